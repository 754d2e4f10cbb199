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

use crate::error::{Error, Result};
use crate::io::exec::Exec;
use redis::aio::ConnectionLike;
use std::sync::atomic::{AtomicBool, Ordering};

/// `answers` of a check (or removal) of part `part`, where `exists` says whether the part's key
/// existed when it was read: they stand unless some item was answered "absent", the part is
/// missing and the filter's parameters (`params`) are stored.
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
    match stored {
        true => Err(Error::Lost {
            filter: filter.to_owned(),
            key: part.to_owned(),
        }),
        false => Ok(answers),
    }
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
