//! Windows over module filters (SPEC.md §7): G module filters, one per generation, named by
//! the epoch of the server's clock as a window filter's generations are (SPEC.md §4 "window",
//! `src/kinds/window/`), each made with `BF.RESERVE` and its absolute expiry (`PEXPIREAT`, the
//! moment it leaves the window) in the one step that makes it, and listed in the part's ledger
//! of generations made, so that a live generation deleted by hand is [`Error::Lost`].
//!
//! The scripts share the window kind's head (`lua/window_args.lua`: the keys around the
//! client's guess of the epoch, the ledger; `lua/window_epoch.lua`: the server's clock, and
//! the refusal of a guess more than one generation off) and add their own
//! (`lua/module_window_*.lua`): an add `BF.MADD`s into the current generation and asks the
//! older live ones (`BF.MEXISTS`) about the items new to it; a check (read-only) asks the live
//! ones. An item added at t is thus found until at least t + W and forgotten from
//! t + W·G/(G-1) on at the latest, by the server's clock.

use super::{steps, Module, ModuleOptions, PER_COMMAND};
use crate::core::kind::{Answers, Op};
use crate::core::{Bloom, Conn, Ctx};
use crate::engine::Engine;
use crate::epochs::{millis, Epochs, ServerClock};
use crate::error::{Error, Result};
use crate::info::KeyTtl;
use crate::io::exec::{self, Cap};
use crate::io::guard::Guard;
use crate::io::once::Step;
use crate::io::removal::Removal;
use crate::scripts::{lua, once_lua, script, Arg, LuaScript};
use crate::{keys, Builder};
use futures_util::future::BoxFuture;
use redis::Value;
use std::time::Duration;

// Every module window script starts with the window kind's head (lua/window_args.lua and
// lua/window_epoch.lua). The add's source is named once, for itself and its recorded form.
macro_rules! add {
    () => {
        lua![
            "window_args",
            "window_epoch",
            "module_window_add",
            "module_window_check",
            "module_window_add_tail",
        ]
    };
}

script! {
    /// Adds items to the current generation (made first, with its expiry); new when in no
    /// live generation.
    ADD = concat!(lua!["acl"], add!());
    /// [`ADD`], its reply recorded across retries ([`once`](crate::io::once)); quiet: it only
    /// adds (`BF.MADD`).
    ADD_ONCE = once_lua!(quiet(1, 0) add!());
    /// Checks items against the live generations (read-only).
    EXISTS = lua![
        "acl",
        "window_args",
        "window_epoch",
        "module_window_check",
        "module_window_exists",
    ];
    /// Names the live generations that exist (read-only).
    INFO = lua!["window_args", "window_epoch", "module_window_check", "module_window_info"];
    /// `clear` and `expire` of every generation, the ledger and the parameters.
    DROP = lua![
        "window_args",
        "window_epoch",
        "module_window_check",
        "module_window_drop",
        "window_drop_keys",
    ];
}

/// The fewest and the most generations, as a window filter's.
const GENERATIONS: std::ops::RangeInclusive<u32> = 2..=64;

/// The generations of a windowed module builder that names none.
const DEFAULT_GENERATIONS: u32 = 4;

/// The longest window: ten years, as a window filter's.
const MAX_WINDOW: Duration = Duration::from_secs(10 * 365 * 86_400);

/// Steps that see the server's clock off by more than a generation this many times in a row
/// give up.
const TRIES: usize = 3;

/// A module filter's window: its length and generations, the generations' name beside each
/// part's key, and this client's guess of the server's clock.
#[derive(Debug)]
pub(crate) struct Spec {
    window_ms: u64,
    generations: u32,
    /// `redbloom:gen:HASH`, HASH naming the filter's parameters.
    named: String,
    server: ServerClock,
}

impl Spec {
    /// The window a module builder's options ask for (`None`: a module filter without one),
    /// checked.
    pub(super) fn of(options: &ModuleOptions) -> Result<Option<Spec>> {
        let Some(window) = options.window else {
            return match options.generations {
                Some(_) => Err(Error::InvalidConfig(
                    "generations are a window's: give the module filter a window too".into(),
                )),
                None => Ok(None),
            };
        };
        let generations = options.generations.unwrap_or(DEFAULT_GENERATIONS);
        if !GENERATIONS.contains(&generations) {
            return Err(Error::InvalidConfig(format!(
                "a module filter's window has {} to {} generations, not {generations}",
                GENERATIONS.start(),
                GENERATIONS.end()
            )));
        }
        let window_ms = millis(window);
        if window > MAX_WINDOW || window_ms < u64::from(generations - 1) {
            return Err(Error::InvalidConfig(format!(
                "a window of {window:?} over {generations} generations: give at least 1 ms per \
                 generation after the first, and at most ten years"
            )));
        }
        Ok(Some(Spec {
            window_ms,
            generations,
            named: String::new(),
            server: ServerClock::default(),
        }))
    }

    /// The window.
    pub(super) fn window(&self) -> Duration {
        Duration::from_millis(self.window_ms)
    }

    /// The generations.
    pub(super) fn generations(&self) -> u32 {
        self.generations
    }

    /// The window's share of the filter's parameters.
    pub(super) fn fingerprint(&self) -> String {
        format!(
            " window_ms={} generations={}",
            self.window_ms, self.generations
        )
    }

    /// The window, its generations named by the filter's parameters (`fingerprint`), so that
    /// a client with other parameters never touches them.
    pub(super) fn named(self, fingerprint: &str) -> Spec {
        let (h1, _) = crate::hash::murmur3_x64_128(fingerprint.as_bytes());
        Spec {
            named: format!("redbloom:gen:{:08x}", h1 >> 32),
            ..self
        }
    }

    /// The options a stored filter's window reopens with (`None`: it has none).
    pub(super) fn reopen(window_ms: Option<u64>, generations: Option<u32>) -> ModuleOptions {
        ModuleOptions {
            growth: None,
            window: window_ms.map(Duration::from_millis),
            generations: window_ms.and(generations),
        }
    }

    /// Its window's arithmetic.
    pub(super) fn epochs(&self) -> Epochs {
        Epochs {
            window_ms: self.window_ms,
            generations: self.generations,
        }
    }

    /// The client's guess of the server's current epoch.
    fn guess(&self) -> i64 {
        self.epochs().epoch_of(self.server.now_ms())
    }

    /// The generations of the part at `key`: generation E is the key `{prefix}:{E}`.
    pub(super) fn prefix(&self, key: &str) -> String {
        keys::sidecar(key, &self.named)
    }

    /// The ledger of the generations the part at `key` made.
    pub(super) fn ledger(&self, key: &str) -> String {
        keys::sidecar(key, &self.named.replacen(":gen:", ":made:", 1))
    }

    /// The keys a script on the part at `key` declares when the client guesses epoch `guess`:
    /// generations `guess + 1` down to `guess - G`, the ledger, then (`checked`: a filter of
    /// one key) the parameters key and the bare key (see `lua/window_args.lua`).
    fn keys(&self, key: &str, guess: i64, checked: Option<&Guard>) -> Vec<String> {
        let prefix = self.prefix(key);
        let mut keys: Vec<String> = (-1..=i64::from(self.generations))
            .map(|back| format!("{prefix}:{}", guess - back))
            .collect();
        keys.push(self.ledger(key));
        if let Some(guard) = checked {
            keys.push(guard.key().to_owned());
            keys.push(guard.bits_key().to_owned());
        }
        keys
    }
}

impl Builder<Module> {
    /// Makes the module filter a window (SPEC.md §7 "Windows over module filters"): G module
    /// filters, one per generation of the server's clock ([`generations`](Builder::generations),
    /// default 4), each sized for the most items added in any one window and expiring by
    /// itself when it leaves the window. An item added at t is found until at least
    /// t + `window` and forgotten from t + `window`·G/(G-1) on at the latest; `add` says
    /// "new" for an item in no live generation.
    ///
    /// ```
    /// use std::time::Duration;
    /// let recent = || {
    ///     redbloom::ModuleBloom::builder("k")
    ///         .expected_items(10_000)
    ///         .false_positive_rate(0.01)
    ///         .window(Duration::from_secs(60))
    /// };
    /// assert!(recent().validate().is_ok());
    /// assert!(recent().generations(6).validate().is_ok());
    /// assert!(recent().generations(1).validate().is_err());
    /// ```
    pub fn window(mut self, window: Duration) -> Self {
        self.kind.window = Some(window);
        self
    }

    /// A windowed module filter's number of generations G, in `2..=64` (default 4): items
    /// are forgotten by W·G/(G-1). Refused without a [`window`](Builder::window).
    pub fn generations(mut self, generations: u32) -> Self {
        self.kind.generations = Some(generations);
        self
    }
}

impl<C> Bloom<C, Module> {
    /// The window a windowed module filter remembers items for (`None`: no window).
    pub fn window(&self) -> Option<Duration> {
        self.0.kind.window.as_ref().map(Spec::window)
    }

    /// A windowed module filter's generations (`None`: no window).
    pub fn generations(&self) -> Option<u32> {
        self.0.kind.window.as_ref().map(|w| w.generations)
    }
}

/// A batch of a windowed module filter's part.
pub(super) async fn batch<C: Conn>(ctx: Ctx<'_, C, Module>, op: Op, items: &[&[u8]]) -> Answers {
    match op {
        Op::Add => add(ctx, items).await,
        _ => exists(ctx, items).await,
    }
}

/// What a script run is besides its own arguments.
#[derive(Clone, Copy)]
struct Run<'a> {
    script: &'a LuaScript,
    read_only: bool,
    /// Stores the parameters of a new filter.
    store: bool,
    /// The write step and command index its reply is recorded under, across retries.
    step: Option<(&'a Step, usize)>,
}

/// The window of a module filter that has one.
pub(super) fn spec<'a, C>(ctx: Ctx<'a, C, Module>) -> Result<&'a Spec> {
    ctx.kind()
        .window
        .as_ref()
        .ok_or_else(|| Error::UnexpectedReply("a module filter without a window".into()))
}

/// One script on the part of `ctx`; again with the server's epoch when the guess was off. One
/// attempt: the caller retries.
async fn call<C: Conn>(ctx: Ctx<'_, C, Module>, run: Run<'_>, tail: &[&dyn Arg]) -> Result<Value> {
    let (exec, part, spec) = (ctx.exec(), ctx.part(), spec(ctx)?);
    let fingerprint = ctx.kind().fingerprint.as_str();
    let store = if run.store { "1" } else { "0" };
    for _ in 0..TRIES {
        let guess = spec.guess();
        let mut keys = spec.keys(&part.key, guess, ctx.guard());
        let once = run.step.map(|(step, index)| {
            keys.extend(step.rings(&part.key));
            // The first key is a generation, whose TTL is not the filter's.
            let [id, epoch, retry, _, answer] = step.args(&part.key, index);
            [id, epoch, retry, "0".to_owned(), answer]
        });
        let keys: Vec<&str> = keys.iter().map(String::as_str).collect();
        let mut args: Vec<&dyn Arg> = vec![
            &guess,
            &spec.window_ms,
            &spec.generations,
            &fingerprint,
            &store,
            &"",
        ];
        args.extend_from_slice(tail);
        if let Some(once) = &once {
            args.extend(once.iter().map(|arg| arg as &dyn Arg));
        }
        let reply = match run.read_only {
            true => {
                exec.script_ro(&part.key, (run.script, &keys, &args))
                    .await?
            }
            false => exec.script(&part.key, run.script, &keys, &args).await?,
        };
        match classify(reply) {
            Reply::Done(reply) => return Ok(reply),
            Reply::Epoch(now) => {
                if let Some((step, index)) = run.step {
                    step.unsent(index);
                }
                spec.server.learn(now);
            }
            Reply::Params(stored) => return Err(mismatch(ctx, stored)),
            Reply::Lost(key) => {
                return Err(Error::Lost {
                    filter: ctx.key().to_owned(),
                    key,
                })
            }
        }
    }
    Err(Error::UnexpectedReply(
        "the server's clock moved by more than a generation three times in a row".into(),
    ))
}

/// What a script answered.
enum Reply {
    Done(Value),
    /// The guess was off; the server's time in ms.
    Epoch(u64),
    /// The stored parameters differ ("" when the bare key holds a filter without any).
    Params(String),
    /// A live generation the part's ledger lists is gone.
    Lost(String),
}

fn classify(reply: Value) -> Reply {
    if let Value::Array(items) = &reply {
        match items.as_slice() {
            [Value::BulkString(what), Value::Int(now)] if what == b"epoch" => {
                return Reply::Epoch(u64::try_from(*now).unwrap_or(0));
            }
            [Value::BulkString(what), Value::BulkString(stored)] if what == b"params" => {
                return Reply::Params(String::from_utf8_lossy(stored).into_owned());
            }
            [Value::BulkString(what), Value::BulkString(key)] if what == b"lost" => {
                return Reply::Lost(String::from_utf8_lossy(key).into_owned());
            }
            _ => {}
        }
    }
    Reply::Done(reply)
}

/// The mismatch a script's refusal means ("": the bare key holds a filter without stored
/// parameters).
fn mismatch<C>(ctx: Ctx<'_, C, Module>, stored: String) -> Error {
    let key = ctx.key();
    Error::ParamsMismatch {
        key: key.to_owned(),
        stored: match stored.is_empty() {
            true => format!(
                "none (the key {key:?} holds a filter without stored parameters: not a \
                 windowed one)"
            ),
            false => stored,
        },
        requested: ctx.kind().fingerprint.clone(),
    }
}

/// Adds the items of one part, in commands of at most [`PER_COMMAND`] items, in order; the
/// add and its `WAIT` retried together.
async fn add<C: Conn>(ctx: Ctx<'_, C, Module>, items: &[&[u8]]) -> Result<Vec<bool>> {
    let part = ctx.part();
    let step = ctx.step();
    let step = step.as_ref();
    let attempt = || async move {
        if items.len() <= PER_COMMAND {
            return add_command(ctx, items, step, 0).await;
        }
        let commands = items.chunks(PER_COMMAND).enumerate().map(|(index, chunk)| {
            let command: BoxFuture<'_, Result<Vec<u8>>> =
                Box::pin(add_command(ctx, chunk, step, index));
            command
        });
        exec::in_order(commands.collect()).await
    };
    let flags = ctx.written(&part.key, Engine::Scripts, attempt).await;
    if let Some(step) = step {
        step.settle(ctx.exec(), &flags).await;
    }
    let flags = steps::or_missing(ctx, flags).await?;
    if let Some(added) = flags.iter().position(|&flag| flag == b'F') {
        return Err(Error::FilterFull {
            key: ctx.key().to_owned(),
            added: added as u64,
            reason: "the module refused to add to the window's current generation: a \
                     non-scaling generation holding its capacity, or one that cannot scale \
                     further"
                .to_owned(),
        });
    }
    Ok(flags.into_iter().map(|flag| flag == b'1').collect())
}

/// One add script on some of the part's items (command `index` of the write `step`): one
/// flag per item.
async fn add_command<C: Conn>(
    ctx: Ctx<'_, C, Module>,
    items: &[&[u8]],
    step: Option<&Step>,
    index: usize,
) -> Result<Vec<u8>> {
    let (exec, kind) = (ctx.exec(), ctx.kind());
    let rate = crate::sizing::window_generation_fpr(kind.fpr);
    let expansion = kind.growth.map(|g| g.to_string()).unwrap_or_default();
    let tail: [&dyn Arg; 4] = [&rate, &kind.per_part, &expansion, &items];
    let step = step.filter(|_| exec.has(Cap::Exact));
    let run = Run {
        script: if step.is_some() { &ADD_ONCE } else { &ADD },
        read_only: false,
        store: true,
        step: step.map(|step| (step, index)),
    };
    let reply = match call(ctx, run, &tail).await {
        Err(err) if step.is_some() && exec.lacks(Cap::Exact, &ctx.part().key, &err) => {
            let run = Run {
                script: &ADD,
                step: None,
                ..run
            };
            call(ctx, run, &tail).await?
        }
        reply => reply?,
    };
    match reply {
        Value::BulkString(flags)
            if flags.len() == items.len()
                && flags.iter().all(|f| matches!(f, b'0' | b'1' | b'F')) =>
        {
            Ok(flags)
        }
        other => Err(Error::UnexpectedReply(format!(
            "{other:?} from a module window's add of {} items",
            items.len()
        ))),
    }
}

/// Checks the items of one part against its live generations (read-only scripts of at most
/// [`PER_COMMAND`] items, in order).
async fn exists<C: Conn>(ctx: Ctx<'_, C, Module>, items: &[&[u8]]) -> Result<Vec<bool>> {
    // A check that finds no generation sends no BF.* command: the server is asked once
    // whether it has them, so that one without the module is not "absent".
    steps::ensure_commands(ctx).await?;
    let answers = if items.len() <= PER_COMMAND {
        check(ctx, items).await
    } else {
        let commands = items.chunks(PER_COMMAND).map(|chunk| check(ctx, chunk));
        exec::in_order(commands.collect()).await
    };
    steps::or_missing(ctx, answers).await
}

/// One check script on some of the part's items, retried. Boxed, for [`exec::in_order`].
fn check<'a, C: Conn>(
    ctx: Ctx<'a, C, Module>,
    items: &'a [&'a [u8]],
) -> BoxFuture<'a, Result<Vec<bool>>> {
    Box::pin(async move {
        let run = Run {
            script: &EXISTS,
            read_only: true,
            store: false,
            step: None,
        };
        let tail: [&dyn Arg; 1] = [&items];
        let reply = ctx.retried(|| call(ctx, run, &tail)).await?;
        let unexpected = || {
            Error::UnexpectedReply(format!(
                "{reply:?} from a module window's check of {} items",
                items.len()
            ))
        };
        match &reply {
            Value::Array(found) if found.len() == items.len() => found
                .iter()
                .map(|v| match v {
                    Value::Int(found) => Ok(*found == 1),
                    _ => Err(unexpected()),
                })
                .collect(),
            _ => Err(unexpected()),
        }
    })
}

/// A live generation that exists: its epoch, key and `PTTL`.
pub(super) struct Live {
    pub(super) epoch: i64,
    pub(super) key: String,
    pttl: i64,
}

/// The part's live generations that exist, newest first, and the parameters' `PTTL` (-3: a
/// sharded filter's, not in the part's slot group), read by one read-only script that checks
/// the stored parameters (a filter of one key), retried.
pub(super) async fn live<C: Conn>(ctx: Ctx<'_, C, Module>) -> Result<(i64, Vec<Live>)> {
    let run = Run {
        script: &INFO,
        read_only: true,
        store: false,
        step: None,
    };
    let reply = ctx.retried(|| call(ctx, run, &[])).await?;
    let unexpected = || Error::UnexpectedReply(format!("{reply:?} from a module window's info"));
    let Value::Array(values) = &reply else {
        return Err(unexpected());
    };
    let Some(Value::Int(params_pttl)) = values.get(2) else {
        return Err(unexpected());
    };
    let live = values
        .get(3..)
        .unwrap_or_default()
        .chunks(3)
        .map(|generation| {
            let [Value::Int(epoch), Value::BulkString(key), Value::Int(pttl)] = generation else {
                return Err(unexpected());
            };
            Ok(Live {
                epoch: *epoch,
                key: String::from_utf8_lossy(key).into_owned(),
                pttl: *pttl,
            })
        });
    Ok((*params_pttl, live.collect::<Result<_>>()?))
}

/// One part's info: `BF.INFO` of each live generation, added up; the TTL the parameters'
/// (a filter of one key), else the longest-lived generation's.
pub(super) async fn part_info<C: Conn>(ctx: Ctx<'_, C, Module>) -> Result<super::info::PartInfo> {
    let done = async {
        steps::ensure_commands(ctx).await?;
        let (params_pttl, live) = live(ctx).await?;
        let mut ttl = KeyTtl::from_pttl(params_pttl);
        let mut reported: Option<super::info::Reported> = None;
        for generation in live {
            let found = ctx
                .retried(|| super::info::read(ctx.exec(), &generation.key))
                .await?;
            if params_pttl == -3 {
                ttl = ttl.longest_lived(KeyTtl::from_pttl(generation.pttl));
            }
            let sum = reported.get_or_insert_with(Default::default);
            sum.capacity += found.capacity;
            sum.bytes += found.bytes;
            sum.filters += found.filters;
            sum.items += found.items;
            sum.expansion = sum.expansion.or(found.expansion);
        }
        if params_pttl == -3 && reported.is_none() {
            ttl = KeyTtl::Missing;
        }
        Ok(super::info::PartInfo { reported, ttl })
    };
    steps::or_missing(ctx, done.await).await
}

/// `clear` or `expire` of the part's generations, ledger and (a filter of one key)
/// parameters, checked in the same script; whether a live generation existed.
pub(super) async fn drop_part<C: Conn>(ctx: Ctx<'_, C, Module>, how: Removal) -> Result<bool> {
    let done = async {
        steps::ensure_commands(ctx).await?;
        let run = Run {
            script: &DROP,
            read_only: false,
            store: false,
            step: None,
        };
        let (op, millis) = how.args();
        match call(ctx, run, &[&op, &millis]).await? {
            Value::Int(n) => Ok(n > 0),
            other => Err(Error::UnexpectedReply(format!(
                "{other:?} from clear or expire of a module window"
            ))),
        }
    };
    steps::or_missing(ctx, done.await).await
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::layout::Layout;

    fn spec(window_ms: u64, generations: u32) -> Spec {
        let options = ModuleOptions {
            growth: None,
            window: Some(Duration::from_millis(window_ms)),
            generations: Some(generations),
        };
        Spec::of(&options).unwrap().unwrap().named("kind=module x")
    }

    #[test]
    fn the_scripts_share_the_window_head() {
        assert!(ADD.source().contains("BF.RESERVE") && ADD.source().contains("pexpireat"));
        assert!(ADD_ONCE.source().contains("once_ring"));
        assert!(EXISTS.source().contains("BF.MEXISTS") && EXISTS.source().contains("lost("));
    }

    #[test]
    fn the_keys_are_named_around_the_guess_in_the_keys_slot() {
        let spec = spec(2_000, 4);
        let guard = Guard::of("k", 1, "kind=module x".into(), (Layout::Native, 0));
        let keys = spec.keys("k", 100, Some(&guard));
        assert_eq!(keys.len(), 4 + 2 + 1 + 2);
        assert!(keys[0].starts_with("{k}:redbloom:1:k:gen:") && keys[0].ends_with(":101"));
        assert!(keys[5].ends_with(":96"));
        assert!(keys[6].starts_with("{k}:redbloom:1:k:made:"));
        assert_eq!(&keys[7..], ["{k}:redbloom:1:k:params", "k"]);
        assert!(keys.iter().all(|k| keys::slot(k) == keys::slot("k")));
    }

    #[test]
    fn a_window_is_checked() {
        let options = |window_ms: u64, generations: Option<u32>| ModuleOptions {
            growth: None,
            window: Some(Duration::from_millis(window_ms)),
            generations,
        };
        assert!(Spec::of(&options(2_000, None)).unwrap().is_some());
        assert!(Spec::of(&options(2_000, Some(1))).is_err());
        assert!(Spec::of(&options(2_000, Some(65))).is_err());
        assert!(Spec::of(&options(2, Some(4))).is_err());
        let no_window = ModuleOptions {
            generations: Some(4),
            ..ModuleOptions::default()
        };
        assert!(Spec::of(&no_window).is_err());
        assert!(Spec::of(&ModuleOptions::default()).unwrap().is_none());
        assert_eq!(
            spec(3_000, 4).fingerprint(),
            " window_ms=3000 generations=4"
        );
    }
}
