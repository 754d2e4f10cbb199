//! The plain filter on the command line: no kind flag; `--bits N` (go-zero's layout) or
//! `--capacity N --fpr P`, `--layout`.

use super::{same, shards_agree, CliKind};
use crate::args::Cli;
use crate::output;
use anyhow::{bail, Result};
use redbloom::kind::Plain;
use redbloom::{Builder, Layout, RedisBloom, StoredParams};

impl CliKind for Plain {
    const FLAG: &'static str = "";

    fn chosen(_: &Cli) -> bool {
        false
    }

    fn from_flags(cli: &Cli, key: String) -> Result<Builder<Plain>> {
        let (size, layout) = (&cli.size, cli.layout);
        let builder = RedisBloom::builder(key).layout(layout);
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
        let given = cli.layout_given.then(|| layout(&cli.layout.to_string()));
        same(
            stored,
            "--layout",
            given,
            stored.field("layout").map(layout),
        )?;
        shards_agree(cli, stored)
    }

    fn report(info: redbloom::FilterInfo) -> output::Info {
        output::Info::from(info)
    }

    fn offline(builder: Builder<Plain>) -> redbloom::Result<Option<redbloom::OfflineBloom>> {
        builder.build_offline().map(Some)
    }
}
