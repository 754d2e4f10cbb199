//! Reading a copy's keys: whole strings in bounded pieces.

use super::Strings;
use crate::error::Result;

/// A copy of a filter kept in one string per part: its parameters checked, then each part's
/// string (`parts`: its key and most bytes) read whole, each read retried. A filter that keeps
/// its parts (`keeps`) fails with [`Error::Lost`](crate::Error::Lost) naming a part that is
/// gone under its stored parameters; any filter with
/// [`Error::ReplicaNotSynced`](crate::Error::ReplicaNotSynced) when a part read as nothing, no
/// parameters are stored and the server is a replica that has not synced (SPEC.md §3,
/// "Replicas"): its copy would answer "absent" for everything.
pub(crate) async fn read_strings<'a, C>(
    exec: &crate::io::exec::Exec<C>,
    (clock, filter, keeps): (&crate::retry::Clock, &str, bool),
    guard: &crate::io::guard::Guard,
    parts: impl Iterator<Item = (&'a str, u64)>,
) -> Result<Strings>
where
    C: redis::aio::ConnectionLike + Clone + Send + Sync,
{
    use crate::core::lost;
    exec.retried(clock, || guard.ensure(exec, false)).await?;
    let mut copy = Strings(Vec::new());
    for (key, max) in parts {
        let bytes = exec.retried(clock, || read_key(exec, key, max)).await?;
        if keeps && bytes.is_empty() {
            // A part that keeps its key while the parameters are stored (`keeps`) read as
            // nothing: gone is `Error::Lost`, not a copy that answers "absent" (SPEC.md §3);
            // nothing of the filter at all, from a replica that has not synced, is
            // `Error::ReplicaNotSynced` (`lost::confirm` asks).
            let exists = exec.retried(clock, || lost::exists(exec, key)).await?;
            lost::confirm(exec, (filter, key, guard.key()), vec![false], exists).await?;
        } else if bytes.is_empty() && !guard.is_checked() {
            // Neither bits nor parameters (the check above saw none stored): a go-zero filter
            // missing here, unless the server is a replica that holds nothing yet.
            exec.retried(clock, || lost::synced(exec, filter, key))
                .await?;
        }
        copy.0.push(bytes);
    }
    Ok(copy)
}

/// Reads `key` whole (a string of at most `max_bytes`; empty when missing) in pieces of at most
/// 1 MiB, so that no command holds the server longer than one piece's copy.
pub(crate) async fn read_key<C>(
    exec: &crate::io::exec::Exec<C>,
    key: &str,
    max_bytes: u64,
) -> Result<Vec<u8>>
where
    C: redis::aio::ConnectionLike + Clone + Send + Sync,
{
    const PIECE: u64 = 1 << 20;
    if max_bytes <= PIECE {
        let bytes: Option<Vec<u8>> = exec.query(key, redis::cmd("GET").arg(key)).await?;
        return Ok(bytes.unwrap_or_default());
    }
    let len: u64 = exec.query(key, redis::cmd("STRLEN").arg(key)).await?;
    let len = len.min(max_bytes);
    let mut bytes = Vec::with_capacity(len as usize);
    let mut at = 0;
    while at < len {
        let end = (at + PIECE).min(len);
        let cmd = redis::cmd("GETRANGE")
            .arg(key)
            .arg(at)
            .arg(end - 1)
            .to_owned();
        let piece: Vec<u8> = exec.query(key, &cmd).await?;
        let short = piece.len() < (end - at) as usize;
        bytes.extend_from_slice(&piece);
        if short {
            // Shortened meanwhile (a clear): what is left reads as zeros.
            break;
        }
        at = end;
    }
    Ok(bytes)
}
