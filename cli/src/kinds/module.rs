//! The module filter on the command line: `--module`, the server's own Bloom filter (`BF.*`),
//! sized with `--capacity N --fpr P` (`BF.RESERVE`'s capacity and error rate), `--growth F`
//! optional (its `EXPANSION`). What the module cannot do is refused with one line each.

use super::{same, shards_agree, CliKind, Kept};
use crate::args::{duration_text, Cli, FILTER};
use crate::{config, output};
use anyhow::{bail, Result};
use clap::Args;
use redbloom::kind::Module;
use redbloom::redis::aio::ConnectionLike;
use redbloom::{Bloom, Builder, ModuleBloom, ModuleParams};
use std::time::Duration;

/// A module filter's flags.
#[derive(Debug, Args)]
#[group(skip)]
pub(crate) struct Flags {
    /// The server's own Bloom filter (BF.*: Redis 8, RedisBloom, valkey-bloom), shared with
    /// every client of BF.ADD and BF.EXISTS: made with BF.RESERVE KEY P N from --fpr P and
    /// --capacity N (with EXPANSION F given --growth F); a filter another client made is read,
    /// and written when BF.INFO agrees with the flags. With --window DURATION [--generations
    /// G]: G module filters, one per generation of the server's clock, each expiring by
    /// itself. Not with --counting, --layout or --near-cache.
    #[arg(long, global = true, help_heading = FILTER)]
    pub(crate) module: bool,
}

/// Why `import --merge` of a module filter's file is refused.
const NO_MERGE: &str = "a module filter's snapshot holds the module's dump chunks, not items \
                        (import it whole, or load the items)";

impl CliKind for Module {
    const FLAG: &'static str = "--module";
    const NO_MERGE: Option<&'static str> = Some(NO_MERGE);

    fn chosen(cli: &Cli) -> bool {
        cli.kinds.module.module
    }

    fn from_flags(cli: &Cli, key: String) -> Result<Builder<Module>> {
        refusals(cli)?;
        let builder = sized(cli, ModuleBloom::builder(key))?;
        let builder = match cli.kinds.growing.growth {
            Some(growth) => builder.growth(growth),
            None => builder,
        };
        Ok(match cli.kinds.window.window {
            Some(window) => {
                let builder = builder.window(window);
                match cli.kinds.window.generations {
                    Some(generations) => builder.generations(generations),
                    None => builder,
                }
            }
            None => builder,
        })
    }

    fn agrees(cli: &Cli, kept: Kept<'_>) -> Result<()> {
        refusals(cli)?;
        // Stored as a number, or "default" (the module's own expansion).
        let given = cli.kinds.growing.growth.map(|g| g.to_string());
        same(kept, "--growth", given, kept.field("growth").map(str::to_owned))?;
        window_agrees(cli, kept)?;
        shards_agree(cli, kept)
    }

    fn resized(cli: &Cli, kept: Kept<'_>) -> Result<Builder<Module>> {
        let builder = sized(cli, ModuleBloom::builder(config::key(cli)?))?;
        let builder = match kept.number("growth") {
            Some(growth) => builder.growth(growth),
            None => builder,
        };
        let builder = match kept.number("window_ms") {
            Some(ms) => builder
                .window(Duration::from_millis(ms))
                .generations(kept.number("generations").unwrap_or(0)),
            None => builder,
        };
        Ok(builder.shards(kept.shards()))
    }

    fn report<C>(bloom: &Bloom<C, Module>, info: redbloom::ModuleInfo) -> output::Info {
        let exists = info.ttl != redbloom::KeyTtl::Missing;
        let info = output::Info {
            key: info.key,
            bits: None,
            k: None,
            bits_set: None,
            bytes: info.bytes,
            estimated_items: Some(info.items),
            estimated_fpr: info.false_positive_rate,
            ttl_seconds: info.ttl.as_secs(),
            exists,
            planned_bytes: None,
            planned: None,
            window_seconds: info.window.map(|w| w.as_secs_f64()),
            generations: info.generations,
            parts: None,
            counters_in_use: None,
            counters_saturated: None,
            levels: None,
            capacity: Some(info.capacity),
            items: Some(info.items),
            max_levels: None,
            level_sizes: None,
            filters: Some(info.filters),
            expansion: info.expansion,
        };
        let shards = match bloom.shards() {
            1 => String::new(),
            n => format!(" in each of {n} shards (capacity {} each)", bloom.capacity().div_ceil(u64::from(n))),
        };
        let planned = format!(
            "BF.RESERVE will make it{shards}: capacity {}, error rate {}{} (the module sizes \
             its bits)",
            bloom.capacity(),
            output::rate(bloom.false_positive_rate()),
            bloom
                .growth()
                .map_or_else(String::new, |growth| format!(", expansion {growth}"))
        );
        info.planned(None, planned)
    }
}

/// `builder` sized by the flags: `--capacity N --fpr P`.
fn sized(cli: &Cli, builder: Builder<Module>) -> Result<Builder<Module>> {
    match (cli.size.bits, cli.size.capacity, cli.size.fpr) {
        (None, Some(items), Some(fpr)) => Ok(builder.expected_items(items).false_positive_rate(fpr)),
        _ => bail!(
            "--module is sized with --capacity N --fpr P (BF.RESERVE's capacity and error rate), \
             not --bits: the module sizes its own bits"
        ),
    }
}

/// The builder of the module filter another client made at `key` (it stores no parameters:
/// `None` when the key holds no module filter), with the capacity, error rate and expansion
/// the server reports ([`ModuleParams`]); the flags given must agree with them (SPEC.md §7).
pub(crate) async fn made_elsewhere<C: ConnectionLike>(
    cli: &Cli,
    key: &str,
    conn: &mut C,
) -> Result<Option<Builder<Module>>> {
    // What the key holds first: a server without the module has no BF.INFO to ask.
    let found: String = redis::cmd("TYPE").arg(key).query_async(conn).await?;
    if !redbloom::MODULE_KEY_TYPES.contains(&found.as_str()) {
        return Ok(None);
    }
    let Some(found) = ModuleParams::read(conn, key).await? else {
        return Ok(None);
    };
    refusals(cli)?;
    let described = describe(key, &found);
    if cli.kinds.window.window.is_some() || cli.shards_given && cli.shards != 1 {
        bail!(
            "{described}: one key, without a window or shards; drop --window, --generations and \
             --shards"
        );
    }
    let growth = cli.kinds.growing.growth;
    match (growth, found.expansion) {
        (Some(growth), Some(expansion)) if growth != expansion => bail!(
            "{described}: --growth {growth} disagrees with its expansion={expansion}; leave \
             --growth out to open it as the server reports it"
        ),
        (Some(growth), None) => bail!(
            "{described}: it does not scale, so --growth {growth} disagrees; leave --growth out \
             to open it as the server reports it"
        ),
        _ => {}
    }
    let capacity = match (cli.size.capacity, found.capacity) {
        (Some(given), Some(capacity)) if given != capacity => bail!(
            "{described}: --capacity {given} disagrees with its capacity {capacity}; leave \
             --capacity and --fpr out to open it as the server reports it"
        ),
        (_, Some(capacity)) => capacity,
        (Some(given), None) => given,
        (None, None) => bail!(
            "{described}: the server does not say its first capacity (BF.INFO's {} is the sum \
             of its sub-filters'); give --capacity N --fpr P as it was made",
            found.total_capacity
        ),
    };
    let fpr = match (cli.size.fpr, found.false_positive_rate) {
        (Some(given), Some(rate)) if (given - rate).abs() > rate * 1e-9 => bail!(
            "{described}: --fpr {given} disagrees with its error rate {rate}; leave --capacity \
             and --fpr out to open it as the server reports it"
        ),
        (_, Some(rate)) => rate,
        (Some(given), None) => {
            eprintln!(
                "note: {described}: the server reports no error rate (neither BF.INFO nor a \
                 BF.SCANDUMP header), so --fpr {given} cannot be checked"
            );
            given
        }
        (None, None) => bail!(
            "{described}: the server reports no error rate (neither BF.INFO nor a BF.SCANDUMP \
             header); give --capacity N --fpr P as it was made"
        ),
    };
    let builder = ModuleBloom::builder(key)
        .expected_items(capacity)
        .false_positive_rate(fpr);
    Ok(Some(match growth {
        Some(growth) => builder.growth(growth),
        None => builder,
    }))
}

/// A module filter another client made, as the server reports it, for the lines that name a
/// flag that disagrees.
fn describe(key: &str, found: &ModuleParams) -> String {
    let capacity = found
        .capacity
        .map_or_else(|| "?".to_owned(), |n| n.to_string());
    let rate = found
        .false_positive_rate
        .map_or_else(|| "not reported".to_owned(), output::rate);
    let expansion = found
        .expansion
        .map_or_else(|| "nonscaling".to_owned(), |e| format!("expansion={e}"));
    format!(
        "{key:?} is a module filter another client made (no parameters stored; the server \
         reports capacity {capacity}, error rate {rate}, {expansion}, {} sub-filters)",
        found.filters
    )
}

/// What the module cannot do, each refused with one line naming why (SPEC.md §7).
fn refusals(cli: &Cli) -> Result<()> {
    if cli.kinds.counting.counting {
        bail!(
            "--counting cannot go with --module: the module's Bloom filter does not count (its \
             cuckoo filter is another structure); drop one of them"
        );
    }
    if cli.layout_given {
        bail!("--layout cannot go with --module: the server hashes items its own way; drop --layout");
    }
    if cli.kinds.plain.shared_with_go {
        bail!("--shared-with-go cannot go with --module: a module filter is not go-zero's");
    }
    if cli.near_cache.is_some() {
        bail!(
            "--near-cache cannot go with --module: the server hashes items its own way, so a \
             copy in this process could not answer for it"
        );
    }
    Ok(())
}

/// `--window` and `--generations` against the stored filter's window (or its lack of one).
fn window_agrees(cli: &Cli, from: Kept<'_>) -> Result<()> {
    let kept = from.number("window_ms").map(Duration::from_millis);
    let given = cli.kinds.window.window;
    let (made, left_out, shown) = (from.made(), from.left_out(), from.shown());
    match (given, kept) {
        (Some(_), None) => bail!(
            "{made} without --window: drop --window (and --generations) to {left_out} ({shown})"
        ),
        // A file gives what the flags leave out.
        (None, Some(kept)) if super::sized(cli) && !from.file => bail!(
            "{made} with --window {}: give it, or leave the size flags out to {left_out} \
             ({shown})",
            duration_text(kept),
        ),
        _ => {}
    }
    same(from, "--window", given.map(duration_text), kept.map(duration_text))?;
    let kept = from.number("generations");
    same(from, "--generations", cli.kinds.window.generations, kept)
}
