//! One lane: a filter of one kind (sharded or not) on one topology, with a loader, two
//! single-item writers and a checker, and the bookkeeping that proves at the end that no
//! acknowledged add was lost and no "new" was wrong.
//!
//! Items are unique per writer (`w0:17`), per loaded batch (`l3:150`) or shared on purpose by
//! the two writers (`c4`, "contested"):
//! - a first add answered "not new" is a false positive (counted, allowed at the filter's rate),
//!   unless a check just before found the item absent: then the add lost its "new" (no one
//!   else adds the item; the adds in between make it a false positive only rarely, the filters
//!   being far from full), which fails the soak;
//! - a repeated add of an acknowledged item answered "new" is wrong, and so is a second "new"
//!   for a contested item (of concurrent adds of one item exactly one may say new);
//! - a counting filter's items are counted: adds minus removes, an add or remove that failed
//!   counted as maybe (the bounds `min..=max`); an item whose `min` is above zero must be found,
//!   and its remove must say it was present.

use crate::conn::Conn;
use crate::report::{bump, Tally};
use crate::rng::Rng;
use redbloom::kind::Kind;
use redbloom::{
    Builder, CountingBloom, GrowingBloom, Layout, Loaded, ModuleBloom, RedisBloom, Retry,
    WindowBloom,
};
use std::collections::HashMap;
use std::future::Future;
use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::{Arc, Mutex};
use std::time::{Duration, Instant};

/// Every filter's false-positive rate.
pub const FPR: f64 = 0.001;

/// A window filter's window: far longer than a run, so nothing added is forgotten by design.
const WINDOW: Duration = Duration::from_secs(3600);

/// Items per final-check call.
const CHECK_CHUNK: usize = 2_000;

/// The kinds the soak runs.
#[derive(Clone, Copy, Debug, PartialEq, Eq, PartialOrd, Ord)]
pub enum KindName {
    GoZero,
    Native,
    Window,
    Counting,
    Growing,
    Module,
}

impl KindName {
    /// Every kind, in the report's order.
    pub const ALL: [KindName; 6] = [
        KindName::GoZero,
        KindName::Native,
        KindName::Window,
        KindName::Counting,
        KindName::Growing,
        KindName::Module,
    ];

    /// The kind's name in the report.
    pub fn name(self) -> &'static str {
        match self {
            KindName::GoZero => "plain, go-zero layout",
            KindName::Native => "plain, native layout",
            KindName::Window => "window (1 h)",
            KindName::Counting => "counting",
            KindName::Growing => "growing",
            KindName::Module => "module (RedisBloom)",
        }
    }

    fn slug(self) -> &'static str {
        match self {
            KindName::GoZero => "gozero",
            KindName::Native => "native",
            KindName::Window => "window",
            KindName::Counting => "counting",
            KindName::Growing => "growing",
            KindName::Module => "module",
        }
    }
}

/// How hard and how long the lanes work.
#[derive(Clone, Debug)]
pub struct Settings {
    /// Every call's deadline (`Builder::timeout`).
    pub deadline: Duration,
    /// Every filter's retry budget (longer than the deadline: the deadline binds).
    pub retry: Duration,
    /// Replicas every write waits for (`Builder::wait_for_replicas`), on Sentinel.
    pub replicas: u32,
    /// The items the filters are sized for (a growing filter's first level: an eighth).
    pub expected_items: u64,
    /// Items per loaded batch.
    pub batch: usize,
    /// Pauses between a loader's batches, a writer's adds and a checker's checks.
    pub loader_pause: Duration,
    pub writer_pause: Duration,
    pub checker_pause: Duration,
}

/// A filter of any kind over [`Conn`].
pub enum Filter {
    Plain(RedisBloom<Conn>),
    Window(WindowBloom<Conn>),
    Counting(CountingBloom<Conn>),
    Growing(GrowingBloom<Conn>),
    Module(ModuleBloom<Conn>),
}

/// Runs `$body` with `$f` bound to the filter, whatever its kind.
macro_rules! each {
    ($filter:expr, $f:ident => $body:expr) => {
        match $filter {
            Filter::Plain($f) => $body,
            Filter::Window($f) => $body,
            Filter::Counting($f) => $body,
            Filter::Growing($f) => $body,
            Filter::Module($f) => $body,
        }
    };
}

impl Filter {
    /// A filter of `kind` at `key` over `conn`, with the soak's options.
    pub fn build(
        kind: KindName,
        key: String,
        shards: u32,
        sentinel: bool,
        conn: Conn,
        settings: &Settings,
    ) -> redbloom::Result<Filter> {
        let items = settings.expected_items;
        Ok(match kind {
            KindName::GoZero => Filter::Plain(
                options(
                    Builder::new(key).layout(Layout::GoZero),
                    items,
                    shards,
                    sentinel,
                    settings,
                )
                .build(conn)?,
            ),
            KindName::Native => Filter::Plain(
                options(
                    Builder::new(key).layout(Layout::Native),
                    items,
                    shards,
                    sentinel,
                    settings,
                )
                .build(conn)?,
            ),
            KindName::Window => Filter::Window(
                options(
                    WindowBloom::builder(key, WINDOW),
                    items,
                    shards,
                    sentinel,
                    settings,
                )
                .build(conn)?,
            ),
            KindName::Counting => Filter::Counting(
                options(
                    CountingBloom::builder(key),
                    items,
                    shards,
                    sentinel,
                    settings,
                )
                .build(conn)?,
            ),
            // Sized for an eighth of the items: it grows three or four levels in a run.
            KindName::Growing => Filter::Growing(
                options(
                    GrowingBloom::builder(key),
                    items / 8,
                    shards,
                    sentinel,
                    settings,
                )
                .build(conn)?,
            ),
            KindName::Module => Filter::Module(
                options(ModuleBloom::builder(key), items, shards, sentinel, settings)
                    .build(conn)?,
            ),
        })
    }

    async fn add(&self, item: &str) -> redbloom::Result<bool> {
        each!(self, f => f.add(item).await)
    }

    async fn exists(&self, item: &str) -> redbloom::Result<bool> {
        each!(self, f => f.exists(item).await)
    }

    async fn load_many(&self, items: &[String]) -> redbloom::Result<Loaded> {
        each!(self, f => f.load_many(items).await)
    }

    async fn exists_many(&self, items: &[String]) -> redbloom::Result<Vec<bool>> {
        each!(self, f => f.exists_many(items).await)
    }

    async fn remove(&self, item: &str) -> redbloom::Result<bool> {
        match self {
            Filter::Counting(f) => f.remove(item).await,
            _ => unreachable!("only a counting filter removes"),
        }
    }
}

/// Every kind's options: size, rate, shards, deadline, retries, and on Sentinel `WAIT`.
fn options<K: Kind>(
    builder: Builder<K>,
    items: u64,
    shards: u32,
    sentinel: bool,
    settings: &Settings,
) -> Builder<K> {
    let builder = builder
        .expected_items(items)
        .false_positive_rate(FPR)
        .shards(shards)
        .timeout(settings.deadline)
        .retry(Retry::for_duration(settings.retry));
    match sentinel {
        // Two: with one, the last writes of a master that dies can be acknowledged by the
        // replica that is then resynced from the other (issue 52).
        true => builder.wait_for_replicas(settings.replicas, Duration::from_millis(500)),
        false => builder,
    }
}

/// An acknowledged item a checker may ask about: it is never removed.
#[derive(Clone, Copy)]
enum Stable {
    Writer(u8, u32),
    Contested(u32),
}

impl Stable {
    fn item(self) -> String {
        match self {
            Stable::Writer(w, seq) => writer_item(w, seq),
            Stable::Contested(k) => format!("c{k}"),
        }
    }
}

fn writer_item(writer: u8, seq: u32) -> String {
    format!("w{writer}:{seq}")
}

fn batch_items(batch: u32, size: usize) -> Vec<String> {
    (0..size).map(|i| format!("l{batch}:{i}")).collect()
}

/// What the checker may ask about, with when each was acknowledged (ms into the run).
#[derive(Default)]
struct Pool {
    singles: Vec<(Stable, u32)>,
    batches: Vec<(u32, u32)>,
}

/// A contested item: how many of its adds were acknowledged, and how many said "new".
#[derive(Default, Clone, Copy)]
struct Contest {
    acks: u32,
    news: u32,
}

/// An item a writer added first, with its count bounds (non-counting kinds: 1..=1 once
/// acknowledged).
#[derive(Clone, Copy)]
pub struct Own {
    seq: u32,
    at: u32,
    min: i32,
    max: i32,
}

/// One filter and its workers' shared state.
pub struct Lane {
    pub topology: &'static str,
    pub kind: KindName,
    pub shards: u32,
    pub filter: Filter,
    pub tally: Tally,
    deadline: Duration,
    batch: usize,
    t0: Instant,
    pool: Mutex<Pool>,
    contests: Mutex<HashMap<u32, Contest>>,
}

impl Lane {
    pub fn new(
        topology: &'static str,
        kind: KindName,
        shards: u32,
        filter: Filter,
        settings: &Settings,
        t0: Instant,
    ) -> Lane {
        Lane {
            topology,
            kind,
            shards,
            filter,
            tally: Tally::default(),
            deadline: settings.deadline,
            batch: settings.batch,
            t0,
            pool: Mutex::default(),
            contests: Mutex::default(),
        }
    }

    /// The filter's key on its topology.
    pub fn key(kind: KindName, shards: u32) -> String {
        format!("soak:{}:{shards}", kind.slug())
    }

    fn label(&self) -> String {
        format!("{} {}×{}", self.topology, self.kind.slug(), self.shards)
    }

    /// Milliseconds into the run.
    fn now(&self) -> u32 {
        self.t0.elapsed().as_millis() as u32
    }

    /// Runs one call: its wall time against the deadline, its error by type. A call that has
    /// not returned by three deadlines is given up (and counted past its deadline), so that
    /// the soak itself always ends.
    async fn call<T>(
        &self,
        op: &str,
        item: &str,
        call: impl Future<Output = redbloom::Result<T>>,
    ) -> Option<T> {
        let started = Instant::now();
        let out = tokio::time::timeout(3 * self.deadline, call).await;
        let took = started.elapsed();
        self.tally.latency(took);
        let late = took > self.deadline + Duration::from_secs(1);
        let out = match out {
            Ok(Ok(value)) => Some(value),
            Ok(Err(err)) => {
                self.tally.error(&err, op, took, self.deadline);
                if late {
                    self.late(
                        op,
                        item,
                        took,
                        &format!("error: {}", crate::report::describe(&err)),
                    );
                }
                None
            }
            Err(_) => {
                self.late(op, item, took, "no answer: given up");
                None
            }
        };
        if late && out.is_some() {
            self.late(op, item, took, "ok");
        }
        out
    }

    fn late(&self, op: &str, item: &str, took: Duration, outcome: &str) {
        bump(&self.tally.past_deadline, 1);
        self.tally.note(format!(
            "{}: {op} {item} took {:.2} s (deadline {:?}) at t={:.1}s: {outcome}",
            self.label(),
            took.as_secs_f64(),
            self.deadline,
            self.t0.elapsed().as_secs_f64()
        ));
    }

    fn wrong_new(&self, n: u64, what: String) {
        bump(&self.tally.wrong_new, n);
        self.tally.note(format!(
            "{}: wrong \"new\" at t={:.1}s: {what}",
            self.label(),
            self.t0.elapsed().as_secs_f64()
        ));
    }

    /// Whether `item` is absent now (`None`: the check failed); a check counted as any.
    async fn probe(&self, item: &str) -> Option<bool> {
        let found = self.call("check", item, self.filter.exists(item)).await?;
        bump(&self.tally.checks, 1);
        Some(!found)
    }

    fn new_lost(&self, n: u64, what: String) {
        bump(&self.tally.new_lost, n);
        self.tally.note(format!(
            "{}: \"new\" lost at t={:.1}s: {what}",
            self.label(),
            self.t0.elapsed().as_secs_f64()
        ));
    }

    fn miss(&self, item: &str, at: u32, how: &str) {
        bump(&self.tally.misses, 1);
        self.tally.note(format!(
            "{}: {item} (acknowledged at t={:.1}s) {how} at t={:.1}s",
            self.label(),
            at as f64 / 1e3,
            self.t0.elapsed().as_secs_f64()
        ));
    }
}

/// A pause of about `pause` (±50%), cut short when the run stops.
async fn nap(pause: Duration, rng: &mut Rng, stop: &AtomicBool) {
    let ms = pause.as_millis() as u64;
    let mut left = Duration::from_millis(rng.range(ms / 2, ms * 3 / 2 + 1));
    while !left.is_zero() && !stop.load(Ordering::Relaxed) {
        let step = left.min(Duration::from_millis(200));
        tokio::time::sleep(step).await;
        left -= step;
    }
}

/// A writer: single-item adds, most of new items; every tenth of a contested item (the other
/// writer adds the same one about then), two in ten repeat an acknowledged item, and on a
/// counting filter one in ten removes one. Returns its items for the final check.
pub async fn writer(
    lane: Arc<Lane>,
    w: u8,
    pause: Duration,
    stop: Arc<AtomicBool>,
    mut rng: Rng,
) -> Vec<Own> {
    let counting = lane.kind == KindName::Counting;
    let mut own: Vec<Own> = Vec::new();
    let (mut seq, mut op) = (0u32, 0u32);
    while !stop.load(Ordering::Relaxed) {
        op += 1;
        // An item of its own counted present for sure, for a repeat or a remove.
        let pick = match own.is_empty() {
            true => None,
            false => Some(rng.below(own.len())).filter(|&i| own[i].min >= 1),
        };
        match (op % 10, pick) {
            (9, _) => contest(&lane, op / 10).await,
            (3 | 7, Some(i)) => {
                let item = writer_item(w, own[i].seq);
                match lane.call("add again", &item, lane.filter.add(&item)).await {
                    Some(new) => {
                        bump(&lane.tally.adds, 1);
                        if new {
                            lane.wrong_new(
                                1,
                                format!(
                                    "{item} (acknowledged at t={:.1}s, counted {}..={}) added again",
                                    own[i].at as f64 / 1e3,
                                    own[i].min,
                                    own[i].max
                                ),
                            );
                        }
                        own[i].min += 1;
                        own[i].max += 1;
                    }
                    None => own[i].max += 1,
                }
            }
            (5, Some(i)) if counting => {
                let item = writer_item(w, own[i].seq);
                match lane.call("remove", &item, lane.filter.remove(&item)).await {
                    Some(true) => {
                        bump(&lane.tally.removes, 1);
                        own[i].min -= 1;
                        own[i].max -= 1;
                    }
                    Some(false) => {
                        lane.miss(
                            &item,
                            own[i].at,
                            &format!(
                                "(counted {}..={}): remove answered absent",
                                own[i].min, own[i].max
                            ),
                        );
                        // Counted once: not checked again at the end.
                        own[i].min = 0;
                        own[i].max = 0;
                    }
                    None => own[i].min -= 1,
                }
            }
            _ => {
                let item = writer_item(w, seq);
                let absent = lane.probe(&item).await;
                let at = lane.now();
                let started = Instant::now();
                match lane.call("add", &item, lane.filter.add(&item)).await {
                    Some(new) => {
                        bump(&lane.tally.adds, 1);
                        bump(&lane.tally.fresh, 1);
                        bump(&lane.tally.false_positives, u64::from(!new));
                        if !new && absent == Some(true) {
                            let took = started.elapsed().as_secs_f64();
                            let what =
                                format!("{item}: absent, then its add said not new ({took:.2} s)");
                            lane.new_lost(1, what);
                        }
                        own.push(Own {
                            seq,
                            at,
                            min: 1,
                            max: 1,
                        });
                        if !counting {
                            let stable = (Stable::Writer(w, seq), at);
                            lane.pool.lock().unwrap().singles.push(stable);
                        }
                    }
                    // Added or not: a counting filter keeps it (never removed: its count may be
                    // 0); other kinds forget it.
                    None if counting => own.push(Own {
                        seq,
                        at,
                        min: 0,
                        max: 1,
                    }),
                    None => {}
                }
                seq += 1;
            }
        }
        nap(pause, &mut rng, &stop).await;
    }
    own
}

/// Adds the contested item `k`, which the other writer adds too.
async fn contest(lane: &Lane, k: u32) {
    let item = Stable::Contested(k).item();
    let at = lane.now();
    let Some(new) = lane.call("add", &item, lane.filter.add(&item)).await else {
        return;
    };
    bump(&lane.tally.adds, 1);
    let state = {
        let mut contests = lane.contests.lock().unwrap();
        let state = contests.entry(k).or_default();
        state.acks += 1;
        state.news += u32::from(new);
        *state
    };
    if new && state.news > 1 {
        lane.wrong_new(1, format!("{item} answered new to both writers"));
    }
    if state.acks == 1 {
        lane.pool
            .lock()
            .unwrap()
            .singles
            .push((Stable::Contested(k), at));
    }
}

/// A loader: a batch of new items at a time (`load_many`, the CLI's `load`), and every fourth
/// time an acknowledged batch again, all of whose answers must be "not new".
pub async fn loader(lane: Arc<Lane>, pause: Duration, stop: Arc<AtomicBool>, mut rng: Rng) {
    let mut acked: Vec<u32> = Vec::new();
    let (mut next, mut round) = (0u32, 0u32);
    while !stop.load(Ordering::Relaxed) {
        round += 1;
        if round % 4 == 0 && !acked.is_empty() {
            let batch = acked[rng.below(acked.len())];
            let items = batch_items(batch, lane.batch);
            let what = format!("batch l{batch}");
            if let Some(loaded) = lane
                .call("load again", &what, lane.filter.load_many(&items))
                .await
            {
                bump(&lane.tally.adds, items.len() as u64);
                let news: Vec<&String> = items
                    .iter()
                    .zip(&loaded.answers)
                    .filter(|(_, &new)| new)
                    .map(|(item, _)| item)
                    .collect();
                if !news.is_empty() {
                    lane.wrong_new(
                        news.len() as u64,
                        format!(
                            "{what} loaded again: new for {:?}",
                            &news[..news.len().min(5)]
                        ),
                    );
                }
            }
        } else {
            let batch = next;
            next += 1;
            let items = batch_items(batch, lane.batch);
            let what = format!("batch l{batch}");
            let absent = lane
                .call("check", &what, lane.filter.exists_many(&items))
                .await
                .inspect(|found| bump(&lane.tally.checks, found.len() as u64));
            let at = lane.now();
            let started = Instant::now();
            if let Some(loaded) = lane
                .call("load", &what, lane.filter.load_many(&items))
                .await
            {
                let n = items.len() as u64;
                let seen = loaded.answers.iter().filter(|&&new| !new).count() as u64;
                bump(&lane.tally.adds, n);
                bump(&lane.tally.fresh, n - loaded.unknown.min(n));
                bump(
                    &lane.tally.false_positives,
                    seen.saturating_sub(loaded.unknown),
                );
                if let Some(found) = absent {
                    let lost: Vec<&String> = items
                        .iter()
                        .zip(found.iter().zip(&loaded.answers))
                        .filter(|(_, (&found, &new))| !found && !new)
                        .map(|(item, _)| item)
                        .collect();
                    let n = (lost.len() as u64).saturating_sub(loaded.unknown);
                    if n > 0 {
                        lane.new_lost(
                            n,
                            format!(
                                "{what}: {} items absent, then loaded as not new ({} unknown, \
                                 {:.2} s): {:?}",
                                lost.len(),
                                loaded.unknown,
                                started.elapsed().as_secs_f64(),
                                &lost[..lost.len().min(5)]
                            ),
                        );
                    }
                }
                acked.push(batch);
                lane.pool.lock().unwrap().batches.push((batch, at));
            }
        }
        nap(pause, &mut rng, &stop).await;
    }
}

/// A checker: acknowledged items one at a time, and every tenth time a whole batch.
pub async fn checker(lane: Arc<Lane>, pause: Duration, stop: Arc<AtomicBool>, mut rng: Rng) {
    let mut round = 0u32;
    while !stop.load(Ordering::Relaxed) {
        round += 1;
        let (single, batch) = {
            let pool = lane.pool.lock().unwrap();
            let single = match pool.singles.is_empty() {
                true => None,
                false => Some(pool.singles[rng.below(pool.singles.len())]),
            };
            let batch = match pool.batches.is_empty() {
                true => None,
                false => Some(pool.batches[rng.below(pool.batches.len())]),
            };
            (single, batch)
        };
        match (round % 10, single, batch) {
            (0, _, Some((batch, at))) | (_, None, Some((batch, at))) => {
                let items = batch_items(batch, lane.batch);
                let what = format!("batch l{batch}");
                if let Some(found) = lane
                    .call("check", &what, lane.filter.exists_many(&items))
                    .await
                {
                    bump(&lane.tally.checks, items.len() as u64);
                    for (item, _) in items.iter().zip(found).filter(|(_, f)| !f) {
                        lane.miss(item, at, "not found by exists_many");
                    }
                }
            }
            (_, Some((stable, at)), _) => {
                let item = stable.item();
                if let Some(found) = lane.call("check", &item, lane.filter.exists(&item)).await {
                    bump(&lane.tally.checks, 1);
                    if !found {
                        lane.miss(&item, at, "not found by exists");
                    }
                }
            }
            _ => {}
        }
        nap(pause, &mut rng, &stop).await;
    }
}

/// After the run: every item that must be in the filter is asked about (`exists_many` in
/// chunks, each tried up to 10 times); each one not found is lost.
/// (`filter`: the lane's filter over a new connection, or why there is none: then every item
/// is unchecked.)
pub async fn final_check(lane: &Lane, filter: Result<Filter, String>, writers: &[(u8, Vec<Own>)]) {
    let mut items: Vec<(String, u32)> = Vec::new();
    for (w, own) in writers {
        for o in own.iter().filter(|o| o.min >= 1) {
            items.push((writer_item(*w, o.seq), o.at));
        }
    }
    {
        let pool = lane.pool.lock().unwrap();
        for &(stable, at) in &pool.singles {
            if let Stable::Contested(_) = stable {
                items.push((stable.item(), at));
            }
        }
        for &(batch, at) in &pool.batches {
            items.extend(batch_items(batch, lane.batch).into_iter().map(|i| (i, at)));
        }
    }
    let filter = match filter {
        Ok(filter) => filter,
        Err(why) => {
            bump(&lane.tally.unchecked, items.len() as u64);
            lane.tally
                .note(format!("{}: final check: {why}", lane.label()));
            return;
        }
    };
    for chunk in items.chunks(CHECK_CHUNK) {
        let names: Vec<String> = chunk.iter().map(|(item, _)| item.clone()).collect();
        let mut found = None;
        for attempt in 0..10 {
            match filter.exists_many(&names).await {
                Ok(answers) => {
                    found = Some(answers);
                    break;
                }
                Err(err) => {
                    lane.tally.note(format!(
                        "{}: final check, try {attempt}: {}",
                        lane.label(),
                        crate::report::describe(&err)
                    ));
                    tokio::time::sleep(Duration::from_secs(1)).await;
                }
            }
        }
        let Some(found) = found else {
            bump(&lane.tally.unchecked, chunk.len() as u64);
            continue;
        };
        for ((item, at), present) in chunk.iter().zip(found) {
            if !present {
                bump(&lane.tally.lost, 1);
                lane.tally.note(format!(
                    "{}: {item} (acknowledged at t={:.1}s) not found by the final check",
                    lane.label(),
                    *at as f64 / 1e3
                ));
            }
        }
    }
}
