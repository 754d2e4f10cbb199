//! Export: a filter's keys, as the sections its kind names, into a snapshot file, each read in
//! [`READ_CHUNK`] pieces (`GETRANGE`) after its length and TTL.

use super::transfer::{hash_text, Stored, Transferred, READ_CHUNK};
use super::{SectionHeader, SnapshotHeader, SnapshotWriter};
use crate::error::{Error, Result};
use crate::io::exec::Exec;
use crate::io::tx::{Slot, Tx};
use redis::aio::ConnectionLike;
use tokio::io::AsyncWrite;

/// Writes `header` and every key of `keys` (in order) to `out`.
///
/// # Errors
/// [`Error::WrongType`] when a key holds something other than a string; a key longer than its
/// `max_bytes` is a [`Error::ParamsMismatch`]-like refusal from `too_long`; network faults;
/// [`Error::Snapshot`] when writing fails.
pub(crate) async fn export<C, W>(
    exec: &Exec<C>,
    header: &SnapshotHeader,
    keys: &[Stored],
    too_long: impl Fn(&Stored, u64) -> Error,
    out: W,
) -> Result<(W, Transferred)>
where
    C: ConnectionLike + Clone + Send + Sync,
    W: AsyncWrite + Unpin,
{
    let mut writer = SnapshotWriter::new(out, header).await?;
    let mut filter_bytes = 0;
    for stored in keys {
        if stored.hash {
            let mut tx = Tx::plain();
            let fields: Slot<Vec<(u64, u64)>> =
                tx.add(redis::cmd("HGETALL").arg(&stored.key).to_owned());
            let ttl: Slot<i64> = tx.add(redis::cmd("PTTL").arg(&stored.key).to_owned());
            let mut replies = exec.run(&stored.key, &tx).await?;
            let text = hash_text(replies.take(fields)?);
            let ttl = u64::try_from(replies.take(ttl)?).ok().filter(|&t| t > 0);
            let mut section =
                SectionHeader::new(stored.shard, stored.role.clone(), text.len() as u64);
            section.meta = stored.meta.clone();
            section.ttl_ms = ttl;
            writer.begin_section(&section).await?;
            writer.write(&text).await?;
            continue;
        }
        let (len, ttl) = measure(exec, &stored.key).await?;
        if len > stored.max_bytes {
            return Err(too_long(stored, len));
        }
        let mut section = SectionHeader::new(stored.shard, stored.role.clone(), len);
        section.meta = stored.meta.clone();
        section.ttl_ms = ttl;
        writer.begin_section(&section).await?;
        let mut at = 0;
        while at < len {
            let end = (at + READ_CHUNK).min(len);
            let cmd = redis::cmd("GETRANGE")
                .arg(&stored.key)
                .arg(at)
                .arg(end - 1)
                .to_owned();
            let mut bytes: Vec<u8> = exec.query(&stored.key, &cmd).await?;
            // A key deleted or shortened meanwhile (a clear): zeros, as Redis reads past the end.
            bytes.resize((end - at) as usize, 0);
            writer.write(&bytes).await?;
            at = end;
        }
        filter_bytes += len;
    }
    let (out, file_bytes) = writer.finish_counted().await?;
    Ok((
        out,
        Transferred {
            file_bytes,
            filter_bytes,
        },
    ))
}

/// A key's length (0 when missing) and TTL; `STRLEN` refuses a key that is not a string
/// (`WRONGTYPE`).
async fn measure<C>(exec: &Exec<C>, key: &str) -> Result<(u64, Option<u64>)>
where
    C: ConnectionLike + Clone + Send + Sync,
{
    let mut tx = Tx::plain();
    let len: Slot<u64> = tx.add(redis::cmd("STRLEN").arg(key).to_owned());
    let ttl: Slot<i64> = tx.add(redis::cmd("PTTL").arg(key).to_owned());
    let mut replies = exec.run(key, &tx).await?;
    let len = replies.take(len)?;
    let ttl = replies.take(ttl)?;
    Ok((len, u64::try_from(ttl).ok().filter(|&t| t > 0)))
}
