//! A window filter's near cache: each part's live generations (and the next, which a client
//! ahead may have begun), with the server's clock as it was read, so that the copy rolls its
//! generations over by itself: at every answer, the live generations are those of the server's
//! time now (its time at the read plus the time elapsed here since), as the scripts compute
//! them. The estimate lags the server by at most the read's round trip, so the copy may find
//! an item that long past its window, never forget one early.

use super::{epoch_of, Window};
use crate::error::{Error, Result};
use crate::geometry::Geometry;
use crate::hash::ItemHash;
use crate::layout::Layout;
use crate::near::{self, Near, NearCache};
use redis::aio::ConnectionLike;
use std::time::Instant;

/// The copy: per part, its generations by epoch.
#[derive(Debug)]
pub(super) struct Copy {
    parts: Vec<Vec<(i64, Vec<u8>)>>,
    /// The server's time (ms) when it was read, and when that was here.
    server_ms: u64,
    heard: Instant,
}

impl near::Copy for Copy {
    fn bytes(&self) -> u64 {
        self.parts
            .iter()
            .flatten()
            .map(|(_, bytes)| bytes.len() as u64)
            .sum()
    }
}

/// The near cache of a window filter of `parts` keys of `geometry` each (per part): its copy
/// takes up to G + 1 generations per part.
pub(super) fn attach<C>(window: &mut Window<C>, config: NearCache) -> Result<()> {
    let per_part = window.parts.parts()[0].geometry;
    let bytes =
        per_part.max_bytes() * u64::from(window.generations + 1) * u64::from(window.parts.count());
    let keys = window
        .parts
        .parts()
        .iter()
        .map(|p| format!("{}:", p.prefix))
        .collect();
    window.near = Some(Near::new(&window.key, config, bytes, near::prefixes(keys))?);
    Ok(())
}

impl<C> Window<C>
where
    C: ConnectionLike + Clone + Send + Sync,
{
    /// The answer for `item` from the near cache's copy, when it may give it now (see
    /// [`Near::answer_now`]).
    pub(super) fn answer_now(&self, item: &[u8]) -> Option<bool> {
        self.near
            .as_ref()?
            .answer_now(item, |copy, item| self.in_copy(copy, item))
    }

    /// Whether `item` is in a generation of the copy that is live now.
    fn in_copy(&self, copy: &Copy, item: &[u8]) -> bool {
        let parts = self.parts.parts();
        let i = self.parts.part_of(item);
        let now = copy
            .server_ms
            .saturating_add(u64::try_from(copy.heard.elapsed().as_millis()).unwrap_or(0));
        let epoch = epoch_of(now, self.window_ms, self.generations);
        let live = epoch - i64::from(self.generations) + 1..=epoch;
        let hash = ItemHash::of(item, Layout::Native);
        let geometry: &Geometry = &parts[i].geometry;
        copy.parts[i]
            .iter()
            .filter(|(e, _)| live.contains(e))
            .any(|(_, bytes)| geometry.all(&hash, |offset| crate::dense::test(bytes, offset)))
    }

    /// Checks `items` from the near cache's copy while it is fresh, else from Redis.
    pub(super) async fn check<T: AsRef<[u8]>>(&self, items: &[T]) -> Result<Vec<bool>> {
        let clock = self.exec.clock();
        let Some(near) = &self.near else {
            return self.per_part(&clock, items, false).await;
        };
        let answer = |copy: &Copy, item: &[u8]| self.in_copy(copy, item);
        let read = || async {
            let copy = self.exec.retried(&clock, || self.read_copy()).await?;
            Ok(copy)
        };
        let remote = || self.per_part(&clock, items, false);
        near.check(items, answer, read, remote).await
    }

    /// Reads every part's generations from the oldest live one to the next, after the
    /// parameters check.
    async fn read_copy(&self) -> Result<Copy> {
        if let Some(guard) = &self.guard {
            guard.ensure(&self.exec, false).await?;
        }
        let g = i64::from(self.generations);
        let mut copy = Copy {
            parts: Vec::with_capacity(self.parts.parts().len()),
            server_ms: 0,
            heard: Instant::now(),
        };
        for (index, part) in self.parts.parts().iter().enumerate() {
            let anchor = format!("{}:0", part.prefix);
            if let Some([params, _]) = &part.checked {
                let stored: Option<String> = self
                    .exec
                    .query(params, redis::cmd("GET").arg(params))
                    .await?;
                if let Some(stored) = stored.filter(|s| *s != self.fingerprint) {
                    return Err(self.mismatch(stored));
                }
            }
            let (secs, micros): (u64, u64) = self.exec.query(&anchor, &redis::cmd("TIME")).await?;
            let heard = Instant::now();
            let server_ms = secs * 1_000 + micros / 1_000;
            if index == 0 {
                copy.server_ms = server_ms;
                copy.heard = heard;
            }
            let epoch = epoch_of(server_ms, self.window_ms, self.generations);
            let mut generations = Vec::new();
            for e in epoch - g + 1..=epoch + 1 {
                let key = format!("{}:{e}", part.prefix);
                let bytes = near::read_key(&self.exec, &key, part.geometry.max_bytes()).await?;
                if !bytes.is_empty() {
                    generations.push((e, bytes));
                }
            }
            copy.parts.push(generations);
        }
        if copy.parts.len() != self.parts.parts().len() {
            return Err(Error::UnexpectedReply(
                "a part of the copy is missing".into(),
            ));
        }
        Ok(copy)
    }
}
