//! The plain filter on the command line: no kind flag; `--bits N` (go-zero's layout) or
//! `--capacity N --fpr P`, `--layout`.

use super::{same, shards_agree, CliKind};
use crate::args::{Cli, FILTER};
use crate::output;
use anyhow::{bail, Result};
use clap::builder::{PossibleValuesParser, TypedValueParser};
use clap::Args;
use redbloom::kind::Plain;
use redbloom::{Builder, Layout, RedisBloom, StoredParams};

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
        let (size, layout) = (&cli.size, cli.kinds.plain.layout);
        let builder = RedisBloom::builder(key)
            .layout(layout)
            .shared_with_go(cli.kinds.plain.shared_with_go);
        Ok(match (size.bits, size.capacity, size.fpr) {
            (Some(_), None, None) if layout == Layout::Native => {
                bail!("--layout native is sized with --capacity N --fpr P, not --bits")
            }
            (Some(bits), None, None) => builder.bits(bits),
            (None, Some(items), Some(fpr)) => {
                builder.expected_items(items).false_positive_rate(fpr)
            }
            _ => bail!("give the filter's size: --bits N, or --capacity N with --fpr P"),
        })
    }

    fn agrees(cli: &Cli, stored: &StoredParams) -> Result<()> {
        let layout = |name: &str| match name {
            "gozero" => "gozero",
            _ => "native",
        };
        let given = cli
            .layout_given
            .then(|| layout(&cli.kinds.plain.layout.to_string()));
        same(
            stored,
            "--layout",
            given,
            stored.field("layout").map(layout),
        )?;
        if cli.kinds.plain.shared_with_go && stored.field("layout") != Some("gozero") {
            bail!(
                "--shared-with-go is for go-zero filters; the filter stores {}",
                stored.fingerprint()
            );
        }
        shards_agree(cli, stored)
    }

    fn report(info: redbloom::FilterInfo) -> output::Info {
        output::Info::from(info)
    }

    fn offline(builder: Builder<Plain>) -> redbloom::Result<Option<redbloom::OfflineBloom>> {
        builder.build_offline().map(Some)
    }
}
