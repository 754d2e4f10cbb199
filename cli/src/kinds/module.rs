//! The module filter on the command line: `--module`, the server's own Bloom filter (`BF.*`),
//! sized with `--capacity N --fpr P` (`BF.RESERVE`'s capacity and error rate), `--growth F`
//! optional (its `EXPANSION`). What the module cannot do is refused with one line each.

use super::{same, shards_agree, CliKind};
use crate::args::{Cli, FILTER};
use crate::output;
use anyhow::{bail, Result};
use clap::Args;
use redbloom::kind::Module;
use redbloom::{Builder, ModuleBloom, StoredParams};

/// A module filter's flags.
#[derive(Debug, Args)]
#[group(skip)]
pub(crate) struct Flags {
    /// The server's own Bloom filter (BF.*: Redis 8, RedisBloom, valkey-bloom), shared with
    /// every client of BF.ADD and BF.EXISTS: made with BF.RESERVE KEY P N from --fpr P and
    /// --capacity N (with EXPANSION F given --growth F); a filter another client made is read,
    /// and written when BF.INFO agrees with the flags. Not with --counting, --layout, --window
    /// or --near-cache.
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
        Ok(match cli.kinds.growing.growth {
            Some(growth) => builder.growth(growth),
            None => builder,
        })
    }

    fn agrees(cli: &Cli, stored: &StoredParams) -> Result<()> {
        refusals(cli)?;
        // Stored as a number, or "default" (the module's own expansion).
        let given = cli.kinds.growing.growth.map(|g| g.to_string());
        same(stored, "--growth", given, stored.field("growth").map(str::to_owned))?;
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
            window_seconds: None,
            generations: None,
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
    if cli.kinds.window.window.is_some() {
        bail!(
            "--window with --module is not offered yet (windows over module filters come \
             later); drop one of them"
        );
    }
    Ok(())
}
