//! One logical filter over several keys (shards) in slots spread over a Redis Cluster: the
//! constructor, routing of single items, batches split per shard, and `info` added up.

use super::RedisBloom;
use crate::error::Result;
use crate::hash;
use crate::info::{FilterInfo, KeyTtl};
use crate::keys;
use crate::layout::Layout;
use redis::aio::ConnectionLike;

impl<C> RedisBloom<C> {
    /// A filter of `bits` bits in all over `shards` keys (each `bits / shards` bits, at most
    /// 2^32), in slots spread evenly over a cluster; `shards` = 1 is [`with_layout`].
    pub(crate) fn sharded(
        conn: C,
        key: String,
        bits: u64,
        layout: Layout,
        hashes: u32,
        shards: u32,
    ) -> Result<Self>
    where
        C: Clone,
    {
        keys::check_not_reserved(&key)?;
        if shards <= 1 {
            return Self::with_layout(conn, key, bits, layout, hashes);
        }
        let per_shard = bits.div_ceil(u64::from(shards));
        let parts = (0..shards)
            .map(|i| {
                let mut shard = Self::with_layout(
                    conn.clone(),
                    keys::shard_key(&key, i, shards),
                    per_shard,
                    layout,
                    hashes,
                )?;
                // The parameters are checked once, for the whole filter.
                shard.params_key = None;
                shard.check_length = false;
                Ok(shard)
            })
            .collect::<Result<Vec<_>>>()?;
        let mut filter = Self::with_layout(conn, key, per_shard, layout, hashes)?;
        filter.bits = per_shard * u64::from(shards);
        filter.params_key = Some(keys::sidecar(&filter.key, "redbloom:params")?);
        filter.shards = Some(parts);
        Ok(filter)
    }

    /// How many keys hold the filter (1 unless built with [`Builder::shards`](crate::Builder::shards)).
    pub fn shards(&self) -> u32 {
        self.shards.as_ref().map_or(1, |shards| shards.len() as u32)
    }
}

impl<C> RedisBloom<C>
where
    C: ConnectionLike + Clone + Send + Sync,
{
    /// For a sharded filter, after checking its parameters: the shard that holds `item`.
    pub(super) async fn shard_for(
        &self,
        item: &[u8],
        write: bool,
    ) -> Result<Option<&RedisBloom<C>>> {
        let Some(shards) = &self.shards else {
            return Ok(None);
        };
        self.call(|| self.ensure_params(write)).await?;
        Ok(Some(&shards[hash::shard_of(item, shards.len() as u32)]))
    }

    /// A batch on a sharded filter: one call per shard, all at once (each shard is one key, so
    /// a cluster connection sends each to its node), answers back in input order.
    pub(super) async fn per_shard<T: AsRef<[u8]>>(
        &self,
        shards: &[RedisBloom<C>],
        items: &[T],
        write: bool,
    ) -> Result<Vec<bool>> {
        self.call(|| self.ensure_params(write)).await?;
        let guarded = async {
            if write {
                self.guard_shards().await
            } else {
                Ok(())
            }
        };
        let mut groups: Vec<Vec<usize>> = vec![Vec::new(); shards.len()];
        for (i, item) in items.iter().enumerate() {
            groups[hash::shard_of(item.as_ref(), shards.len() as u32)].push(i);
        }
        let calls = groups
            .iter()
            .zip(shards.iter())
            .map(|(group, shard)| async move {
                let part: Vec<&[u8]> = group.iter().map(|&i| items[i].as_ref()).collect();
                match (part.is_empty(), write) {
                    (true, _) => Ok(Vec::new()),
                    (false, true) => shard.call(|| shard.write(&part)).await,
                    (false, false) => shard.call(|| shard.read(&part)).await,
                }
            });
        let (guarded, answers) =
            futures_util::future::join(guarded, futures_util::future::join_all(calls)).await;
        guarded?;
        let mut out = vec![false; items.len()];
        for (group, answers) in groups.iter().zip(answers) {
            for (&i, answer) in group.iter().zip(answers?) {
                out[i] = answer;
            }
        }
        Ok(out)
    }

    /// A sharded native filter's parameters guard, sent beside each write (its key is in
    /// another slot than the shards'): the parameters are stored again after a clear or an
    /// expiry, and another client's since then are reported, as for a filter of one key.
    pub(super) async fn guard_shards(&self) -> Result<()> {
        let Some(guard) = self.params_guard() else {
            return Ok(());
        };
        let stored = self.call(|| self.query(&guard)).await?;
        self.check_guard(&stored)
    }

    /// [`info`](RedisBloom::info) of a sharded filter: the shards' added up.
    pub(super) async fn sharded_info(&self, shards: &[RedisBloom<C>]) -> Result<FilterInfo> {
        self.call(|| self.ensure_params(false)).await?;
        let infos = shards.iter().map(|shard| shard.call(|| shard.info_once()));
        let infos = futures_util::future::join_all(infos).await;
        let infos = infos.into_iter().collect::<Result<Vec<_>>>()?;
        let ttl = infos
            .iter()
            .map(|info| info.ttl)
            .fold(KeyTtl::Missing, KeyTtl::longest_lived);
        Ok(FilterInfo {
            key: self.key.clone(),
            bits: self.bits,
            hashes: self.hashes,
            bits_set: infos.iter().map(|info| info.bits_set).sum(),
            bytes: infos.iter().map(|info| info.bytes).sum(),
            estimated_items: infos.iter().map(|info| info.estimated_items).sum(),
            // An absent item goes to one shard, each as likely as the others.
            estimated_fpr: infos.iter().map(|info| info.estimated_fpr).sum::<f64>()
                / infos.len() as f64,
            ttl,
        })
    }
}
