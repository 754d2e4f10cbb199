//! What the server says of a module filter another client made, which stores no parameters
//! beside it: `BF.INFO`, and the first sub-filter of `BF.SCANDUMP`'s header where the server
//! has it (RedisBloom, Redis 8): the capacity, error rate and expansion it was made with.

use super::info::{self, Reported};
use crate::error::{Error, Result};
use crate::snapshot::FirstLink;
use redis::aio::ConnectionLike;
use redis::Value;

/// The parameters a module filter was made with, as the server reports them: for a filter
/// that another client made (`BF.RESERVE KEY P N`, or `BF.ADD`'s defaults), which stores
/// none beside it, what to build a [`ModuleBloom`](crate::ModuleBloom) with to open it, and
/// what sizes given elsewhere must agree with.
///
/// `BF.INFO` reports the expansion and the capacity of all sub-filters together; RedisBloom's
/// dump header (`BF.SCANDUMP KEY 0`) holds the first sub-filter's capacity and error rate,
/// `BF.RESERVE`'s own. Where the server has no dump (valkey-bloom), the capacity is derived
/// from `BF.INFO`'s (each sub-filter takes the expansion times the one before's) and the
/// rate is `BF.INFO`'s, where the module reports it.
///
/// ```no_run
/// # async fn demo(mut conn: redbloom::redis::aio::MultiplexedConnection) -> redbloom::Result<()> {
/// if let Some(found) = redbloom::ModuleParams::read(&mut conn, "made:elsewhere").await? {
///     if let (Some(capacity), Some(rate)) = (found.capacity, found.false_positive_rate) {
///         let mut builder = redbloom::ModuleBloom::builder("made:elsewhere")
///             .expected_items(capacity)
///             .false_positive_rate(rate);
///         if let Some(expansion) = found.expansion {
///             builder = builder.growth(expansion);
///         }
///         let filter = builder.build(conn)?;
///         println!("{:?}", filter.info().await?);
///     }
/// }
/// # Ok(()) }
/// ```
#[derive(Debug, Clone, PartialEq)]
#[non_exhaustive]
pub struct ModuleParams {
    /// `BF.RESERVE`'s capacity: the first sub-filter's (`None` when the server says too little
    /// to derive it).
    pub capacity: Option<u64>,
    /// `BF.RESERVE`'s error rate (`None` when the server reports it nowhere).
    pub false_positive_rate: Option<f64>,
    /// Each new sub-filter's size over the one before (`BF.INFO`'s `Expansion rate`); `None`
    /// for a non-scaling filter.
    pub expansion: Option<u32>,
    /// The capacity of all its sub-filters together (`BF.INFO`'s `Capacity`).
    pub total_capacity: u64,
    /// Its sub-filters (`BF.INFO`'s `Number of filters`).
    pub filters: u64,
}

impl ModuleParams {
    /// What the server reports of the module filter at `key`; `None` when the key does not
    /// exist.
    ///
    /// # Errors
    /// [`Error::WrongType`] when the key holds something else than a module filter;
    /// [`Error::NoPermission`] when the ACL refuses `BF.INFO`; network faults.
    pub async fn read<C: ConnectionLike>(conn: &mut C, key: &str) -> Result<Option<Self>> {
        let reply: Value = match redis::cmd("BF.INFO").arg(key).query_async(conn).await {
            Ok(reply) => reply,
            Err(err) if err.to_string().contains("not found") => return Ok(None),
            Err(err) => return Err(Error::from_redis(err, key).typed(conn, "module").await),
        };
        let found = info::parse(&reply)?;
        // The dump's header only: a few dozen bytes. A server without BF.SCANDUMP, or an ACL
        // that refuses it, leaves what BF.INFO says.
        let dumped: Option<(u64, Vec<u8>)> = redis::cmd("BF.SCANDUMP")
            .arg(key)
            .arg(0)
            .query_async(conn)
            .await
            .ok();
        let first = dumped.and_then(|(_, header)| FirstLink::parse(&header));
        Ok(Some(Self::of(&found, first)))
    }

    /// The parameters from `BF.INFO`'s reply and the dump header's first link, if any.
    fn of(found: &Reported, first: Option<FirstLink>) -> Self {
        ModuleParams {
            capacity: first
                .map(|link| link.entries)
                .or_else(|| first_capacity(found)),
            false_positive_rate: found.error_rate.or(first.map(|link| link.rate())),
            expansion: found.expansion,
            total_capacity: found.capacity,
            filters: found.filters,
        }
    }
}

/// The first sub-filter's capacity from the total of `filters` sub-filters, each `expansion`
/// times the one before: `N·(1 + e + … + e^(n-1))`; `None` when the total is not such a sum.
fn first_capacity(found: &Reported) -> Option<u64> {
    let Some(expansion) = found.expansion else {
        return Some(found.capacity);
    };
    let (mut parts, mut size) = (0u64, 1u64);
    for _ in 0..found.filters.max(1) {
        parts = parts.checked_add(size)?;
        size = size.checked_mul(u64::from(expansion))?;
    }
    found
        .capacity
        .is_multiple_of(parts)
        .then(|| found.capacity / parts)
}

#[cfg(test)]
mod tests {
    use super::*;

    fn reported(capacity: u64, filters: u64, expansion: Option<u32>) -> Reported {
        Reported {
            capacity,
            filters,
            expansion,
            ..Reported::default()
        }
    }

    #[test]
    fn the_first_capacity_is_derived_from_the_total() {
        // BF.RESERVE k 0.01 100 EXPANSION 3, grown to three sub-filters: 100 + 300 + 900.
        assert_eq!(first_capacity(&reported(1_300, 3, Some(3))), Some(100));
        assert_eq!(first_capacity(&reported(1_000, 1, Some(2))), Some(1_000));
        assert_eq!(first_capacity(&reported(300, 3, Some(1))), Some(100));
        assert_eq!(first_capacity(&reported(100, 1, None)), Some(100));
        assert_eq!(first_capacity(&reported(1_301, 3, Some(3))), None);
    }

    #[test]
    fn the_dump_header_wins_and_bf_info_reports_the_rate_where_it_can() {
        let first = FirstLink {
            entries: 100,
            error: 0.005,
            nonscaling: false,
        };
        let found = ModuleParams::of(&reported(1_300, 3, Some(3)), Some(first));
        assert_eq!(
            (found.capacity, found.false_positive_rate, found.expansion),
            (Some(100), Some(0.01), Some(3))
        );
        let valkey = Reported {
            error_rate: Some(0.02),
            ..reported(1_000, 1, Some(2))
        };
        let found = ModuleParams::of(&valkey, None);
        assert_eq!(
            (found.capacity, found.false_positive_rate),
            (Some(1_000), Some(0.02))
        );
        let found = ModuleParams::of(&reported(1_000, 1, Some(2)), None);
        assert_eq!(found.false_positive_rate, None);
    }
}
