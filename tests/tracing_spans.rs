//! The `tracing` spans and events of the public calls (docs/operations.md "Observability"), seen
//! by a capturing subscriber installed for the test's thread (`tracing::subscriber::set_default`,
//! a current-thread runtime): one span per call with its operation, kind, key, item count and
//! tries; an `error` event in it when the call fails; a WARN event per retry; an INFO event per
//! fallback.

mod common;

use redbloom::{CountingBloom, Error, GrowingBloom, RedisBloom, Retry, WindowBloom};
use std::collections::{BTreeMap, HashMap};
use std::future::Future;
use std::sync::{Arc, Mutex, MutexGuard};
use std::time::Duration;
use tracing::field::{Field, Visit};
use tracing::span::{Attributes, Id, Record};
use tracing::{Event, Level, Metadata, Subscriber};
use tracing_core::span::Current;

/// A span as the subscriber saw it.
#[derive(Debug, Clone)]
struct SpanSeen {
    name: &'static str,
    target: &'static str,
    level: Level,
    parent: Option<u64>,
    fields: BTreeMap<String, String>,
    /// Closed: its last handle was dropped.
    closed: bool,
    handles: usize,
}

/// An event as the subscriber saw it, with the span it happened in.
#[derive(Debug, Clone)]
struct EventSeen {
    target: &'static str,
    level: Level,
    span: Option<u64>,
    fields: BTreeMap<String, String>,
}

#[derive(Debug, Default)]
struct Seen {
    next: u64,
    spans: BTreeMap<u64, SpanSeen>,
    metadata: HashMap<u64, &'static Metadata<'static>>,
    events: Vec<EventSeen>,
    /// The spans entered on this thread, innermost last.
    stack: Vec<u64>,
}

/// Keeps every span and event, at every level.
#[derive(Debug, Clone, Default)]
struct Capture(Arc<Mutex<Seen>>);

struct Fields<'a>(&'a mut BTreeMap<String, String>);

impl Visit for Fields<'_> {
    fn record_debug(&mut self, field: &Field, value: &dyn std::fmt::Debug) {
        self.0.insert(field.name().to_owned(), format!("{value:?}"));
    }
    fn record_str(&mut self, field: &Field, value: &str) {
        self.0.insert(field.name().to_owned(), value.to_owned());
    }
}

impl Capture {
    fn seen(&self) -> MutexGuard<'_, Seen> {
        self.0.lock().unwrap()
    }

    /// The crate's spans, in the order they were made.
    fn spans(&self) -> Vec<(u64, SpanSeen)> {
        let seen = self.seen();
        seen.spans
            .iter()
            .filter(|(_, s)| s.target == "redbloom")
            .map(|(&id, s)| (id, s.clone()))
            .collect()
    }

    /// The crate's events in span `id`.
    fn events_in(&self, id: u64) -> Vec<EventSeen> {
        self.seen()
            .events
            .iter()
            .filter(|e| e.target == "redbloom" && e.span == Some(id))
            .cloned()
            .collect()
    }

    /// Runs `f` with this subscriber as the thread's default, on a current-thread runtime.
    fn run<F: Future>(&self, f: F) -> F::Output {
        let _default = tracing::subscriber::set_default(self.clone());
        tokio::runtime::Builder::new_current_thread()
            .enable_all()
            .build()
            .unwrap()
            .block_on(f)
    }
}

impl Subscriber for Capture {
    fn enabled(&self, _: &Metadata<'_>) -> bool {
        true
    }

    fn new_span(&self, span: &Attributes<'_>) -> Id {
        let mut seen = self.seen();
        seen.next += 1;
        let id = seen.next;
        let parent = match span.parent() {
            Some(parent) => Some(parent.into_u64()),
            None if span.is_contextual() => seen.stack.last().copied(),
            None => None,
        };
        let mut fields = BTreeMap::new();
        span.record(&mut Fields(&mut fields));
        let meta = span.metadata();
        seen.metadata.insert(id, meta);
        seen.spans.insert(
            id,
            SpanSeen {
                name: meta.name(),
                target: meta.target(),
                level: *meta.level(),
                parent,
                fields,
                closed: false,
                handles: 1,
            },
        );
        Id::from_u64(id)
    }

    fn record(&self, span: &Id, values: &Record<'_>) {
        let mut seen = self.seen();
        if let Some(s) = seen.spans.get_mut(&span.into_u64()) {
            values.record(&mut Fields(&mut s.fields));
        }
    }

    fn record_follows_from(&self, _: &Id, _: &Id) {}

    fn event(&self, event: &Event<'_>) {
        let mut seen = self.seen();
        let span = match event.parent() {
            Some(parent) => Some(parent.into_u64()),
            None if event.is_contextual() => seen.stack.last().copied(),
            None => None,
        };
        let mut fields = BTreeMap::new();
        event.record(&mut Fields(&mut fields));
        seen.events.push(EventSeen {
            target: event.metadata().target(),
            level: *event.metadata().level(),
            span,
            fields,
        });
    }

    fn enter(&self, span: &Id) {
        self.seen().stack.push(span.into_u64());
    }

    fn exit(&self, span: &Id) {
        let mut seen = self.seen();
        if let Some(at) = seen.stack.iter().rposition(|&s| s == span.into_u64()) {
            seen.stack.remove(at);
        }
    }

    fn clone_span(&self, span: &Id) -> Id {
        if let Some(s) = self.seen().spans.get_mut(&span.into_u64()) {
            s.handles += 1;
        }
        span.clone()
    }

    fn try_close(&self, span: Id) -> bool {
        let mut seen = self.seen();
        let Some(s) = seen.spans.get_mut(&span.into_u64()) else {
            return false;
        };
        s.handles -= 1;
        s.closed = s.handles == 0;
        s.closed
    }

    fn current_span(&self) -> Current {
        let seen = self.seen();
        match seen.stack.last() {
            Some(&id) => Current::new(Id::from_u64(id), seen.metadata[&id]),
            None => Current::none(),
        }
    }
}

fn field<'a>(span: &'a SpanSeen, name: &str) -> &'a str {
    span.fields
        .get(name)
        .map(String::as_str)
        .unwrap_or_else(|| panic!("span {span:?} has no field {name}"))
}

/// Asserts `span` is a closed DEBUG span of the call `op` on a filter of `kind` at `key`.
fn assert_call(span: &SpanSeen, op: &str, kind: &str, key: &str) {
    assert_eq!(span.name, op, "{span:?}");
    assert_eq!(span.level, Level::DEBUG, "{span:?}");
    assert_eq!(field(span, "op"), op, "{span:?}");
    assert_eq!(field(span, "kind"), kind, "{span:?}");
    assert_eq!(field(span, "key"), key, "{span:?}");
    assert!(
        span.closed,
        "the call's span is closed when it returns: {span:?}"
    );
    assert_eq!(span.parent, None, "a call's span is a root here: {span:?}");
}

/// The call's outcome as its span tells it: "ok", or the `error` event's message.
fn outcome(capture: &Capture, id: u64) -> String {
    let errors: Vec<EventSeen> = capture
        .events_in(id)
        .into_iter()
        .filter(|e| e.fields.contains_key("error") && !e.fields.contains_key("message"))
        .collect();
    match errors.as_slice() {
        [] => "ok".to_owned(),
        [one] => {
            assert_eq!(
                one.level,
                Level::DEBUG,
                "an expected error is no ERROR: {one:?}"
            );
            one.fields["error"].clone()
        }
        many => panic!("one outcome per call, not {many:?}"),
    }
}

#[test]
fn plain_calls_have_one_span_each_with_their_fields() {
    let capture = Capture::default();
    let key = common::unique_key("traced");
    let key2 = key.clone();
    capture.run(async move {
        let redis = common::redis().await;
        let bloom = RedisBloom::new(redis.connection().await, &key2, 1 << 20).unwrap();
        assert!(bloom.add("a").await.unwrap());
        let present = bloom.exists_many(&["a", "b", "c"]).await.unwrap();
        assert_eq!(present, [true, false, false]);
    });
    let spans = capture.spans();
    assert_eq!(spans.len(), 2, "one span per public call: {spans:#?}");
    let (add, exists_many) = (&spans[0], &spans[1]);
    assert_call(&add.1, "add", "plain", &key);
    assert_eq!(field(&add.1, "items"), "1");
    assert_eq!(field(&add.1, "attempts"), "1");
    assert_eq!(outcome(&capture, add.0), "ok");
    assert_call(&exists_many.1, "exists_many", "plain", &key);
    assert_eq!(field(&exists_many.1, "items"), "3");
    assert_eq!(field(&exists_many.1, "attempts"), "1");
    assert_eq!(outcome(&capture, exists_many.0), "ok");
    // No retry, no fallback: nothing but the spans.
    assert!(
        capture
            .seen()
            .events
            .iter()
            .all(|e| e.target != "redbloom" || e.level == Level::DEBUG),
        "{:#?}",
        capture.seen().events
    );
}

#[test]
fn retries_against_an_unreachable_server_are_events_of_one_span() {
    let capture = Capture::default();
    // A port nothing listens on.
    let port = std::net::TcpListener::bind("127.0.0.1:0")
        .unwrap()
        .local_addr()
        .unwrap()
        .port();
    let err = capture.run(async move {
        let client = redis::Client::open(format!("redis://127.0.0.1:{port}")).unwrap();
        let config = redis::aio::ConnectionManagerConfig::new()
            .set_number_of_retries(0)
            .set_connection_timeout(Some(Duration::from_millis(200)));
        let conn = redis::aio::ConnectionManager::new_lazy_with_config(client, config).unwrap();
        let bloom = RedisBloom::builder("unreachable")
            .bits(1 << 16)
            .retry(
                Retry::for_duration(Duration::from_millis(400))
                    .with_delays(Duration::from_millis(20), Duration::from_millis(40)),
            )
            .build(conn)
            .unwrap();
        bloom.exists("a").await.unwrap_err()
    });
    assert!(matches!(err, Error::Connection(_)), "{err:?}");
    let spans = capture.spans();
    assert_eq!(spans.len(), 1, "{spans:#?}");
    let (id, span) = &spans[0];
    assert_call(span, "exists", "plain", "unreachable");
    let attempts: u32 = field(span, "attempts").parse().unwrap();
    assert!(attempts > 1, "retried: {span:?}");
    let events = capture.events_in(*id);
    let retries: Vec<&EventSeen> = events
        .iter()
        .filter(|e| {
            e.fields.get("message").map(String::as_str) == Some("retrying after a passing fault")
        })
        .collect();
    assert_eq!(
        retries.len() as u32,
        attempts - 1,
        "one event per retry: {events:#?}"
    );
    for (n, retry) in retries.iter().enumerate() {
        assert_eq!(retry.level, Level::WARN, "{retry:?}");
        assert_eq!(retry.fields["attempt"], (n + 1).to_string(), "{retry:?}");
        assert_eq!(retry.fields["error"], "cannot reach Redis", "{retry:?}");
        let wait: u64 = retry.fields["retry_in_ms"].parse().unwrap();
        assert!((20..=40).contains(&wait), "{retry:?}");
    }
    let gave_up = events
        .iter()
        .filter(|e| {
            e.fields.get("message").map(String::as_str)
                == Some("giving up: the retry budget or the call's deadline is spent")
        })
        .count();
    assert_eq!(gave_up, 1, "{events:#?}");
    assert_eq!(outcome(&capture, *id), "cannot reach Redis");
}

#[test]
fn a_wrong_type_is_the_error_outcome_of_its_call() {
    let capture = Capture::default();
    let key = common::unique_key("a-list");
    let key2 = key.clone();
    let err = capture.run(async move {
        let redis = common::redis().await;
        let mut conn = redis.connection().await;
        let _: i64 = redis::cmd("RPUSH")
            .arg(&key2)
            .arg("x")
            .query_async(&mut conn)
            .await
            .unwrap();
        let bloom = RedisBloom::new(conn, &key2, 1 << 16).unwrap();
        bloom.add("a").await.unwrap_err()
    });
    assert!(matches!(err, Error::WrongType { .. }), "{err:?}");
    let spans = capture.spans();
    assert_eq!(spans.len(), 1, "{spans:#?}");
    let (id, span) = &spans[0];
    assert_call(span, "add", "plain", &key);
    assert_eq!(
        field(span, "attempts"),
        "1",
        "a lasting error is not retried"
    );
    let outcome = outcome(&capture, *id);
    assert_eq!(outcome, err.to_string());
    assert!(outcome.contains("holds a list"), "{outcome}");
}

#[test]
fn every_kind_has_one_span_per_public_call() {
    let capture = Capture::default();
    let base = common::unique_key("kinds");
    let keys = [
        format!("{base}:window"),
        format!("{base}:growing"),
        format!("{base}:counting"),
        format!("{base}:plain"),
    ];
    let [window, growing, counting, plain] = keys.clone();
    capture.run(async move {
        let redis = common::redis().await;
        let conn = redis.connection().await;
        let w = WindowBloom::builder(&window, Duration::from_secs(60))
            .expected_items(1_000)
            .false_positive_rate(0.01)
            .build(conn.clone())
            .unwrap();
        assert!(w.add("a").await.unwrap());
        assert_eq!(w.exists_many(&["a", "b"]).await.unwrap(), [true, false]);
        let g = GrowingBloom::builder(&growing)
            .expected_items(1_000)
            .false_positive_rate(0.01)
            .growth(2)
            .build(conn.clone())
            .unwrap();
        assert_eq!(g.add_many(&["a", "b"]).await.unwrap(), [true, true]);
        assert!(g.info().await.unwrap().levels >= 1);
        let c = CountingBloom::builder(&counting)
            .expected_items(1_000)
            .false_positive_rate(0.01)
            .build(conn.clone())
            .unwrap();
        assert!(c.add_if_absent("a").await.unwrap());
        assert!(c.remove("a").await.unwrap());
        assert!(c.clear().await.unwrap());
        let p = RedisBloom::new(conn, &plain, 1 << 16).unwrap();
        p.add("a").await.unwrap();
        let mut file = Vec::new();
        p.export(&mut file).await.unwrap();
        assert!(p.expire(Duration::from_secs(60)).await.unwrap());
    });
    let spans = capture.spans();
    let calls: Vec<(&str, &str, &str, Option<&str>)> = spans
        .iter()
        .map(|(_, s)| {
            (
                field(s, "op"),
                field(s, "kind"),
                field(s, "key"),
                s.fields.get("items").map(String::as_str),
            )
        })
        .collect();
    let [window, growing, counting, plain] = keys.each_ref().map(String::as_str);
    assert_eq!(
        calls,
        [
            ("add", "window", window, Some("1")),
            ("exists_many", "window", window, Some("2")),
            ("add_many", "growing", growing, Some("2")),
            ("info", "growing", growing, None),
            ("add_if_absent", "counting", counting, Some("1")),
            ("remove", "counting", counting, Some("1")),
            ("clear", "counting", counting, None),
            ("add", "plain", plain, Some("1")),
            ("export", "plain", plain, None),
            ("expire", "plain", plain, None),
        ]
    );
    for (id, span) in &spans {
        assert_call(
            span,
            field(span, "op"),
            field(span, "kind"),
            field(span, "key"),
        );
        assert_eq!(outcome(&capture, *id), "ok", "{span:?}");
    }
    // Every call that sent commands through the retry loop says how many tries it took.
    for (_, span) in spans.iter().filter(|(_, s)| field(s, "op") != "export") {
        assert_eq!(field(span, "attempts"), "1", "{span:?}");
    }
}

#[test]
fn a_refused_dense_merge_is_a_fallback_event_of_its_call() {
    let capture = Capture::default();
    let key = common::unique_key("fallback");
    let key2 = key.clone();
    capture.run(async move {
        let redis = common::redis().await;
        let port = redis
            .private_server_url()
            .expect("an ACL user needs a private server")
            .rsplit(':')
            .next()
            .unwrap()
            .to_owned();
        let mut admin = redis.connection().await;
        // A user whose ACL refuses BITOP: the dense merge fails, the batch goes by BITFIELD.
        let () = redis::cmd("ACL")
            .arg(&[
                "SETUSER",
                "tracenobitop",
                "on",
                ">pw",
                "~*",
                "+@all",
                "-bitop",
            ])
            .query_async(&mut admin)
            .await
            .unwrap();
        let url = format!("redis://tracenobitop:pw@127.0.0.1:{port}");
        let bloom = RedisBloom::new(common::connect(&url).await, &key2, 1 << 14).unwrap();
        let items: Vec<String> = (0..200).map(|i| format!("item-{i}")).collect();
        for half in items.chunks(100) {
            let new = bloom.add_many(half).await.unwrap();
            assert!(new.iter().filter(|&&n| n).count() > 80, "{new:?}");
        }
        assert!(bloom.exists_many(&items).await.unwrap().iter().all(|&p| p));
    });
    let spans = capture.spans();
    assert_eq!(spans.len(), 3, "{spans:#?}");
    let (id, span) = &spans[0];
    assert_call(span, "add_many", "plain", &key);
    assert_eq!(outcome(&capture, *id), "ok");
    let fallbacks: Vec<EventSeen> = capture
        .events_in(*id)
        .into_iter()
        .filter(|e| e.fields.get("message").map(String::as_str) == Some("fallback"))
        .collect();
    assert_eq!(fallbacks.len(), 1, "{fallbacks:#?}");
    let fallback = &fallbacks[0];
    assert_eq!(fallback.level, Level::INFO);
    assert_eq!(fallback.fields["key"], key);
    assert_eq!(fallback.fields["from"], "dense merge");
    assert_eq!(fallback.fields["to"], "BITFIELD");
    // Learned once: the next batch goes by BITFIELD without trying.
    assert_call(&spans[1].1, "add_many", "plain", &key);
    assert!(capture.events_in(spans[1].0).iter().all(|e| e
        .fields
        .get("message")
        .map(String::as_str)
        != Some("fallback")));
}
