//! The window filter on the command line: `--window DURATION [--generations G]`, sized with
//! `--capacity N --fpr P` (the most items added in any one window).

use super::{native_only, same, shards_agree, CliKind};
use crate::args::{duration, duration_text, ranged, Cli, FILTER};
use crate::output;
use anyhow::{bail, Result};
use clap::Args;
use std::time::Duration;
use redbloom::kind::Window;
use redbloom::{Builder, StoredParams, WindowBloom};

/// A window filter's flags.
#[derive(Debug, Args)]
#[group(skip)]
pub(crate) struct Flags {
    /// A window filter: items are found for at least DURATION after their add and forgotten
    /// by DURATION·G/(G-1) (G = --generations), by the Redis server's clock; sized with
    /// --capacity N (the most items added in any one window) and --fpr P. DURATION: seconds,
    /// or numbers with units (90s, 15m, 1h, 7d, 1h30m).
    #[arg(
        long,
        global = true,
        value_name = "DURATION",
        value_parser = duration,
        allow_negative_numbers = true,
        help_heading = FILTER
    )]
    pub(crate) window: Option<Duration>,

    /// With --window: generations live at once, 2..=64 [default: 4]. More forget closer to
    /// the window, at more memory and work per call.
    #[arg(
        long,
        global = true,
        value_name = "G",
        requires = "window",
        value_parser = ranged::<u32>(2, 64),
        allow_negative_numbers = true,
        help_heading = FILTER
    )]
    pub(crate) generations: Option<u32>,
}

impl CliKind for Window {
    const FLAG: &'static str = "--window";

    fn chosen(cli: &Cli) -> bool {
        cli.kinds.window.window.is_some()
    }

    fn from_flags(cli: &Cli, key: String) -> Result<Builder<Window>> {
        native_only(cli, Self::FLAG)?;
        let Some(window) = cli.kinds.window.window else {
            bail!("a window filter needs --window DURATION");
        };
        let generations = cli.kinds.window.generations.unwrap_or(4);
        let builder = WindowBloom::builder(key, window).generations(generations);
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
        let millis = |ms: u64| duration_text(Duration::from_millis(ms));
        let given = cli.kinds.window.window.map(duration_text);
        let kept = stored.field("window_ms").and_then(|ms| ms.parse().ok());
        same(stored, "--window", given, kept.map(millis))?;
        let kept = stored.field("generations").and_then(|g| g.parse().ok());
        same(stored, "--generations", cli.kinds.window.generations, kept)?;
        shards_agree(cli, stored)
    }

    fn report(info: redbloom::WindowInfo) -> output::Info {
        output::Info::from(info)
    }
}
