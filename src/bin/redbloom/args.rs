//! The command line of SPEC.md §3.

use clap::{Args, Parser, Subcommand, ValueEnum};
use std::ffi::OsString;
use std::path::PathBuf;

/// Load, check and inspect Bloom filters kept in Redis (go-zero's layout by default).
#[derive(Debug, Parser)]
#[command(name = "redbloom", version, about)]
pub(crate) struct Cli {
    /// Redis URL (redis://, rediss://, user:password@, /db); default $REDIS_URL, else
    /// redis://127.0.0.1:6379.
    #[arg(
        long,
        global = true,
        value_name = "URL",
        env = "REDIS_URL",
        hide_env_values = true
    )]
    pub(crate) url: Option<String>,

    /// PEM file of the CA that signed the server's certificate, trusted instead of the system's
    /// CAs for a rediss:// URL (a private CA, or a self-signed server certificate).
    #[arg(long, global = true, value_name = "FILE")]
    pub(crate) tls_ca: Option<PathBuf>,

    /// A Redis Cluster instead of one server: comma-separated seed URLs of some of its nodes.
    #[arg(long, global = true, value_name = "SEEDS")]
    pub(crate) cluster: Option<String>,

    /// With --cluster: serve exists and check from a random replica of each slot (its master
    /// when it has none). Writes still go to the masters; a read may miss an add made a moment
    /// ago (replication lag; --wait-replicas on the writer closes that gap).
    #[arg(long, global = true)]
    pub(crate) read_from_replicas: bool,

    /// The filter's key (required).
    #[arg(long, global = true, value_name = "KEY")]
    pub(crate) key: Option<String>,

    #[command(flatten)]
    pub(crate) size: Size,

    /// How items map to bits: go-zero's (k = 14, shared with Go services) or the native layout
    /// (k from the rate, parameters stored with the filter; sized with --capacity and --fpr).
    #[arg(long, global = true, value_enum, default_value_t = LayoutArg::Gozero)]
    pub(crate) layout: LayoutArg,

    /// Seconds to wait for a connection or a reply before the attempt counts as failed.
    #[arg(long, global = true, value_name = "SECONDS", default_value_t = 5.0, value_parser = positive_seconds)]
    pub(crate) timeout: f64,

    /// Seconds a call keeps retrying (reconnecting, with backoff) after a lost connection or a
    /// timeout before the command gives up; 0 never retries.
    #[arg(long, global = true, value_name = "SECONDS", default_value_t = 30.0, value_parser = seconds)]
    pub(crate) retry_for: f64,

    /// After every write, wait until N replicas have it (Redis WAIT, up to --timeout) and fail
    /// when fewer confirm.
    #[arg(long, global = true, value_name = "N")]
    pub(crate) wait_replicas: Option<u32>,

    /// Split the filter over N keys in hash slots spread evenly over a cluster (the size is the
    /// total; each key holds at most 2^32 bits).
    #[arg(long, global = true, value_name = "N", default_value_t = 1, value_parser = clap::value_parser!(u32).range(1..=1024))]
    pub(crate) shards: u32,

    /// Print one line of JSON instead of text.
    #[arg(long, global = true)]
    pub(crate) json: bool,

    #[command(subcommand)]
    pub(crate) command: Command,
}

/// The filter's size: `--bits N`, or `--capacity N --fpr P`.
#[derive(Debug, Args)]
pub(crate) struct Size {
    /// The filter's size in bits (go-zero layout, k = 14), 1..=4294967296.
    #[arg(long, global = true, value_name = "N", conflicts_with_all = ["capacity", "fpr"])]
    pub(crate) bits: Option<u64>,

    /// Size the filter for this many items (with --fpr).
    #[arg(long, global = true, value_name = "N", requires = "fpr")]
    pub(crate) capacity: Option<u64>,

    /// The false-positive rate to reach at --capacity, in (0, 1).
    #[arg(long, global = true, value_name = "P", requires = "capacity")]
    pub(crate) fpr: Option<f64>,
}

#[derive(Debug, Clone, Copy, PartialEq, Eq, ValueEnum)]
pub(crate) enum LayoutArg {
    Gozero,
    Native,
}

#[derive(Debug, Subcommand)]
pub(crate) enum Command {
    /// Add items; "new" counts those that were certainly not there before.
    Add {
        /// Items, taken as raw bytes.
        #[arg(required = true)]
        items: Vec<OsString>,
    },
    /// Check items; exit status 0 if all are present, 1 if any is absent.
    Exists {
        /// Items, taken as raw bytes.
        #[arg(required = true)]
        items: Vec<OsString>,
    },
    /// Add every line of FILE (- for stdin), in batches.
    Load(FileArgs),
    /// Check every line of FILE (- for stdin), in batches; exit status 0 whatever the counts.
    Check(FileArgs),
    /// Describe the filter.
    Info,
    /// Delete the filter's key.
    Clear,
    /// Make the filter's key expire after SECONDS.
    Expire {
        /// Seconds until the key expires.
        seconds: u64,
    },
    /// Load generator: C tasks sharing one client, items bench:0..N-1.
    Bench(BenchArgs),
}

#[derive(Debug, Args)]
pub(crate) struct FileArgs {
    /// One item per line; "-" reads standard input.
    pub(crate) file: PathBuf,

    /// Items per round trip [default: chosen for the filter's size: large when the whole
    /// filter can travel at once (adds: up to 4 MiB, checks: up to 64 MiB), else 1,000].
    #[arg(long, value_parser = clap::value_parser!(u64).range(1..=1_000_000))]
    pub(crate) batch: Option<u64>,

    /// Batches in flight at once on the connection.
    #[arg(long, default_value_t = 8, value_parser = clap::value_parser!(u64).range(1..=1024))]
    pub(crate) pipeline: u64,
}

#[derive(Debug, Args)]
pub(crate) struct BenchArgs {
    /// The operation to time.
    #[arg(long)]
    pub(crate) op: BenchOp,

    /// Items in all: bench:0 .. bench:N-1.
    #[arg(long, value_parser = clap::value_parser!(u64).range(1..))]
    pub(crate) items: u64,

    /// Tasks sharing the one client.
    #[arg(long, value_parser = clap::value_parser!(u64).range(1..=100_000))]
    pub(crate) concurrency: u64,

    /// Items per call.
    #[arg(long, default_value_t = 1, value_parser = clap::value_parser!(u64).range(1..=100_000))]
    pub(crate) batch: u64,
}

#[derive(Debug, Clone, Copy, PartialEq, Eq, ValueEnum, serde::Serialize)]
#[serde(rename_all = "lowercase")]
pub(crate) enum BenchOp {
    Add,
    Exists,
}

/// A number of seconds, 0 or more (at most a day).
fn seconds(text: &str) -> Result<f64, String> {
    match text.parse::<f64>() {
        Ok(secs) if (0.0..=86_400.0).contains(&secs) => Ok(secs),
        _ => Err(format!(
            "expected seconds between 0 and 86400, not {text:?}"
        )),
    }
}

/// A number of seconds above 0.
fn positive_seconds(text: &str) -> Result<f64, String> {
    match seconds(text)? {
        secs if secs > 0.0 => Ok(secs),
        _ => Err("expected more than 0 seconds".to_owned()),
    }
}
