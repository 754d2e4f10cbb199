//! The window filter on the command line: `--window DURATION [--generations G]`, sized with
//! `--capacity N --fpr P` (the most items added in any one window).

use super::plain::in_keys;
use super::{native_only, same, shards_agree, CliKind, Kept};
use crate::args::{duration, duration_text, ranged, Cli, FILTER};
use crate::{config, output};
use anyhow::{bail, Result};
use clap::Args;
use redbloom::kind::Window;
use redbloom::{Bloom, Builder, WindowBloom};
use std::time::Duration;

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
        sized(cli, WindowBloom::builder(key, window).generations(generations))
    }

    fn agrees(cli: &Cli, kept: Kept<'_>) -> Result<()> {
        native_only(cli, Self::FLAG)?;
        let millis = |ms: u64| duration_text(Duration::from_millis(ms));
        let given = cli.kinds.window.window.map(duration_text);
        same(kept, "--window", given, kept.number("window_ms").map(millis))?;
        let generations = kept.number("generations");
        same(kept, "--generations", cli.kinds.window.generations, generations)?;
        shards_agree(cli, kept)
    }

    fn resized(cli: &Cli, kept: Kept<'_>) -> Result<Builder<Window>> {
        let window = Duration::from_millis(kept.number("window_ms").unwrap_or(0));
        let builder = WindowBloom::builder(config::key(cli)?, window)
            .generations(kept.number("generations").unwrap_or(0));
        Ok(sized(cli, builder)?.shards(kept.shards()))
    }

    fn report<C>(bloom: &Bloom<C, Window>, info: redbloom::WindowInfo) -> output::Info {
        let (bits, k, generations) = (bloom.bits(), bloom.hashes(), bloom.generations());
        let (bytes, each) = in_keys(bits, bloom.shards(), 8, "bits");
        let planned = format!(
            "each generation up to {each}, k = {k}; up to {generations} generations live, at \
             most {} (its memory follows the items of the live generations)",
            output::bytes(bytes * u64::from(generations))
        );
        let most = bytes * u64::from(generations);
        output::Info::from(info).planned(Some(most), planned)
    }
}

/// `builder` sized by the flags: `--capacity N --fpr P`.
fn sized(cli: &Cli, builder: Builder<Window>) -> Result<Builder<Window>> {
    match (cli.size.bits, cli.size.capacity, cli.size.fpr) {
        (None, Some(items), Some(fpr)) => Ok(builder.expected_items(items).false_positive_rate(fpr)),
        _ => bail!(
            "--window is sized with --capacity N (the most items added in any one window) and \
             --fpr P, not --bits"
        ),
    }
}
