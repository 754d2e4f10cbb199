//! Import, first half: a file's sections into staging keys beside the filter's (same slot),
//! each with a TTL renewed as they are written; a merge by ranges stages one key per range.

use super::transfer::{
    parse_hash_text, piece_key, ImportMode, Pieces, Staged, MAX_HASH_TEXT, READ_CHUNK,
    STAGING_TTL_MS,
};
use super::{invalid, SectionHeader, SnapshotError, SnapshotReader};
use crate::error::{Error, Result};
use crate::io::exec::Exec;
use crate::io::tx::Tx;
use redis::aio::ConnectionLike;
use redis::Value;
use std::future::Future;
use std::task::Poll;
use std::time::{Duration, Instant};
use tokio::io::AsyncRead;

/// Commands per pipeline when one command per staging key is sent (`PEXPIRE`, `DEL`, `EXISTS`).
const KEYS_PER_PIPELINE: usize = 1_000;

/// Reads every section of `reader` into a staging key: `place(section)` names the filter's key
/// it goes to and its staging key (refusing sections the filter has no place for). For a
/// [`ImportMode::Merge`], a string's section is staged in pieces of one range each
/// ([`Pieces`]). Returns the staged sections once the file's end has been verified; on any
/// error the staging keys are left to expire (and are deleted when the connection allows).
pub(crate) async fn stage<C, R>(
    exec: &Exec<C>,
    reader: &mut SnapshotReader<R>,
    mode: ImportMode,
    mut place: impl FnMut(&SectionHeader) -> Result<Staged>,
) -> Result<Vec<Staged>>
where
    C: ConnectionLike + Clone + Send + Sync,
    R: AsyncRead + Unpin,
{
    let mut staged: Vec<Staged> = Vec::new();
    let mut renewed = Instant::now();
    let result = async {
        while let Some(section) = reader.next_section().await? {
            let mut target = place(&section)?;
            if staged.iter().any(|s| s.target == target.target) {
                return Err(Error::Snapshot(SnapshotError::InvalidInput(format!(
                    "the file has two sections for {:?}",
                    target.target
                ))));
            }
            // By ranges only when asked for (a merge chunk given): the default merge is one
            // atomic step per slot group, as SPEC.md §5 has it.
            if mode == ImportMode::Merge && !target.hash && exec.options().merge_chunk.is_some() {
                target.pieces = Some(Pieces {
                    range: exec.options().merge_chunk(),
                    firsts: Vec::new(),
                });
                staged.push(target);
                write_pieces(exec, reader, &mut staged, &mut renewed).await?;
                continue;
            }
            staged.push(target.clone());
            write_section(exec, reader, &target, &staged, &mut renewed).await?;
        }
        Ok(())
    }
    .await;
    match result {
        Ok(()) => Ok(staged),
        Err(err) => {
            drop_staged(exec, &staged).await;
            Err(err)
        }
    }
}

/// One section's chunks into its staging key: made at its full length first (one allocation
/// of the exact size), then each chunk that is not all zeros written over it. A hash's text
/// is read whole (at most [`MAX_HASH_TEXT`]) and written with one `HSET`.
async fn write_section<C, R>(
    exec: &Exec<C>,
    reader: &mut SnapshotReader<R>,
    target: &Staged,
    staged: &[Staged],
    renewed: &mut Instant,
) -> Result<()>
where
    C: ConnectionLike + Clone + Send + Sync,
    R: AsyncRead + Unpin,
{
    let key = &target.staging;
    if target.hash {
        if target.len > MAX_HASH_TEXT {
            return Err(invalid(format!("a hash section of {} bytes", target.len)));
        }
        let mut text = Vec::new();
        while let Some(chunk) = reader.next_chunk().await? {
            text.extend_from_slice(chunk);
        }
        let fields = parse_hash_text(&text)?;
        let mut tx = Tx::plain();
        tx.add_unread(redis::cmd("DEL").arg(key).to_owned());
        if !fields.is_empty() {
            let mut hset = redis::cmd("HSET");
            hset.arg(key);
            for (field, value) in &fields {
                hset.arg(field).arg(value);
            }
            tx.add_unread(hset);
            tx.add_unread(
                redis::cmd("PEXPIRE")
                    .arg(key)
                    .arg(STAGING_TTL_MS)
                    .to_owned(),
            );
        }
        exec.run(key, &tx).await?;
        return Ok(());
    }
    if target.len > 0 {
        let mut tx = Tx::plain();
        tx.add_unread(redis::cmd("DEL").arg(key).to_owned());
        staged_range(&mut tx, key, target.len - 1, &[0]);
        exec.run(key, &tx).await?;
    }
    let mut at = 0u64;
    while let Some(chunk) = reader.next_chunk().await? {
        if renewed.elapsed() >= RENEW_EVERY {
            renew(exec, staged).await?;
            *renewed = Instant::now();
        }
        if chunk.iter().any(|&b| b != 0) {
            let mut tx = Tx::plain();
            staged_range(&mut tx, key, at, chunk);
            exec.run(key, &tx).await?;
        }
        at += chunk.len() as u64;
    }
    Ok(())
}

/// `bytes` written at byte `at` of the staging key `key`, and its TTL renewed.
fn staged_range(tx: &mut Tx, key: &str, at: u64, bytes: &[u8]) {
    tx.add_unread(
        redis::cmd("SETRANGE")
            .arg(key)
            .arg(at)
            .arg(bytes)
            .to_owned(),
    );
    tx.add_unread(
        redis::cmd("PEXPIRE")
            .arg(key)
            .arg(STAGING_TTL_MS)
            .to_owned(),
    );
}

/// A merge's section (the last of `staged`) into pieces: the section's bytes cut at every
/// multiple of the range, each range that holds a bit `SET` with the staging TTL into its own
/// key (no key as large as the filter is made: each command allocates one range), the `SET`s
/// pipelined about [`STAGE_BATCH_BYTES`] at a time.
async fn write_pieces<C, R>(
    exec: &Exec<C>,
    reader: &mut SnapshotReader<R>,
    staged: &mut [Staged],
    renewed: &mut Instant,
) -> Result<()>
where
    C: ConnectionLike + Clone + Send + Sync,
    R: AsyncRead + Unpin,
{
    let last = staged.len() - 1;
    let (target, staging) = (staged[last].target.clone(), staged[last].staging.clone());
    let range = staged[last].pieces.as_ref().map_or(READ_CHUNK, |p| p.range);
    let mut piece: Vec<u8> = Vec::with_capacity(range.min(staged[last].len) as usize);
    let mut tx = Tx::plain();
    let mut queued = 0u64;
    let mut at = 0u64;
    // One batch in flight while the next is read and built: sent at once (polled once), its
    // reply awaited before the next batch goes.
    let send = |tx: Tx| {
        let target = target.clone();
        Box::pin(async move { exec.run(&target, &tx).await.map(drop) })
    };
    let mut pending = None;
    loop {
        let chunk = reader.next_chunk().await?;
        if renewed.elapsed() >= RENEW_EVERY {
            renew(exec, staged).await?;
            *renewed = Instant::now();
        }
        let end = chunk.is_none();
        let mut rest = chunk.unwrap_or_default();
        while !rest.is_empty() || (end && !piece.is_empty()) {
            let room = (range - at % range) as usize;
            let take = room.min(rest.len());
            piece.extend_from_slice(&rest[..take]);
            rest = &rest[take..];
            at += take as u64;
            if !at.is_multiple_of(range) && !end {
                continue;
            }
            if piece.iter().any(|&b| b != 0) {
                let first = at - piece.len() as u64;
                let mut set = redis::cmd("SET");
                set.arg(piece_key(&staging, first))
                    .arg(&piece[..])
                    .arg("PX")
                    .arg(STAGING_TTL_MS);
                tx.add_unread(set);
                queued += piece.len() as u64;
                if let Some(pieces) = staged[last].pieces.as_mut() {
                    pieces.firsts.push(first);
                }
            }
            piece.clear();
            if queued >= STAGE_BATCH_BYTES {
                if let Some(previous) = pending.take() {
                    previous.await?;
                }
                let mut next = send(std::mem::replace(&mut tx, Tx::plain()));
                match std::future::poll_fn(|cx| Poll::Ready(next.as_mut().poll(cx))).await {
                    Poll::Ready(done) => done?,
                    Poll::Pending => pending = Some(next),
                }
                queued = 0;
            }
        }
        if end {
            break;
        }
    }
    if let Some(previous) = pending {
        previous.await?;
    }
    if queued > 0 {
        send(tx).await?;
    }
    Ok(())
}

/// Bytes of pieces sent in one pipeline while a merge stages its file (at least one piece).
const STAGE_BATCH_BYTES: u64 = 1 << 20;

/// How often the staging keys staged so far get their TTL again while later ones are written
/// (a `PEXPIRE` each): the TTL then runs from the importer's last write, within this, so that
/// only an importer stopped for [`STAGING_TTL_MS`] loses them, however long the file.
pub(super) const RENEW_EVERY: Duration = Duration::from_secs(1);

/// Every staging key's TTL set again to [`STAGING_TTL_MS`] (a merge's pieces pipelined,
/// [`KEYS_PER_PIPELINE`] at a time).
pub(super) async fn renew<C>(exec: &Exec<C>, staged: &[Staged]) -> Result<()>
where
    C: ConnectionLike + Clone + Send + Sync,
{
    for s in staged {
        for keys in s.keys().chunks(KEYS_PER_PIPELINE) {
            let mut tx = Tx::plain();
            for key in keys {
                tx.add_unread(
                    redis::cmd("PEXPIRE")
                        .arg(key)
                        .arg(STAGING_TTL_MS)
                        .to_owned(),
                );
            }
            exec.run(&s.target, &tx).await?;
        }
    }
    Ok(())
}

/// Deletes staging keys (best effort: they expire anyway).
pub(crate) async fn drop_staged<C>(exec: &Exec<C>, staged: &[Staged])
where
    C: ConnectionLike + Clone + Send + Sync,
{
    for s in staged {
        for keys in s.keys().chunks(KEYS_PER_PIPELINE) {
            let _: Result<Value> = exec
                .query(&s.target, &redis::cmd("DEL").arg(keys).to_owned())
                .await;
        }
    }
}

/// Whether every piece of a merge's sections is still there (checked before anything is
/// written): `Err` naming a section whose pieces are not all there.
pub(super) async fn check_pieces<C>(exec: &Exec<C>, staged: &[Staged]) -> Result<()>
where
    C: ConnectionLike + Clone + Send + Sync,
{
    for s in staged {
        let Some(pieces) = &s.pieces else { continue };
        let keys: Vec<String> = pieces
            .firsts
            .iter()
            .map(|&first| piece_key(&s.staging, first))
            .collect();
        for keys in keys.chunks(KEYS_PER_PIPELINE) {
            let there: usize = exec
                .query(&s.target, &redis::cmd("EXISTS").arg(keys).to_owned())
                .await?;
            if there != keys.len() {
                return Err(expired(&s.staging));
            }
        }
    }
    Ok(())
}

/// A staging key gone before the import could finish.
pub(super) fn expired(key: &str) -> Error {
    Error::Snapshot(SnapshotError::InvalidInput(format!(
        "the staging key {key} expired before the import could finish (the import took longer \
         than {} s between two writes)",
        STAGING_TTL_MS / 1000
    )))
}
