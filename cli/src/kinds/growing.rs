//! The growing filter on the command line: `--growth F`, sized with `--capacity N` (the first
//! level's items) and `--fpr P` (the bound over every level).

use super::plain::in_keys;
use super::{native_only, same, shards_agree, CliKind, Kept};
use crate::args::{ranged, Cli, FILTER};
use crate::{config, output};
use anyhow::{bail, Result};
use clap::Args;
use redbloom::kind::Growing;
use redbloom::{Bloom, Builder, GrowingBloom, GrowingLevel};

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

/// `builder` sized by the flags: `--capacity N --fpr P`.
fn sized(cli: &Cli, builder: Builder<Growing>) -> Result<Builder<Growing>> {
    match (cli.size.bits, cli.size.capacity, cli.size.fpr) {
        (None, Some(items), Some(fpr)) => Ok(builder.expected_items(items).false_positive_rate(fpr)),
        _ => bail!(
            "--growth is sized with --capacity N (the first level's items) and --fpr P, not --bits"
        ),
    }
}

impl CliKind for Growing {
    const FLAG: &'static str = "--growth";
    const NO_MERGE: Option<&'static str> = Some(
        "a growing filter's file cannot be merged into it (its levels and counts do not add \
         up): import it whole, or load its items",
    );

    fn chosen(cli: &Cli) -> bool {
        cli.kinds.growing.growth.is_some()
    }

    fn from_flags(cli: &Cli, key: String) -> Result<Builder<Growing>> {
        native_only(cli, Self::FLAG)?;
        let Some(growth) = cli.kinds.growing.growth else {
            bail!("a growing filter needs --growth F");
        };
        sized(cli, GrowingBloom::builder(key).growth(growth))
    }

    fn agrees(cli: &Cli, kept: Kept<'_>) -> Result<()> {
        native_only(cli, Self::FLAG)?;
        same(kept, "--growth", cli.kinds.growing.growth, kept.number("growth"))?;
        shards_agree(cli, kept)
    }

    fn resized(cli: &Cli, kept: Kept<'_>) -> Result<Builder<Growing>> {
        let builder = GrowingBloom::builder(config::key(cli)?)
            .growth(kept.number("growth").unwrap_or(0))
            .tightening(kept.number("tightening").unwrap_or(0.0));
        Ok(sized(cli, builder)?.shards(kept.shards()))
    }

    fn report<C>(bloom: &Bloom<C, Growing>, info: redbloom::GrowingInfo) -> output::Info {
        let shards = u64::from(bloom.shards());
        let made = info.levels.max(1) as usize;
        let sizes: Vec<output::LevelSize> = bloom
            .levels()
            .iter()
            .take(made)
            .enumerate()
            .map(|(level, shape)| output::LevelSize {
                level: level as u32,
                capacity: shape.capacity * shards,
                bits: shape.bits * shards,
                k: shape.words_per_item * shape.bits_per_word,
                fpr: shape.false_positive_rate,
            })
            .collect();
        let planned = bloom.levels().first().map(|first| {
            let k = first.words_per_item * first.bits_per_word;
            let (bytes, each) = in_keys(first.bits * shards, bloom.shards(), 8, "bits");
            let planned = format!(
                "its first level takes {each}, k = {k}, for {} items; each level after it \
                 takes {} times the items of the one before, at a tighter rate (up to {} \
                 levels)",
                first.capacity * shards,
                bloom.growth(),
                bloom.max_levels()
            );
            (bytes, planned)
        });
        let info = output::Info::from(info);
        let info = match (info.exists, sizes.first()) {
            // Not made yet: the size its first level will have.
            (false, Some(first)) => output::Info {
                bits: Some(first.bits),
                k: Some(first.k),
                ..info
            },
            _ => info,
        };
        let info = output::Info {
            level_sizes: Some(sizes),
            ..info
        };
        match planned {
            Some((bytes, planned)) => info.planned(Some(bytes), planned),
            None => info,
        }
    }

    /// When the first level does not merge, no level does: every batch goes item by item.
    /// (A filter whose later levels pass the bound, after millions of items, is not asked
    /// about: which level is the newest takes a round trip, and `info` counts every bit.)
    fn load_note<C>(bloom: &Bloom<C, Growing>) -> Option<String> {
        let first = *bloom.levels().first()?;
        (!first.dense).then(|| slow_level(first.bits / 8, bloom.shards()))
    }
}

/// The note for a load into a filter whose first level takes `bytes` bytes a shard, past
/// [`GrowingLevel::MAX_DENSE_BYTES`]: its batches go item by item.
fn slow_level(bytes: u64, shards: u32) -> String {
    let most = GrowingLevel::MAX_DENSE_BYTES;
    // Shards split the items, so each shard's levels shrink about as many times.
    let more = u64::from(shards).saturating_mul(bytes.div_ceil(most).next_power_of_two());
    format!(
        "note: level 0 of this filter takes {:.1} MB a shard, past the {} MiB a batch merges \
         whole: this load adds item by item, about ten times slower; a filter made with \
         --shards {more} keeps its levels small enough",
        bytes as f64 / 1e6,
        most >> 20
    )
}

#[cfg(test)]
mod tests {
    use super::slow_level;

    #[test]
    fn the_note_names_the_level_and_enough_shards() {
        let note = slow_level(26_500_000, 1);
        assert!(
            note.contains("level 0 of this filter takes 26.5 MB a shard, past the 16 MiB a"),
            "{note}"
        );
        assert!(note.contains("--shards 2 "), "{note}");
        // 40 MiB a shard over 2 shards: 3 times past, so 4 times the shards.
        assert!(slow_level(40 << 20, 2).contains("--shards 8 "));
    }
}
