//! A step's commands, sent as one transaction (or one plain command), and its replies read
//! back through typed slots instead of by position.

use crate::error::{Error, Result};
use redis::{Cmd, FromRedisValue, Pipeline, Value};
use std::marker::PhantomData;

/// Commands for one slot group, run by [`Exec::run`](super::exec::Exec::run): in a `MULTI`
/// when [`atomic`](Tx::atomic), else one command alone or a plain pipeline.
#[derive(Debug)]
pub(crate) struct Tx {
    pipe: Pipeline,
}

/// Where the reply of one command of a [`Tx`] will be, and what it is read as.
#[derive(Debug)]
#[must_use]
pub(crate) struct Slot<T> {
    index: usize,
    read_as: PhantomData<fn() -> T>,
}

/// The replies of a [`Tx`], one per command, taken out by their [`Slot`]s.
#[derive(Debug)]
pub(crate) struct Replies(Vec<Value>);

impl Tx {
    /// Commands that run together, atomically (`MULTI`/`EXEC`).
    pub(crate) fn atomic() -> Self {
        let mut pipe = Pipeline::new();
        pipe.atomic();
        Tx { pipe }
    }

    /// Commands sent together, each atomic by itself (one alone is sent as itself).
    pub(crate) fn plain() -> Self {
        Tx {
            pipe: Pipeline::new(),
        }
    }

    /// Adds `cmd`; its reply will be read as `T`.
    pub(crate) fn add<T: FromRedisValue>(&mut self, cmd: Cmd) -> Slot<T> {
        self.pipe.add_command(cmd);
        Slot {
            index: self.pipe.len() - 1,
            read_as: PhantomData,
        }
    }

    /// Adds `cmd`, whose reply nobody reads (a failure still fails the step).
    pub(crate) fn add_unread(&mut self, cmd: Cmd) {
        self.pipe.add_command(cmd);
    }

    /// The one command of a non-atomic step of one command, which goes alone (a cluster
    /// client follows a redirect for a command, not for a pipeline).
    pub(crate) fn single(&self) -> Option<&Cmd> {
        match self.pipe.len() {
            1 if !self.pipe.is_transaction() => self.pipe.cmd_iter().next(),
            _ => None,
        }
    }

    /// The commands as a pipeline (or transaction).
    pub(crate) fn pipeline(&self) -> &Pipeline {
        &self.pipe
    }
}

impl Replies {
    /// Replies in command order.
    pub(crate) fn new(replies: Vec<Value>) -> Self {
        Replies(replies)
    }

    /// The reply in `slot`, read as its type.
    ///
    /// # Errors
    /// [`Error::UnexpectedReply`] when the reply is missing or of another shape.
    pub(crate) fn take<T: FromRedisValue>(&mut self, slot: Slot<T>) -> Result<T> {
        let value = self
            .0
            .get_mut(slot.index)
            .map(std::mem::take)
            .ok_or_else(|| {
                Error::UnexpectedReply(format!("no reply for command {}", slot.index))
            })?;
        redis::from_redis_value(value).map_err(|err| Error::UnexpectedReply(err.to_string()))
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn slots_read_their_own_replies_as_their_types() {
        let mut tx = Tx::atomic();
        let a: Slot<i64> = tx.add(redis::cmd("STRLEN"));
        tx.add_unread(redis::cmd("DEL"));
        let c: Slot<Option<Vec<u8>>> = tx.add(redis::cmd("GET"));
        assert!(tx.single().is_none(), "a transaction is never sent alone");
        let mut replies = Replies::new(vec![
            Value::Int(7),
            Value::Okay,
            Value::BulkString(b"ab".to_vec()),
        ]);
        assert_eq!(replies.take(c).unwrap(), Some(b"ab".to_vec()));
        assert_eq!(replies.take(a).unwrap(), 7);
        let mut short = Replies::new(vec![]);
        let mut tx = Tx::plain();
        let missing: Slot<i64> = tx.add(redis::cmd("PTTL"));
        assert!(matches!(
            short.take(missing),
            Err(Error::UnexpectedReply(_))
        ));
        assert!(tx.single().is_some(), "one plain command goes alone");
    }
}
