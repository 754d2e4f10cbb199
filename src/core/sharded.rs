//! One filter over several slot groups (shards) spread over a Redis Cluster, for any kind:
//! which part an item goes to, a batch split per part, and the answers put back in input
//! order.

use crate::error::Result;
use crate::hash;
use crate::info::{FilterInfo, KeyTtl};
use crate::io::exec::one_wait_failure;
use crate::io::exec::Exec;
use crate::io::guard::Guard;
use crate::retry::Clock;
use futures_util::future::{join, join_all, try_join_all};
use redis::aio::ConnectionLike;
use std::future::Future;

/// When a sharded filter's call checks its parameters (kept in a slot of their own) against
/// the stored ones: first in every case (from memory, once seen), and for a write again.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) enum Check {
    /// A read: first only.
    Read,
    /// A write: again beside the parts' writes (a filter made again with other parameters
    /// meanwhile is found by the same call).
    Write,
    /// A write that cannot be undone (a counting filter's remove takes other items with it):
    /// again before any part is touched.
    WriteFirst,
}

/// A filter's parts: one slot group each, one part for a filter of one key.
#[derive(Debug, Clone)]
pub(crate) struct Shards<P> {
    parts: Vec<P>,
}

impl<P> Shards<P> {
    pub(crate) fn new(parts: Vec<P>) -> Self {
        debug_assert!(!parts.is_empty());
        Shards { parts }
    }

    pub(crate) fn parts(&self) -> &[P] {
        &self.parts
    }

    /// The part that holds `item` (a filter of one part hashes nothing).
    pub(crate) fn part_of(&self, item: &[u8]) -> usize {
        match self.parts.len() {
            1 => 0,
            n => hash::shard_of(item, n as u32),
        }
    }

    /// How many parts.
    pub(crate) fn count(&self) -> u32 {
        self.parts.len() as u32
    }

    /// The parts that hold items of the batch, each with the indices of its items (by a hash
    /// of the item independent of its bits), in input order. A single item goes straight to
    /// its part: nothing is allocated per part.
    pub(crate) fn split<T: AsRef<[u8]>>(&self, items: &[T]) -> Vec<(usize, Vec<usize>)> {
        if let [item] = items {
            return vec![(self.part_of(item.as_ref()), vec![0])];
        }
        let mut groups: Vec<Vec<usize>> = vec![Vec::new(); self.parts.len()];
        for (i, item) in items.iter().enumerate() {
            groups[hash::shard_of(item.as_ref(), self.count())].push(i);
        }
        groups
            .into_iter()
            .enumerate()
            .filter(|(_, group)| !group.is_empty())
            .collect()
    }
}

impl<P> Shards<P> {
    /// A sharded filter's call on `items`: the parameters checked (`guard`, as `check` says),
    /// each part's items sent at once (`call(part, its items)`), and the answers put back in
    /// input order. The first error ends the call: the other parts' futures are dropped
    /// (their writes may be applied, as with any failed write). Not for a write that waits
    /// for replicas, whose [`Error::NotReplicated`](crate::Error::NotReplicated) says the write
    /// is on the primary: every part's write goes to its end (the first `WAIT` that fails
    /// stands for the others', [`one_wait_failure`]), and the error is then the first that is
    /// not `NotReplicated`, else that.
    pub(crate) async fn fan_out<'a, C, T, F, Fut>(
        &self,
        exec: &Exec<C>,
        clock: &Clock,
        guard: &Guard,
        items: &'a [T],
        check: Check,
        call: F,
    ) -> Result<Vec<bool>>
    where
        C: ConnectionLike + Clone + Send + Sync,
        T: AsRef<[u8]>,
        F: Fn(usize, Vec<&'a [u8]>) -> Fut,
        Fut: Future<Output = Result<Vec<bool>>>,
    {
        exec.retried(clock, || guard.ensure(exec, check != Check::Read))
            .await?;
        if check == Check::WriteFirst {
            guard.beside(exec, clock).await?;
        }
        let groups = self.split(items);
        let calls = groups.iter().map(|(part, group)| {
            let answers = call(*part, group.iter().map(|&i| items[i].as_ref()).collect());
            async move { Ok::<_, crate::Error>((group.as_slice(), answers.await?)) }
        });
        let beside = async {
            match check {
                Check::Write => guard.beside(exec, clock).await,
                Check::Read | Check::WriteFirst => Ok(()),
            }
        };
        let all = async {
            if check == Check::Read || exec.options().replicas.is_none() {
                return try_join_all(calls).await;
            }
            let (mut answers, mut not_replicated) = (Vec::new(), None);
            for answer in one_wait_failure(join_all(calls)).await {
                match answer {
                    Ok(answer) => answers.push(answer),
                    Err(err @ crate::Error::NotReplicated { .. }) => {
                        not_replicated.get_or_insert(err);
                    }
                    Err(err) => return Err(err),
                }
            }
            not_replicated.map_or(Ok(answers), Err)
        };
        let (beside, answers) = join(beside, all).await;
        beside?;
        Ok(gather(items.len(), answers?))
    }
}

/// The parts' answers (each in the order of its group's indices) back in input order.
pub(crate) fn gather<R: Clone + Default>(items: usize, answers: Vec<(&[usize], Vec<R>)>) -> Vec<R> {
    let mut out = vec![R::default(); items];
    for (group, answers) in answers {
        for (&i, answer) in group.iter().zip(answers) {
            out[i] = answer;
        }
    }
    out
}

/// The parts' infos added up into the filter's, under its name.
pub(crate) fn sum_info(key: &str, bits: u64, hashes: u32, infos: &[FilterInfo]) -> FilterInfo {
    let ttl = infos
        .iter()
        .map(|info| info.ttl)
        .fold(KeyTtl::Missing, KeyTtl::longest_lived);
    FilterInfo {
        key: key.to_owned(),
        bits,
        hashes,
        bits_set: infos.iter().map(|info| info.bits_set).sum(),
        bytes: infos.iter().map(|info| info.bytes).sum(),
        estimated_items: infos.iter().map(|info| info.estimated_items).sum(),
        // An absent item goes to one part, each as likely as the others.
        estimated_fpr: infos.iter().map(|info| info.estimated_fpr).sum::<f64>()
            / infos.len().max(1) as f64,
        ttl,
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn split_then_gather_keeps_input_order() {
        let shards = Shards::new(vec![(), (), ()]);
        let items: Vec<String> = (0..100).map(|i| format!("item{i}")).collect();
        let groups = shards.split(&items);
        assert_eq!(groups.len(), 3, "every part holds items of 100");
        assert_eq!(groups.iter().map(|(_, g)| g.len()).sum::<usize>(), 100);
        let answers = groups
            .iter()
            .map(|(_, g)| (g.as_slice(), g.clone()))
            .collect();
        assert_eq!(gather(100, answers), (0..100).collect::<Vec<_>>());
        // One item: one group, in the part the batch split would pick.
        let one = shards.split(&items[7..8]);
        let part = groups.iter().find(|(_, g)| g.contains(&7)).unwrap().0;
        assert_eq!(one, vec![(part, vec![0])]);
    }
}
