//! Import, second half: the staged keys swapped in (or merged) with one checked script per slot
//! group (`lua/import_swap.lua`), or, for a merge by ranges, one range per step
//! (`lua/import_merge.lua`).

use super::stage::{check_pieces, drop_staged, expired, renew, RENEW_EVERY};
use super::transfer::{piece_key, scratch_key, Group, ImportMode, Params, Refused, Staged};
use crate::error::{Error, Result};
use crate::io::exec::Exec;
use crate::io::guard::{Evidence, Guard};
use crate::scripts::{lua, script};
use futures_util::StreamExt;
use redis::aio::ConnectionLike;
use redis::Value;
use std::time::Instant;

script! {
    /// Swaps an import's staged keys in, checked, in one step per slot group (for a merge, only
    /// the checks).
    IMPORT_SWAP = lua!["acl", "import_swap"];
    /// A merge's step: one staged range ORed into the filter's key.
    IMPORT_MERGE = lua!["acl", "import_merge"];
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
        let ttl = s.ttl_arg();
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

/// Swaps one slot group's staged sections in (`mode`), deleting `extra` (a replace), checking
/// `params` when given; the staging keys are deleted whatever happens.
async fn swap<C>(
    exec: &Exec<C>,
    group: &[Staged],
    extra: &[String],
    params: Option<Params<'_>>,
    mode: ImportMode,
    key_type: &str,
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
    let ttls: Vec<i64> = group.iter().map(|s| s.ttl_arg()).collect();
    let types: Vec<&str> = group
        .iter()
        .map(|s| if s.hash { "hash" } else { key_type })
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
                &key_type,
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

/// Swaps every group in. A filter of one group: one script. Several (a sharded filter): one
/// script for them all when the server takes keys of several slots in one step (a single
/// server: the whole filter changes at once, or not at all), checking and storing `params`
/// there; on a cluster, which refuses that, every target's type is checked first, then
/// `before_groups` (the parameters stored beside), then one script per group, each atomic. The
/// staging keys are renewed first, and deleted whatever happens.
///
/// A merge: the same scripts only check (nothing of the filter written but the parameters),
/// every group before any bit is written, then [`merge_pieces`] ORs the file in by ranges.
async fn swap_groups<C, F>(
    exec: &Exec<C>,
    groups: &[Group],
    params: Option<Params<'_>>,
    before_groups: F,
    mode: ImportMode,
    key_type: &str,
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
    match swap(exec, &all, &extra, params, mode, key_type).await {
        Err(err) if groups.len() > 1 && is_cross_slot(&err) => {}
        Ok(Ok(())) if mode == ImportMode::Merge => return merged(exec, &all).await,
        done => return done,
    }
    let checked = async {
        for group in groups {
            let targets = group
                .staged
                .iter()
                .map(|s| {
                    let want = if s.hash { "hash" } else { key_type };
                    (s.target.as_str(), [want, want])
                })
                // A key the file lacks: a string (a ledger), or of the filter's keys' type.
                .chain(
                    group
                        .extra
                        .iter()
                        .map(|k| (k.as_str(), ["string", key_type])),
                );
            for (key, wants) in targets {
                let cmd = redis::cmd("TYPE").arg(key).to_owned();
                let found: String = exec.query(key, &cmd).await?;
                if found != "none" && !wants.contains(&found.as_str()) {
                    let mut expected = wants.to_vec();
                    expected.dedup();
                    return Err(Error::WrongType {
                        key: key.to_owned(),
                        found: found.clone(),
                        expected: expected.join(" or "),
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
        match swap(exec, &group.staged, &group.extra, None, mode, key_type).await {
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

/// [`swap_groups`] with a filter's parameters (`params`, as [`Guard::swap_params`] gives them)
/// checked and stored in the swap, a refusal as the mismatch it means; on a cluster the
/// sharded filter's parameters are checked and stored first, beside. `key_type`: what the
/// filter's keys hold besides a growing filter's hashes (`string`, or the module's type).
pub(crate) async fn swap_checked<C>(
    exec: &Exec<C>,
    groups: &[Group],
    params: Option<Params<'_>>,
    guard: &Guard,
    mode: ImportMode,
    key_type: &str,
) -> Result<()>
where
    C: ConnectionLike + Clone + Send + Sync,
{
    let before = guard.ensure(exec, true);
    match swap_groups(exec, groups, params, before, mode, key_type).await? {
        Ok(()) => Ok(()),
        Err(Refused::Params(stored)) => Err(guard.refusal(Evidence::Stored(stored))),
    }
}
