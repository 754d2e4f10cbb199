//! A filter's keys to a snapshot file and back (SPEC.md §5): the Redis side, for any kind
//! that names its keys as sections.
//!
//! - **Export** reads each key in [`READ_CHUNK`] pieces (`GETRANGE`): no command holds the
//!   server longer than one piece's copy, and memory stays at one chunk whatever the size.
//!   A key's length and TTL are taken before its bytes: bits only ever get set, so every bit
//!   set before the export began is in the file.
//! - **Import** writes staging keys beside the filter's (same slot), in pieces of at most one
//!   chunk (`SETRANGE`; an all-zero chunk is skipped), each with a TTL of [`STAGING_TTL_MS`]
//!   renewed at every piece (and every staging key's, at least once a second), then swaps them in with one script per slot group
//!   (`lua/import_swap.lua`) once the file's end block has been verified. An importer killed at
//!   any moment leaves the filter as it was, and its staging keys expire.

use super::{SectionHeader, SnapshotError, SnapshotHeader, SnapshotReader, SnapshotWriter};
use crate::error::{Error, Result};
use crate::io::exec::Exec;
use crate::io::guard::{Evidence, Guard};
use crate::io::tx::{Slot, Tx};
use crate::scripts::script;
use redis::aio::ConnectionLike;
use redis::Value;
use std::time::{Duration, Instant};
use tokio::io::{AsyncRead, AsyncWrite};

/// Bytes per `GETRANGE` of an export (and the file's chunk size).
pub(crate) const READ_CHUNK: u64 = 1 << 20;

/// A staging key's TTL, renewed at every piece written: how long an interrupted import's keys
/// stay.
pub(crate) const STAGING_TTL_MS: u64 = 120_000;

script!(
    /// Swaps an import's staged keys in, checked, in one step per slot group.
    IMPORT_SWAP = include_str!("../../lua/import_swap.lua")
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

fn invalid(what: String) -> Error {
    Error::Snapshot(SnapshotError::InvalidInput(what))
}

/// How an import puts the file in place.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum ImportMode {
    /// The filter becomes the file's: its keys replaced, atomically per slot group.
    Replace,
    /// The file's items are added to the filter (its bits ORed in).
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
}

/// Reads every section of `reader` into a staging key: `place(section)` names the filter's key
/// it goes to and its staging key (refusing sections the filter has no place for). Returns the
/// staged sections once the file's end has been verified; on any error the staging keys are
/// left to expire (and are deleted when the connection allows).
pub(crate) async fn stage<C, R>(
    exec: &Exec<C>,
    reader: &mut SnapshotReader<R>,
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
            let target = place(&section)?;
            if staged.iter().any(|s| s.target == target.target) {
                return Err(Error::Snapshot(SnapshotError::InvalidInput(format!(
                    "the file has two sections for {:?}",
                    target.target
                ))));
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

/// How often the staging keys staged so far get their TTL again while later ones are written
/// (a `PEXPIRE` each): the TTL then runs from the importer's last write, within this, so that
/// only an importer stopped for [`STAGING_TTL_MS`] loses them, however long the file.
const RENEW_EVERY: Duration = Duration::from_secs(1);

/// Every staging key's TTL set again to [`STAGING_TTL_MS`].
async fn renew<C>(exec: &Exec<C>, staged: &[Staged]) -> Result<()>
where
    C: ConnectionLike + Clone + Send + Sync,
{
    for s in staged {
        let cmd = redis::cmd("PEXPIRE")
            .arg(&s.staging)
            .arg(STAGING_TTL_MS)
            .to_owned();
        let _: i64 = exec.query(&s.staging, &cmd).await?;
    }
    Ok(())
}

/// Deletes staging keys (best effort: they expire anyway).
pub(crate) async fn drop_staged<C>(exec: &Exec<C>, staged: &[Staged])
where
    C: ConnectionLike + Clone + Send + Sync,
{
    for s in staged {
        let _: Result<Value> = exec
            .query(&s.staging, &redis::cmd("DEL").arg(&s.staging).to_owned())
            .await;
    }
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
    let mode_arg = match mode {
        ImportMode::Replace => "replace",
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
                [what, key] if text(what) == "staged" => {
                    Err(Error::Snapshot(SnapshotError::InvalidInput(format!(
                        "the staging key {} expired before the import could finish (the import \
                         took longer than {} s between two writes)",
                        text(key),
                        STAGING_TTL_MS / 1000
                    ))))
                }
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
    if let Err(err) = renew(exec, &all).await {
        drop_staged(exec, &all).await;
        return Err(err);
    }
    let extra: Vec<String> = groups.iter().flat_map(|g| g.extra.clone()).collect();
    match swap(exec, &all, &extra, params, mode).await {
        Err(err) if groups.len() > 1 && is_cross_slot(&err) => {}
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
    for (i, group) in groups.iter().enumerate() {
        match swap(exec, &group.staged, &group.extra, None, mode).await {
            Ok(Ok(())) => {}
            other => {
                let rest: Vec<Staged> = groups[i + 1..]
                    .iter()
                    .flat_map(|g| g.staged.clone())
                    .collect();
                drop_staged(exec, &rest).await;
                return other;
            }
        }
    }
    Ok(Ok(()))
}

/// A file of another kind, with other parameters or over another shard count: a mismatch,
/// before anything is written.
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

/// [`swap_groups`] for a kind whose filter of one key has its scripts check the parameters
/// (`checked`: the parameters key and the bare key) and whose sharded filter has a `guard`
/// beside: the parameters checked and stored in the swap, a refusal as the mismatch it means.
pub(crate) async fn swap_checked<C>(
    exec: &Exec<C>,
    groups: &[Group],
    checked: Option<&[String; 2]>,
    guard: Option<&Guard>,
    key: &str,
    fingerprint: &str,
    mode: ImportMode,
) -> Result<()>
where
    C: ConnectionLike + Clone + Send + Sync,
{
    let params = match (checked, guard) {
        (Some([params, bare]), _) => Some(Params {
            key: params,
            bare,
            fingerprint,
        }),
        (None, Some(guard)) => guard.key().map(|key| Params {
            key,
            bare: key,
            fingerprint,
        }),
        (None, None) => None,
    };
    let before = async {
        match guard {
            Some(guard) => guard.ensure(exec, true).await,
            None => Ok(()),
        }
    };
    match swap_groups(exec, groups, params, before, mode).await? {
        Ok(()) => Ok(()),
        Err(Refused::Params(stored)) => Err(match guard {
            Some(guard) => guard.refusal(Evidence::Stored(stored)),
            None => Error::ParamsMismatch {
                key: key.to_owned(),
                stored: stored.unwrap_or_else(|| {
                    "no parameters: the key holds another kind of filter (or other data)".into()
                }),
                requested: fingerprint.to_owned(),
            },
        }),
    }
}
