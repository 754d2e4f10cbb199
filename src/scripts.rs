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
    /// Panics (at compile time: scripts are statics) when `source` calls a function of
    /// `lua/acl.lua` without that part first, or holds it twice: Lua itself would find the
    /// missing part only when the call runs, on the path of a refusal.
    pub(crate) const fn new(source: &'static str, sha: fn() -> String) -> Self {
        assert!(
            acl_part_declared(source.as_bytes()),
            "a script calls acl_refusal or bitfield_refusal without lua/acl.lua first, or holds it twice"
        );
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

/// Whether `lua/acl.lua`'s functions, where `source` calls them, come from that part, declared
/// once before: the first line outside comments that names a `…_refusal(` is the part's
/// `local function acl_refusal(`, which no later line declares again.
const fn acl_part_declared(source: &[u8]) -> bool {
    const CALL: &[u8] = b"_refusal(";
    const DECLARATION: &[u8] = b"local function acl_refusal(";
    let mut declared = false;
    let mut line = 0;
    while line < source.len() {
        let mut end = line;
        while end < source.len() && source[end] != b'\n' {
            end += 1;
        }
        let mut start = line;
        while start < end && (source[start] == b' ' || source[start] == b'\t') {
            start += 1;
        }
        let comment = starts_with(source, start, end, b"--");
        if !comment && starts_with(source, start, end, DECLARATION) {
            if declared {
                return false;
            }
            declared = true;
        } else if !comment && !declared && contains(source, start, end, CALL) {
            return false;
        }
        line = end + 1;
    }
    true
}

/// Whether `source[start..end]` begins with `prefix`.
const fn starts_with(source: &[u8], start: usize, end: usize, prefix: &[u8]) -> bool {
    if end - start < prefix.len() {
        return false;
    }
    let mut i = 0;
    while i < prefix.len() {
        if source[start + i] != prefix[i] {
            return false;
        }
        i += 1;
    }
    true
}

/// Whether `source[start..end]` holds `needle`.
const fn contains(source: &[u8], start: usize, end: usize, needle: &[u8]) -> bool {
    let mut at = start;
    while at < end {
        if starts_with(source, at, end, needle) {
            return true;
        }
        at += 1;
    }
    false
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

/// The source of a script put together from files of `lua/`, named without `.lua`, in order:
/// `lua!["window_args", "window_exists"]`.
macro_rules! lua {
    [$($part:literal),+ $(,)?] => {
        concat!($(include_str!(concat!(env!("CARGO_MANIFEST_DIR"), "/lua/", $part, ".lua"))),+)
    };
}
pub(crate) use lua;

/// The source of a write step's script that records its reply across retries
/// ([`once`](crate::io::once)): `lua/once_head.lua`, the step's own script (`$body`, a [`lua!`]
/// or a macro that expands to one: the body of its `apply()`), `lua/once_tail.lua`.
///
/// `once_lua!(quiet(FIRST, SKIP) body)` declares a *quiet* step: one whose reply with no flag
/// set means that applying it again changes nothing (an add that only sets bits; an
/// add-if-absent or a remove, which then wrote nothing). Its flags are the reply's elements
/// FIRST .. #reply - SKIP (or a string reply's characters, or a number reply), and a reply with
/// none set goes unrecorded (`once_quiet` in `lua/once_head.lua`). Dense compare-and-set steps,
/// merges and counting increments are not quiet: their reply does not say what they wrote.
macro_rules! once_lua {
    (quiet($first:literal, $skip:literal) $body:expr) => {
        concat!(
            $crate::scripts::lua!["acl", "once_head"],
            "once_quiet = {",
            $first,
            ", ",
            $skip,
            "}\n",
            $body,
            $crate::scripts::lua!["once_tail"],
        )
    };
    ($body:expr) => {
        concat!(
            $crate::scripts::lua!["acl", "once_head"],
            $body,
            $crate::scripts::lua!["once_tail"],
        )
    };
}
pub(crate) use once_lua;

/// Declares scripts: `script! { NAME = lua!["name"]; ... }`, each one's SHA computed once. A
/// kind declares its own scripts in its own folder this way.
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
    ADD = lua!["add"];
    /// go-zero's test script, verbatim.
    EXISTS = lua!["exists"];
    /// The set script over a batch of items, one reply per item.
    ADD_MANY = lua!["add_many"];
    /// The test script over a batch of items, one reply per item.
    EXISTS_MANY = lua!["exists_many"];
    /// Compares the parameters stored beside a filter with a client's, storing them first.
    PARAMS = lua!["params"];
    /// The dense path's OR of a batch's bitmap into the filter, sent as `EVAL` inside a `MULTI`
    /// after the `GET` of the bytes from before; a batch that sets no new bit writes nothing.
    MERGE = lua!["bare", "probe", "merge"];
    /// The dense path by ranges: one range of a batch's bitmap ORed into a large filter; replies
    /// with the range's bytes from before, or 0 when it sets no new bit (nothing written).
    MERGE_RANGE = lua!["bare", "stage_range", "merge_range"];
    /// `clear` and `expire`: the key's type and the filter's parameters checked, then the
    /// delete or the TTL, in one atomic step.
    DROP = lua!["drop"];
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

    #[test]
    fn a_script_that_asks_the_acl_holds_the_part_once_before() {
        let acl = lua!["acl"];
        let body = "local refused = acl_refusal(\"on it\", \"hset\", KEYS[1])\n";
        assert!(acl_part_declared(
            concat!(lua!["acl"], "return 1\n").as_bytes()
        ));
        assert!(acl_part_declared(format!("{acl}{body}").as_bytes()));
        assert!(!acl_part_declared(body.as_bytes()));
        assert!(!acl_part_declared(format!("{body}{acl}").as_bytes()));
        assert!(!acl_part_declared(format!("{acl}{acl}{body}").as_bytes()));
        let renamed = acl.replace("local function acl_refusal", "local function asked");
        assert!(!acl_part_declared(format!("{renamed}{body}").as_bytes()));
        // A comment naming the functions is no call.
        assert!(acl_part_declared(
            b"-- acl_refusal(ON, COMMAND) asks the ACL\nreturn 1\n"
        ));
    }
}
