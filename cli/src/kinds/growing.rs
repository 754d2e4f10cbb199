//! The growing filter on the command line: `--growth F`, sized with `--capacity N` (the first
//! level's items) and `--fpr P` (the bound over every level).

use super::{native_only, same, shards_agree, CliKind};
use crate::args::{ranged, Cli, FILTER};
use crate::output;
use anyhow::{bail, Result};
use clap::Args;
use redbloom::kind::Growing;
use redbloom::{Builder, GrowingBloom, StoredParams};

/// A growing filter's flags.
#[derive(Debug, Args)]
#[group(skip)]
pub(crate) struct Flags {
    /// A growing filter: it grows by levels, each F times the capacity of the one before at a
    /// tighter rate, so the false-positive rate stays at or below --fpr P however many items it
    /// takes; sized with --capacity N (the first level's items). F: a whole number, 1 or more.
    #[arg(
        long,
        global = true,
        value_name = "F",
        conflicts_with_all = ["window", "counting"],
        value_parser = ranged::<u32>(1, 1_000_000),
        allow_negative_numbers = true,
        help_heading = FILTER
    )]
    pub(crate) growth: Option<u32>,
}

impl CliKind for Growing {
    const FLAG: &'static str = "--growth";

    fn chosen(cli: &Cli) -> bool {
        cli.kinds.growing.growth.is_some()
    }

    fn from_flags(cli: &Cli, key: String) -> Result<Builder<Growing>> {
        native_only(cli, Self::FLAG)?;
        let Some(growth) = cli.kinds.growing.growth else {
            bail!("a growing filter needs --growth F");
        };
        match (cli.size.bits, cli.size.capacity, cli.size.fpr) {
            (None, Some(items), Some(fpr)) => Ok(GrowingBloom::builder(key)
                .growth(growth)
                .expected_items(items)
                .false_positive_rate(fpr)),
            _ => bail!(
                "--growth is sized with --capacity N (the first level's items) and --fpr P, not \
                 --bits"
            ),
        }
    }

    fn agrees(cli: &Cli, stored: &StoredParams) -> Result<()> {
        native_only(cli, Self::FLAG)?;
        let kept = stored.field("growth").and_then(|g| g.parse().ok());
        same(stored, "--growth", cli.kinds.growing.growth, kept)?;
        shards_agree(cli, stored)
    }

    fn report(info: redbloom::GrowingInfo) -> output::Info {
        output::Info::from(info)
    }
}
