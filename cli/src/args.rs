//! The command line of SPEC.md §3.

use crate::kinds::KindFlags;
use clap::{Args, Parser, Subcommand, ValueEnum};
use std::ffi::OsString;
use std::path::PathBuf;
use std::time::Duration;

/// A subcommand's usage line: the options every command needs, then its own.
macro_rules! usage {
    ($own:literal) => {
        concat!(
            "redbloom --key KEY [--bits N | --capacity N --fpr P] [OPTIONS] ",
            $own
        )
    };
}

/// The usage line every help shows: the key is required; the size creates a filter, or opens
/// one that stores no parameters (a go-zero filter made by Go).
const USAGE: &str = "redbloom --key KEY [--bits N | --capacity N --fpr P] [OPTIONS] <COMMAND>";

/// Help headings of the options every command takes.
const CONNECTION: &str = "Connection options";
pub(crate) const FILTER: &str = "Filter options";
const OUTPUT: &str = "Output options";

const EXAMPLES: &str = "\
Examples:
  # Load a file (one item per line) into a filter sized for 10 million items at 0.1%
  redbloom --key seen --capacity 10000000 --fpr 0.001 load items.txt

  # Check the lines of standard input against it
  cat today.txt | redbloom --key seen --capacity 10000000 --fpr 0.001 check -

  # Describe it as one line of JSON: a filter that exists opens with its key alone
  redbloom --key seen info --json

  # One filter over 16 shards of a Redis Cluster, each write confirmed by a replica
  redbloom --cluster redis://10.0.0.1:7000,redis://10.0.0.2:7000 --shards 16 \\
      --wait-replicas 1 --key big --capacity 5000000000 --fpr 0.01 load items.txt

A filter redbloom made stores its kind and size in Redis: later commands may leave the size and
kind flags out, and any given must be those it was made with. Numbers may be written 1e6;
durations combine units (1h30m).";

/// Load, check and inspect Bloom filters kept in Redis (go-zero's layout by default).
#[derive(Debug, Parser)]
#[command(name = "redbloom", version, about, override_usage = USAGE, after_help = EXAMPLES)]
pub(crate) struct Cli {
    /// Redis URL (redis://, rediss://, user:password@, /db), or the sentinels of a monitored
    /// master: redis+sentinel://USER:PASS@HOST:PORT,HOST:PORT/MASTER/DB, credentials (the data
    /// nodes') and DB optional (rediss+sentinel:// for TLS) [default: $REDIS_URL, else
    /// redis://127.0.0.1:6379].
    #[arg(
        long,
        global = true,
        value_name = "URL",
        env = "REDIS_URL",
        hide_env_values = true,
        help_heading = CONNECTION
    )]
    pub(crate) url: Option<String>,

    /// Whether the URL came from `$REDIS_URL` rather than `--url` (set by [`parse`]).
    #[arg(skip)]
    pub(crate) url_from_env: bool,

    /// Whether `--layout` was given rather than defaulted (set by [`parse`]).
    #[arg(skip)]
    pub(crate) layout_given: bool,

    /// Whether `--shards` was given rather than defaulted (set by [`parse`]).
    #[arg(skip)]
    pub(crate) shards_given: bool,

    /// PEM file of the certificates trusted instead of the system's CAs for a rediss:// URL:
    /// the CA that signed the server's certificate, or the server's own self-signed
    /// certificate (as `openssl req -x509` makes it).
    #[arg(long, global = true, value_name = "FILE", help_heading = CONNECTION)]
    pub(crate) tls_ca: Option<PathBuf>,

    /// With a redis+sentinel:// URL: the sentinels' own ACL user, when they need one.
    #[arg(
        long,
        global = true,
        value_name = "USER",
        env = "REDIS_SENTINEL_USER",
        help_heading = CONNECTION
    )]
    pub(crate) sentinel_user: Option<String>,

    /// With a redis+sentinel:// URL: the sentinels' own password, when they need one.
    #[arg(
        long,
        global = true,
        value_name = "PASSWORD",
        env = "REDIS_SENTINEL_PASSWORD",
        hide_env_values = true,
        help_heading = CONNECTION
    )]
    pub(crate) sentinel_password: Option<String>,

    /// A Redis Cluster instead of one server: comma-separated seed URLs of some of its nodes.
    #[arg(long, global = true, value_name = "SEEDS", help_heading = CONNECTION)]
    pub(crate) cluster: Option<String>,

    /// With --cluster: serve exists and check from a random replica of each slot (its master
    /// when it has none). With a redis+sentinel:// URL: exists, check, info and export go to a
    /// replica the sentinels list. Writes still go to the masters; a read may miss an add made
    /// a moment ago (replication lag; --wait-replicas on the writer closes that gap).
    #[arg(long, global = true, help_heading = CONNECTION)]
    pub(crate) read_from_replicas: bool,

    /// The filter's key (required).
    #[arg(long, global = true, value_name = "KEY", help_heading = FILTER)]
    pub(crate) key: Option<String>,

    #[command(flatten)]
    pub(crate) size: Size,

    /// Each kind's own flags (`--layout`, `--window`, `--counting`, `--growth`, …): one struct
    /// per kind, in the kind's file under `kinds/`.
    #[command(flatten)]
    pub(crate) kinds: KindFlags,

    /// Seconds to wait for a connection or a reply before the attempt counts as failed,
    /// more than 0 and at most 86400.
    #[arg(
        long,
        global = true,
        value_name = "SECONDS",
        default_value_t = 5.0,
        value_parser = positive_seconds,
        allow_negative_numbers = true,
        help_heading = CONNECTION
    )]
    pub(crate) timeout: f64,

    /// Seconds a step keeps retrying (reconnecting, with backoff from 50 ms to 1 s) after a
    /// lost connection or a timeout before the command gives up, connecting first included (a
    /// server that is starting), counted from the step that meets the fault: a long load whose
    /// steps succeed is never failed by its length; 0 to 86400, 0 never retries. A refused password, a bad URL or
    /// certificate, or a server that does not speak Redis fails at once.
    #[arg(
        long,
        global = true,
        value_name = "SECONDS",
        default_value_t = 30.0,
        value_parser = seconds,
        allow_negative_numbers = true,
        help_heading = CONNECTION
    )]
    pub(crate) retry_for: f64,

    /// After every write, wait up to --timeout until N replicas have it (Redis WAIT) and fail,
    /// naming how many confirmed, when fewer do: a write's reply may then take up to twice
    /// --timeout. 0..=4294967295.
    #[arg(
        long,
        global = true,
        value_name = "N",
        value_parser = ranged::<u32>(0, u32::MAX as u64),
        allow_negative_numbers = true,
        help_heading = CONNECTION
    )]
    pub(crate) wait_replicas: Option<u32>,

    /// Write even when the server may evict the filter's keys (maxmemory with an allkeys-*
    /// policy, or a volatile-* one while the filter's keys have a TTL: window filters, any
    /// filter after expire). A filter that loses keys forgets items, so without this such a
    /// write exits 2 naming the policy; the lasting fix is maxmemory-policy noeviction on the
    /// server.
    #[arg(long, global = true, help_heading = CONNECTION)]
    pub(crate) accept_eviction: bool,

    /// Turn off exact answers across retries. By default a write retried after a lost reply
    /// reads back what its first attempt did (recorded beside the filter until the reply
    /// arrives, for --retry-for and 2 s at least): "new" counts stay exact and counting writes
    /// apply once (`load` goes without records, and says how many answers it could not know,
    /// except into a counting filter). With this flag
    /// writes go as plain commands (single adds take a third of the server's CPU, a window
    /// filter's loads its faster dense path); after a retry an item may count as seen though
    /// the lost attempt added it, and a counting write may apply twice.
    #[arg(long, global = true, help_heading = CONNECTION)]
    pub(crate) inexact_retries: bool,

    /// Split the filter over N keys in hash slots spread evenly over a cluster (the size is the
    /// total; each key holds at most 2^32 bits), 1..=1024.
    #[arg(
        long,
        global = true,
        value_name = "N",
        default_value_t = 1,
        value_parser = ranged::<u32>(1, 1024),
        allow_negative_numbers = true,
        help_heading = FILTER
    )]
    pub(crate) shards: u32,

    /// Bytes per step when a large load or check goes to a filter over 4 MiB range by range
    /// (and, given with `import --merge`, the merge too, then atomic per range only): a power
    /// of two from 1K to 64M, with an optional K or M suffix (binary units). Each step holds
    /// Redis about 4 ns per byte (128K: 0.5 ms); smaller steps pause it for less, at more round
    /// trips [default: 128K].
    #[arg(
        long,
        global = true,
        value_name = "BYTES",
        value_parser = chunk_bytes,
        allow_negative_numbers = true,
        help_heading = FILTER
    )]
    pub(crate) merge_chunk: Option<u64>,

    /// With `bench --op exists` only: the filter keeps a copy of itself in the process and
    /// answers from it with no round trip; any change by any client reaches the copy within
    /// DURATION (SPEC.md §6). With --url the copy learns of changes from Redis (CLIENT
    /// TRACKING) and is read again only after one; with --cluster it is read every DURATION.
    /// The copy takes the filter's bytes, at most 256 MiB. DURATION: seconds, or a number with
    /// a unit (500ms, 1s, 15m).
    #[arg(
        long,
        global = true,
        value_name = "DURATION",
        value_parser = duration,
        // "-1s" is a bad duration, not an unknown flag.
        allow_hyphen_values = true,
        help_heading = FILTER
    )]
    pub(crate) near_cache: Option<Duration>,

    /// Print one line of JSON instead of text.
    #[arg(long, global = true, help_heading = OUTPUT)]
    pub(crate) json: bool,

    #[command(subcommand)]
    pub(crate) command: Command,
}

/// Parses the process's arguments, noting where the URL came from.
pub(crate) fn parse() -> Result<Cli, clap::Error> {
    use clap::parser::ValueSource;
    use clap::FromArgMatches;
    let matches = command().try_get_matches()?;
    let mut cli = Cli::from_arg_matches(&matches)?;
    cli.url_from_env = matches.value_source("url") == Some(ValueSource::EnvVariable);
    cli.layout_given = matches.value_source("layout") == Some(ValueSource::CommandLine);
    cli.shards_given = matches.value_source("shards") == Some(ValueSource::CommandLine);
    Ok(cli)
}

/// The global options a subcommand's help lists beside its own (and the size flags its usage
/// line names). Every global option is taken after the subcommand too (SPEC.md §3); the others
/// are listed by `redbloom --help` only.
fn listed_globals(subcommand: &str) -> &'static [&'static str] {
    match subcommand {
        // Without Redis: no connection option.
        "build" => &["key", "bits", "capacity", "fpr", "layout", "shards", "json"],
        "remove" | "unload" => &["key", "counting", "url", "cluster", "json"],
        "bench" => &["key", "url", "cluster", "near_cache", "json"],
        "import" => &["key", "url", "cluster", "merge_chunk", "json"],
        _ => &["key", "url", "cluster", "json"],
    }
}

/// Where a subcommand's help sends the reader for the rest.
const EVERY_OPTION: &str =
    "Every option (connection, TLS, retries, replicas, the filter's kind and \
size, the safety switches) is listed by redbloom --help, and is taken before or after the \
command.";

/// The command line: [`Cli`]'s, with each subcommand's help listing its own options and the
/// few global ones it uses ([`listed_globals`]). A global option is copied into every
/// subcommand when the command is built, unless the subcommand has one of its id already:
/// each subcommand gets its hidden copies first, which parse as the global ones do.
pub(crate) fn command() -> clap::Command {
    use clap::CommandFactory;
    let cmd = Cli::command();
    let globals: Vec<clap::Arg> = cmd
        .get_arguments()
        .filter(|arg| arg.is_global_set())
        .cloned()
        .collect();
    cmd.mut_subcommands(|sub| {
        let listed = listed_globals(sub.get_name());
        let note = match sub.get_after_help() {
            Some(help) => format!("{help}\n\n{EVERY_OPTION}"),
            None => EVERY_OPTION.to_owned(),
        };
        let hidden: Vec<clap::Arg> = globals
            .iter()
            .filter(|arg| !listed.contains(&arg.get_id().as_str()))
            .map(|arg| arg.clone().hide(true))
            .collect();
        sub.args(hidden).after_help(note)
    })
}

/// The filter's size: `--bits N`, or `--capacity N --fpr P`.
#[derive(Debug, Args)]
pub(crate) struct Size {
    /// The filter's size in bits (go-zero layout, k = 14), 1..=4294967296 (2^32; with --shards,
    /// 2^32 per shard).
    #[arg(
        long,
        global = true,
        value_name = "N",
        conflicts_with_all = ["capacity", "fpr"],
        value_parser = whole::<u64>("1..=4294967296 (2^32 per shard)"),
        allow_negative_numbers = true,
        help_heading = FILTER
    )]
    pub(crate) bits: Option<u64>,

    /// Size the filter for this many items (with --fpr), 1 or more.
    #[arg(
        long,
        global = true,
        value_name = "N",
        requires = "fpr",
        value_parser = whole::<u64>("1 or more items"),
        allow_negative_numbers = true,
        help_heading = FILTER
    )]
    pub(crate) capacity: Option<u64>,

    /// The false-positive rate to reach at --capacity, between 0 and 1 (exclusive), e.g. 0.01.
    #[arg(
        long,
        global = true,
        value_name = "P",
        requires = "capacity",
        value_parser = rate,
        allow_negative_numbers = true,
        help_heading = FILTER
    )]
    pub(crate) fpr: Option<f64>,
}

#[derive(Debug, Subcommand)]
pub(crate) enum Command {
    /// Add items; "new" counts those that were certainly not there before.
    #[command(override_usage = usage!("add [--if-absent] ITEM..."))]
    Add {
        /// Items, taken as raw bytes.
        #[arg(required = true)]
        items: Vec<OsString>,
        /// Counting filters: add each item only if it tests absent, in one atomic step
        /// (RedisBloom's CF.ADDNX), so that an item added twice is removed by one remove;
        /// "new" counts the items added.
        #[arg(long)]
        if_absent: bool,
    },
    /// Check items; exit status 0 if all are present, 1 if any is absent.
    #[command(override_usage = usage!("exists ITEM..."))]
    Exists {
        /// Items, taken as raw bytes.
        #[arg(required = true)]
        items: Vec<OsString>,
    },
    /// Add every line of FILE (- for stdin), in batches.
    #[command(
        override_usage = usage!("load [--batch N] [--pipeline N] [--emit new] FILE"),
        after_help = "Examples:
  redbloom --key seen --capacity 10000000 --fpr 0.001 load items.txt
  zcat items.gz | redbloom --key seen --capacity 10000000 --fpr 0.001 --json load -
  # A crawler's frontier: the URLs never seen before, in input order, the summary on stderr
  redbloom --key seen load --emit new - < urls.txt > fresh.txt

Items are lines of at most 64 KiB; at most 128 MiB of items are in flight (a batch at most
64 MiB), and a partial batch goes after 250 ms. SIGINT/SIGTERM print the summary of what was
acknowledged and exit 130/143."
    )]
    Load(LoadArgs),
    /// Check every line of FILE (- for stdin), in batches; exit status 0 whatever the counts.
    #[command(
        override_usage = usage!("check [--batch N] [--pipeline N] [--emit absent|present] FILE"),
        after_help = "Examples:
  redbloom --key seen --capacity 10000000 --fpr 0.001 check today.txt
  cat today.txt | redbloom --key seen --capacity 10000000 --fpr 0.001 --json check -
  # The lines the filter has not seen (check adds nothing; load --emit new adds them too)
  redbloom --key seen check --emit absent - < urls.txt > unseen.txt
  redbloom --key seen load --emit new - < urls.txt > fresh.txt

Items are lines of at most 64 KiB; at most 128 MiB of items are in flight (a batch at most
64 MiB), and a partial batch goes after 250 ms. SIGINT/SIGTERM print the summary of what was
acknowledged and exit 130/143."
    )]
    Check(CheckArgs),
    /// With --counting: remove items once each (only items that were added: removing a false
    /// positive can remove other items); "removed" counts those that were present.
    #[command(override_usage = usage!("--counting remove ITEM..."))]
    Remove {
        /// Items, taken as raw bytes.
        #[arg(required = true)]
        items: Vec<OsString>,
    },
    /// With --counting: remove every line of FILE (- for stdin) once, in batches: the inverse
    /// of load.
    #[command(
        override_usage = usage!("--counting unload [--batch N] [--pipeline N] FILE"),
        after_help = "Example:
  redbloom --key blocked --counting --capacity 100000 --fpr 0.001 unload lifted.txt

Items are lines of at most 64 KiB; the same bounds and signals as load."
    )]
    Unload(FileArgs),
    /// Describe the filter.
    #[command(
        override_usage = usage!("info"),
        after_help = "Example:
  redbloom --key seen --capacity 10000000 --fpr 0.001 info --json"
    )]
    Info,
    /// Delete the filter's key.
    #[command(override_usage = usage!("clear"))]
    Clear,
    /// Take a filter an earlier redbloom made under names that KEY and {KEY} shared
    /// ({KEY}:redbloom:...) for KEY, and move it to today's names.
    #[command(
        override_usage = usage!("migrate"),
        after_help = "Example:
  redbloom --key '{events}' migrate

Needed only when a command said the filter may be KEY's or {KEY}'s. Moves nothing when there is
no such filter; size flags are not needed."
    )]
    Migrate,
    /// Make the filter's key expire after SECONDS.
    #[command(override_usage = usage!("expire SECONDS"))]
    Expire {
        /// Seconds until the key expires: a whole number, or a duration with units (90m, 1h,
        /// 7d, 1h30m).
        #[arg(
            value_parser = ttl_seconds,
            allow_negative_numbers = true
        )]
        seconds: u64,
    },
    /// Write the filter (any size, with its kind and parameters) to FILE ("-": stdout).
    #[command(
        override_usage = usage!("export FILE"),
        after_help = "Example:
  redbloom --key seen --capacity 10000000 --fpr 0.001 export seen.rbloom

Reads the filter in 1 MiB pieces: every add acknowledged before the export began is in the
file. Format: docs/snapshot-format.md."
    )]
    Export {
        /// The snapshot file to write; "-" writes standard output.
        file: PathBuf,
    },
    /// Replace the filter at --key with FILE's ("-": stdin), or with --merge add FILE's items.
    #[command(
        override_usage = usage!("import [--merge] [--idle DURATION] FILE"),
        after_help = "Example:
  redbloom --url redis://other:6379 --key seen import seen.rbloom

The kind and every parameter come from the file; flags given must agree with it. It is staged
beside the filter and swapped in once verified: a bad file or an interrupted import leaves the
filter as it was."
    )]
    Import {
        /// The snapshot file to read; "-" reads standard input.
        file: PathBuf,
        /// Add the file's items to the filter (OR its bits in) instead of replacing it.
        #[arg(long)]
        merge: bool,
        /// Give up when FILE gives no byte for DURATION (a stalled pipe): exit 2, nothing
        /// written. Seconds, or a number with a unit (500ms, 90s, 5m) [default: 60s].
        #[arg(long, value_name = "DURATION", value_parser = duration)]
        idle: Option<Duration>,
    },
    /// Build the filter from the lines of ITEMS without Redis, and write it to --out FILE.
    #[command(
        override_usage = usage!("build ITEMS --out FILE"),
        after_help = "Example:
  redbloom --key seen --capacity 10000000 --fpr 0.001 build urls.txt --out seen.rbloom
  redbloom --url redis://prod:6379 --key seen --capacity 10000000 --fpr 0.001 import seen.rbloom

Holds the filter's bits in memory; lines as for load."
    )]
    Build {
        /// One item per line; "-" reads standard input.
        items: PathBuf,
        /// The snapshot file to write; "-" writes standard output.
        #[arg(long, value_name = "FILE")]
        out: PathBuf,
    },
    /// Load generator: C tasks sharing one client, items bench:0..N-1.
    #[command(
        override_usage = usage!(
            "bench --op add|exists|remove --items N --concurrency C [--batch B] [--near-cache DURATION]"
        ),
        after_help = "Examples:
  redbloom --key seen --capacity 1000000 --fpr 0.01 bench --op add --items 1000000 --concurrency 4 --batch 1000
  redbloom --key seen --capacity 1000000 --fpr 0.01 bench --op exists --items 1000000 --concurrency 64
  redbloom --key seen --capacity 1000000 --fpr 0.01 bench --op exists --items 1000000 --concurrency 64 --near-cache 1s

With --op exists, \"present\" counts the items found. With --near-cache, \"near_cache\" reports
the copy's statistics: lookups answered from it (hits), by Redis (misses), copies read
(refreshes), and whether invalidations were received (tracking)."
    )]
    Bench(BenchArgs),
}

impl Command {
    /// Whether the command only reads the filter (a replica may serve it).
    pub(crate) fn only_reads(&self) -> bool {
        matches!(
            self,
            Command::Exists { .. } | Command::Check(_) | Command::Info | Command::Export { .. }
        )
    }
}

#[derive(Debug, Args)]
pub(crate) struct FileArgs {
    /// One item per line; "-" reads standard input.
    pub(crate) file: PathBuf,

    /// Items per round trip, 1..=1000000 [default: chosen for the filter's size: large enough
    /// that the batch's bits travel as a bitmap (the whole filter up to 4 MiB, range by range
    /// beyond)].
    #[arg(
        long,
        value_name = "N",
        value_parser = ranged::<u64>(1, 1_000_000),
        allow_negative_numbers = true
    )]
    pub(crate) batch: Option<u64>,

    /// Batches in flight at once on the connection, 1..=1024.
    #[arg(
        long,
        value_name = "N",
        default_value_t = 8,
        value_parser = ranged::<u64>(1, 1024),
        allow_negative_numbers = true
    )]
    pub(crate) pipeline: u64,
}

/// `load`: the lines, and which to write out.
#[derive(Debug, Args)]
pub(crate) struct LoadArgs {
    #[command(flatten)]
    pub(crate) lines: FileArgs,

    /// Write each line whose item was new to standard output, in input order, as it is
    /// answered (a line repeated in the input at its first new occurrence only; a line whose
    /// answer could not be known after a retry too, counted as "unknown"); the summary then
    /// goes to standard error.
    #[arg(long, value_name = "WHICH")]
    pub(crate) emit: Option<LoadEmit>,
}

/// `check`: the lines, and which to write out.
#[derive(Debug, Args)]
pub(crate) struct CheckArgs {
    #[command(flatten)]
    pub(crate) lines: FileArgs,

    /// Write each absent (or present) line to standard output, in input order, as it is
    /// answered; the summary then goes to standard error.
    #[arg(long, value_name = "WHICH")]
    pub(crate) emit: Option<CheckEmit>,
}

/// The lines `load --emit` writes.
#[derive(Debug, Clone, Copy, PartialEq, Eq, ValueEnum)]
pub(crate) enum LoadEmit {
    /// Those whose item was new.
    New,
}

/// The lines `check --emit` writes.
#[derive(Debug, Clone, Copy, PartialEq, Eq, ValueEnum)]
pub(crate) enum CheckEmit {
    /// Those certainly not in the filter.
    Absent,
    /// Those in the filter (or false positives).
    Present,
}

#[derive(Debug, Args)]
pub(crate) struct BenchArgs {
    /// The operation to time.
    #[arg(long)]
    pub(crate) op: BenchOp,

    /// Items in all: bench:0 .. bench:N-1, 1 or more.
    #[arg(
        long,
        value_name = "N",
        value_parser = ranged::<u64>(1, u64::MAX),
        allow_negative_numbers = true
    )]
    pub(crate) items: u64,

    /// Tasks sharing the one client, 1..=100000.
    #[arg(
        long,
        value_name = "C",
        value_parser = ranged::<u64>(1, 100_000),
        allow_negative_numbers = true
    )]
    pub(crate) concurrency: u64,

    /// Items per call, 1..=100000.
    #[arg(
        long,
        value_name = "B",
        default_value_t = 1,
        value_parser = ranged::<u64>(1, 100_000),
        allow_negative_numbers = true
    )]
    pub(crate) batch: u64,
}

#[derive(Debug, Clone, Copy, PartialEq, Eq, ValueEnum, serde::Serialize)]
#[serde(rename_all = "lowercase")]
pub(crate) enum BenchOp {
    Add,
    Exists,
    /// With --counting: items are added first (untimed), then removed.
    Remove,
}

/// A whole number in `min..=max`, the range named when it is not one (a negative number
/// included).
pub(crate) fn ranged<T: TryFrom<u64> + Clone + Send + Sync + 'static>(
    min: u64,
    max: u64,
) -> impl Fn(&str) -> Result<T, String> + Clone + Send + Sync + 'static {
    move |text| {
        let expected = match max {
            u64::MAX => format!("expected {min} or more"),
            _ => format!("expected {min}..={max}"),
        };
        whole_number(text)
            .filter(|n| (min..=max).contains(n))
            .and_then(|n| T::try_from(n).ok())
            .ok_or(expected)
    }
}

/// A whole number as people write it (SPEC.md §3): digits, or a power-of-ten notation that
/// names a whole number exactly (`1e6`, `2.5E3`, `1e16`), read as decimal digits (no
/// rounding) up to `u64::MAX`; `None` otherwise.
fn whole_number(text: &str) -> Option<u64> {
    let text = text.trim();
    if let Ok(n) = text.parse::<u64>() {
        return Some(n);
    }
    let (mantissa, exponent) = text.split_once(['e', 'E'])?;
    let exponent: u32 = exponent
        .strip_prefix('+')
        .unwrap_or(exponent)
        .parse()
        .ok()?;
    let (whole, fraction) = mantissa.split_once('.').unwrap_or((mantissa, ""));
    let digits = || whole.bytes().chain(fraction.bytes());
    if whole.is_empty() || !digits().all(|b| b.is_ascii_digit()) {
        return None;
    }
    // The fraction's digits past the exponent must be zeros: 2.5e0 is not whole.
    let shift = exponent.checked_sub(fraction.len() as u32);
    let kept = fraction.len() - (fraction.len() as u32).saturating_sub(exponent) as usize;
    if !fraction.as_bytes()[kept..].iter().all(|&b| b == b'0') {
        return None;
    }
    let mut n: u64 = 0;
    for b in whole.bytes().chain(fraction[..kept].bytes()) {
        n = n.checked_mul(10)?.checked_add(u64::from(b - b'0'))?;
    }
    n.checked_mul(10u64.checked_pow(shift.unwrap_or(0))?)
}

/// `--merge-chunk`: bytes, with an optional `K`/`KiB` or `M`/`MiB` suffix (binary units), a
/// power of two from 1 KiB to 64 MiB.
fn chunk_bytes(text: &str) -> Result<u64, String> {
    let text = text.trim();
    let lower = text.to_ascii_lowercase();
    let (digits, unit) = match lower.find(|c: char| !c.is_ascii_digit()) {
        Some(at) => lower.split_at(at),
        None => (lower.as_str(), ""),
    };
    let unit = match unit {
        "" | "b" => 1,
        "k" | "kb" | "kib" => 1 << 10,
        "m" | "mb" | "mib" => 1 << 20,
        _ => {
            return Err(format!(
                "expected bytes, like 262144, 256K or 1M, not {text:?}"
            ))
        }
    };
    digits
        .parse::<u64>()
        .ok()
        .and_then(|n| n.checked_mul(unit))
        .filter(|n| n.is_power_of_two() && ((1 << 10)..=(64 << 20)).contains(n))
        .ok_or_else(|| format!("expected a power of two from 1K to 64M, like 256K, not {text:?}"))
}

/// A whole number, checked further by the library (which knows, say, the shard count); a
/// negative number or a fraction says `expected`.
fn whole<T: std::str::FromStr + Clone + Send + Sync + 'static>(
    expected: &'static str,
) -> impl Fn(&str) -> Result<T, String> + Clone + Send + Sync + 'static {
    move |text| {
        let text = whole_number(text).map_or_else(|| text.trim().to_owned(), |n| n.to_string());
        text.parse::<T>()
            .map_err(|_| format!("expected {expected}"))
    }
}

/// A TTL: a whole number of seconds, at least 1 (a TTL of 0 would delete the filter at once).
fn ttl_seconds(text: &str) -> Result<u64, String> {
    let expected = "expected a whole number of seconds, 1 or more, or a duration with units \
                    (90m, 1h, 7d, 1h30m)";
    match text.trim().parse::<u64>() {
        Ok(secs) if secs >= 1 => Ok(secs),
        Ok(_) => Err(format!(
            "{expected}: a TTL of 0 would delete the filter at once (use clear to delete it)"
        )),
        Err(_) => match duration(text) {
            Ok(d) if d.subsec_nanos() == 0 => Ok(d.as_secs()),
            _ => Err(expected.to_owned()),
        },
    }
}

/// A false-positive rate: strictly between 0 and 1.
fn rate(text: &str) -> Result<f64, String> {
    match text.trim().parse::<f64>() {
        Ok(rate) if rate > 0.0 && rate < 1.0 => Ok(rate),
        _ => Err("expected a false-positive rate between 0 and 1 (exclusive), e.g. 0.01".into()),
    }
}

/// A number of seconds, 0 or more (at most a day).
fn seconds(text: &str) -> Result<f64, String> {
    match text.trim().parse::<f64>() {
        Ok(secs) if (0.0..=86_400.0).contains(&secs) => Ok(secs),
        _ => Err("expected seconds between 0 and 86400".to_owned()),
    }
}

/// A number of seconds above 0 (at most a day).
fn positive_seconds(text: &str) -> Result<f64, String> {
    match text.trim().parse::<f64>() {
        Ok(secs) if secs > 0.0 && secs <= 86_400.0 => Ok(secs),
        _ => Err("expected more than 0 and at most 86400 seconds".to_owned()),
    }
}

/// A duration: seconds, or a number with a unit (`90s`, `15m`, `1h`, `7d`), more than 0 and at
/// most ten years.
/// A duration as [`duration`] reads it and people write it: `1h`, `1h30m`, `7d`, `90s` as
/// `1m30s`, `1.5s`, `250ms`.
pub(crate) fn duration_text(duration: Duration) -> String {
    let millis = duration.as_millis();
    if !millis.is_multiple_of(1000) {
        return match millis < 1000 {
            true => format!("{millis}ms"),
            false => format!("{}s", millis as f64 / 1000.0),
        };
    }
    let mut secs = millis / 1000;
    let mut text = String::new();
    for (unit, size) in [("d", 86_400), ("h", 3_600), ("m", 60), ("s", 1)] {
        if secs >= size {
            text.push_str(&format!("{}{unit}", secs / size));
            secs %= size;
        }
    }
    if text.is_empty() {
        text.push_str("0s");
    }
    text
}

pub(crate) fn duration(text: &str) -> Result<Duration, String> {
    let expected = || {
        "expected a duration: seconds, or numbers with units (90s, 15m, 1h, 7d, 1h30m), more \
         than 0 and at most ten years"
            .to_owned()
    };
    let text = text.trim();
    let mut secs = 0.0;
    let mut rest = text;
    while !rest.is_empty() {
        let digits = rest
            .find(|c: char| !(c.is_ascii_digit() || c == '.'))
            .unwrap_or(rest.len());
        let (number, tail) = rest.split_at(digits);
        let letters = tail
            .find(|c: char| !c.is_ascii_alphabetic())
            .unwrap_or(tail.len());
        let (unit, tail) = tail.split_at(letters);
        let scale = match (unit, rest.len() == text.len() && tail.is_empty()) {
            // A bare number is seconds.
            ("", true) => 1.0,
            ("ms", _) => 0.001,
            ("s", _) => 1.0,
            ("m", _) => 60.0,
            ("h", _) => 3600.0,
            ("d", _) => 86_400.0,
            _ => return Err(expected()),
        };
        secs += number.parse::<f64>().map_err(|_| expected())? * scale;
        rest = tail;
    }
    if !(secs > 0.0 && secs <= 10.0 * 365.0 * 86_400.0) {
        return Err(expected());
    }
    Ok(Duration::from_secs_f64(secs))
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn durations_print_as_they_are_read() {
        for (millis, text) in [
            (3_600_000, "1h"),
            (5_400_000, "1h30m"),
            (90_000, "1m30s"),
            (7 * 86_400_000, "7d"),
            (1_500, "1.5s"),
            (250, "250ms"),
        ] {
            let d = Duration::from_millis(millis);
            assert_eq!(duration_text(d), text);
            assert_eq!(duration(text), Ok(d), "{text}");
        }
    }

    #[test]
    fn durations_take_units() {
        assert_eq!(duration("90"), Ok(Duration::from_secs(90)));
        assert_eq!(duration("90s"), Ok(Duration::from_secs(90)));
        assert_eq!(duration("15m"), Ok(Duration::from_secs(900)));
        assert_eq!(duration("1h"), Ok(Duration::from_secs(3600)));
        assert_eq!(duration("7d"), Ok(Duration::from_secs(7 * 86_400)));
        assert_eq!(duration("1.5s"), Ok(Duration::from_millis(1500)));
        assert_eq!(duration("500ms"), Ok(Duration::from_millis(500)));
        for bad in ["", "0", "-1s", "1w", "s", "nan", "inf", "1e12d", "1 h h"] {
            assert!(duration(bad).is_err(), "{bad}");
        }
        // Units combined (SPEC.md §3).
        assert_eq!(duration("1h30m"), Ok(Duration::from_secs(5400)));
        assert_eq!(duration("1d12h"), Ok(Duration::from_secs(129_600)));
        assert_eq!(duration("2m30s500ms"), Ok(Duration::from_millis(150_500)));
        for bad in ["1h30", "h30m", "1h 30m", "30m1", "1hh"] {
            assert!(duration(bad).is_err(), "{bad}");
        }
    }

    #[test]
    fn an_expiry_takes_seconds_or_units() {
        assert_eq!(ttl_seconds("90"), Ok(90));
        assert_eq!(ttl_seconds("1h"), Ok(3600));
        assert_eq!(ttl_seconds("1h30m"), Ok(5400));
        assert_eq!(ttl_seconds("7d"), Ok(7 * 86_400));
        for bad in ["0", "-1", "1.5s", "500ms", "5x", ""] {
            assert!(ttl_seconds(bad).is_err(), "{bad}");
        }
        assert!(ttl_seconds("0").unwrap_err().contains("use clear"));
    }

    #[test]
    fn whole_numbers_take_powers_of_ten() {
        assert_eq!(whole_number("1000000"), Some(1_000_000));
        assert_eq!(whole_number("1e6"), Some(1_000_000));
        assert_eq!(whole_number("2.5E3"), Some(2_500));
        assert_eq!(whole_number(" 3e0 "), Some(3));
        // Exactly, past a double's 2^53: 1e16, and u64::MAX's digits.
        assert_eq!(whole_number("1e16"), Some(10_000_000_000_000_000));
        assert_eq!(whole_number("1.8e19"), Some(18_000_000_000_000_000_000));
        assert_eq!(whole_number("12.50e1"), Some(125));
        assert_eq!(whole_number("1e+3"), Some(1_000));
        assert_eq!(whole_number("18446744073709551615"), Some(u64::MAX));
        for bad in [
            "1.5", "1e-3", "-1e6", "1e20", "2e19", "e6", ".5e1", "1.e", "1e6x", "nan", "inf",
            "1.25e1", "1e",
        ] {
            assert_eq!(whole_number(bad), None, "{bad}");
        }
        let capacity = whole::<u64>("1 or more items");
        assert_eq!(capacity("1e6"), Ok(1_000_000));
        assert!(capacity("1.5e0").is_err());
    }

    #[test]
    fn merge_chunks_are_powers_of_two_with_binary_units() {
        assert_eq!(chunk_bytes("131072"), Ok(128 << 10));
        assert_eq!(chunk_bytes("128K"), Ok(128 << 10));
        assert_eq!(chunk_bytes("64kib"), Ok(64 << 10));
        assert_eq!(chunk_bytes("1M"), Ok(1 << 20));
        assert_eq!(chunk_bytes("64MiB"), Ok(64 << 20));
        assert_eq!(chunk_bytes("1k"), Ok(1024));
        for bad in [
            "",
            "0",
            "512",
            "3K",
            "128M",
            "-1K",
            "1G",
            "1.5M",
            "K",
            "99999999999999999999",
        ] {
            assert!(chunk_bytes(bad).is_err(), "{bad}");
        }
    }
}
