//! What the `tracing` instrumentation costs (docs/operations.md "Observability", BENCHMARKS.md
//! "What tracing costs"): CALLS single-item `exists` calls on a plain filter from TASKS tasks
//! sharing one connection, on one thread (as `redbloom bench` runs them), with no subscriber
//! (`none`), with one that takes INFO and above (`info`: the crate's DEBUG spans stay off), or
//! with one that takes every span and event at every level and visits their fields
//! (`subscriber`). Not a criterion bench:
//!
//! ```text
//! cargo bench --bench tracing_cost -- URL CALLS TASKS none|info|subscriber
//! ```
//!
//! Prints one JSON line: the mode, calls, seconds, calls per second, and the spans and events
//! the subscriber saw (0 without one).

use std::cell::RefCell;
use std::collections::HashMap;
use std::sync::atomic::{AtomicU64, Ordering};
use std::sync::Arc;
use std::time::Instant;
use tracing::field::{Field, Visit};
use tracing::level_filters::LevelFilter;
use tracing::span::{Attributes, Id, Record};
use tracing::{Event, Level, Metadata, Subscriber};
use tracing_core::span::Current;

/// Takes everything up to `max` (all levels by default); counts spans and events, and visits
/// every field.
#[derive(Default)]
struct Counting {
    max: Option<Level>,
    next: AtomicU64,
    spans: AtomicU64,
    events: AtomicU64,
}

thread_local! {
    static STACK: RefCell<Vec<(Id, &'static Metadata<'static>)>> = const { RefCell::new(Vec::new()) };
    /// Each open span's metadata and handles.
    static SPANS: RefCell<HashMap<u64, (&'static Metadata<'static>, usize)>> =
        RefCell::new(HashMap::new());
}

struct Visitor(u64);

impl Visit for Visitor {
    fn record_debug(&mut self, _: &Field, _: &dyn std::fmt::Debug) {
        self.0 += 1;
    }
}

impl Subscriber for Counting {
    fn enabled(&self, meta: &Metadata<'_>) -> bool {
        self.max.is_none_or(|max| *meta.level() <= max)
    }
    fn max_level_hint(&self) -> Option<LevelFilter> {
        self.max.map(LevelFilter::from_level)
    }
    fn new_span(&self, span: &Attributes<'_>) -> Id {
        self.spans.fetch_add(1, Ordering::Relaxed);
        span.record(&mut Visitor(0));
        let id = self.next.fetch_add(1, Ordering::Relaxed) + 1;
        SPANS.with(|m| m.borrow_mut().insert(id, (span.metadata(), 1)));
        Id::from_u64(id)
    }
    fn record(&self, _: &Id, values: &Record<'_>) {
        values.record(&mut Visitor(0));
    }
    fn record_follows_from(&self, _: &Id, _: &Id) {}
    fn event(&self, event: &Event<'_>) {
        self.events.fetch_add(1, Ordering::Relaxed);
        event.record(&mut Visitor(0));
    }
    fn enter(&self, span: &Id) {
        let meta = SPANS.with(|m| m.borrow()[&span.into_u64()].0);
        STACK.with(|s| s.borrow_mut().push((span.clone(), meta)));
    }
    fn exit(&self, _: &Id) {
        STACK.with(|s| s.borrow_mut().pop());
    }
    fn clone_span(&self, span: &Id) -> Id {
        SPANS.with(|m| {
            if let Some(open) = m.borrow_mut().get_mut(&span.into_u64()) {
                open.1 += 1;
            }
        });
        span.clone()
    }
    fn try_close(&self, span: Id) -> bool {
        SPANS.with(|m| {
            let mut spans = m.borrow_mut();
            let id = span.into_u64();
            let Some(open) = spans.get_mut(&id) else {
                return false;
            };
            open.1 -= 1;
            let closed = open.1 == 0;
            if closed {
                spans.remove(&id);
            }
            closed
        })
    }
    fn current_span(&self) -> Current {
        STACK.with(|s| match s.borrow().last() {
            Some((id, meta)) => Current::new(id.clone(), meta),
            None => Current::none(),
        })
    }
}

type Error = Box<dyn std::error::Error + Send + Sync>;

#[tokio::main(flavor = "current_thread")]
async fn main() {
    let args: Vec<String> = std::env::args()
        .skip(1)
        .filter(|a| a != "--bench")
        .collect();
    let result = match args.len() {
        // `cargo bench` with no arguments runs every bench target: nothing to do here.
        0 => return,
        4 => run(&args).await,
        _ => Err("usage: see the top of benches/tracing_cost.rs".into()),
    };
    if let Err(err) = result {
        eprintln!("tracing_cost: {err}");
        std::process::exit(2);
    }
}

async fn run(args: &[String]) -> Result<(), Error> {
    let (url, calls, tasks) = (&args[0], args[1].parse::<u64>()?, args[2].parse::<u64>()?);
    let mode = args[3].as_str();
    let subscriber = Arc::new(Counting {
        max: (mode == "info").then_some(Level::INFO),
        ..Counting::default()
    });
    match mode {
        "none" => {}
        "subscriber" | "info" => tracing::subscriber::set_global_default(subscriber.clone())?,
        other => return Err(format!("mode {other:?}: none, info or subscriber").into()),
    }
    let client = redis::Client::open(url.as_str())?;
    let key = format!("tracing-cost:{}", std::process::id());
    let bloom = redbloom::RedisBloom::new(
        client.get_multiplexed_async_connection().await?,
        key,
        1 << 24,
    )?;
    bloom.add("warm-up").await?;
    let next = Arc::new(AtomicU64::new(0));
    let started = Instant::now();
    let workers = (0..tasks).map(|_| {
        let (bloom, next) = (bloom.clone(), next.clone());
        tokio::spawn(async move {
            let mut present = 0u64;
            loop {
                let i = next.fetch_add(1, Ordering::Relaxed);
                if i >= calls {
                    return Ok::<u64, redbloom::Error>(present);
                }
                present += u64::from(bloom.exists(format!("bench:{i}")).await?);
            }
        })
    });
    for worker in futures_util::future::join_all(workers).await {
        worker??;
    }
    let secs = started.elapsed().as_secs_f64();
    bloom.clear().await?;
    println!(
        "{{\"mode\":\"{mode}\",\"calls\":{calls},\"tasks\":{tasks},\"secs\":{secs:.3},\
         \"calls_per_sec\":{:.0},\"spans\":{},\"events\":{}}}",
        calls as f64 / secs,
        subscriber.spans.load(Ordering::Relaxed),
        subscriber.events.load(Ordering::Relaxed),
    );
    Ok(())
}
