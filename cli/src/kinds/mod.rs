//! The kinds of filter the command line knows, in one registry (`kinds!` below): each kind's flags,
//! how they make its builder, how they must agree with what Redis stores, and how its info
//! prints, in a file of its own. The commands are written once, generic over the kind.

use crate::args::Cli;
use crate::output;
use anyhow::{bail, Result};
use redbloom::kind::{Kind, Plain};
use redbloom::redis::aio::ConnectionLike;
use redbloom::{Bloom, Builder, StoredParams};
use std::future::Future;

/// A kind of filter as the command line sees it.
pub(crate) trait CliKind: Kind + Sized + Send + Sync {
    /// The flag that asks for the kind (`""`: none, the plain filter).
    const FLAG: &'static str;

    /// Whether the flags ask for this kind.
    fn chosen(cli: &Cli) -> bool;

    /// Its builder from the flags, sizes included.
    fn from_flags(cli: &Cli, key: String) -> Result<Builder<Self>>;

    /// `Ok` when the flags given (kind and shape, no sizes) agree with the filter as stored;
    /// else the one line naming the flag that differs.
    fn agrees(cli: &Cli, stored: &StoredParams) -> Result<()>;

    /// Its info as the command line prints it.
    fn report(info: Self::Info) -> output::Info;

    /// Removes each item once: only a counting filter can.
    fn remove_many<C, T>(
        bloom: &Bloom<C, Self>,
        items: &[T],
    ) -> impl Future<Output = redbloom::Result<Vec<bool>>> + Send
    where
        C: ConnectionLike + Clone + Send + Sync,
        T: AsRef<[u8]> + Sync,
    {
        let _ = (bloom, items);
        std::future::ready(Err(redbloom::Error::InvalidConfig(
            "only a counting filter can remove items: give --counting (or leave the size flags \
             out to open the filter as Redis stores it)"
                .into(),
        )))
    }

    /// The filter built in memory (`build`): only a plain filter can be.
    fn offline(builder: Builder<Self>) -> redbloom::Result<Option<redbloom::OfflineBloom>> {
        let _ = builder;
        Ok(None)
    }

    /// Whether the kind removes items (`unload`).
    fn removes() -> bool {
        false
    }

    /// A line for standard error before a `load`, when the filter's shape will make it much
    /// slower than usual (known without asking the server); `None` when nothing will.
    fn load_note<C>(bloom: &Bloom<C, Self>) -> Option<String> {
        let _ = bloom;
        None
    }
}

/// Something to do with a filter of whichever kind the command line or Redis names: the one
/// place the commands meet the kinds.
pub(crate) trait WithKind {
    type Output;
    fn with<K: CliKind>(self) -> Self::Output;
}

/// The registry: every kind the command line knows (its file under `kinds/` and its type in
/// `redbloom::kind`), in the order its flags are tried. A new kind is one line here.
macro_rules! kinds {
    ($($module:ident: $name:ident),+ $(,)?) => {
        kinds!(@ $($module: redbloom::kind::$name),+);
    };
    (@ $($module:ident: $kind:ty),+) => {
        $(mod $module;)+

        /// Every kind's own flags, each kind's in its file.
        #[derive(Debug, clap::Args)]
        #[group(skip)]
        pub(crate) struct KindFlags {
            $(
                #[command(flatten)]
                pub(crate) $module: $module::Flags,
            )+
        }

        /// `work` with the kind the flags ask for (the plain filter when none).
        pub(crate) fn by_flags<W: WithKind>(cli: &Cli, work: W) -> W::Output {
            $(if <$kind as CliKind>::chosen(cli) {
                return work.with::<$kind>();
            })+
            work.with::<Plain>()
        }

        /// `work` with the kind named `name` (as stored with a filter); `None` for a kind this
        /// version does not know.
        pub(crate) fn by_name<W: WithKind>(name: &str, work: W) -> Option<W::Output> {
            $(if name == <$kind as Kind>::NAME {
                return Some(work.with::<$kind>());
            })+
            None
        }

        /// The flag of the kind the flags ask for, if any.
        pub(crate) fn flag_given(cli: &Cli) -> Option<&'static str> {
            $(if <$kind as CliKind>::chosen(cli) && !<$kind as CliKind>::FLAG.is_empty() {
                return Some(<$kind as CliKind>::FLAG);
            })+
            None
        }
    };
}

kinds! {
    module: Module,
    window: Window,
    counting: Counting,
    growing: Growing,
    plain: Plain,
}

/// Whether the command line gives the filter's size (otherwise it opens as Redis stores it).
pub(crate) fn sized(cli: &Cli) -> bool {
    cli.size.bits.is_some() || cli.size.capacity.is_some() || cli.size.fpr.is_some()
}

/// The stored filter of another kind than the flags ask for: the flag to drop or give.
pub(crate) fn other_kind(cli: &Cli, stored: &StoredParams) -> anyhow::Error {
    let key = cli.key.as_deref().unwrap_or_default();
    match flag_given(cli) {
        Some(flag) => anyhow::anyhow!(
            "{key:?} holds a {} filter, not one made with {flag}: drop {flag} to open it as \
             stored (stored: {})",
            stored.kind(),
            stored.fingerprint()
        ),
        None => anyhow::anyhow!(
            "{key:?} holds a {} filter, not a plain one: leave the size flags out to open it as \
             stored, or give its kind's flags (stored: {})",
            stored.kind(),
            stored.fingerprint()
        ),
    }
}

/// Whether `err` is the library's refusal of a filter stored with other parameters.
pub(crate) fn is_mismatch(err: &anyhow::Error) -> bool {
    err.chain().any(|cause| {
        matches!(
            cause.downcast_ref::<redbloom::Error>(),
            Some(redbloom::Error::ParamsMismatch { .. })
        )
    })
}

/// `err` (a [`is_mismatch`] refusal of the filter the flags describe) in the flags' words: the
/// kind's flag, the kind's own flags (`--window`, `--generations`, `--growth`, `--shards`) or
/// the size that differ, what the filter was created with, and that leaving them out opens it
/// as Redis stores it.
pub(crate) fn mismatch<K: CliKind>(
    cli: &Cli,
    stored: &StoredParams,
    err: anyhow::Error,
) -> anyhow::Error {
    if stored.kind() != <K as Kind>::NAME {
        return other_kind(cli, stored);
    }
    if let Err(named) = K::agrees(cli, stored) {
        return named;
    }
    let key = cli.key.as_deref().unwrap_or_default();
    // The size: a growing filter stores its --capacity and --fpr; the others their bits and
    // hashes, which the flags given made otherwise.
    for (field, flag, given) in [
        (
            "capacity",
            "--capacity",
            cli.size.capacity.map(|n| n.to_string()),
        ),
        ("fpr", "--fpr", cli.size.fpr.map(|p| p.to_string())),
    ] {
        if let (Some(kept), Some(given)) = (stored.field(field), given) {
            if kept.parse::<f64>().ok() != given.parse::<f64>().ok() {
                return anyhow::anyhow!(
                    "{key:?} was created with {flag} {kept}, not {flag} {given}: leave                      --capacity and --fpr out to open it as Redis stores it (stored: {})",
                    stored.fingerprint()
                );
            }
        }
    }
    let requested = err.chain().find_map(|cause| match cause.downcast_ref() {
        Some(redbloom::Error::ParamsMismatch { requested, .. }) => Some(requested.clone()),
        _ => None,
    });
    let size = |fields: &str| {
        let pick = |name: &str| {
            fields
                .split_whitespace()
                .find_map(|pair| pair.strip_prefix(name)?.strip_prefix('='))
                .map(str::to_owned)
        };
        (pick("bits"), pick("hashes"))
    };
    let kept = size(stored.fingerprint());
    let (Some(requested), (Some(bits), Some(hashes))) = (requested, kept.clone()) else {
        return err;
    };
    if size(&requested) == kept {
        return err;
    }
    let flags = match (cli.size.bits, cli.size.capacity, cli.size.fpr) {
        (Some(bits), ..) => format!("--bits {bits}"),
        (None, Some(items), Some(fpr)) => format!("--capacity {items} --fpr {fpr}"),
        _ => return err,
    };
    let (given_bits, given_hashes) = size(&requested);
    anyhow::anyhow!(
        "{key:?} was created with another size: {bits} bits and {hashes} hashes, where          {flags} make {} bits and {} hashes: leave the size flags out to open it as Redis          stores it (stored: {})",
        given_bits.unwrap_or_default(),
        given_hashes.unwrap_or_default(),
        stored.fingerprint()
    )
}

/// `Ok` when a flag given agrees with the value stored; else the line naming it.
pub(crate) fn same<T: PartialEq + std::fmt::Display>(
    stored: &StoredParams,
    flag: &str,
    given: Option<T>,
    kept: Option<T>,
) -> Result<()> {
    match (given, kept) {
        (Some(given), Some(kept)) if given != kept => bail!(
            "the filter was created with {flag} {kept}, not {flag} {given}: leave {flag} out to \
             open it as Redis stores it (stored: {})",
            stored.fingerprint()
        ),
        _ => Ok(()),
    }
}

/// The shard count and layout given, against the stored ones (every kind has shards).
pub(crate) fn shards_agree(cli: &Cli, stored: &StoredParams) -> Result<()> {
    let given = cli.shards_given.then_some(cli.shards);
    let kept = Some(
        stored
            .field("shards")
            .map_or(Ok(1), str::parse)
            .unwrap_or(0),
    );
    same(stored, "--shards", given, kept)
}

/// Window, counting and growing filters use the native layout: `--layout gozero` or
/// `--shared-with-go` with `flag` is refused.
pub(crate) fn native_only(cli: &Cli, flag: &str) -> Result<()> {
    if cli.layout_given && cli.kinds.plain.layout != redbloom::Layout::Native {
        bail!("{flag} filters use the native layout; drop --layout gozero");
    }
    if cli.kinds.plain.shared_with_go {
        bail!("{flag} filters are not go-zero's; drop --shared-with-go");
    }
    Ok(())
}
