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

    /// Why `import --merge` cannot go into a filter of the kind (`None`: it can), said before
    /// the file is read.
    const NO_MERGE: Option<&'static str> = None;

    /// Whether the flags ask for this kind.
    fn chosen(cli: &Cli) -> bool;

    /// Its builder from the flags, sizes included.
    fn from_flags(cli: &Cli, key: String) -> Result<Builder<Self>>;

    /// `Ok` when the flags given (kind and shape, no sizes) agree with the filter as stored
    /// (or as a snapshot file holds it); else the one line naming the flag that differs.
    fn agrees(cli: &Cli, kept: Kept<'_>) -> Result<()>;

    /// The builder of the size the flags give (`--bits`, or `--capacity` and `--fpr`) and of
    /// the shape `kept` has (its layout, window, growth, shards: flags given for them agree,
    /// [`agrees`](CliKind::agrees)): whose fingerprint is `kept`'s when the sizes agree.
    fn resized(cli: &Cli, kept: Kept<'_>) -> Result<Builder<Self>>;

    /// `builder` (of a filter opened as stored, or as a file holds it) with the kind's flags
    /// that are no parameter of the filter (`--shared-with-go`).
    fn with_switches(cli: &Cli, builder: Builder<Self>) -> Builder<Self> {
        let _ = cli;
        builder
    }

    /// Its info as the command line prints it; `bloom` gives what the info does not say (the
    /// size a filter that does not exist yet will take, a growing filter's levels).
    fn report<C>(bloom: &Bloom<C, Self>, info: Self::Info) -> output::Info;

    /// Adds each item only if it tests absent (`add --if-absent`): only a counting filter can.
    fn add_many_if_absent<C, T>(
        bloom: &Bloom<C, Self>,
        items: &[T],
    ) -> impl Future<Output = redbloom::Result<Vec<bool>>> + Send
    where
        C: ConnectionLike + Clone + Send + Sync,
        T: AsRef<[u8]> + Sync,
    {
        let _ = (bloom, items);
        std::future::ready(Err(redbloom::Error::InvalidConfig(format!(
            "add --if-absent is for counting filters (--counting), whose add counts every time: \
             this is a {} filter, whose add already leaves a present item as it is; drop \
             --if-absent",
            <Self as Kind>::NAME
        ))))
    }

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
            "only a counting filter can remove items".into(),
        )))
    }

    /// The filter built in memory (`build`): only a plain filter can be.
    fn offline(builder: Builder<Self>) -> redbloom::Result<Option<redbloom::OfflineBloom>> {
        let _ = builder;
        Ok(None)
    }

    /// The filter's bits and k when the kind can read a copy of it into memory
    /// ([`memory_copy`](CliKind::memory_copy)): only a plain filter can.
    fn copy_shape<C>(bloom: &Bloom<C, Self>) -> Option<(u64, u32)> {
        let _ = bloom;
        None
    }

    /// The filter's bits read into memory, to answer a large `check` there (the `stream`
    /// module says when); `None` when the kind has no such copy.
    fn memory_copy<C>(
        bloom: &Bloom<C, Self>,
    ) -> impl Future<Output = Option<redbloom::Result<redbloom::OfflineBloom>>> + Send
    where
        C: ConnectionLike + Clone + Send + Sync,
    {
        let _ = bloom;
        std::future::ready(None)
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
            $(if name == <$kind as Kind>::NAME.as_str() {
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

pub(crate) use module::made_elsewhere;

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

/// The parameters the flags must agree with: stored in Redis beside the filter, or held by a
/// snapshot file that `import` reads (SPEC.md §3: it takes every parameter from the file). The
/// lines naming a flag that differs say which.
#[derive(Clone, Copy)]
pub(crate) struct Kept<'a> {
    pub(crate) params: &'a StoredParams,
    /// From a snapshot file's header, not from Redis.
    pub(crate) file: bool,
}

impl<'a> Kept<'a> {
    /// Parameters stored in Redis.
    pub(crate) fn stored(params: &'a StoredParams) -> Self {
        Kept {
            params,
            file: false,
        }
    }

    /// The filter's kind ("unknown": one this version does not know).
    pub(crate) fn kind(&self) -> &'static str {
        self.params.kind().map_or("unknown", |kind| kind.as_str())
    }

    /// The value of `field`.
    pub(crate) fn field(&self, field: &str) -> Option<&'a str> {
        self.params.field(field)
    }

    /// The value of `field`, a number.
    pub(crate) fn number<T: std::str::FromStr>(&self, field: &str) -> Option<T> {
        self.field(field)?.parse().ok()
    }

    /// The shard count (1 when not stored; 0 when not a number).
    pub(crate) fn shards(&self) -> u32 {
        self.field("shards").map_or(Ok(1), str::parse).unwrap_or(0)
    }

    /// A builder of the filter as kept, of kind `K`.
    pub(crate) fn builder<K: CliKind>(&self) -> redbloom::Result<Builder<K>> {
        self.params.builder::<K>()
    }

    /// What holds the filter, as the lines start: "the filter was created" or "the file holds
    /// a filter made".
    pub(crate) fn made(&self) -> &'static str {
        match self.file {
            false => "the filter was created",
            true => "the file holds a filter made",
        }
    }

    /// What leaving a flag out does: "open it as Redis stores it" or "take it from the file".
    pub(crate) fn left_out(&self) -> &'static str {
        match self.file {
            false => "open it as Redis stores it",
            true => "take it from the file",
        }
    }

    /// The parameters, as the lines end: "stored: …" or "file: …".
    pub(crate) fn shown(&self) -> String {
        match self.file {
            false => format!("stored: {}", self.params.fingerprint()),
            true => format!("file: {}", self.params.fingerprint()),
        }
    }
}

/// `Ok` when the kind flag given (if any) is the kind of `kept`; else the line naming it.
pub(crate) fn kind_agrees<K: CliKind>(cli: &Cli, kept: Kept<'_>) -> Result<()> {
    match flag_given(cli) {
        Some(flag) if flag != K::FLAG => Err(other_kind(cli, kept)),
        _ => Ok(()),
    }
}

/// The stored filter (or file) of another kind than the flags ask for: the flag to drop or
/// give.
pub(crate) fn other_kind(cli: &Cli, kept: Kept<'_>) -> anyhow::Error {
    let key = cli.key.as_deref().unwrap_or_default();
    let holds = match kept.file {
        false => format!("{key:?} holds a {} filter", kept.kind()),
        true => format!("the file holds a {} filter", kept.kind()),
    };
    let (left_out, shown) = (kept.left_out(), kept.shown());
    match flag_given(cli) {
        Some(flag) => anyhow::anyhow!(
            "{holds}, not one made with {flag}: drop {flag} to {left_out} ({shown})"
        ),
        None => anyhow::anyhow!(
            "{holds}, not a plain one: leave the size flags out to {left_out}, or give its \
             kind's flags ({shown})"
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
    let kept = Kept::stored(stored);
    if stored.kind().ok() != Some(<K as Kind>::NAME) {
        return other_kind(cli, kept);
    }
    if let Err(named) = K::agrees(cli, kept) {
        return named;
    }
    let requested = err.chain().find_map(|cause| match cause.downcast_ref() {
        Some(redbloom::Error::ParamsMismatch { requested, .. }) => Some(requested.clone()),
        _ => None,
    });
    match requested {
        Some(requested) => size_differs(cli, kept, &requested).unwrap_or(err),
        None => err,
    }
}

/// The line naming the size flags that differ from `kept`'s, where they make a filter of the
/// parameters `requested`: a growing or module filter keeps its `--capacity` and `--fpr`; the
/// others their bits and hashes, which the flags given make otherwise. `None` when no size
/// given differs.
pub(crate) fn size_differs(cli: &Cli, kept: Kept<'_>, requested: &str) -> Option<anyhow::Error> {
    let (made, left_out, shown) = (kept.made(), kept.left_out(), kept.shown());
    for (field, flag, given) in [
        (
            "capacity",
            "--capacity",
            cli.size.capacity.map(|n| n.to_string()),
        ),
        ("fpr", "--fpr", cli.size.fpr.map(|p| p.to_string())),
    ] {
        if let (Some(kept), Some(given)) = (kept.field(field), given) {
            if kept.parse::<f64>().ok() != given.parse::<f64>().ok() {
                return Some(anyhow::anyhow!(
                    "{made} with {flag} {kept}, not {flag} {given}: leave --capacity and --fpr \
                     out to {left_out} ({shown})"
                ));
            }
        }
    }
    let size = |fields: &str| {
        let pick = |name: &str| {
            fields
                .split_whitespace()
                .find_map(|pair| pair.strip_prefix(name)?.strip_prefix('='))
                .map(str::to_owned)
        };
        (pick("bits"), pick("hashes"))
    };
    let (Some(bits), Some(hashes)) = size(kept.params.fingerprint()) else {
        return None;
    };
    let (given_bits, given_hashes) = size(requested);
    if (given_bits.as_deref(), given_hashes.as_deref()) == (Some(&*bits), Some(&*hashes)) {
        return None;
    }
    let flags = match (cli.size.bits, cli.size.capacity, cli.size.fpr) {
        (Some(bits), ..) => format!("--bits {bits}"),
        (None, Some(items), Some(fpr)) => format!("--capacity {items} --fpr {fpr}"),
        _ => return None,
    };
    Some(anyhow::anyhow!(
        "{made} with another size: {bits} bits and {hashes} hashes, where {flags} make {} bits \
         and {} hashes: leave the size flags out to {left_out} ({shown})",
        given_bits.unwrap_or_default(),
        given_hashes.unwrap_or_default(),
    ))
}

/// `Ok` when a flag given agrees with the value kept (stored, or in the file); else the line
/// naming it, with both values.
pub(crate) fn same<T: PartialEq + std::fmt::Display>(
    from: Kept<'_>,
    flag: &str,
    given: Option<T>,
    kept: Option<T>,
) -> Result<()> {
    match (given, kept) {
        (Some(given), Some(kept)) if given != kept => bail!(
            "{} with {flag} {kept}, not {flag} {given}: leave {flag} out to {} ({})",
            from.made(),
            from.left_out(),
            from.shown()
        ),
        _ => Ok(()),
    }
}

/// The shard count given, against the kept one (every kind has shards).
pub(crate) fn shards_agree(cli: &Cli, kept: Kept<'_>) -> Result<()> {
    let given = cli.shards_given.then_some(cli.shards);
    same(kept, "--shards", given, Some(kept.shards()))
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
