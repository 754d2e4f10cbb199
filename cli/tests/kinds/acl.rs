//! The ACL tests' shared runs: a private redis-server whose users the test sets (`ACL
//! SETUSER`), a user's grants, the library and the CLI as that user, and the checks of a refused
//! call (`Error::NoPermission` naming the ACL, never showing the password).
//!
//! The counting, window and growing filters' files (`counting_acl.rs`, `window_acl.rs`,
//! `growing_acl.rs`) describe their kind as an [`AclKind`] and run the same three tests on it:
//! [`each_command_is_needed_and_together_they_are_enough`],
//! [`the_documented_line_is_the_tested_one_and_works`] and
//! [`a_user_without_access_to_the_keys_gets_no_permission_and_writes_nothing`]. `acl.rs` (the
//! plain filter) uses the helpers.

use super::{items, lines_file, path_of};
use crate::common::cli::{assert_fails, redbloom, run};
use crate::common::server::RedisServer;
use redbloom::kind::Kind;
use redbloom::{Bloom, Builder, Error};
use redis::aio::{ConnectionManager, ConnectionManagerConfig, MultiplexedConnection};
use serde_json::{json, Value};
use std::sync::atomic::{AtomicU64, Ordering};
use std::time::{Duration, Instant};

/// A private server (the users change the server's ACL) and an admin connection.
pub async fn acl_server() -> (RedisServer, MultiplexedConnection) {
    let server = RedisServer::start().expect("redis-server on PATH");
    let admin = redis::Client::open(server.url())
        .unwrap()
        .get_multiplexed_async_connection()
        .await
        .unwrap();
    (server, admin)
}

/// `ACL SETUSER user reset on RULES...`.
pub async fn set_user<R>(admin: &mut MultiplexedConnection, user: &str, rules: &[R])
where
    R: redis::ToRedisArgs + std::fmt::Debug,
{
    let () = redis::cmd("ACL")
        .arg("SETUSER")
        .arg(user)
        .arg("reset")
        .arg("on")
        .arg(rules)
        .query_async(admin)
        .await
        .unwrap_or_else(|err| panic!("ACL SETUSER {user} {rules:?}: {err}"));
}

/// The rules of a user with `password`, the key patterns of `keys` but `skip_key`, and the
/// commands of `commands` but those of `skip`: `>PW ~KEYS... -@all +COMMAND...`.
pub fn grant(
    password: &str,
    keys: &[&str],
    commands: &[(&str, &str)],
    skip: &[&str],
    skip_key: Option<&str>,
) -> Vec<String> {
    let mut rules = vec![format!(">{password}")];
    rules.extend(
        keys.iter()
            .filter(|k| Some(**k) != skip_key)
            .map(|k| k.to_string()),
    );
    rules.push("-@all".to_owned());
    for (command, _) in commands {
        if !skip.contains(command) {
            rules.push(format!("+{command}"));
        }
    }
    rules
}

/// `redis://USER:PASSWORD@127.0.0.1:PORT`.
pub fn user_url(server: &RedisServer, user: &str, password: &str) -> String {
    format!("redis://{user}:{password}@127.0.0.1:{}", server.port())
}

/// A connection manager, as the CLI makes.
pub async fn manager(url: &str) -> ConnectionManager {
    let config = ConnectionManagerConfig::new()
        .set_connection_timeout(Some(Duration::from_secs(5)))
        .set_response_timeout(Some(Duration::from_secs(10)))
        .set_number_of_retries(1);
    redis::Client::open(url)
        .unwrap()
        .get_connection_manager_with_config(config)
        .await
        .unwrap_or_else(|err| panic!("cannot connect as {}: {err}", user_of(url)))
}

/// The user of a `redis://USER:PASSWORD@…` URL.
pub fn user_of(url: &str) -> &str {
    url.trim_start_matches("redis://")
        .split(':')
        .next()
        .unwrap()
}

/// A key under `PREFIX:` that no other filter of this test run uses.
pub fn fresh_key(prefix: &str, name: &str) -> String {
    static N: AtomicU64 = AtomicU64::new(0);
    format!("{prefix}:{name}:{}", N.fetch_add(1, Ordering::Relaxed))
}

/// The keys matching `pattern` (`KEYS`).
pub async fn keys(admin: &mut MultiplexedConnection, pattern: &str) -> Vec<String> {
    redis::cmd("KEYS")
        .arg(pattern)
        .query_async(admin)
        .await
        .unwrap()
}

/// Empties the server's script cache (`SCRIPT FLUSH`): scripts go as EVALSHA, and as EVAL only
/// after NOSCRIPT.
pub async fn flush_scripts(admin: &mut MultiplexedConnection) {
    let () = redis::cmd("SCRIPT")
        .arg("FLUSH")
        .query_async(admin)
        .await
        .unwrap();
}

/// Asserts that `err` (an `Error::NoPermission`) names NOPERM and its cause the ACL; returns
/// the cause's message.
#[track_caller]
pub fn assert_names_the_acl(what: &str, err: &Error) -> String {
    // redis-rs says "NoPerm: this user has no permissions to ..." (the command or the key;
    // Valkey: "No permissions to access a key"); inside a script Redis 7.0 says "The user
    // executing the script can't run this command ..." (or "... can't access ... keys"), and
    // Valkey "ACL failure in script: ...", also NoPermission.
    let source = std::error::Error::source(err).unwrap().to_string();
    let lower = source.to_lowercase();
    let acl = lower.contains("no permissions")
        || lower.contains("the user executing the script can't")
        || lower.contains("acl failure in script");
    assert!(
        err.to_string().contains("NOPERM") && acl,
        "{what}: {err}: {source}"
    );
    source
}

/// Asserts `result` is `Error::NoPermission` naming the ACL, and never shows `password`.
#[track_caller]
pub fn assert_noperm<T: std::fmt::Debug>(what: &str, result: redbloom::Result<T>, password: &str) {
    match result {
        Err(err @ Error::NoPermission(_)) => {
            let source = assert_names_the_acl(what, &err);
            for text in [format!("{err}"), format!("{err:?}"), source] {
                assert!(!text.contains(password), "{what}: the password shows");
            }
        }
        other => panic!("{what}: expected Error::NoPermission, got {other:?}"),
    }
}

/// Asserts the refusal of a user whose ACL refuses `INFO`: the server counts as one that may
/// evict the filter's keys (`Error::Evictable`, naming `+info`).
#[track_caller]
pub fn assert_refused_without_info<T: std::fmt::Debug>(what: &str, result: redbloom::Result<T>) {
    match result {
        Err(err @ Error::Evictable { .. }) => {
            assert!(err.to_string().contains("+info"), "{what}: {err}");
        }
        other => panic!("{what}: expected Error::Evictable, got {other:?}"),
    }
}

/// The CLI as a user: `redbloom --url URL --key KEY`, the filter's flags, then each call's
/// arguments.
pub struct UserCli<'a> {
    url: &'a str,
    /// The filter's key.
    pub key: String,
    flags: Vec<&'a str>,
}

impl<'a> UserCli<'a> {
    pub fn new(url: &'a str, key: impl Into<String>, flags: &[&'a str]) -> Self {
        UserCli {
            url,
            key: key.into(),
            flags: flags.to_vec(),
        }
    }

    /// Runs `args`, asserts its exit status is `code` and its JSON answer's `field` is
    /// `value`, and returns the answer.
    #[track_caller]
    pub fn answers(&self, args: &[&str], code: i32, field: &str, value: Value) -> Value {
        let (status, out, err) = self.run(args);
        assert_eq!((status, &out[field]), (code, &value), "{err}");
        out
    }

    /// Runs `args` and asserts it succeeds answering exactly `expected`.
    #[track_caller]
    pub fn answers_exactly(&self, args: &[&str], expected: Value) {
        let (code, out, err) = self.run(args);
        assert_eq!((code, out), (0, expected), "{err}");
    }

    /// Loads and checks `file` (of `lines` lines), then adds `x` and `y` and checks `x` and
    /// `in_file` (one of the file's lines).
    #[track_caller]
    pub fn loads_checks_adds(&self, file: &str, lines: u64, in_file: &str) {
        self.answers(&["load", file], 0, "items", json!(lines));
        self.answers(&["check", file], 0, "present", json!(lines));
        self.answers(&["add", "x", "y"], 0, "items", json!(2));
        self.answers(&["exists", "x", in_file], 0, "present", json!(2));
    }

    /// `info`, whose `key` is the filter's; the answer.
    #[track_caller]
    pub fn info(&self) -> Value {
        self.answers(&["info"], 0, "key", json!(self.key))
    }

    /// `expire 60`, then (when `clear`) `clear`.
    #[track_caller]
    pub fn expires(&self, clear: bool) {
        self.answers_exactly(&["expire", "60"], json!({"ttl_seconds": 60}));
        if clear {
            self.clears();
        }
    }

    /// `clear`, which deletes the filter.
    #[track_caller]
    pub fn clears(&self) {
        self.answers_exactly(&["clear"], json!({"deleted": true}));
    }

    fn run(&self, args: &[&str]) -> (i32, Value, String) {
        run(redbloom(
            self.url,
            &self.key,
            &[&self.flags[..], args].concat(),
        ))
    }
}

/// What the shared ACL tests need of a kind of filter (besides its [`Kind::NAME`], as in
/// docs/security.md's paragraphs): its grants (the commands it sends and the
/// key patterns it uses, as docs/security.md lists them), its CLI flags, and the operations only
/// it has.
pub trait AclKind: Kind {
    /// The start of the tests' keys ("bf"), which [`KEYS`](AclKind::KEYS) covers as `PREFIX:*`.
    const PREFIX: &'static str;
    /// Every command the kind sends, directly or from its Lua scripts (`redis.call` is checked
    /// against the ACL too), with what needs it.
    const COMMANDS: &'static [(&'static str, &'static str)];
    /// The key patterns of the kind's filters at `PREFIX:*`.
    const KEYS: &'static [&'static str];
    /// The commands of [`COMMANDS`](AclKind::COMMANDS) whose refusal the kind works around:
    /// every operation still works without one of them.
    const OPTIONAL: &'static [&'static str];
    /// The start of the kind's line in docs/security.md.
    const DOCUMENTED: &'static str;
    /// The key the documented line is tried on, literally.
    const DOCUMENTED_KEY: &'static str;
    /// The CLI's flags for the kind, before `--capacity`.
    const FLAGS: &'static [&'static str];
    /// The CLI's `--capacity` in [`cli_end_to_end`](AclKind::cli_end_to_end).
    const CAPACITY: &'static str;
    /// What a batch of 20,000 items is called in messages ("big", or "dense").
    const BIG: &'static str;
    /// The keys (a `KEYS` pattern) that refused CLI calls on `PREFIX:x` would have written.
    const REFUSED_CLI_KEYS: &'static str;
    /// The password of the users granted [`COMMANDS`](AclKind::COMMANDS).
    const MINIMAL_PW: &'static str;
    /// The password of the user whose keys are elsewhere.
    const OTHER_PW: &'static str;
    /// The commands and key patterns of [`COMMANDS`](AclKind::COMMANDS) and
    /// [`KEYS`](AclKind::KEYS) that only exact answers across retries need: without one,
    /// everything works but writes no longer record their answers ([`records`]).
    const EXACT_ONLY: &'static [&'static str];

    /// The rules of a user with `password`, [`KEYS`](AclKind::KEYS) but `skip_key`, and
    /// [`COMMANDS`](AclKind::COMMANDS) but those of `skip`.
    fn grant(password: &str, skip: &[&str], skip_key: Option<&str>) -> Vec<String> {
        grant(password, Self::KEYS, Self::COMMANDS, skip, skip_key)
    }

    /// A filter of the kind at `key`, of `shards` shards, as the tests size it.
    fn builder(key: &str, shards: u32) -> Builder<Self>;

    /// The filter of [`builder`](AclKind::builder) over `conn`.
    fn build<C>(conn: C, key: &str, shards: u32) -> redbloom::Result<Bloom<C, Self>>
    where
        C: redis::aio::ConnectionLike + Clone + Send + Sync,
    {
        Self::builder(key, shards).build(conn)
    }

    /// Every operation of a filter at `key`, of one key and then of 4 shards, through `url`.
    /// The first error, if any.
    async fn exercise_key(url: &str, key: &str) -> redbloom::Result<()>;

    /// The CLI, every verb of the kind, through `cli` (on a new filter of
    /// [`CAPACITY`](AclKind::CAPACITY), of one shard or more, answering in JSON); `file` has
    /// 20,000 lines `line:I`.
    fn cli_end_to_end(cli: &UserCli, file: &str);

    /// The operations only the kind has, on a filter at a key the user cannot access: each
    /// `Error::NoPermission` (`what` names the filter; `big` has 20,000 items).
    async fn refused_too(bloom: &Bloom<ConnectionManager, Self>, what: &str, big: &[String]);

    /// The user's own keys (`other:*`) work.
    async fn own_keys_work(conn: ConnectionManager);

    /// The CLI verbs refused on a key the user cannot access; `file` has 100 lines.
    fn refused_verbs(file: &str) -> Vec<Vec<&str>>;
}

/// Whether a filter of the kind through `url` (a new one, retrying) still records its writes'
/// answers across retries after an add: `false` once the ACL refused the recording script.
pub async fn records<K: AclKind>(url: &str) -> bool {
    let key = fresh_key(K::PREFIX, "exact");
    let bloom = K::builder(&key, 1)
        .retry(redbloom::Retry::for_duration(Duration::from_secs(5)))
        .build(manager(url).await)
        .unwrap();
    bloom.add("probe").await.unwrap();
    bloom.exact_retries()
}

/// Every operation of a filter of the kind, on new keys, through `url`: see
/// [`AclKind::exercise_key`].
pub async fn exercise<K: AclKind>(url: &str) -> redbloom::Result<()> {
    K::exercise_key(url, &fresh_key(K::PREFIX, "all")).await
}

/// The commands of [`AclKind::COMMANDS`] on the keys of [`AclKind::KEYS`] are enough for every
/// operation (the library's and the CLI's), and each is needed by one: without it some
/// operation gets `Error::NoPermission` (but those of [`AclKind::OPTIONAL`]); so is each key
/// pattern. The server, its admin connection and the URL of the user (`minimal`), for the
/// kind's own checks after.
pub async fn each_command_is_needed_and_together_they_are_enough<K: AclKind>(
) -> (RedisServer, MultiplexedConnection, String) {
    let (server, mut admin) = acl_server().await;
    let url = user_url(&server, "minimal", K::MINIMAL_PW);

    set_user(&mut admin, "minimal", &K::grant(K::MINIMAL_PW, &[], None)).await;
    exercise::<K>(&url).await.unwrap();
    assert!(records::<K>(&url).await, "the grant keeps exact answers");
    let file = lines_file(20_000);
    for shards in ["1", "4"] {
        let size = [
            "--capacity",
            K::CAPACITY,
            "--fpr",
            "0.01",
            "--shards",
            shards,
            "--json",
        ];
        let cli = UserCli::new(
            &url,
            fresh_key(K::PREFIX, "cli"),
            &[K::FLAGS, &size].concat(),
        );
        K::cli_end_to_end(&cli, path_of(&file));
    }

    for (command, needed_by) in K::COMMANDS {
        if ["multi", "exec"].contains(command) {
            // Needed, but not testable this way (see acl.rs): when MULTI is refused, Redis runs
            // the commands meant for the transaction at once and redis-rs miscounts the
            // replies; when EXEC is refused, the connection stays inside MULTI. Grant both.
            continue;
        }
        let rules = K::grant(K::MINIMAL_PW, &[command], None);
        set_user(&mut admin, "minimal", &rules).await;
        if K::EXACT_ONLY.contains(command) {
            exercise::<K>(&url)
                .await
                .unwrap_or_else(|e| panic!("everything works without {command}: {e}"));
            assert!(!records::<K>(&url).await, "exact answers need {command}");
            continue;
        }
        if K::OPTIONAL.contains(command) {
            // Only the dense path uses it, and a dense add refused (before it writes anything)
            // goes another way.
            exercise::<K>(&url)
                .await
                .unwrap_or_else(|e| panic!("everything works without {command}: {e}"));
            continue;
        }
        if *command == "eval" {
            // Scripts go as EVALSHA, and as EVAL only after NOSCRIPT: empty the cache first.
            flush_scripts(&mut admin).await;
        }
        if *command == "info" {
            let what = format!("without {command} ({needed_by})");
            assert_refused_without_info(&what, exercise::<K>(&url).await);
            continue;
        }
        assert_noperm(
            &format!("without {command} ({needed_by})"),
            exercise::<K>(&url).await,
            K::MINIMAL_PW,
        );
    }

    for key in K::KEYS {
        let rules = K::grant(K::MINIMAL_PW, &[], Some(key));
        set_user(&mut admin, "minimal", &rules).await;
        if K::EXACT_ONLY.contains(key) {
            exercise::<K>(&url)
                .await
                .unwrap_or_else(|e| panic!("everything works without {key}: {e}"));
            assert!(!records::<K>(&url).await, "exact answers need {key}");
            continue;
        }
        assert_noperm(
            &format!("without the keys {key}"),
            exercise::<K>(&url).await,
            K::MINIMAL_PW,
        );
    }
    (server, admin, url)
}

/// The kind's paragraph of docs/security.md gives the kind's grants: its one line (it starts
/// with [`AclKind::DOCUMENTED`]) is [`AclKind::KEYS`] (for the key `KEY`) and
/// [`AclKind::COMMANDS`], and taken literally for a key it works end to end.
pub async fn the_documented_line_is_the_tested_one_and_works<K: AclKind>() {
    let docs = std::fs::read_to_string(concat!(env!("CARGO_MANIFEST_DIR"), "/../docs/security.md"))
        .unwrap();
    let start = docs
        .find(K::DOCUMENTED)
        .unwrap_or_else(|| panic!("the {} filter's line in docs/security.md", K::NAME));
    let end = start + docs[start..].find("```").unwrap();
    let words: Vec<&str> = docs[start..end].split_whitespace().collect();
    assert_eq!(words[..5], ["ACL", "SETUSER", "app", "on", ">PW"]);
    let rules = &words[5..];
    let pattern = format!("{}:*", K::PREFIX);
    let keys: Vec<String> = K::KEYS.iter().map(|k| k.replace(&pattern, "KEY")).collect();
    assert_eq!(rules[..keys.len()], keys, "the key patterns");
    assert_eq!(rules[keys.len()], "-@all");
    let documented: Vec<&str> = rules[keys.len() + 1..]
        .iter()
        .map(|r| r.strip_prefix('+').expect("+command"))
        .collect();
    let tested: Vec<&str> = K::COMMANDS.iter().map(|(c, _)| *c).collect();
    assert_eq!(documented, tested, "the commands");

    let (server, mut admin) = acl_server().await;
    let key = K::DOCUMENTED_KEY;
    let literal: Vec<String> = words[4..]
        .iter()
        .map(|w| w.replace("PW", K::MINIMAL_PW).replace("KEY", key))
        .collect();
    set_user(&mut admin, "app", &literal).await;
    K::exercise_key(&user_url(&server, "app", K::MINIMAL_PW), key)
        .await
        .unwrap();
}

/// A user whose keys are elsewhere: every operation of a filter of the kind, of one key and
/// sharded, is `Error::NoPermission`, at once (no retries), and writes nothing; the CLI says
/// NOPERM in one line.
pub async fn a_user_without_access_to_the_keys_gets_no_permission_and_writes_nothing<K: AclKind>() {
    let (server, mut admin) = acl_server().await;
    let rules = [
        format!(">{}", K::OTHER_PW),
        "~other:*".into(),
        "~{other:*}:redbloom:*".into(),
        "+@all".into(),
    ];
    set_user(&mut admin, "otherkeys", &rules).await;
    let url = user_url(&server, "otherkeys", K::OTHER_PW);
    let conn = manager(&url).await;
    let big = items("b", 20_000);
    let key = format!("{}:x", K::PREFIX);
    for shards in [1, 4] {
        let what = format!("{shards} shard(s)");
        let bloom = K::builder(&key, shards)
            .retry(redbloom::Retry::for_duration(Duration::from_secs(30)))
            .build(conn.clone())
            .unwrap();
        let started = Instant::now();
        let op = |op: &str| format!("{what} {op}");
        let big_op = |op: &str| format!("{what} {} {op}", K::BIG);
        assert_noperm(&op("add"), bloom.add("a").await, K::OTHER_PW);
        assert_noperm(&op("exists"), bloom.exists("a").await, K::OTHER_PW);
        assert_noperm(
            &op("add_many"),
            bloom.add_many(&["a", "b"]).await,
            K::OTHER_PW,
        );
        assert_noperm(&big_op("add_many"), bloom.add_many(&big).await, K::OTHER_PW);
        assert_noperm(
            &big_op("exists_many"),
            bloom.exists_many(&big).await,
            K::OTHER_PW,
        );
        K::refused_too(&bloom, &what, &big).await;
        assert_noperm(&op("info"), bloom.info().await, K::OTHER_PW);
        let expiry = bloom.expire(Duration::from_secs(5)).await;
        assert_noperm(&op("expire"), expiry, K::OTHER_PW);
        assert_noperm(&op("clear"), bloom.clear().await, K::OTHER_PW);
        assert!(
            started.elapsed() < Duration::from_secs(5),
            "{what}: not retried: {:?}",
            started.elapsed()
        );
    }
    let written = keys(&mut admin, "*").await;
    assert!(written.is_empty(), "refused calls wrote {written:?}");

    // Its own keys work.
    K::own_keys_work(conn).await;

    let file = lines_file(100);
    for shards in ["1", "4"] {
        for args in K::refused_verbs(path_of(&file)) {
            let size = ["--capacity", "1000", "--fpr", "0.01", "--shards", shards];
            let cmd = redbloom(&url, &key, &[K::FLAGS, &size[..], &args].concat());
            assert_fails(cmd, &["NOPERM", "permission"], Some(K::OTHER_PW));
        }
    }
    let written = keys(&mut admin, K::REFUSED_CLI_KEYS).await;
    assert!(written.is_empty(), "refused CLI calls wrote {written:?}");
}
