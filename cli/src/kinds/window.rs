//! The window filter on the command line: `--window DURATION [--generations G]`, sized with
//! `--capacity N --fpr P` (the most items added in any one window).

use super::{native_only, same, shards_agree, CliKind};
use crate::args::Cli;
use crate::output;
use anyhow::{bail, Result};
use redbloom::kind::Window;
use redbloom::{Builder, StoredParams, WindowBloom};

impl CliKind for Window {
    const FLAG: &'static str = "--window";

    fn chosen(cli: &Cli) -> bool {
        cli.window.is_some()
    }

    fn from_flags(cli: &Cli, key: String) -> Result<Builder<Window>> {
        native_only(cli, Self::FLAG)?;
        let Some(window) = cli.window else {
            bail!("a window filter needs --window DURATION");
        };
        let builder = WindowBloom::builder(key, window).generations(cli.generations.unwrap_or(4));
        match (cli.size.bits, cli.size.capacity, cli.size.fpr) {
            (None, Some(items), Some(fpr)) => {
                Ok(builder.expected_items(items).false_positive_rate(fpr))
            }
            _ => bail!(
                "--window is sized with --capacity N (the most items added in any one window) \
                 and --fpr P, not --bits"
            ),
        }
    }

    fn agrees(cli: &Cli, stored: &StoredParams) -> Result<()> {
        native_only(cli, Self::FLAG)?;
        let millis = |ms: u64| format!("{}s", ms as f64 / 1000.0);
        let given = cli.window.map(|w| millis(w.as_millis() as u64));
        let kept = stored.field("window_ms").and_then(|ms| ms.parse().ok());
        same(stored, "--window", given, kept.map(millis))?;
        let kept = stored.field("generations").and_then(|g| g.parse().ok());
        same(stored, "--generations", cli.generations, kept)?;
        shards_agree(cli, stored)
    }

    fn report(info: redbloom::WindowInfo) -> output::Info {
        output::Info::from(info)
    }
}
