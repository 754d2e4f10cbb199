//! The plain filter on the command line: no kind flag; `--bits N` (go-zero's layout) or
//! `--capacity N --fpr P`, `--layout`.

use super::{same, shards_agree, CliKind, Kept};
use crate::args::{Cli, FILTER};
use crate::{config, output};
use anyhow::{bail, Result};
use clap::builder::{PossibleValuesParser, TypedValueParser};
use clap::Args;
use redbloom::kind::Plain;
use redbloom::redis::aio::ConnectionLike;
use redbloom::{Bloom, Builder, Layout, OfflineBloom, RedisBloom};

/// A plain filter's flags.
#[derive(Debug, Args)]
#[group(skip)]
pub(crate) struct Flags {
    /// How items map to bits: go-zero's (k = 14, shared with Go services) or the native layout
    /// (k from the rate, parameters stored with the filter; sized with --capacity and --fpr).
    #[arg(
        long,
        global = true,
        value_name = "LAYOUT",
        default_value_t = Layout::GoZero,
        value_parser = PossibleValuesParser::new(["gozero", "native"])
            .try_map(|name| name.parse::<Layout>()),
        help_heading = FILTER
    )]
    pub(crate) layout: Layout,

    /// The key may hold a go-zero filter that a Go service wrote (it stores no parameters):
    /// write into it, clear it, import over it. Without this, such a key, which may as well be
    /// another program's string, is only read.
    #[arg(long, global = true, help_heading = FILTER)]
    pub(crate) shared_with_go: bool,
}

impl CliKind for Plain {
    const FLAG: &'static str = "";

    fn chosen(_: &Cli) -> bool {
        false
    }

    fn from_flags(cli: &Cli, key: String) -> Result<Builder<Plain>> {
        let layout = cli.kinds.plain.layout;
        let builder = RedisBloom::builder(key).layout(layout);
        Ok(Self::with_switches(cli, sized(cli, layout, builder)?))
    }

    fn agrees(cli: &Cli, kept: Kept<'_>) -> Result<()> {
        let layout = |name: &str| match name {
            "gozero" => "gozero",
            _ => "native",
        };
        let given = cli
            .layout_given
            .then(|| layout(&cli.kinds.plain.layout.to_string()));
        same(kept, "--layout", given, kept.field("layout").map(layout))?;
        if cli.kinds.plain.shared_with_go && kept.field("layout") != Some("gozero") {
            bail!(
                "--shared-with-go is for go-zero filters; {} with --layout native ({})",
                kept.made(),
                kept.shown()
            );
        }
        shards_agree(cli, kept)
    }

    fn resized(cli: &Cli, kept: Kept<'_>) -> Result<Builder<Plain>> {
        let layout = match kept.field("layout") {
            Some("gozero") => Layout::GoZero,
            _ => Layout::Native,
        };
        let builder = RedisBloom::builder(config::key(cli)?).layout(layout);
        Ok(sized(cli, layout, builder)?.shards(kept.shards()))
    }

    fn copy_shape<C>(bloom: &Bloom<C, Plain>) -> Option<(u64, u32)> {
        Some((bloom.bits(), bloom.hashes()))
    }

    async fn memory_copy<C>(bloom: &Bloom<C, Plain>) -> Option<redbloom::Result<OfflineBloom>>
    where
        C: ConnectionLike + Clone + Send + Sync,
    {
        Some(bloom.read_offline().await)
    }

    fn with_switches(cli: &Cli, builder: Builder<Plain>) -> Builder<Plain> {
        builder.shared_with_go(cli.kinds.plain.shared_with_go)
    }

    fn report<C>(bloom: &Bloom<C, Plain>, info: redbloom::FilterInfo) -> output::Info {
        let (bits, k) = (bloom.bits(), bloom.hashes());
        let (bytes, planned) = in_keys(bits, bloom.shards(), 8, "bits");
        output::Info::from(info).planned(Some(bytes), format!("{planned}, k = {k}"))
    }

    fn offline(builder: Builder<Plain>) -> redbloom::Result<Option<redbloom::OfflineBloom>> {
        builder.build_offline().map(Some)
    }
}

/// `builder` sized by the flags: `--bits N` (go-zero's layout) or `--capacity N --fpr P`.
fn sized(cli: &Cli, layout: Layout, builder: Builder<Plain>) -> Result<Builder<Plain>> {
    let size = &cli.size;
    Ok(match (size.bits, size.capacity, size.fpr) {
        (Some(_), None, None) if layout == Layout::Native => {
            bail!("--layout native is sized with --capacity N --fpr P, not --bits")
        }
        (Some(bits), None, None) => builder.bits(bits),
        (None, Some(items), Some(fpr)) => builder.expected_items(items).false_positive_rate(fpr),
        _ => bail!("give the filter's size: --bits N, or --capacity N with --fpr P"),
    })
}

/// The bytes `cells` cells of `per_byte` to a byte take over `shards` keys, and how, in words:
/// "9586 bits (1.2 kB)", or "9588 bits over 3 shards of 3196 bits (400 bytes) each".
pub(super) fn in_keys(cells: u64, shards: u32, per_byte: u64, unit: &str) -> (u64, String) {
    let shards = u64::from(shards.max(1));
    let each = cells.div_ceil(shards);
    let key_bytes = each.div_ceil(per_byte);
    let total = key_bytes * shards;
    let text = match shards {
        1 => format!("{cells} {unit} ({})", output::bytes(total)),
        n => format!(
            "{cells} {unit} over {n} shards of {each} {unit} ({}) each, {} in all",
            output::bytes(key_bytes),
            output::bytes(total)
        ),
    };
    (total, text)
}
