//! The filter a command line describes, of any kind, behind the verbs every kind shares
//! (SPEC.md §4): the library gives each kind its own type with the same inherent methods.

use crate::output;
use redbloom::redis::aio::ConnectionLike;
use redbloom::{
    Builder, CountingBloom, Error, GrowingBloom, NearCacheStats, RedisBloom, Result, WindowBloom,
};
use std::time::Duration;

/// One filter of one kind.
#[derive(Debug, Clone)]
pub(crate) enum Filter<C> {
    Plain(RedisBloom<C>),
    Window(WindowBloom<C>),
    Counting(CountingBloom<C>),
    Growing(GrowingBloom<C>),
}

/// Which kind the command line asks for.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) enum Kind {
    Plain,
    Window,
    Counting,
    Growing,
}

/// Calls the same method on whichever kind the filter is.
macro_rules! each {
    ($filter:expr, $f:ident => $call:expr) => {
        match $filter {
            Filter::Plain($f) => $call,
            Filter::Window($f) => $call,
            Filter::Counting($f) => $call,
            Filter::Growing($f) => $call,
        }
    };
}

impl<C> Filter<C> {
    /// A filter of `kind` as `builder` describes it, on `conn`.
    pub(crate) fn build(builder: Builder, kind: Kind, conn: C) -> Result<Self> {
        Ok(match kind {
            Kind::Window => Filter::Window(builder.build_window(conn)?),
            Kind::Counting => Filter::Counting(builder.build_counting(conn)?),
            Kind::Growing => Filter::Growing(builder.build_growing(conn)?),
            Kind::Plain => Filter::Plain(builder.build(conn)?),
        })
    }

    /// What the near cache has done (`None`: the filter has none).
    pub(crate) fn near_cache_stats(&self) -> Option<NearCacheStats> {
        each!(self, f => f.near_cache_stats())
    }

    /// Items per `load` batch when not given.
    pub(crate) fn bulk_add_batch_size(&self) -> usize {
        match self {
            Filter::Plain(f) => f.bulk_add_batch_size(),
            Filter::Window(f) => f.bulk_batch_size(),
            Filter::Counting(f) => f.bulk_batch_size(),
            Filter::Growing(f) => f.bulk_batch_size(),
        }
    }

    /// Items per `check` batch when not given.
    pub(crate) fn bulk_check_batch_size(&self) -> usize {
        match self {
            Filter::Plain(f) => f.bulk_check_batch_size(),
            Filter::Window(f) => f.bulk_batch_size(),
            Filter::Counting(f) => f.bulk_check_batch_size(),
            Filter::Growing(f) => f.bulk_check_batch_size(),
        }
    }
}

impl<C> Filter<C>
where
    C: ConnectionLike + Clone + Send + Sync,
{
    pub(crate) async fn add(&self, item: &[u8]) -> Result<bool> {
        each!(self, f => f.add(item).await)
    }

    pub(crate) async fn exists(&self, item: &[u8]) -> Result<bool> {
        each!(self, f => f.exists(item).await)
    }

    pub(crate) async fn add_many<T: AsRef<[u8]>>(&self, items: &[T]) -> Result<Vec<bool>> {
        each!(self, f => f.add_many(items).await)
    }

    pub(crate) async fn exists_many<T: AsRef<[u8]>>(&self, items: &[T]) -> Result<Vec<bool>> {
        each!(self, f => f.exists_many(items).await)
    }

    pub(crate) async fn info(&self) -> Result<output::Info> {
        Ok(match self {
            Filter::Plain(f) => output::Info::from(f.info().await?),
            Filter::Window(f) => output::Info::from(f.info().await?),
            Filter::Counting(f) => output::Info::from(f.info().await?),
            Filter::Growing(f) => output::Info::from(f.info().await?),
        })
    }

    /// Removes each item once (counting filters only).
    pub(crate) async fn remove_many<T: AsRef<[u8]>>(&self, items: &[T]) -> Result<Vec<bool>> {
        match self {
            Filter::Counting(f) => f.remove_many(items).await,
            _ => Err(Error::InvalidConfig(
                "only a counting filter can remove items: give --counting (and the size it was \
                 created with)"
                    .into(),
            )),
        }
    }

    pub(crate) async fn remove(&self, item: &[u8]) -> Result<bool> {
        Ok(self.remove_many(&[item]).await?[0])
    }

    pub(crate) async fn clear(&self) -> Result<bool> {
        each!(self, f => f.clear().await)
    }

    pub(crate) async fn expire(&self, ttl: Duration) -> Result<bool> {
        each!(self, f => f.expire(ttl).await)
    }
}
