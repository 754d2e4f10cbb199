//! The module filter on the command line: `--module`, the server's own Bloom filter (`BF.*`),
//! sized with `--capacity N --fpr P` (`BF.RESERVE`'s capacity and error rate), `--growth F`
//! optional (its `EXPANSION`). What the module cannot do is refused with one line each.

use super::{same, shards_agree, CliKind};
use crate::args::{duration_text, Cli, FILTER};
use crate::output;
use anyhow::{bail, Result};
use clap::Args;
use redbloom::kind::Module;
use redbloom::{Builder, ModuleBloom, StoredParams};
use std::time::Duration;

/// A module filter's flags.
#[derive(Debug, Args)]
#[group(skip)]
pub(crate) struct Flags {
    /// The server's own Bloom filter (BF.*: Redis 8, RedisBloom, valkey-bloom), shared with
    /// every client of BF.ADD and BF.EXISTS: made with BF.RESERVE KEY P N from --fpr P and
    /// --capacity N (with EXPANSION F given --growth F); a filter another client made is read,
    /// and written when BF.INFO agrees with the flags. With --window DURATION [--generations
    /// G]: G module filters, one per generation of the server's clock, each expiring by
    /// itself. Not with --counting, --layout or --near-cache.
    #[arg(long, global = true, help_heading = FILTER)]
    pub(crate) module: bool,
}

impl CliKind for Module {
    const FLAG: &'static str = "--module";

    fn chosen(cli: &Cli) -> bool {
        cli.kinds.module.module
    }

    fn from_flags(cli: &Cli, key: String) -> Result<Builder<Module>> {
        refusals(cli)?;
        let builder = match (cli.size.bits, cli.size.capacity, cli.size.fpr) {
            (None, Some(items), Some(fpr)) => ModuleBloom::builder(key)
                .expected_items(items)
                .false_positive_rate(fpr),
            _ => bail!(
                "--module is sized with --capacity N --fpr P (BF.RESERVE's capacity and error \
                 rate), not --bits: the module sizes its own bits"
            ),
        };
        let builder = match cli.kinds.growing.growth {
            Some(growth) => builder.growth(growth),
            None => builder,
        };
        Ok(match cli.kinds.window.window {
            Some(window) => {
                let builder = builder.window(window);
                match cli.kinds.window.generations {
                    Some(generations) => builder.generations(generations),
                    None => builder,
                }
            }
            None => builder,
        })
    }

    fn agrees(cli: &Cli, stored: &StoredParams) -> Result<()> {
        refusals(cli)?;
        // Stored as a number, or "default" (the module's own expansion).
        let given = cli.kinds.growing.growth.map(|g| g.to_string());
        same(stored, "--growth", given, stored.field("growth").map(str::to_owned))?;
        window_agrees(cli, stored)?;
        shards_agree(cli, stored)
    }

    fn report(info: redbloom::ModuleInfo) -> output::Info {
        output::Info {
            key: info.key,
            bits: None,
            k: None,
            bits_set: None,
            bytes: info.bytes,
            estimated_items: Some(info.items),
            estimated_fpr: info.false_positive_rate,
            ttl_seconds: info.ttl.as_secs(),
            window_seconds: info.window.map(|w| w.as_secs_f64()),
            generations: info.generations,
            parts: None,
            counters_in_use: None,
            counters_saturated: None,
            levels: None,
            capacity: Some(info.capacity),
            items: Some(info.items),
            max_levels: None,
            filters: Some(info.filters),
            expansion: info.expansion,
        }
    }
}

/// What the module cannot do, each refused with one line naming why (SPEC.md §7).
fn refusals(cli: &Cli) -> Result<()> {
    if cli.kinds.counting.counting {
        bail!(
            "--counting cannot go with --module: the module's Bloom filter does not count (its \
             cuckoo filter is another structure); drop one of them"
        );
    }
    if cli.layout_given {
        bail!("--layout cannot go with --module: the server hashes items its own way; drop --layout");
    }
    if cli.kinds.plain.shared_with_go {
        bail!("--shared-with-go cannot go with --module: a module filter is not go-zero's");
    }
    if cli.near_cache.is_some() {
        bail!(
            "--near-cache cannot go with --module: the server hashes items its own way, so a \
             copy in this process could not answer for it"
        );
    }
    Ok(())
}

/// `--window` and `--generations` against the stored filter's window (or its lack of one).
fn window_agrees(cli: &Cli, stored: &StoredParams) -> Result<()> {
    let kept = stored
        .field("window_ms")
        .and_then(|ms| ms.parse().ok())
        .map(Duration::from_millis);
    let given = cli.kinds.window.window;
    match (given, kept) {
        (Some(_), None) => bail!(
            "the filter was created without --window: drop --window (and --generations) to \
             open it as Redis stores it (stored: {})",
            stored.fingerprint()
        ),
        (None, Some(kept)) if super::sized(cli) => bail!(
            "the filter was created with --window {}: give it, or leave the size flags out to \
             open it as Redis stores it (stored: {})",
            duration_text(kept),
            stored.fingerprint()
        ),
        _ => {}
    }
    same(stored, "--window", given.map(duration_text), kept.map(duration_text))?;
    let kept = stored.field("generations").and_then(|g| g.parse().ok());
    same(stored, "--generations", cli.kinds.window.generations, kept)
}
