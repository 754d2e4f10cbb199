//! The filter: a Bloom filter in one Redis string, in go-zero's layout.

use crate::builder::Builder;
use crate::error::{Error, Result};
use crate::hash::{gozero_locations, GOZERO_HASHES};
use crate::info::{FilterInfo, KeyTtl};
use crate::scripts;
use crate::sizing::{current_fpr, estimate_items, MAX_BITS};
use redis::aio::ConnectionLike;
use std::time::Duration;

/// A Bloom filter whose bits live in a Redis string, shared by every process that opens the
/// same key with the same size.
///
/// The layout is go-zero's `core/bloom` (SPEC.md §1): the key is used as given, and each item
/// sets 14 bits at `murmur3(item ‖ i) mod bits`. A Go service using go-zero and a Rust service
/// using this type read and write the same filter.
///
/// `C` is any redis-rs async connection that can be cloned and shared: a
/// [`MultiplexedConnection`](redis::aio::MultiplexedConnection) or a
/// [`ConnectionManager`](redis::aio::ConnectionManager). Methods take `&self`; clone the filter
/// (cheap) or share a reference to use it from many tasks at once. Concurrent calls on one
/// multiplexed connection are pipelined by redis-rs.
///
/// ```no_run
/// # async fn demo() -> Result<(), Box<dyn std::error::Error>> {
/// let client = redis::Client::open("redis://127.0.0.1:6379")?;
/// let conn = client.get_multiplexed_async_connection().await?;
/// let seen = redbloom::RedisBloom::new(conn, "events:seen", 20 * 1_000_000)?;
/// if seen.add("event-42").await? {
///     // certainly the first time this event was added
/// }
/// assert!(seen.exists("event-42").await?);
/// # Ok(()) }
/// ```
#[derive(Debug, Clone)]
pub struct RedisBloom<C> {
    conn: C,
    key: String,
    bits: u64,
}

impl<C> RedisBloom<C> {
    /// A filter of `bits` bits at `key`, in go-zero's layout (k = 14). Sends nothing to Redis.
    ///
    /// # Errors
    /// [`Error::InvalidConfig`] when `bits` is not in `1..=2^32` or the key is empty.
    pub fn new(conn: C, key: impl Into<String>, bits: u64) -> Result<Self> {
        let key = key.into();
        if key.is_empty() {
            return Err(Error::InvalidConfig("the key must not be empty".into()));
        }
        if !(1..=MAX_BITS).contains(&bits) {
            return Err(Error::InvalidConfig(format!(
                "bits must be between 1 and 2^32 (4294967296), not {bits}"
            )));
        }
        Ok(RedisBloom { conn, key, bits })
    }

    /// The filter's key in Redis.
    pub fn key(&self) -> &str {
        &self.key
    }

    /// The filter's size in bits.
    pub fn bits(&self) -> u64 {
        self.bits
    }

    /// Bit locations per item (14, as in go-zero).
    pub fn hashes(&self) -> u32 {
        GOZERO_HASHES as u32
    }

    /// The bit offsets of `item`, checked against the filter's size before anything is sent.
    fn offsets(&self, item: &[u8]) -> Result<[u64; GOZERO_HASHES]> {
        let offsets = gozero_locations(item, self.bits);
        check_offsets(&offsets, self.bits)?;
        Ok(offsets)
    }

    /// `ARGV` for the batch scripts: k, then k offsets per item.
    fn batch_args<T: AsRef<[u8]>>(&self, items: &[T]) -> Result<Vec<u64>> {
        let mut args = Vec::with_capacity(1 + items.len() * GOZERO_HASHES);
        args.push(GOZERO_HASHES as u64);
        for item in items {
            args.extend_from_slice(&self.offsets(item.as_ref())?);
        }
        Ok(args)
    }

    fn redis_error(&self, err: redis::RedisError) -> Error {
        Error::from_redis(err, &self.key)
    }
}

impl RedisBloom<()> {
    /// A [`Builder`] for a filter at `key`, sized in bits or from items and a rate; the
    /// connection comes last, in [`Builder::build`].
    pub fn builder(key: impl Into<String>) -> Builder {
        Builder::new(key.into())
    }
}

impl<C> RedisBloom<C>
where
    C: ConnectionLike + Clone + Send + Sync,
{
    /// Adds `item`. Returns `true` when at least one of its bits flipped from 0 to 1, so the
    /// item was certainly not in the filter before; `false` when all its bits were already set
    /// (it was added before, or this is a false positive). Atomic: of many concurrent adds of
    /// one item, exactly one returns `true`.
    ///
    /// Adding is idempotent, so retrying after a timeout or a lost connection is safe.
    ///
    /// # Errors
    /// [`Error::WrongType`] when the key holds a non-string; [`Error::Timeout`] and
    /// [`Error::Connection`] for network faults; [`Error::Redis`] for other server errors.
    pub async fn add(&self, item: impl AsRef<[u8]>) -> Result<bool> {
        let offsets = self.offsets(item.as_ref())?;
        let new: i64 = scripts::ADD
            .key(&self.key)
            .arg(&offsets[..])
            .invoke_async(&mut self.conn.clone())
            .await
            .map_err(|e| self.redis_error(e))?;
        Ok(new == 1)
    }

    /// Whether `item` may be in the filter: `false` means certainly never added; `true` means
    /// added, or a false positive. A missing key holds no items.
    ///
    /// # Errors
    /// As for [`add`](RedisBloom::add).
    pub async fn exists(&self, item: impl AsRef<[u8]>) -> Result<bool> {
        let offsets = self.offsets(item.as_ref())?;
        // go-zero's test script answers Lua true (1) or false (nil).
        let present: Option<i64> = scripts::EXISTS
            .key(&self.key)
            .arg(&offsets[..])
            .invoke_async(&mut self.conn.clone())
            .await
            .map_err(|e| self.redis_error(e))?;
        Ok(present == Some(1))
    }

    /// Adds every item in one round trip and one atomic script; the result for each item, in
    /// input order, means what [`add`](RedisBloom::add)'s does. An item repeated in the batch is
    /// new only at its first occurrence. An empty slice sends nothing.
    ///
    /// # Errors
    /// As for [`add`](RedisBloom::add); on error, some or none of the items may be added.
    pub async fn add_many<T: AsRef<[u8]>>(&self, items: &[T]) -> Result<Vec<bool>> {
        self.run_batch(&scripts::ADD_MANY, items).await
    }

    /// Checks every item in one round trip; the result for each item, in input order, means
    /// what [`exists`](RedisBloom::exists)'s does. An empty slice sends nothing.
    ///
    /// # Errors
    /// As for [`add`](RedisBloom::add).
    pub async fn exists_many<T: AsRef<[u8]>>(&self, items: &[T]) -> Result<Vec<bool>> {
        self.run_batch(&scripts::EXISTS_MANY, items).await
    }

    async fn run_batch<T: AsRef<[u8]>>(
        &self,
        script: &redis::Script,
        items: &[T],
    ) -> Result<Vec<bool>> {
        if items.is_empty() {
            return Ok(Vec::new());
        }
        let args = self.batch_args(items)?;
        let flags: Vec<u8> = script
            .key(&self.key)
            .arg(args)
            .invoke_async(&mut self.conn.clone())
            .await
            .map_err(|e| self.redis_error(e))?;
        if flags.len() != items.len() {
            return Err(Error::UnexpectedReply(format!(
                "{} results for {} items",
                flags.len(),
                items.len()
            )));
        }
        Ok(flags.into_iter().map(|flag| flag == 1).collect())
    }

    /// Reads the filter's fill, size and TTL in one atomic round trip.
    ///
    /// # Errors
    /// As for [`add`](RedisBloom::add).
    pub async fn info(&self) -> Result<FilterInfo> {
        let last_byte = (self.bits - 1) / 8;
        let (bits_set, bytes, pttl): (u64, u64, i64) = redis::pipe()
            .atomic()
            .cmd("BITCOUNT")
            .arg(&self.key)
            .arg(0)
            .arg(last_byte)
            .cmd("STRLEN")
            .arg(&self.key)
            .cmd("PTTL")
            .arg(&self.key)
            .query_async(&mut self.conn.clone())
            .await
            .map_err(|e| self.redis_error(e))?;
        let hashes = self.hashes();
        Ok(FilterInfo {
            key: self.key.clone(),
            bits: self.bits,
            hashes,
            bits_set,
            bytes,
            estimated_items: estimate_items(self.bits, hashes, bits_set),
            estimated_fpr: current_fpr(self.bits, hashes, bits_set),
            ttl: KeyTtl::from_pttl(pttl),
        })
    }

    /// Deletes the filter's key. Returns whether it existed.
    ///
    /// # Errors
    /// [`Error::Timeout`], [`Error::Connection`] or [`Error::Redis`].
    pub async fn clear(&self) -> Result<bool> {
        let deleted: i64 = redis::cmd("DEL")
            .arg(&self.key)
            .query_async(&mut self.conn.clone())
            .await
            .map_err(|e| self.redis_error(e))?;
        Ok(deleted > 0)
    }

    /// Makes the filter's key expire after `ttl` (millisecond precision; zero deletes it now).
    /// Returns `false` when the key does not exist, since nothing has been added yet.
    ///
    /// # Errors
    /// [`Error::InvalidConfig`] for a TTL Redis cannot hold; otherwise as for
    /// [`clear`](RedisBloom::clear).
    pub async fn expire(&self, ttl: Duration) -> Result<bool> {
        let millis = i64::try_from(ttl.as_millis())
            .ok()
            .filter(|ms| *ms < i64::MAX / 2)
            .ok_or_else(|| Error::InvalidConfig(format!("a TTL of {ttl:?} is too long")))?;
        let set: i64 = redis::cmd("PEXPIRE")
            .arg(&self.key)
            .arg(millis)
            .query_async(&mut self.conn.clone())
            .await
            .map_err(|e| self.redis_error(e))?;
        Ok(set == 1)
    }
}

/// go-zero's `ErrTooLargeOffset` check: every offset must be below the filter's size.
pub(crate) fn check_offsets(offsets: &[u64], bits: u64) -> Result<()> {
    match offsets.iter().find(|&&offset| offset >= bits) {
        Some(&offset) => Err(Error::OffsetOutOfRange { offset, bits }),
        None => Ok(()),
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn offsets_at_or_past_the_size_are_rejected() {
        assert!(check_offsets(&[0, 63], 64).is_ok());
        let err = check_offsets(&[3, 64, 65], 64).unwrap_err();
        assert!(
            matches!(
                err,
                Error::OffsetOutOfRange {
                    offset: 64,
                    bits: 64
                }
            ),
            "{err}"
        );
        assert_eq!(
            err.to_string(),
            "bit offset 64 is out of range for a filter of 64 bits"
        );
    }

    #[test]
    fn construction_rejects_bad_sizes_without_io() {
        for bits in [0, MAX_BITS + 1, u64::MAX] {
            let err = RedisBloom::new((), "k", bits).unwrap_err();
            assert!(matches!(err, Error::InvalidConfig(_)), "{bits}: {err}");
        }
        assert!(RedisBloom::new((), "", 64).is_err());
        assert_eq!(RedisBloom::new((), "k", MAX_BITS).unwrap().bits(), MAX_BITS);
    }

    #[test]
    fn batch_arguments_are_k_then_each_items_offsets() {
        let bloom = RedisBloom::new((), "k", 64).unwrap();
        let args = bloom.batch_args(&["hello", "world"]).unwrap();
        assert_eq!(args[0], 14);
        assert_eq!(args[1..15], gozero_locations(b"hello", 64));
        assert_eq!(args[15..], gozero_locations(b"world", 64));
    }
}
