//! The Lua scripts, embedded from `lua/` and hashed once: go-zero's set and test scripts and
//! their batch forms (the [`Engine::Scripts`](crate::Engine::Scripts) engine), the parameters
//! check, and the dense path's merges (whole, and by ranges).
//!
//! A script goes as `EVALSHA`; when the server answers `NOSCRIPT` (after a restart, a failover
//! or a `SCRIPT FLUSH`), it goes again as `EVAL` with its source, which cannot fail that way and
//! caches it for the next `EVALSHA`. (redis-rs's `Script` loads and retries `EVALSHA`, which a
//! concurrent `SCRIPT FLUSH` can beat.) Keys always travel in `KEYS[]`, so the scripts are
//! cluster-safe.

use redis::{Cmd, ToRedisArgs};
use std::sync::LazyLock;

/// A Lua script and its SHA1.
pub(crate) struct LuaScript {
    source: &'static str,
    sha: LazyLock<String>,
}

impl LuaScript {
    pub(crate) const fn new(source: &'static str, sha: fn() -> String) -> Self {
        LuaScript {
            source,
            sha: LazyLock::new(sha),
        }
    }

    /// The source, for `EVAL` inside a transaction (where `NOSCRIPT` could not be retried).
    pub(crate) fn source(&self) -> &'static str {
        self.source
    }

    /// The script on `keys` with `args` (each a separate `ARGV` entry, or several for a
    /// slice) as `EVALSHA` (`by_source`: `EVAL` with its source, which cannot fail with
    /// `NOSCRIPT`); `read_only` as a read-only one (`EVALSHA_RO`, Redis 7: a replica may serve
    /// it, and the server refuses any write it attempts).
    pub(crate) fn call(
        &self,
        read_only: bool,
        by_source: bool,
        keys: &[&str],
        args: &[&dyn Arg],
    ) -> Cmd {
        match (read_only, by_source) {
            (false, false) => self.command("EVALSHA", &self.sha, keys, args),
            (false, true) => self.command("EVAL", self.source, keys, args),
            (true, false) => self.command("EVALSHA_RO", &self.sha, keys, args),
            (true, true) => self.command("EVAL_RO", self.source, keys, args),
        }
    }

    fn command(&self, name: &str, script: &str, keys: &[&str], args: &[&dyn Arg]) -> Cmd {
        let mut cmd = redis::cmd(name);
        cmd.arg(script).arg(keys.len()).arg(keys);
        for arg in args {
            arg.write(&mut cmd);
        }
        cmd
    }
}

/// One argument, or a slice of them, for [`LuaScript::call`].
pub(crate) trait Arg: Sync {
    fn write(&self, cmd: &mut Cmd);
}

impl<T: ToRedisArgs + Sync> Arg for T {
    fn write(&self, cmd: &mut Cmd) {
        cmd.arg(self);
    }
}

/// Declares scripts: `script! { NAME = include_str!("path/to.lua"); ... }`, each one's SHA
/// computed once. A kind declares its own scripts in its own folder this way.
macro_rules! script {
    ($($(#[$doc:meta])* $name:ident = $source:expr);+ $(;)?) => {$(
        $(#[$doc])*
        pub(crate) static $name: $crate::scripts::LuaScript =
            $crate::scripts::LuaScript::new($source, || {
                ::redis::Script::new($source).get_hash().to_owned()
            });
    )+};
}
#[allow(unused_imports)]
pub(crate) use script;

script! {
    /// go-zero's set script, replying whether any bit flipped.
    ADD = include_str!("../lua/add.lua");
    /// go-zero's test script, verbatim.
    EXISTS = include_str!("../lua/exists.lua");
    /// The set script over a batch of items, one reply per item.
    ADD_MANY = include_str!("../lua/add_many.lua");
    /// The test script over a batch of items, one reply per item.
    EXISTS_MANY = include_str!("../lua/exists_many.lua");
    /// Compares the parameters stored beside a filter with a client's, storing them first.
    PARAMS = include_str!("../lua/params.lua");
    /// The dense path's OR of a batch's bitmap into the filter, sent as `EVAL` inside a `MULTI`.
    MERGE = include_str!("../lua/merge.lua");
    /// The dense path by ranges: one range of a batch's bitmap ORed into a large filter, sent as
    /// `EVAL` inside a `MULTI`; replies with the range's bytes from before.
    MERGE_RANGE = include_str!("../lua/merge_range.lua");
    /// `clear` and `expire`: the key's type and the filter's parameters checked, then the
    /// delete or the TTL, in one atomic step.
    DROP = include_str!("../lua/drop.lua");
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn evalsha_carries_keys_then_arguments() {
        let offsets: &[u64] = &[3, 4];
        let cmd = ADD.command("EVALSHA", &ADD.sha, &["f"], &[&offsets]);
        let packed = String::from_utf8(cmd.get_packed_command()).unwrap();
        let want = format!(
            "*6\r\n$7\r\nEVALSHA\r\n$40\r\n{}\r\n$1\r\n1\r\n$1\r\nf\r\n$1\r\n3\r\n$1\r\n4\r\n",
            *ADD.sha
        );
        assert_eq!(packed, want);
        assert_eq!(ADD.sha.len(), 40);
        assert!(MERGE.source().contains("bitop"));
        assert!(MERGE_RANGE.source().contains("setrange"));
    }
}
