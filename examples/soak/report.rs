//! What each lane counted, and the report: one summary line, then a table per kind.

use redbloom::Error;
use std::collections::BTreeMap;
use std::sync::atomic::{AtomicU64, Ordering};
use std::sync::Mutex;
use std::time::Duration;

/// Notes kept per lane (the first failures of each sort, for the report's details).
const NOTES: usize = 40;

/// One lane's counts. Every counter only grows.
#[derive(Default)]
pub struct Tally {
    /// Items of acknowledged adds (single adds and loaded batches, first adds and repeats).
    pub adds: AtomicU64,
    /// Items checked during the run (`exists`, `exists_many`) that answered.
    pub checks: AtomicU64,
    /// Acknowledged removes (counting).
    pub removes: AtomicU64,
    /// Items never added before whose add was acknowledged with a known answer.
    pub fresh: AtomicU64,
    /// Of those, the ones answered "not new": false positives.
    pub false_positives: AtomicU64,
    /// Of those, the ones a check just before had found absent: a "new" the add should have
    /// answered (no one else adds the item), unless the adds in between made it a false
    /// positive (rare: the filters are far from full).
    pub new_lost: AtomicU64,
    /// Acknowledged items (counting: counted above zero) that the final check did not find.
    pub lost: AtomicU64,
    /// Acknowledged items a check during the run did not find (or a counting remove called
    /// absent).
    pub misses: AtomicU64,
    /// "new" answered for an item added before (or twice for one item).
    pub wrong_new: AtomicU64,
    /// Calls that returned later than their deadline and a second.
    pub past_deadline: AtomicU64,
    /// Errors of a sort no fault should cause (not a timeout, a deadline, a lost connection,
    /// too few replicas, an unknown outcome, or a passing refusal such as `TRYAGAIN`).
    pub unexpected: AtomicU64,
    /// Items the final check could not ask about (every try failed).
    pub unchecked: AtomicU64,
    /// The slowest call, in microseconds.
    pub max_latency_us: AtomicU64,
    /// Errors by type.
    pub errors: Mutex<BTreeMap<String, u64>>,
    /// Of those, passing errors returned before half the deadline: the retry budget unspent.
    pub early: Mutex<BTreeMap<String, u64>>,
    /// The first error of each type, in full.
    pub samples: Mutex<BTreeMap<String, String>>,
    /// The first failures, described.
    pub notes: Mutex<Vec<String>>,
}

/// Adds `n` to `counter`.
pub fn bump(counter: &AtomicU64, n: u64) {
    counter.fetch_add(n, Ordering::Relaxed);
}

fn get(counter: &AtomicU64) -> u64 {
    counter.load(Ordering::Relaxed)
}

impl Tally {
    /// Records one call's wall time.
    pub fn latency(&self, took: Duration) {
        self.max_latency_us
            .fetch_max(took.as_micros() as u64, Ordering::Relaxed);
    }

    /// Records an error of a call (`op`, which took `took`).
    ///
    /// A passing error ([`Error::is_transient`]) back before half the deadline was not retried
    /// for the filter's budget (longer than the deadline): counted apart, as "early" (its
    /// retry budget unspent).
    pub fn error(&self, err: &Error, op: &str, took: Duration, deadline: Duration) {
        let name = error_name(err);
        *self.errors.lock().unwrap().entry(name.clone()).or_default() += 1;
        let text = format!("{op}, after {:.2} s: {}", took.as_secs_f64(), describe(err));
        if !expected(err) {
            bump(&self.unexpected, 1);
            self.note(format!("unexpected error: {text}"));
        }
        if err.is_transient() && took < deadline / 2 {
            *self.early.lock().unwrap().entry(name.clone()).or_default() += 1;
            let mut samples = self.samples.lock().unwrap();
            samples
                .entry(format!("{name}, early"))
                .or_insert(text.clone());
        }
        self.samples.lock().unwrap().entry(name).or_insert(text);
    }

    /// Keeps `note` among the lane's details (the first few).
    pub fn note(&self, note: String) {
        let mut notes = self.notes.lock().unwrap();
        if notes.len() < NOTES {
            notes.push(note);
        }
    }
}

/// The error's variant, with the server's code for `Error::Redis` (`Redis(TRYAGAIN)`).
pub fn error_name(err: &Error) -> String {
    match err {
        Error::Redis(redis) => match redis.code() {
            Some(code) => format!("Redis({code})"),
            None => format!("Redis({:?})", redis.kind()),
        },
        _ => format!("{err:?}")
            .chars()
            .take_while(|c| c.is_alphanumeric())
            .collect(),
    }
}

/// The error and its sources on one line.
pub fn describe(err: &Error) -> String {
    let mut out = err.to_string();
    let mut source = std::error::Error::source(err);
    while let Some(cause) = source {
        out.push_str(&format!(" <- {cause}"));
        source = cause.source();
    }
    out
}

/// Whether a fault explains `err`: it names a passing cause (a reply overdue, the deadline, a
/// connection lost or refused, too few replicas in time, an outcome that could not be proven,
/// a refusal that passes: `TRYAGAIN`, `MOVED`, `LOADING`, `READONLY`, …).
pub fn expected(err: &Error) -> bool {
    matches!(
        err,
        Error::Timeout(_)
            | Error::Deadline(_)
            | Error::Connection(_)
            | Error::NotReplicated { .. }
            | Error::OutcomeUnknown { .. }
    ) || err.is_transient()
}

/// One row of a kind's table.
pub struct Row<'a> {
    pub topology: &'a str,
    pub shards: u32,
    pub tally: &'a Tally,
    pub counting: bool,
}

/// `n` with thousands separated by commas.
pub fn thousands(n: u64) -> String {
    let digits = n.to_string();
    let mut out = String::new();
    for (i, c) in digits.chars().enumerate() {
        if i > 0 && (digits.len() - i).is_multiple_of(3) {
            out.push(',');
        }
        out.push(c);
    }
    out
}

/// A kind's table, in Markdown.
pub fn table(kind: &str, rows: &[Row]) -> String {
    let mut out = format!("\n### {kind}\n\n");
    out.push_str(
        "| topology | shards | adds | checks | removes | errors by type | lost | wrong new | \
         past deadline | max latency | false positives (first adds) | of which absent just before (\"new\" lost) |\n",
    );
    out.push_str("|---|---:|---:|---:|---:|---|---:|---:|---:|---:|---|---:|\n");
    for row in rows {
        let t = row.tally;
        let errors = t.errors.lock().unwrap();
        let early = t.early.lock().unwrap();
        let errors = match errors.is_empty() {
            true => "—".to_owned(),
            false => errors
                .iter()
                .map(|(name, n)| match early.get(name) {
                    Some(early) => format!("{name} {} ({early} early)", thousands(*n)),
                    None => format!("{name} {}", thousands(*n)),
                })
                .collect::<Vec<_>>()
                .join(", "),
        };
        let lost = match get(&t.misses) + get(&t.unchecked) {
            0 => thousands(get(&t.lost)),
            _ => format!(
                "{} (+{} missed in the run, {} unchecked)",
                thousands(get(&t.lost)),
                get(&t.misses),
                get(&t.unchecked)
            ),
        };
        let (fresh, fp) = (get(&t.fresh), get(&t.false_positives));
        out.push_str(&format!(
            "| {} | {} | {} | {} | {} | {} | {} | {} | {} | {:.2} s | {} of {} ({:.3}%) | {} |\n",
            row.topology,
            row.shards,
            thousands(get(&t.adds)),
            thousands(get(&t.checks)),
            match row.counting {
                true => thousands(get(&t.removes)),
                false => "—".to_owned(),
            },
            errors,
            lost,
            get(&t.wrong_new),
            get(&t.past_deadline),
            get(&t.max_latency_us) as f64 / 1e6,
            thousands(fp),
            thousands(fresh),
            100.0 * fp as f64 / fresh.max(1) as f64,
            get(&t.new_lost),
        ));
    }
    out
}
