//! Lost data is an error, not "absent" (SPEC.md §3): a filter whose stored parameters say its
//! keys exist, but whose part is gone (evicted, deleted by hand, expired apart from them),
//! fails its checks with [`Error::Lost`] instead of answering that items are absent.
//!
//! Kinds that keep this promise ([`Seam::keeps_parts`](super::kind::Seam::keeps_parts)) make
//! every part before their parameters are stored: a filter of one key in the same script
//! (lua/params.lua, or the kind's write script), a sharded one by [`make_parts`] before its
//! first write stores them. A check that answers "absent" for an item (or a removal that finds
//! nothing) having read only clear bits (a part that is gone reads as zeros; a bit seen set,
//! [`Ctx::saw`](super::Ctx::saw), proves it is there) then asks whether the part exists; only
//! when it does not are the parameters asked for. A filter in use seldom pays the round trip.
//!
//! A replica that has not synced with its master holds nothing yet (SPEC.md §3, "Replicas"):
//! a check it answers "absent" from nothing of the filter (its part missing, no parameters
//! stored) fails with [`Error::ReplicaNotSynced`] ([`synced`]). Only that path asks the
//! server's `ROLE`: a filter whose part exists, or whose parameters a handle has seen stored,
//! asks nothing more.

use crate::error::{Error, Result};
use crate::io::exec::Exec;
use crate::io::tx::{Slot, Tx};
use redis::aio::ConnectionLike;
use redis::Value;
use std::sync::atomic::{AtomicBool, Ordering};

/// `answers` of a check (or removal) of part `part`, where `exists` says whether the part's key
/// existed when it was read: they stand unless some item was answered "absent" and the part is
/// missing, and then either the filter's parameters (`params`) are stored ([`Error::Lost`]) or
/// the server is a replica that has not synced ([`synced`]).
pub(crate) async fn confirm<C>(
    exec: &Exec<C>,
    (filter, part, params): (&str, &str, &str),
    answers: Vec<bool>,
    exists: bool,
) -> Result<Vec<bool>>
where
    C: ConnectionLike + Clone + Send + Sync,
{
    if exists || answers.iter().all(|&a| a) {
        return Ok(answers);
    }
    let stored: bool = exec.query(params, redis::cmd("EXISTS").arg(params)).await?;
    if stored {
        return Err(Error::Lost {
            filter: filter.to_owned(),
            key: part.to_owned(),
        });
    }
    // Nothing of the filter here: "absent" unless the server is a replica that holds nothing
    // yet.
    synced(exec, filter, part).await?;
    Ok(answers)
}

/// After a read of filter `filter` that found nothing of it (`part`, a key of the part read,
/// missing as far as the read could tell): `Ok` unless the server that answers for `part` is a
/// replica not in sync with its master and `part` is missing there, which is
/// [`Error::ReplicaNotSynced`] naming the replica's state (SPEC.md §3, "Replicas"). One
/// attempt: the caller retries.
pub(crate) async fn synced<C>(exec: &Exec<C>, filter: &str, part: &str) -> Result<()>
where
    C: ConnectionLike + Clone + Send + Sync,
{
    match unsynced(exec, part).await? {
        Some(state) => Err(Error::ReplicaNotSynced {
            key: filter.to_owned(),
            state,
        }),
        None => Ok(()),
    }
}

/// The replication state of the server that answers for `part` when it is a replica whose
/// link to its master is not `connected` and `part` is missing there; else `None`.
///
/// `ROLE` goes behind `EXISTS part`, in one pipeline: the pipeline goes where the part's reads
/// go (on a cluster, the part's node; a replica of it when reads go to replicas), and the part
/// is asked for again on the server that answers. A user the ACL refuses `ROLE` (the filters'
/// lists in docs/security.md grant `INFO`, not `ROLE`) is asked `INFO replication` instead;
/// a server that answers neither (refused, or unknown to a proxy) counts as no replica: the
/// answers stand, as before the question.
async fn unsynced<C>(exec: &Exec<C>, part: &str) -> Result<Option<String>>
where
    C: ConnectionLike + Clone + Send + Sync,
{
    type Parse = fn(Value) -> Option<String>;
    let questions: [(redis::Cmd, Parse); 2] = [
        (redis::cmd("ROLE"), role_state),
        (redis::cmd("INFO").arg("replication").to_owned(), info_state),
    ];
    for (question, parse) in questions {
        let mut tx = Tx::plain();
        let exists: Slot<bool> = tx.add(redis::cmd("EXISTS").arg(part).to_owned());
        let reply: Slot<Value> = tx.add(question);
        let mut replies = match exec.run(part, &tx).await {
            Err(err @ (Error::NoPermission(_) | Error::Redis(_))) if !err.is_transient() => {
                continue
            }
            replies => replies?,
        };
        if replies.take(exists)? {
            return Ok(None);
        }
        return Ok(parse(replies.take(reply)?));
    }
    Ok(None)
}

/// The state `ROLE` replies of a replica not `connected` to its master (`slave`, or
/// `replica`, then its master's host and port, then its state); `None` for any other server.
fn role_state(role: Value) -> Option<String> {
    let Value::Array(fields) = role else {
        return None;
    };
    let text = |at: usize| redis::from_redis_value_ref::<String>(fields.get(at)?).ok();
    if !matches!(text(0)?.as_str(), "slave" | "replica") {
        return None;
    }
    text(3).filter(|state| state != "connected")
}

/// The state `INFO replication` tells of a replica whose link to its master is not up: `sync`
/// while it loads its master's data, else `link down`; `None` for any other server.
fn info_state(info: Value) -> Option<String> {
    let info: String = redis::from_redis_value(info).ok()?;
    let field = |name: &str| {
        info.lines()
            .find_map(|line| line.strip_prefix(name)?.strip_prefix(':'))
            .map(str::trim)
    };
    if !matches!(field("role")?, "slave" | "replica") || field("master_link_status")? == "up" {
        return None;
    }
    Some(match field("master_sync_in_progress") {
        Some("1") => "sync".to_owned(),
        _ => "link down".to_owned(),
    })
}

/// A read saw a bit or counter set (`set`): proof, told to `seen`, that its part exists.
pub(crate) fn saw(seen: Option<&AtomicBool>, set: bool) {
    if let (Some(seen), true) = (seen, set) {
        seen.store(true, Ordering::Relaxed);
    }
}

/// Whether `part` exists, asked after a read of it answered "absent" from clear bits only.
pub(crate) async fn exists<C>(exec: &Exec<C>, part: &str) -> Result<bool>
where
    C: ConnectionLike + Clone + Send + Sync,
{
    exec.query(part, redis::cmd("EXISTS").arg(part)).await
}

/// Every part of a sharded filter made (each by its kind's command,
/// [`Seam::make_part`](super::kind::Seam::make_part): one that exists is left as it is) before
/// its parameters are stored, so that a part is never merely unwritten.
pub(crate) async fn make_parts<C>(exec: &Exec<C>, parts: &[(&str, redis::Cmd)]) -> Result<()>
where
    C: ConnectionLike + Clone + Send + Sync,
{
    let made = parts
        .iter()
        .map(|(part, cmd)| async move { exec.query::<redis::Value>(part, cmd).await.map(drop) });
    futures_util::future::try_join_all(made).await.map(drop)
}

#[cfg(test)]
mod tests {
    use super::*;

    fn bulk(text: &str) -> Value {
        Value::BulkString(text.as_bytes().to_vec())
    }

    #[test]
    fn a_replica_not_connected_names_its_state() {
        let replica = |state: &str| {
            Value::Array(vec![
                bulk("slave"),
                bulk("127.0.0.1"),
                Value::Int(6379),
                bulk(state),
                Value::Int(-1),
            ])
        };
        assert_eq!(role_state(replica("connect")).as_deref(), Some("connect"));
        assert_eq!(role_state(replica("sync")).as_deref(), Some("sync"));
        assert_eq!(role_state(replica("connected")), None);
        let master = Value::Array(vec![bulk("master"), Value::Int(0), Value::Array(vec![])]);
        assert_eq!(role_state(master), None);
        assert_eq!(role_state(Value::Nil), None);
        let info = |lines: &str| Value::BulkString(lines.replace('\n', "\r\n").into_bytes());
        let down =
            "# Replication\nrole:slave\nmaster_link_status:down\nmaster_sync_in_progress:0\n";
        assert_eq!(info_state(info(down)).as_deref(), Some("link down"));
        let syncing = "role:slave\nmaster_link_status:down\nmaster_sync_in_progress:1\n";
        assert_eq!(info_state(info(syncing)).as_deref(), Some("sync"));
        let up = "role:slave\nmaster_link_status:up\nmaster_sync_in_progress:0\n";
        assert_eq!(info_state(info(up)), None);
        assert_eq!(info_state(info("role:master\nconnected_slaves:0\n")), None);
    }
}
