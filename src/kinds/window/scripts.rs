//! The window scripts (`lua/window_*.lua`), their head's arguments and keys, and their
//! replies: an answer, a refused guess of the server's epoch (then the step goes again with the
//! server's), or other parameters stored.

use super::part::Part;
use super::Window;
use crate::core::{Conn, Ctx};
use crate::error::{Error, Result};
use crate::io::exec::{Cap, Exec};
use crate::io::guard::Guard;
use crate::io::once::Step;
use crate::scripts::{lua, once_lua, script, Arg, LuaScript};
use redis::{Cmd, Value};

// Every window script starts with lua/window_args.lua (its arguments and keys). A write's
// source is named once, for itself and its recorded form.
macro_rules! add {
    () => {
        lua![
            "window_args",
            "window_epoch",
            "window_add_head",
            "window_check",
            "window_create",
            "find_sort",
            "window_find",
            "window_add",
        ]
    };
}
macro_rules! merge {
    () => {
        lua![
            "window_args",
            "window_check",
            "window_epoch",
            "probe",
            "window_merge"
        ]
    };
}
macro_rules! merge_range {
    () => {
        lua!["window_range_head", "stage_range", "merge_range"]
    };
}

script! {
    /// Adds items to the current generation; new when in no live generation. The parameters
    /// are checked when the step creates the generation.
    WINDOW_ADD = concat!(lua!["acl"], add!());
    /// [`WINDOW_ADD`], its reply recorded across retries ([`once`](crate::io::once)); quiet:
    /// it only sets bits (its last element is `verified`, not a flag).
    WINDOW_ADD_ONCE = once_lua!(quiet(1, 1) add!());
    /// Checks items against the live generations (read-only; the clock only when needed).
    WINDOW_EXISTS = lua![
        "window_args",
        "window_check",
        "find_sort",
        "window_find",
        "window_exists"
    ];
    /// Describes the live generations (read-only).
    WINDOW_INFO = lua!["window_args", "window_check", "window_epoch", "window_info"];
    /// The dense add's merge of a batch's bitmap into the current generation (a batch the
    /// generation holds already: 0, nothing written).
    WINDOW_MERGE = concat!(lua!["bare"], merge!());
    /// [`WINDOW_MERGE`] with the batch's bitmap as an argument, its reply (the epoch, which
    /// older generations existed, the current one's bytes from before) recorded across
    /// retries ([`once`](crate::io::once)).
    WINDOW_MERGE_ONCE = once_lua!(merge!());
    /// The add by ranges' first step: the current generation made, and its epoch.
    WINDOW_MAKE = lua![
        "acl",
        "window_args",
        "window_epoch",
        "window_add_head",
        "window_check",
        "window_create",
        "window_make",
    ];
    /// One range of an add by ranges into the generation of a pinned epoch (refused when the
    /// epoch has passed): the range's bytes from before (0 when it sets no new bit: nothing
    /// written).
    WINDOW_MERGE_RANGE = concat!(lua!["bare"], merge_range!());
    /// [`WINDOW_MERGE_RANGE`], its reply recorded across retries ([`once`](crate::io::once)).
    WINDOW_MERGE_RANGE_ONCE = once_lua!(merge_range!());
    /// The dense check's head: the checks and the current epoch (read-only).
    WINDOW_AT = lua!["window_args", "window_check", "window_epoch", "window_at"];
    /// `clear` and `expire` of every generation and the parameters.
    WINDOW_DROP = lua![
        "window_args",
        "window_check",
        "window_epoch",
        "window_drop",
        "window_drop_keys",
    ];
}

/// Steps that see the server's clock off by more than a generation this many times in a row
/// give up.
pub(super) const TRIES: usize = 3;

/// What a window script answered.
pub(super) enum Reply {
    Done(Value),
    /// The guess was off; the server's time in ms.
    Epoch(u64),
    /// The stored parameters differ ("" when the bare key holds bits without any).
    Params(String),
    /// A live generation the part's ledger lists is gone (a check).
    Lost(String),
}

pub(super) fn classify(reply: Value) -> Result<Reply> {
    if let Value::Array(items) = &reply {
        match items.as_slice() {
            [Value::BulkString(what), Value::Int(now)] if what == b"epoch" => {
                return Ok(Reply::Epoch(u64::try_from(*now).unwrap_or(0)));
            }
            [Value::BulkString(what), Value::BulkString(stored)] if what == b"params" => {
                return Ok(Reply::Params(String::from_utf8_lossy(stored).into_owned()));
            }
            [Value::BulkString(what), Value::BulkString(key)] if what == b"lost" => {
                return Ok(Reply::Lost(String::from_utf8_lossy(key).into_owned()));
            }
            _ => {}
        }
    }
    Ok(Reply::Done(reply))
}

/// What a script run does besides its own arguments.
#[derive(Clone, Copy)]
pub(super) struct Run<'a> {
    pub(super) script: &'a LuaScript,
    pub(super) read_only: bool,
    /// Stores the parameters of a new filter.
    pub(super) store: bool,
    /// Replies its flags and whether the parameters were seen (adds and checks).
    pub(super) flags: bool,
    /// The write step and command index its reply is recorded under, across retries (the
    /// script then is a [`once`](crate::io::once) one).
    pub(super) step: Option<(&'a Step, usize)>,
}

/// One script on the part of `ctx`, with the head's arguments; again with the server's epoch
/// when the guess was off (the server's clock may also cross a generation meanwhile). One
/// attempt: the caller retries.
pub(super) async fn call<C: Conn>(
    ctx: Ctx<'_, C, Window>,
    run: Run<'_>,
    tail: &[&dyn Arg],
) -> Result<Value> {
    let (exec, window, part) = (ctx.exec(), ctx.kind(), ctx.part());
    for _ in 0..TRIES {
        let guess = window.guess();
        // Checks leave the parameters out once this client has seen them stored (writes,
        // info, clear and expire never do).
        let checked = ctx
            .guard()
            .filter(|guard| !(run.read_only && run.flags && guard.is_checked()));
        let mut keys = part.keys(guess, window.generations, checked);
        let ring_key = format!("{}:", part.prefix);
        let once = run.step.map(|(step, index)| {
            keys.extend(step.rings(&ring_key));
            // The first key is a generation, whose TTL is not the filter's.
            let [id, epoch, retry, _, answer] = step.args(&ring_key, index);
            [id, epoch, retry, "0".to_owned(), answer]
        });
        let keys: Vec<&str> = keys.iter().map(String::as_str).collect();
        let ro = exec.has(Cap::BitfieldRo);
        let read = read_arg(ro, part);
        let mut args = window.head_args(&guess, run.store, &read);
        args.extend_from_slice(tail);
        if let Some(once) = &once {
            args.extend(once.iter().map(|arg| arg as &dyn Arg));
        }
        let route = keys[1];
        let reply = match run.read_only {
            true => exec.script_ro(route, (run.script, &keys, &args)).await,
            false => exec.script(route, run.script, &keys, &args).await,
        };
        let reply = match reply {
            // A server before Redis 6.2: the scripts read bits with BITFIELD instead.
            Err(err) if ro && exec.lacks(Cap::BitfieldRo, ctx.key(), &err) => {
                unsent(run.step);
                continue;
            }
            reply => reply?,
        };
        match classify(reply)? {
            Reply::Done(reply) => return Ok(reply),
            Reply::Epoch(now) => {
                unsent(run.step);
                window.server.learn(now);
            }
            Reply::Params(stored) => return Err(window.mismatch(ctx.key(), stored)),
            Reply::Lost(part) => return Err(lost(ctx.key(), part)),
        }
    }
    Err(clock_moved())
}

/// The step's command was answered with nothing applied: its next sending is a first attempt.
fn unsent(step: Option<(&Step, usize)>) {
    if let Some((step, index)) = step {
        step.unsent(index);
    }
}

impl Window {
    /// The client's guess of the server's current epoch.
    pub(super) fn guess(&self) -> i64 {
        crate::epochs::epoch_of(self.server.now_ms(), self.window_ms, self.generations)
    }

    /// The arguments every window script starts with (see `lua/window_args.lua`); `read`:
    /// [`read_arg`]'s.
    fn head_args<'a>(&'a self, guess: &'a i64, store: bool, read: &'a String) -> Vec<&'a dyn Arg> {
        vec![
            guess,
            &self.window_ms,
            &self.generations,
            &self.fingerprint,
            if store { &"1" } else { &"0" },
            read,
        ]
    }

    /// `EVAL` (or `EVAL_RO`: `by`) of `script` with its source, the declared `keys` and the
    /// head's arguments, for a transaction (where `NOSCRIPT` could not be retried).
    pub(super) fn eval(
        &self,
        by: &str,
        script: &LuaScript,
        keys: &[String],
        guess: i64,
        store: bool,
        (ro, part): (bool, &Part),
    ) -> Cmd {
        let mut cmd = redis::cmd(by);
        cmd.arg(script.source()).arg(keys.len()).arg(keys);
        let read = read_arg(ro, part);
        for arg in self.head_args(&guess, store, &read) {
            arg.write(&mut cmd);
        }
        cmd
    }

    /// The mismatch a script's refusal means for the filter `key` ("": the bare key holds
    /// bits without stored parameters).
    pub(super) fn mismatch(&self, key: &str, stored: String) -> Error {
        Error::ParamsMismatch {
            key: key.to_owned(),
            stored: match stored.is_empty() {
                true => format!(
                    "none (the key {key:?} holds a filter without stored parameters: another \
                     kind)"
                ),
                false => stored,
            },
            requested: self.fingerprint.clone(),
        }
    }

    /// A filter of one key: the parameters stored beside it (read with `GET`, whatever this
    /// client has seen) are this filter's, or none are stored yet.
    pub(super) async fn check_stored<C: Conn>(
        &self,
        exec: &Exec<C>,
        guard: &Guard,
        key: &str,
    ) -> Result<()> {
        let params = guard.key();
        let stored: Option<String> = exec.query(params, redis::cmd("GET").arg(params)).await?;
        match stored.filter(|s| *s != self.fingerprint) {
            Some(stored) => Err(self.mismatch(key, stored)),
            None => Ok(()),
        }
    }

    /// The epoch a `{"at", EPOCH}` reply names; `None` after learning the server's time from
    /// a refused guess.
    pub(super) fn epoch_from(&self, key: &str, reply: Value) -> Result<Option<i64>> {
        Ok(self.at_from(key, reply)?.map(|(epoch, _)| epoch))
    }

    /// The epoch a `{"at", EPOCH[, GONE]}` reply names, and the live generation gone it names
    /// (`lua/window_at.lua`: a check with an absent item then fails, [`lost`]); `None` after
    /// learning the server's time from a refused guess.
    pub(super) fn at_from(&self, key: &str, reply: Value) -> Result<Option<(i64, Option<String>)>> {
        match classify(reply)? {
            Reply::Done(Value::Array(at)) => match at.as_slice() {
                [Value::BulkString(what), Value::Int(epoch)] if what == b"at" => {
                    Ok(Some((*epoch, None)))
                }
                [Value::BulkString(what), Value::Int(epoch), Value::BulkString(gone)]
                    if what == b"at" =>
                {
                    let gone = String::from_utf8_lossy(gone).into_owned();
                    Ok(Some((*epoch, Some(gone).filter(|g| !g.is_empty()))))
                }
                other => Err(Error::UnexpectedReply(format!("{other:?} for an epoch"))),
            },
            Reply::Done(other) => Err(Error::UnexpectedReply(format!("{other:?} for an epoch"))),
            Reply::Epoch(now) => {
                self.server.learn(now);
                Ok(None)
            }
            Reply::Params(stored) => Err(self.mismatch(key, stored)),
            Reply::Lost(part) => Err(lost(key, part)),
        }
    }
}

/// The head's sixth argument (`lua/window_args.lua`): the command that reads bits (`ro`:
/// `BITFIELD_RO`), and the bytes a new generation of `part` is made with.
fn read_arg(ro: bool, part: &Part) -> String {
    let read = if ro { "bitfield_ro" } else { "bitfield" };
    format!("{read} {}", part.geometry.max_bytes())
}

/// The error of a check that found generation `part` of filter `key` gone.
pub(super) fn lost(key: &str, part: String) -> Error {
    Error::Lost {
        filter: key.to_owned(),
        key: part,
    }
}

/// Where the generation of `epoch` is among the keys declared for `guess`.
pub(super) fn index(guess: i64, epoch: i64) -> Result<usize> {
    usize::try_from(guess + 1 - epoch)
        .ok()
        .filter(|&i| i <= 2)
        .ok_or_else(|| Error::UnexpectedReply(format!("epoch {epoch} for a guess of {guess}")))
}

pub(super) fn clock_moved() -> Error {
    Error::UnexpectedReply(
        "the server's clock moved by more than a generation three times in a row".into(),
    )
}

/// One flag per item from a script's array of 0/1, and the last element: whether the script
/// saw the filter's parameters stored.
pub(super) fn flags(reply: &Value, items: usize) -> Result<(Vec<bool>, bool)> {
    let unexpected = || Error::UnexpectedReply(format!("{reply:?} for {items} items"));
    let Value::Array(values) = reply else {
        return Err(unexpected());
    };
    if values.len() != items + 1 {
        return Err(unexpected());
    }
    let mut flags = values
        .iter()
        .map(|v| match v {
            Value::Int(flag) => Ok(*flag == 1),
            _ => Err(unexpected()),
        })
        .collect::<Result<Vec<_>>>()?;
    let verified = flags.pop().unwrap_or(false);
    Ok((flags, verified))
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn replies_are_told_apart() {
        let epoch = Value::Array(vec![Value::BulkString(b"epoch".to_vec()), Value::Int(5)]);
        assert!(matches!(classify(epoch), Ok(Reply::Epoch(5))));
        let params = Value::Array(vec![
            Value::BulkString(b"params".to_vec()),
            Value::BulkString(b"x".to_vec()),
        ]);
        assert!(matches!(classify(params), Ok(Reply::Params(p)) if p == "x"));
        let lost = Value::Array(vec![
            Value::BulkString(b"lost".to_vec()),
            Value::BulkString(b"k:7".to_vec()),
        ]);
        assert!(matches!(classify(lost), Ok(Reply::Lost(k)) if k == "k:7"));
        let done = Value::Array(vec![Value::Int(1), Value::Int(0), Value::Int(1)]);
        let Ok(Reply::Done(done)) = classify(done) else {
            panic!("flags are an answer");
        };
        assert_eq!(flags(&done, 2).unwrap(), (vec![true, false], true));
        assert!(flags(&done, 3).is_err());
    }
}
