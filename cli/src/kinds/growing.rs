//! The growing filter on the command line: `--growth F`, sized with `--capacity N` (the first
//! level's items) and `--fpr P` (the bound over every level).

use super::{native_only, same, shards_agree, CliKind};
use crate::args::Cli;
use crate::output;
use anyhow::{bail, Result};
use redbloom::kind::Growing;
use redbloom::{Builder, GrowingBloom, StoredParams};

impl CliKind for Growing {
    const FLAG: &'static str = "--growth";

    fn chosen(cli: &Cli) -> bool {
        cli.growth.is_some()
    }

    fn from_flags(cli: &Cli, key: String) -> Result<Builder<Growing>> {
        native_only(cli, Self::FLAG)?;
        let Some(growth) = cli.growth else {
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
        same(stored, "--growth", cli.growth, kept)?;
        shards_agree(cli, stored)
    }

    fn report(info: redbloom::GrowingInfo) -> output::Info {
        output::Info::from(info)
    }
}
