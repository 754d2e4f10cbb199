//! The parameters stored beside a filter (`{KEY}:redbloom:params`): checked once per client,
//! and for the native layout re-stored with every write, so that a client with another size,
//! layout or shard count gets [`Error::ParamsMismatch`] instead of wrong answers.

use super::{unexpected, RedisBloom};
use crate::error::{Error, Result};
use crate::layout::Layout;
use crate::scripts;
use redis::aio::ConnectionLike;
use redis::Value;
use std::sync::atomic::Ordering;

impl<C> RedisBloom<C> {
    /// The parameters stored beside a native filter: `field=value` pairs.
    pub(super) fn fingerprint(&self) -> String {
        let shards = match &self.shards {
            Some(shards) => format!(" shards={}", shards.len()),
            None => String::new(),
        };
        format!(
            "layout={} bits={} hashes={} hash=murmur3_x64_128{shards}",
            self.layout.name(),
            self.bits,
            self.hashes
        )
    }

    /// `SET params FINGERPRINT NX GET`, sent with every write of a native filter: it stores the
    /// parameters again when they went away with the bits (a `clear`, an expiry) and tells
    /// when another client has since stored different ones.
    pub(super) fn params_guard(&self) -> Option<redis::Cmd> {
        if self.layout != Layout::Native {
            return None;
        }
        let params_key = self.params_key.as_ref()?;
        let mut cmd = redis::cmd("SET");
        cmd.arg(params_key)
            .arg(self.fingerprint())
            .arg("NX")
            .arg("GET");
        Some(cmd)
    }

    /// The guard's reply: nothing was stored (now ours is), or what was stored must be ours.
    pub(super) fn check_guard(&self, reply: &Value) -> Result<()> {
        match reply {
            Value::Nil => Ok(()),
            stored => {
                let stored: String = redis::from_redis_value_ref(stored).map_err(unexpected)?;
                self.compare_params(Some(stored))
            }
        }
    }

    /// `Ok` when bits of `bytes` bytes fit this filter's size: longer bits were written by
    /// another program, or by a filter of another size.
    pub(super) fn compare_length(&self, bytes: i64) -> Result<()> {
        let most = self.bits.div_ceil(8);
        if u64::try_from(bytes).is_ok_and(|bytes| bytes <= most) {
            return Ok(());
        }
        Err(Error::ParamsMismatch {
            key: self.key.clone(),
            stored: format!(
                "{bytes} bytes of bits (more than the {most} bytes that {} bits take)",
                self.bits
            ),
            requested: self.fingerprint(),
        })
    }

    /// `Ok` when `stored` equals this filter's parameters; `None` means bits without any.
    pub(super) fn compare_params(&self, stored: Option<String>) -> Result<()> {
        let requested = self.fingerprint();
        match stored {
            Some(stored) if stored == requested => Ok(()),
            stored => Err(Error::ParamsMismatch {
                key: self.key.clone(),
                stored: stored.unwrap_or_else(|| {
                    "none (the key holds bits written without stored parameters)".to_owned()
                }),
                requested,
            }),
        }
    }
}

impl<C> RedisBloom<C>
where
    C: ConnectionLike + Clone + Send + Sync,
{
    /// Checks the parameters stored beside the filter against this client's now (storing them
    /// when the filter is new), instead of on the first operation.
    ///
    /// Both layouts store their parameters (`layout`, `bits`, `hashes`) beside the bits, so
    /// that a client with another size gets [`Error::ParamsMismatch`] instead of wrong answers.
    /// A go-zero filter written by go-zero itself has none; it opens with whatever bits the
    /// client gives, as in go-zero. A native filter must have them.
    ///
    /// # Errors
    /// [`Error::ParamsMismatch`] when they differ, or for a native filter over bits without
    /// parameters; otherwise as for [`add`](RedisBloom::add).
    pub async fn check_params(&self) -> Result<()> {
        self.call(|| self.ensure_params(true)).await
    }

    /// The parameters check, once per client (again after [`clear`](RedisBloom::clear));
    /// `write` lets it store them on a new filter.
    pub(super) async fn ensure_params(&self, write: bool) -> Result<()> {
        if self.shared.params_checked.load(Ordering::Acquire) {
            return Ok(());
        }
        let Some(params_key) = &self.params_key else {
            return self.ensure_length().await;
        };
        let stored: Result<Value> = scripts::PARAMS
            .invoke(
                &mut self.conn.clone(),
                &[params_key, &self.key],
                &[&self.fingerprint(), &(if write { "1" } else { "0" })],
            )
            .await
            .map_err(|e| self.redis_error(e));
        let checked = match (self.layout, stored) {
            // Nothing exists yet, and a read stores nothing: check again next time.
            (_, Ok(Value::BulkString(stored))) if stored.is_empty() => false,
            (_, Ok(stored @ (Value::BulkString(_) | Value::SimpleString(_)))) => {
                let stored: String = redis::from_redis_value(stored).map_err(unexpected)?;
                self.compare_params(Some(stored)).map(|()| true)?
            }
            // go-zero's own filters carry no parameters; their length must fit the size.
            (Layout::GoZero, Ok(Value::Int(bytes))) => self.compare_length(bytes).map(|()| true)?,
            (Layout::Native, Ok(Value::Int(_))) => return self.compare_params(None),
            // A user allowed the bits but not the check's script: go-zero's layout does without.
            (Layout::GoZero, Err(Error::NoPermission(_))) => true,
            (_, Ok(other)) => {
                return Err(unexpected(format!("{other:?} from the parameters check")))
            }
            (_, Err(err)) => return Err(err),
        };
        self.shared.params_checked.store(checked, Ordering::Release);
        Ok(())
    }

    /// For a filter whose key allows no stored parameters (a `}` without a hash tag): the one
    /// check the server's answer allows, that its bits are not longer than this size holds.
    async fn ensure_length(&self) -> Result<()> {
        if !self.check_length {
            return Ok(());
        }
        let bytes: i64 = self.query(redis::cmd("STRLEN").arg(&self.key)).await?;
        self.compare_length(bytes)?;
        // A missing key proves nothing yet.
        self.shared
            .params_checked
            .store(bytes > 0, Ordering::Release);
        Ok(())
    }

    /// Runs a write, with the parameters guard in the same round trip for a native filter.
    ///
    /// The two go as one transaction: while a cluster moves the slot key by key, a plain
    /// pipeline redirected (`ASK`) for one of its keys would create the other on the new
    /// node before that key's own move, which then fails (`BUSYKEY`). A transaction is
    /// checked as a whole, and waits (`TRYAGAIN`) until both keys are on one node.
    pub(super) async fn query_guarded(&self, cmd: redis::Cmd) -> Result<Value> {
        let Some(guard) = self.params_guard() else {
            return self.query(&cmd).await;
        };
        let mut pipe = redis::pipe();
        pipe.atomic().add_command(guard).add_command(cmd);
        let (stored, reply): (Value, Value) = self.query_pipe(&pipe).await?;
        self.check_guard(&stored)?;
        Ok(reply)
    }
}
