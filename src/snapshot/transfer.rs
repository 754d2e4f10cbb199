//! A filter's keys to a snapshot file and back (SPEC.md §5): the Redis side, for any kind
//! that names its keys as sections.
//!
//! - **Export** reads each key in [`READ_CHUNK`] pieces (`GETRANGE`): no command holds the
//!   server longer than one piece's copy, and memory stays at one chunk whatever the size.
//!   A key's length and TTL are taken before its bytes: bits only ever get set, so every bit
//!   set before the export began is in the file.
//! - **Import** writes staging keys beside the filter's (same slot), in pieces of at most one
//!   chunk (`SETRANGE`; an all-zero chunk is skipped), each with a TTL of [`STAGING_TTL_MS`]
//!   renewed at every piece (and every staging key's, at least once a second), then swaps them
//!   in with one script per slot group (`lua/import_swap.lua`) once the file's end block has
//!   been verified. An importer killed at any moment leaves the filter as it was, and its
//!   staging keys expire.
//! - **Merge** ([`ImportMode::Merge`]) stages as a replace does and ORs each staging key into
//!   the filter's (`BITOP OR`) in the same atomic step per slot group: other clients see the
//!   filter before or after, and a killed importer leaves it as it was. That step holds the
//!   server for one `BITOP` of the whole key (about 1.6 ms per MiB). Given a merge chunk
//!   ([`Builder::merge_chunk_bytes`](crate::Builder::merge_chunk_bytes), CLI `--merge-chunk`),
//!   it goes by ranges instead: each section staged in pieces of one range each (a key per
//!   range that is not all zeros: no staging string as large as the filter), the keys and the
//!   parameters checked with the same script once the file is verified, then the pieces ORed in
//!   one range per step (`lua/import_merge.lua`): no step holds the server longer than one
//!   range's copy. Each range is atomic, such a merge is not: bits only get set, so a
//!   concurrent reader sees a subset of the final bits, never a bit lost, and an importer
//!   killed midway leaves part of the file merged (merging again completes it).

use super::{SectionHeader, SnapshotError, SnapshotHeader, SnapshotReader, SnapshotWriter};
use crate::error::{Error, Result};
use crate::io::exec::Exec;
use crate::io::guard::{Evidence, Guard};
use crate::io::tx::{Slot, Tx};
use crate::scripts::script;
use futures_util::StreamExt;
use redis::aio::ConnectionLike;
use redis::Value;
use std::future::Future;
use std::task::Poll;
use std::time::{Duration, Instant};
use tokio::io::{AsyncRead, AsyncWrite};

/// Bytes per `GETRANGE` of an export (and the file's chunk size).
pub(crate) const READ_CHUNK: u64 = 1 << 20;

/// A staging key's TTL, renewed at every piece written: how long an interrupted import's keys
/// stay.
pub(crate) const STAGING_TTL_MS: u64 = 120_000;

script!(
    /// Swaps an import's staged keys in, checked, in one step per slot group (for a merge, only
    /// the checks).
    IMPORT_SWAP = include_str!("../../lua/import_swap.lua")
);
script!(
    /// A merge's step: one staged range ORed into the filter's key.
    IMPORT_MERGE = include_str!("../../lua/import_merge.lua")
);

/// One key of a filter, as a section of a snapshot.
#[derive(Debug, Clone)]
pub(crate) struct Stored {
    /// The section's shard, role and meta, which say where it goes back.
    pub(crate) shard: u32,
    pub(crate) role: String,
    pub(crate) meta: String,
    /// The key in Redis.
    pub(crate) key: String,
    /// The most bytes it can hold (a longer key is not this filter's).
    pub(crate) max_bytes: u64,
    /// A hash (a growing filter's counts) rather than a string: its fields go in the section
    /// as text, a line `field=value` each ([`hash_text`]).
    pub(crate) hash: bool,
}

/// The most bytes of a hash's text: its fields are a growing filter's level counts.
const MAX_HASH_TEXT: u64 = 64 << 10;

/// A hash's fields as a section's text: `field=value` lines, by field (numeric order).
fn hash_text(mut fields: Vec<(u64, u64)>) -> Vec<u8> {
    fields.sort_unstable();
    fields
        .iter()
        .map(|(field, value)| format!("{field}={value}\n"))
        .collect::<String>()
        .into_bytes()
}

/// The fields of a section's text (see [`hash_text`]).
pub(crate) fn parse_hash_text(text: &[u8]) -> Result<Vec<(u64, u64)>> {
    let bad = || invalid("a hash section that is not lines of field=value".to_owned());
    let text = std::str::from_utf8(text).map_err(|_| bad())?;
    text.lines()
        .map(|line| {
            let (field, value) = line.split_once('=').ok_or_else(bad)?;
            Ok((
                field.parse().map_err(|_| bad())?,
                value.parse().map_err(|_| bad())?,
            ))
        })
        .collect()
}

use super::invalid;

/// How an import puts the file in place.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum ImportMode {
    /// The filter becomes the file's: its keys replaced, atomically per slot group.
    Replace,
    /// The file's items are added to the filter (its bits ORed in), range by range
    /// ([`Builder::merge_chunk_bytes`](crate::Builder::merge_chunk_bytes), 128 KiB by default:
    /// no command holds the server longer than one range's OR, about 0.5 ms). Each range is
    /// atomic, the merge is not: bits only get set, so a concurrent reader sees a subset of the
    /// final bits, never one lost; an importer stopped midway leaves some ranges merged, and
    /// merging the file again finishes the job.
    Merge,
}

/// What an export or an import moved.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
#[non_exhaustive]
pub struct Transferred {
    /// Bytes of the snapshot file written or read.
    pub file_bytes: u64,
    /// Bytes of the filter's keys (their lengths in Redis).
    pub filter_bytes: u64,
}

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

/// A section read from a file into its staging key.
#[derive(Debug, Clone)]
pub(crate) struct Staged {
    /// The filter's key it replaces, and its staging key.
    pub(crate) target: String,
    pub(crate) staging: String,
    pub(crate) len: u64,
    pub(crate) ttl_ms: Option<u64>,
    /// The type the filter's key holds: a string, or the hash of a growing filter's counts
    /// (staged by the caller, not by [`stage`]).
    pub(crate) hash: bool,
    /// A merge's section, staged by ranges (set by [`stage`]; `None` from `place`).
    pub(crate) pieces: Option<Pieces>,
}

/// A section staged for a merge: a key per range of `range` bytes that holds a bit
/// (`STAGING:FIRST`, [`piece_key`]), in the order of the section.
#[derive(Debug, Clone)]
pub(crate) struct Pieces {
    pub(crate) range: u64,
    /// The first byte of each range staged.
    pub(crate) firsts: Vec<u64>,
}

/// The key of the piece of `staging` starting at byte `first`.
fn piece_key(staging: &str, first: u64) -> String {
    format!("{staging}:{first}")
}

/// The scratch key of a merge into the key `staging` stands beside.
fn scratch_key(staging: &str) -> String {
    format!("{staging}:or")
}

impl Staged {
    /// Every key this section may have put in Redis: its staging key, or its pieces and the
    /// merge's scratch key.
    fn keys(&self) -> Vec<String> {
        match &self.pieces {
            None => vec![self.staging.clone()],
            Some(pieces) => pieces
                .firsts
                .iter()
                .map(|&first| piece_key(&self.staging, first))
                .chain([scratch_key(&self.staging)])
                .collect(),
        }
    }
}

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
        tx.add_unread(
            redis::cmd("SETRANGE")
                .arg(key)
                .arg(target.len - 1)
                .arg(&[0u8][..])
                .to_owned(),
        );
        tx.add_unread(
            redis::cmd("PEXPIRE")
                .arg(key)
                .arg(STAGING_TTL_MS)
                .to_owned(),
        );
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
            tx.add_unread(
                redis::cmd("SETRANGE")
                    .arg(key)
                    .arg(at)
                    .arg(chunk)
                    .to_owned(),
            );
            tx.add_unread(
                redis::cmd("PEXPIRE")
                    .arg(key)
                    .arg(STAGING_TTL_MS)
                    .to_owned(),
            );
            exec.run(key, &tx).await?;
        }
        at += chunk.len() as u64;
    }
    Ok(())
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
const RENEW_EVERY: Duration = Duration::from_secs(1);

/// Every staging key's TTL set again to [`STAGING_TTL_MS`] (a merge's pieces pipelined,
/// [`KEYS_PER_PIPELINE`] at a time).
async fn renew<C>(exec: &Exec<C>, staged: &[Staged]) -> Result<()>
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
async fn check_pieces<C>(exec: &Exec<C>, staged: &[Staged]) -> Result<()>
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
fn expired(key: &str) -> Error {
    Error::Snapshot(SnapshotError::InvalidInput(format!(
        "the staging key {key} expired before the import could finish (the import took longer \
         than {} s between two writes)",
        STAGING_TTL_MS / 1000
    )))
}

/// ORs every merge's staged pieces into their keys (`lua/import_merge.lua`, one range per
/// step, steps pipelined up to [`RANGES_IN_FLIGHT_BYTES`](crate::dense::RANGES_IN_FLIGHT_BYTES)
/// of ranges), the pieces staged for later sections renewed at least once a second. A key the
/// file has bytes for but no piece (all zeros) is grown to the file's length, as `BITOP OR`
/// would leave it.
async fn merge_pieces<C>(exec: &Exec<C>, staged: &[Staged]) -> Result<()>
where
    C: ConnectionLike + Clone + Send + Sync,
{
    let mut renewed = Instant::now();
    for (i, s) in staged.iter().enumerate() {
        let Some(pieces) = &s.pieces else { continue };
        if s.len == 0 {
            continue;
        }
        let scratch = scratch_key(&s.staging);
        let ttl = s.ttl_ms.map_or(-1, |t| t as i64);
        let in_flight = (crate::dense::RANGES_IN_FLIGHT_BYTES / pieces.range).clamp(1, 256);
        let steps: Vec<Option<u64>> = match pieces.firsts.is_empty() {
            true => vec![None],
            false => pieces.firsts.iter().copied().map(Some).collect(),
        };
        let step = |first: Option<u64>| {
            let (piece, scratch) = (piece_key(&s.staging, first.unwrap_or(0)), scratch.clone());
            async move {
                let keys = [s.target.as_str(), piece.as_str(), scratch.as_str()];
                let want = u8::from(first.is_some());
                let at = first.unwrap_or(0);
                let reply = exec
                    .script(&s.target, &IMPORT_MERGE, &keys, &[&at, &s.len, &ttl, &want])
                    .await?;
                match reply {
                    Value::Int(1) => Ok(()),
                    Value::Array(parts) if parts.len() == 2 => Err(expired(&piece)),
                    other => Err(Error::UnexpectedReply(format!("{other:?} from a merge"))),
                }
            }
        };
        let mut steps = futures_util::stream::iter(steps)
            .map(step)
            .buffered(in_flight as usize);
        while let Some(done) = steps.next().await {
            done?;
            if renewed.elapsed() >= RENEW_EVERY {
                renew(exec, &staged[i + 1..]).await?;
                renewed = Instant::now();
            }
        }
    }
    Ok(())
}

/// The stored parameters a swap checks and sets: their key, the key whose bits show a filter
/// without parameters, and the parameters.
#[derive(Debug, Clone)]
pub(crate) struct Params<'a> {
    pub(crate) key: &'a str,
    pub(crate) bare: &'a str,
    pub(crate) fingerprint: &'a str,
}

/// What a swap answered when it wrote nothing.
#[derive(Debug)]
pub(crate) enum Refused {
    /// Other parameters stored (`None`: bits without any).
    Params(Option<String>),
}

/// Swaps one slot group's staged sections in (`mode`), deleting `extra` (a replace), checking
/// `params` when given; the staging keys are deleted whatever happens.
pub(crate) async fn swap<C>(
    exec: &Exec<C>,
    group: &[Staged],
    extra: &[String],
    params: Option<Params<'_>>,
    mode: ImportMode,
) -> Result<std::result::Result<(), Refused>>
where
    C: ConnectionLike + Clone + Send + Sync,
{
    let route = group
        .first()
        .map(|s| s.target.clone())
        .or_else(|| extra.first().cloned());
    let Some(route) = route else {
        return Ok(Ok(()));
    };
    let mut keys: Vec<&str> = group.iter().map(|s| s.target.as_str()).collect();
    keys.extend(group.iter().map(|s| s.staging.as_str()));
    keys.extend(extra.iter().map(String::as_str));
    let fingerprint = match &params {
        Some(p) => {
            keys.push(p.key);
            keys.push(p.bare);
            p.fingerprint
        }
        None => "",
    };
    let lens: Vec<u64> = group.iter().map(|s| s.len).collect();
    let ttls: Vec<i64> = group
        .iter()
        .map(|s| s.ttl_ms.map_or(-1, |t| t as i64))
        .collect();
    let types: Vec<&str> = group
        .iter()
        .map(|s| if s.hash { "hash" } else { "string" })
        .collect();
    // A merge by ranges: the swap only checks (and stores the parameters), [`merge_pieces`]
    // follows; a merge of whole staging keys ORs them in, in the same atomic step.
    let mode_arg = match mode {
        ImportMode::Replace => "replace",
        ImportMode::Merge if group.iter().any(|s| s.pieces.is_some()) => "check",
        ImportMode::Merge => "merge",
    };
    let reply = exec
        .script(
            &route,
            &IMPORT_SWAP,
            &keys,
            &[
                &group.len(),
                &mode_arg,
                &fingerprint,
                &extra.len(),
                &lens,
                &ttls,
                &types,
            ],
        )
        .await;
    let reply = match reply {
        Ok(reply) => reply,
        Err(err) => {
            if !is_cross_slot(&err) {
                drop_staged(exec, group).await;
            }
            return Err(err);
        }
    };
    match reply {
        Value::Int(1) => Ok(Ok(())),
        Value::Array(parts) => {
            drop_staged(exec, group).await;
            let text = |v: &Value| match v {
                Value::BulkString(b) => String::from_utf8_lossy(b).into_owned(),
                other => format!("{other:?}"),
            };
            match parts.as_slice() {
                [what, stored] if text(what) == "params" => {
                    let stored = text(stored);
                    Ok(Err(Refused::Params((!stored.is_empty()).then_some(stored))))
                }
                [what, key] if text(what) == "staged" => Err(expired(&text(key))),
                _ => Err(Error::UnexpectedReply(format!("{parts:?} from an import"))),
            }
        }
        other => {
            drop_staged(exec, group).await;
            Err(Error::UnexpectedReply(format!("{other:?} from an import")))
        }
    }
}

/// Whether Redis refused a step for naming keys of several slots (a cluster).
fn is_cross_slot(err: &Error) -> bool {
    let text = format!("{err:?}");
    text.contains("CROSSSLOT") || text.contains("CrossSlot")
}

/// One slot group's staged keys and the filter's keys there that the file does not have.
#[derive(Debug, Clone, Default)]
pub(crate) struct Group {
    pub(crate) staged: Vec<Staged>,
    pub(crate) extra: Vec<String>,
}

/// Swaps every group in. A filter of one group: one script. Several (a sharded filter): one
/// script for them all when the server takes keys of several slots in one step (a single
/// server: the whole filter changes at once, or not at all), checking and storing `params`
/// there; on a cluster, which refuses that, every target's type is checked first, then
/// `before_groups` (the parameters stored beside), then one script per group, each atomic. The
/// staging keys are renewed first, and deleted whatever happens.
///
/// A merge: the same scripts only check (nothing of the filter written but the parameters),
/// every group before any bit is written, then [`merge_pieces`] ORs the file in by ranges.
pub(crate) async fn swap_groups<C, F>(
    exec: &Exec<C>,
    groups: &[Group],
    params: Option<Params<'_>>,
    before_groups: F,
    mode: ImportMode,
) -> Result<std::result::Result<(), Refused>>
where
    C: ConnectionLike + Clone + Send + Sync,
    F: std::future::Future<Output = Result<()>>,
{
    let all: Vec<Staged> = groups.iter().flat_map(|g| g.staged.clone()).collect();
    let ready = async {
        renew(exec, &all).await?;
        check_pieces(exec, &all).await
    };
    if let Err(err) = ready.await {
        drop_staged(exec, &all).await;
        return Err(err);
    }
    let extra: Vec<String> = groups.iter().flat_map(|g| g.extra.clone()).collect();
    match swap(exec, &all, &extra, params, mode).await {
        Err(err) if groups.len() > 1 && is_cross_slot(&err) => {}
        Ok(Ok(())) if mode == ImportMode::Merge => return merged(exec, &all).await,
        done => return done,
    }
    let checked = async {
        for group in groups {
            let targets = group
                .staged
                .iter()
                .map(|s| (s.target.as_str(), if s.hash { "hash" } else { "string" }))
                .chain(group.extra.iter().map(|k| (k.as_str(), "string")));
            for (key, want) in targets {
                let cmd = redis::cmd("TYPE").arg(key).to_owned();
                let found: String = exec.query(key, &cmd).await?;
                if found != "none" && found != want {
                    return Err(Error::WrongType {
                        key: key.to_owned(),
                        found: found.clone(),
                        source: redis::RedisError::from(std::io::Error::other(format!(
                            "{key} holds a {found}: the import writes nothing"
                        ))),
                    });
                }
            }
        }
        before_groups.await
    }
    .await;
    if let Err(err) = checked {
        drop_staged(exec, &all).await;
        return Err(err);
    }
    for group in groups {
        match swap(exec, &group.staged, &group.extra, None, mode).await {
            Ok(Ok(())) => {}
            other => {
                // Those swapped have no staging keys left; a merge's checked groups do.
                drop_staged(exec, &all).await;
                return other;
            }
        }
    }
    match mode {
        ImportMode::Merge => merged(exec, &all).await,
        ImportMode::Replace => Ok(Ok(())),
    }
}

/// [`merge_pieces`], the staging keys deleted should it fail.
async fn merged<C>(exec: &Exec<C>, all: &[Staged]) -> Result<std::result::Result<(), Refused>>
where
    C: ConnectionLike + Clone + Send + Sync,
{
    match merge_pieces(exec, all).await {
        Ok(()) => Ok(Ok(())),
        Err(err) => {
            drop_staged(exec, all).await;
            Err(err)
        }
    }
}

/// A file of another kind, with other parameters or over another shard count: a mismatch,
/// before anything is written. The stored side names the file's.
pub(crate) fn check_header(
    header: &SnapshotHeader,
    key: &str,
    kind: &str,
    fingerprint: &str,
    shards: u32,
) -> Result<()> {
    if header.kind == kind && header.params == fingerprint && header.shards == shards {
        return Ok(());
    }
    Err(Error::ParamsMismatch {
        key: key.to_owned(),
        stored: format!(
            "a snapshot of a {} filter with {} over {} shard(s)",
            header.kind, header.params, header.shards
        ),
        requested: format!("a {kind} filter with {fingerprint}"),
    })
}

/// [`swap_groups`] with a filter's parameters (`params`, as [`Guard::swap_params`] gives them)
/// checked and stored in the swap, a refusal as the mismatch it means; on a cluster the
/// sharded filter's parameters are checked and stored first, beside.
pub(crate) async fn swap_checked<C>(
    exec: &Exec<C>,
    groups: &[Group],
    params: Option<Params<'_>>,
    guard: &Guard,
    mode: ImportMode,
) -> Result<()>
where
    C: ConnectionLike + Clone + Send + Sync,
{
    let before = guard.ensure(exec, true);
    match swap_groups(exec, groups, params, before, mode).await? {
        Ok(()) => Ok(()),
        Err(Refused::Params(stored)) => Err(guard.refusal(Evidence::Stored(stored))),
    }
}

/// A name for one import's staging keys: the time and the process.
pub(crate) fn nonce() -> String {
    let nanos = std::time::SystemTime::now()
        .duration_since(std::time::UNIX_EPOCH)
        .map_or(0, |d| d.as_nanos());
    format!("{:x}.{:x}", nanos & 0xffff_ffff_ffff, std::process::id())
}
