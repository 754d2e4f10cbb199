//! The growing filter on the command line: `--growth F`, sized with `--capacity N` (the first
//! level's items) and `--fpr P` (the bound over every level).

use super::{native_only, same, shards_agree, CliKind};
use crate::args::{ranged, Cli, FILTER};
use crate::output;
use anyhow::{bail, Result};
use clap::Args;
use redbloom::kind::Growing;
use redbloom::redis::aio::ConnectionLike;
use redbloom::{Bloom, Builder, GrowingBloom, StoredParams};

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

    async fn load_note<C>(bloom: &Bloom<C, Growing>) -> redbloom::Result<Option<String>>
    where
        C: ConnectionLike + Clone + Send + Sync,
    {
        let newest = (bloom.info().await?.levels as usize).saturating_sub(1);
        let levels = bloom.levels();
        if levels.get(newest).is_none_or(|level| level.dense) {
            return Ok(None);
        }
        let bytes: Vec<u64> = levels[..=newest].iter().map(|l| l.bits / 8).collect();
        Ok(Some(slow_level(&bytes, bloom.shards())))
    }
}

/// The note for a load whose batches go item by item: into the last of levels of `bytes`
/// bytes a shard, past what a batch merges whole (a level of 16 MiB, 64 MiB with those
/// before it).
fn slow_level(bytes: &[u64], shards: u32) -> String {
    let (newest, all) = (bytes.last().copied().unwrap_or(0), bytes.iter().sum::<u64>());
    // Shards split the items, so each shard's levels shrink about as many times.
    let times = newest.div_ceil(16 << 20).max(all.div_ceil(64 << 20));
    let more = u64::from(shards).saturating_mul(times.next_power_of_two());
    let mb = |bytes: u64| bytes as f64 / 1e6;
    let past = match bytes.len() {
        1 => format!("level 0 of this filter takes {:.1} MB a shard, past the 16 MiB", mb(newest)),
        n => format!(
            "level {} of this filter takes {:.1} MB a shard ({:.1} MB with the levels before \
             it), past the 16 MiB a level (64 MiB with those before it)",
            n - 1,
            mb(newest),
            mb(all)
        ),
    };
    format!(
        "note: {past} a batch merges whole: this load adds item by item, about ten times \
         slower; a filter made with --shards {more} keeps its levels small enough"
    )
}

#[cfg(test)]
mod tests {
    use super::slow_level;

    #[test]
    fn the_note_names_the_level_and_enough_shards() {
        let mib = 1 << 20;
        let note = slow_level(&[26_500_000], 1);
        assert!(
            note.contains("level 0 of this filter takes 26.5 MB a shard, past the 16 MiB a"),
            "{note}"
        );
        assert!(note.contains("--shards 2 "), "{note}");
        // Levels of 16 MiB at most, 80 MiB together: the sum asks for two shards more.
        let note = slow_level(&[16 * mib, 16 * mib, 16 * mib, 16 * mib, 16 * mib], 2);
        assert!(note.contains("level 4 of this filter takes 16.8 MB a shard (83.9 MB with"));
        assert!(note.contains("--shards 4 "), "{note}");
    }
}
