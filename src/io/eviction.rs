//! Whether the server may evict a filter's keys: `maxmemory` set with an `allkeys-*` policy, or
//! a `volatile-*` one for keys that carry a TTL (a window filter's generations, any filter after
//! `expire`). A filter that loses a key forgets its items, so a write is refused while that can
//! happen, unless the builder accepted the risk. Asked once per filter, before its first write,
//! of the master of each of its slot groups (`INFO memory`, routed behind a command on a key of
//! the group); a server that changes its configuration later is not asked again.

use super::exec::Exec;
use super::tx::Tx;
use crate::engine::Engine;
use crate::error::{Error, Result};
use crate::retry::Clock;
use redis::aio::ConnectionLike;
use redis::Value;
use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::Mutex;

/// What a server says of its eviction (`INFO memory`).
#[derive(Debug, Clone, PartialEq, Eq)]
pub(crate) struct Policy {
    /// `maxmemory-policy`, e.g. `allkeys-lru`.
    pub(crate) name: String,
    /// `maxmemory` in bytes; 0 is no limit, and nothing is evicted.
    pub(crate) maxmemory: u64,
}

impl Policy {
    /// The policy in `INFO memory`'s text; `None` when it lacks the fields.
    pub(crate) fn parse(info: &str) -> Option<Self> {
        let field = |name: &str| {
            info.lines()
                .find_map(|line| line.strip_prefix(name)?.strip_prefix(':'))
                .map(str::trim)
        };
        Some(Policy {
            name: field("maxmemory_policy")?.to_owned(),
            maxmemory: field("maxmemory")?.parse().ok()?,
        })
    }

    /// Whether the server may evict a key of the filter, one with a TTL when `ttl`.
    pub(crate) fn evicts(&self, ttl: bool) -> bool {
        self.maxmemory > 0
            && (self.name.starts_with("allkeys-") || (ttl && self.name.starts_with("volatile-")))
    }
}

/// One filter's eviction check: what its servers said, asked once, unless the builder
/// accepted the risk.
#[derive(Debug, Default)]
pub(crate) struct Eviction {
    /// The builder accepted that the server may evict the filter's keys.
    accepted: bool,
    /// What the servers said: the first that may evict a key with a TTL (`Some(None)`: the
    /// ACL refused `INFO`), and whether it may evict keys without one too; and whether the
    /// filter had a TTL then.
    found: Mutex<Option<Found>>,
    /// A write passed the check (`[0]`; `[1]`: one that gives the keys a TTL): later ones
    /// pass at once.
    passed: [AtomicBool; 2],
    warned: AtomicBool,
}

#[derive(Debug, Clone)]
struct Found {
    /// The policy of the first server that may evict a key with a TTL.
    evicting: Option<Option<Policy>>,
    /// That server, or another, may evict keys without a TTL as well.
    evicts_all: bool,
    /// The filter's parameters had a TTL.
    ttl: bool,
}

/// A key of each slot group of the filter, and the commands that route to its master.
pub(crate) struct Groups<'a> {
    /// A key of each slot group: the filter's own key, or each shard's.
    pub(crate) keys: &'a [String],
    /// The parameters, whose TTL is the filter's (`expire` gives them one with the rest).
    pub(crate) params: &'a str,
    /// The commands the filter's ACL user has for routing (as for `WAIT`).
    pub(crate) engine: Engine,
}

impl Eviction {
    pub(crate) fn new(accepted: bool) -> Self {
        Eviction {
            accepted,
            ..Eviction::default()
        }
    }

    /// Whether [`ensure`](Eviction::ensure) already passed (for keys with a TTL when `ttl`):
    /// nothing to ask.
    pub(crate) fn passed(&self, ttl: bool) -> bool {
        self.passed[usize::from(ttl)].load(Ordering::Acquire)
    }

    /// Whether every server holding the filter was found to evict no key with a TTL (the
    /// records' ring slots have one): asked, answered, and no `volatile-*` or `allkeys-*` policy
    /// with `maxmemory` set. `false` before the first write's check.
    pub(crate) fn keeps_ttl_keys(&self) -> bool {
        self.found
            .lock()
            .is_ok_and(|found| found.as_ref().is_some_and(|f| f.evicting.is_none()))
    }

    /// `Ok` when no server holding `groups` may evict the filter's keys, keys that carry a
    /// TTL when `ttl` (a window filter's generations; an `expire` about to give them one), or
    /// when the builder accepted that it may (a WARN event, once). The servers are asked once
    /// per filter.
    pub(crate) async fn ensure<C>(
        &self,
        exec: &Exec<C>,
        clock: &Clock,
        name: &str,
        groups: Groups<'_>,
        ttl: bool,
    ) -> Result<()>
    where
        C: ConnectionLike + Clone + Send + Sync,
    {
        let passed = &self.passed[usize::from(ttl)];
        if passed.load(Ordering::Acquire) {
            return Ok(());
        }
        let known = self.found.lock().map(|found| found.clone()).unwrap_or(None);
        let found = match known {
            Some(found) => found,
            None => {
                let found = ask_all(exec, clock, &groups).await?;
                if let Ok(mut slot) = self.found.lock() {
                    *slot = Some(found.clone());
                }
                found
            }
        };
        let ttl = ttl || found.ttl;
        let Some(policy) = found.evicting.filter(|_| ttl || found.evicts_all) else {
            passed.store(true, Ordering::Release);
            return Ok(());
        };
        if self.accepted {
            if !self.warned.swap(true, Ordering::Relaxed) {
                tracing::warn!(
                    target: "redbloom",
                    key = name,
                    "the server may evict this filter's keys, and the filter then forgets \
                     items; accepted by the builder (accept_eviction)"
                );
            }
            passed.store(true, Ordering::Release);
            return Ok(());
        }
        Err(Error::Evictable {
            key: name.to_owned(),
            policy: policy.map_or_else(
                || "an unknown maxmemory-policy: the ACL refuses INFO (grant +info)".to_owned(),
                |p| format!("maxmemory-policy {} with maxmemory {}", p.name, p.maxmemory),
            ),
            ttl,
        })
    }
}

/// What the master of every group says, and, when one evicts keys with a TTL only, whether
/// the filter has one.
async fn ask_all<C>(exec: &Exec<C>, clock: &Clock, groups: &Groups<'_>) -> Result<Found>
where
    C: ConnectionLike + Clone + Send + Sync,
{
    let mut found = Found {
        evicting: None,
        evicts_all: false,
        ttl: false,
    };
    for key in groups.keys {
        let policy = exec
            .retried(clock, || ask(exec, key, groups.engine))
            .await?;
        let (some, all) = match &policy {
            Some(policy) => (policy.evicts(true), policy.evicts(false)),
            None => (true, true),
        };
        // Name the server that evicts the most: one that evicts every key over one that
        // evicts keys with a TTL.
        let named = match &found.evicting {
            None => some,
            Some(_) => all && !found.evicts_all,
        };
        found.evicts_all |= all;
        if named {
            found.evicting = Some(policy);
        }
    }
    if found.evicting.is_some() && !found.evicts_all {
        let params = groups.params;
        found.ttl = exec
            .retried(clock, || has_ttl(exec, params, groups.engine))
            .await?;
    }
    Ok(found)
}

/// The policy of the master that holds `key`; `None` when the ACL refuses `INFO`.
async fn ask<C>(exec: &Exec<C>, key: &str, engine: Engine) -> Result<Option<Policy>>
where
    C: ConnectionLike + Clone + Send + Sync,
{
    let mut tx = Tx::plain();
    tx.add_unread(exec.route(key, engine));
    let info = tx.add::<String>(redis::cmd("INFO").arg("memory").to_owned());
    let info = match exec.run(key, &tx).await {
        Err(Error::NoPermission(_)) if !refused(exec, key, engine).await? => return Ok(None),
        replies => replies?.take(info)?,
    };
    Policy::parse(&info).map(Some).ok_or_else(|| {
        Error::UnexpectedReply(format!("INFO memory without maxmemory fields: {info:?}"))
    })
}

/// Whether the ACL refuses the routing command on `key` (else it refused `INFO`).
async fn refused<C>(exec: &Exec<C>, key: &str, engine: Engine) -> Result<bool>
where
    C: ConnectionLike + Clone + Send + Sync,
{
    match exec.query::<Value>(key, &exec.route(key, engine)).await {
        Ok(_) => Ok(false),
        Err(Error::NoPermission(_)) => Ok(true),
        Err(err) => Err(err),
    }
}

/// Whether `params` has a TTL; `true` when the ACL refuses to say.
async fn has_ttl<C>(exec: &Exec<C>, params: &str, engine: Engine) -> Result<bool>
where
    C: ConnectionLike + Clone + Send + Sync,
{
    let mut tx = Tx::plain();
    tx.add_unread(exec.route(params, engine));
    let pttl = tx.add::<i64>(redis::cmd("PTTL").arg(params).to_owned());
    match exec.run(params, &tx).await {
        Ok(mut replies) => Ok(replies.take(pttl)? > 0),
        Err(Error::NoPermission(_)) => Ok(true),
        Err(err) => Err(err),
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn policies_that_evict() {
        let info =
            "# Memory\r\nused_memory:1\r\nmaxmemory:104857600\r\nmaxmemory_human:100.00M\r\n\
                    maxmemory_policy:allkeys-lru\r\n";
        let policy = Policy::parse(info).unwrap();
        assert_eq!(policy.name, "allkeys-lru");
        assert_eq!(policy.maxmemory, 104_857_600);
        assert!(policy.evicts(false));
        let volatile = Policy {
            name: "volatile-lru".into(),
            maxmemory: 1,
        };
        assert!(!volatile.evicts(false) && volatile.evicts(true));
        let unlimited = Policy {
            name: "allkeys-lru".into(),
            maxmemory: 0,
        };
        assert!(!unlimited.evicts(true), "maxmemory 0 evicts nothing");
        let never = Policy {
            name: "noeviction".into(),
            maxmemory: 1,
        };
        assert!(!never.evicts(true));
        assert_eq!(Policy::parse("# Memory\r\nused_memory:1\r\n"), None);
    }
}
