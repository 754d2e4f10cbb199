//! What each command prints: one line of JSON (`--json`, SPEC.md §3) or one line of text.

use serde::Serialize;

/// A command's result record; `text` is its human form.
pub(crate) trait Report: Serialize {
    fn text(&self) -> String;
}

/// Prints `report` on standard error, as [`print()`] would on standard output: for commands
/// whose standard output carries a file (`export -`, `build --out -`).
pub(crate) fn eprint(report: &impl Report, json: bool) {
    if json {
        eprintln!("{}", serde_json::to_string(report).unwrap_or_default());
    } else {
        eprintln!("{}", report.text());
    }
}

/// Prints `report` as JSON or text.
pub(crate) fn print(report: &impl Report, json: bool) {
    if json {
        // Serializing these plain structs cannot fail.
        println!("{}", serde_json::to_string(report).unwrap_or_default());
    } else {
        println!("{}", report.text());
    }
}

#[derive(Serialize)]
pub(crate) struct Added {
    pub(crate) items: u64,
    pub(crate) new: u64,
}

impl Report for Added {
    fn text(&self) -> String {
        format!("{} items, {} new", self.items, self.new)
    }
}

#[derive(Serialize)]
pub(crate) struct Checked {
    pub(crate) items: u64,
    pub(crate) present: u64,
    pub(crate) absent: u64,
}

impl Report for Checked {
    fn text(&self) -> String {
        format!(
            "{} items, {} present, {} absent",
            self.items, self.present, self.absent
        )
    }
}

#[derive(Serialize)]
pub(crate) struct Loaded {
    pub(crate) items: u64,
    pub(crate) new: u64,
    /// Items answered "seen" whose answers could not be known: a batch that carried them was
    /// retried without a record of its lost attempt (`Bloom::load_many`). The new items, counted
    /// cleanly, lie between `new` and `new + unknown`.
    pub(crate) unknown: u64,
    pub(crate) seconds: f64,
    /// The signal that stopped the run early ("SIGINT", "SIGTERM"); absent when it finished.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub(crate) interrupted: Option<&'static str>,
}

impl Report for Loaded {
    fn text(&self) -> String {
        format!(
            "{} items, {} new{}, in {:.3} s ({:.0} items/s){}",
            self.items,
            self.new,
            match self.unknown {
                0 => String::new(),
                unknown => format!(
                    " ({unknown} more may be: their batches were retried after a lost reply)"
                ),
            },
            self.seconds,
            per_sec(self.items, self.seconds),
            stopped(self.interrupted)
        )
    }
}

#[derive(Serialize)]
pub(crate) struct Removed {
    pub(crate) items: u64,
    pub(crate) removed: u64,
}

impl Report for Removed {
    fn text(&self) -> String {
        format!("{} items, {} removed", self.items, self.removed)
    }
}

#[derive(Serialize)]
pub(crate) struct Unloaded {
    pub(crate) items: u64,
    pub(crate) removed: u64,
    pub(crate) seconds: f64,
    /// The signal that stopped the run early; absent when it finished.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub(crate) interrupted: Option<&'static str>,
}

impl Report for Unloaded {
    fn text(&self) -> String {
        format!(
            "{} items, {} removed, in {:.3} s ({:.0} items/s){}",
            self.items,
            self.removed,
            self.seconds,
            per_sec(self.items, self.seconds),
            stopped(self.interrupted)
        )
    }
}

#[derive(Serialize)]
pub(crate) struct CheckedFile {
    pub(crate) items: u64,
    pub(crate) present: u64,
    pub(crate) absent: u64,
    pub(crate) seconds: f64,
    /// The signal that stopped the run early ("SIGINT", "SIGTERM"); absent when it finished.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub(crate) interrupted: Option<&'static str>,
}

impl Report for CheckedFile {
    fn text(&self) -> String {
        format!(
            "{} items, {} present, {} absent, in {:.3} s ({:.0} items/s){}",
            self.items,
            self.present,
            self.absent,
            self.seconds,
            per_sec(self.items, self.seconds),
            stopped(self.interrupted)
        )
    }
}

#[derive(Serialize)]
pub(crate) struct Info {
    pub(crate) key: String,
    /// The size in bits, bits per item and bits set (absent for a module filter: the module
    /// does not report them).
    #[serde(skip_serializing_if = "Option::is_none")]
    pub(crate) bits: Option<u64>,
    #[serde(skip_serializing_if = "Option::is_none")]
    pub(crate) k: Option<u32>,
    #[serde(skip_serializing_if = "Option::is_none")]
    pub(crate) bits_set: Option<u64>,
    pub(crate) bytes: u64,
    /// `None` (null) when every bit is set and the estimate is unbounded.
    pub(crate) estimated_items: Option<u64>,
    pub(crate) estimated_fpr: f64,
    pub(crate) ttl_seconds: Option<i64>,
    /// Whether the filter exists in Redis: `false` until its first add (or after it was
    /// cleared, or expired), when `bits` and `k` are the size it will have.
    pub(crate) exists: bool,
    /// A filter that does not exist yet: the most bytes its keys will take (all shards; a
    /// window filter: every live generation; a growing filter: its first level).
    #[serde(skip_serializing_if = "Option::is_none")]
    pub(crate) planned_bytes: Option<u64>,
    /// How those bytes split, in words (over shards, generations, levels).
    #[serde(skip)]
    pub(crate) planned: Option<String>,
    /// A window filter's window (absent for other kinds).
    #[serde(skip_serializing_if = "Option::is_none")]
    pub(crate) window_seconds: Option<f64>,
    #[serde(skip_serializing_if = "Option::is_none")]
    pub(crate) generations: Option<u32>,
    /// A window filter's live generations, newest first.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub(crate) parts: Option<Vec<Generation>>,
    /// A counting filter's counters above zero and at 15.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub(crate) counters_in_use: Option<u64>,
    #[serde(skip_serializing_if = "Option::is_none")]
    pub(crate) counters_saturated: Option<u64>,
    /// A growing filter's levels, their capacity and the new items they took.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub(crate) levels: Option<u32>,
    #[serde(skip_serializing_if = "Option::is_none")]
    pub(crate) capacity: Option<u64>,
    #[serde(skip_serializing_if = "Option::is_none")]
    pub(crate) items: Option<u64>,
    #[serde(skip_serializing_if = "Option::is_none")]
    pub(crate) max_levels: Option<u32>,
    /// A growing filter's levels made (its first, when none is), each one's size: its `k` is
    /// the newest level's.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub(crate) level_sizes: Option<Vec<LevelSize>>,
    /// A module filter's sub-filters and expansion (`BF.INFO`), beside its `capacity` and
    /// `items`.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub(crate) filters: Option<u64>,
    #[serde(skip_serializing_if = "Option::is_none")]
    pub(crate) expansion: Option<u32>,
}

/// One level of a growing filter, all shards together.
#[derive(Serialize)]
pub(crate) struct LevelSize {
    pub(crate) level: u32,
    /// The new items it takes.
    pub(crate) capacity: u64,
    pub(crate) bits: u64,
    /// The bits an item sets in it.
    pub(crate) k: u32,
    /// Its false-positive rate once it holds its capacity.
    pub(crate) fpr: f64,
}

impl From<redbloom::GrowingInfo> for Info {
    fn from(info: redbloom::GrowingInfo) -> Self {
        Info {
            levels: Some(info.levels),
            capacity: Some(info.capacity),
            items: Some(info.items),
            max_levels: Some(info.max_levels),
            ..Info::from(info.filter)
        }
    }
}

impl From<redbloom::CountingInfo> for Info {
    fn from(info: redbloom::CountingInfo) -> Self {
        Info {
            counters_in_use: Some(info.counters_in_use),
            counters_saturated: Some(info.counters_saturated),
            ..Info::from(info.filter)
        }
    }
}

/// One live generation of a window filter.
#[derive(Serialize)]
pub(crate) struct Generation {
    /// When it began: Unix time in seconds, by the Redis server's clock.
    pub(crate) start: f64,
    pub(crate) bits_set: u64,
    pub(crate) ttl_seconds: Option<i64>,
}

impl From<redbloom::WindowInfo> for Info {
    fn from(info: redbloom::WindowInfo) -> Self {
        let parts: Vec<Generation> = info
            .parts
            .iter()
            .map(|part| Generation {
                start: part
                    .start
                    .duration_since(std::time::UNIX_EPOCH)
                    .map_or(0.0, |d| d.as_secs_f64()),
                bits_set: part.bits_set,
                ttl_seconds: part.ttl.as_secs(),
            })
            .collect();
        Info {
            window_seconds: Some(info.window.as_secs_f64()),
            generations: Some(info.generations),
            // Its parameters may outlive its generations (or persist), and the reverse: the
            // filter exists while either does.
            exists: info.filter.ttl != redbloom::KeyTtl::Missing || !parts.is_empty(),
            parts: Some(parts),
            ..Info::from(info.filter)
        }
    }
}

impl From<redbloom::FilterInfo> for Info {
    fn from(info: redbloom::FilterInfo) -> Self {
        Info {
            window_seconds: None,
            generations: None,
            parts: None,
            counters_in_use: None,
            counters_saturated: None,
            levels: None,
            capacity: None,
            items: None,
            max_levels: None,
            level_sizes: None,
            filters: None,
            expansion: None,
            exists: info.ttl != redbloom::KeyTtl::Missing,
            planned_bytes: None,
            planned: None,
            ttl_seconds: info.ttl.as_secs(),
            key: info.key,
            bits: Some(info.bits),
            k: Some(info.hashes),
            bits_set: Some(info.bits_set),
            bytes: info.bytes,
            estimated_items: info
                .estimated_items
                .is_finite()
                .then(|| info.estimated_items.round() as u64),
            estimated_fpr: info.estimated_fpr,
        }
    }
}

impl Info {
    /// For a filter that does not exist yet: the most `bytes` its keys will take, and how they
    /// split (`planned`, in words).
    pub(crate) fn planned(self, bytes: Option<u64>, planned: String) -> Self {
        match self.exists {
            true => self,
            false => Info {
                planned_bytes: bytes,
                planned: Some(planned),
                ..self
            },
        }
    }
}

/// A false-positive rate as people read it: `0`, `0.01`, `0.002446`, `2.42e-19`.
pub(crate) fn rate(rate: f64) -> String {
    if rate == 0.0 || !rate.is_finite() {
        return format!("{rate}");
    }
    if rate >= 1e-4 {
        // Four significant digits, without trailing zeros.
        let decimals = (3 - rate.log10().floor() as i32).max(0) as usize;
        let text = format!("{rate:.decimals$}");
        return match text.contains('.') {
            true => text.trim_end_matches('0').trim_end_matches('.').to_owned(),
            false => text,
        };
    }
    format!("{rate:.2e}")
}

/// `1.3 MB`, `412 bytes`: a size as people read it (decimal units).
pub(crate) fn bytes(bytes: u64) -> String {
    match bytes {
        0..1_000 => format!("{bytes} bytes"),
        1_000..1_000_000 => format!("{:.1} kB", bytes as f64 / 1e3),
        1_000_000..1_000_000_000 => format!("{:.1} MB", bytes as f64 / 1e6),
        _ => format!("{:.1} GB", bytes as f64 / 1e9),
    }
}

impl Info {
    /// A window filter's TTL: its generations', which expire as they leave the window, and its
    /// parameters'.
    fn window_ttl(&self, window: f64, parts: &[Generation]) -> String {
        let params = match self.ttl_seconds {
            None => "no parameters stored".to_owned(),
            Some(-1) => "its parameters have no TTL".to_owned(),
            Some(secs) => format!("its parameters expire in {secs} s"),
        };
        let ttls: Vec<i64> = parts.iter().filter_map(|p| p.ttl_seconds).collect();
        let live = match (ttls.iter().max(), ttls.iter().min()) {
            (Some(newest), Some(oldest)) if ttls.len() > 1 => format!(
                "generations expire as they leave the window: the oldest live one in {oldest} s, \
                 the newest in {newest} s (an item is found for at least {window} s after its add)"
            ),
            (Some(newest), _) => format!(
                "generations expire as they leave the window: the live one in {newest} s (an \
                 item is found for at least {window} s after its add)"
            ),
            _ => "no live generation".to_owned(),
        };
        format!("{live}; {params}")
    }
}

impl Report for Info {
    fn text(&self) -> String {
        let ttl = match self.ttl_seconds {
            None => "key missing".to_owned(),
            Some(-1) => "no TTL".to_owned(),
            Some(secs) => format!("TTL {secs} s"),
        };
        if let (false, Some(planned)) = (self.exists, &self.planned) {
            return format!(
                "key {:?} does not exist yet (its first add makes it): {planned}",
                self.key
            );
        }
        let items = self
            .estimated_items
            .map_or_else(|| "unbounded (every bit set)".to_owned(), |n| n.to_string());
        let fpr = rate(self.estimated_fpr);
        let (Some(bits), Some(k), Some(bits_set)) = (self.bits, self.k, self.bits_set) else {
            // A module filter: what BF.INFO reports.
            let expansion = self
                .expansion
                .map_or_else(|| "non-scaling".to_owned(), |e| format!("expansion {e}"));
            let window = match (self.window_seconds, self.generations) {
                (Some(window), Some(generations)) => format!(
                    " (window {window} s over {generations} generations: the live ones added up)"
                ),
                _ => String::new(),
            };
            return format!(
                "key {:?}: module filter{window}, {} items of capacity {} in {} sub-filters \
                 ({expansion}), {} bytes, made for a false-positive rate of {fpr}, {ttl}",
                self.key,
                self.items.unwrap_or(0),
                self.capacity.unwrap_or(0),
                self.filters.unwrap_or(0),
                self.bytes,
            );
        };
        if let (Some(levels), Some(capacity), Some(taken)) =
            (self.levels, self.capacity, self.items)
        {
            // A growing filter: each level's k.
            let ks: Vec<String> = self
                .level_sizes
                .iter()
                .flatten()
                .map(|level| level.k.to_string())
                .collect();
            let ks = match ks.first() {
                None => format!("k = {k}"),
                Some(first) if ks.len() == 1 => format!("k = {first}"),
                Some(first) if ks.iter().all(|k| k == first) => {
                    format!("k = {first} in each level")
                }
                Some(_) => format!("k = {} by level", ks.join(", ")),
            };
            return format!(
                "key {:?}: {bits} bits in {levels} of {} levels ({ks}), {bits_set} bits set in {} \
                 bytes, {taken} of {capacity} items taken, current false-positive rate {fpr}, \
                 {ttl}",
                self.key,
                self.max_levels.unwrap_or(levels),
                self.bytes
            );
        }
        if let (Some(window), Some(generations), Some(parts)) =
            (self.window_seconds, self.generations, &self.parts)
        {
            return format!(
                "key {:?}: {bits} bits per generation, k = {k}, {bits_set} bits set in {} bytes, \
                 ~{items} items, current false-positive rate {fpr}; window {window} s over \
                 {generations} generations, {} live; {}",
                self.key,
                self.bytes,
                parts.len(),
                self.window_ttl(window, parts)
            );
        }
        let size = match self.counters_in_use {
            Some(in_use) => format!(
                "{bits} counters ({in_use} in use, {} saturated)",
                self.counters_saturated.unwrap_or(0)
            ),
            None => format!("{bits} bits"),
        };
        format!(
            "key {:?}: {size}, k = {k}, {bits_set} bits set in {} bytes, ~{items} items, current \
             false-positive rate {fpr}, {ttl}",
            self.key, self.bytes
        )
    }
}

#[cfg(test)]
mod tests {
    use super::{bytes, rate};

    #[test]
    fn rates_print_as_people_read_them() {
        for (value, text) in [
            (0.0, "0"),
            (0.01, "0.01"),
            (0.5, "0.5"),
            (0.002446, "0.002446"),
            (0.0024461234, "0.002446"),
            (0.1234567, "0.1235"),
            (1.0, "1"),
            (0.0001, "0.0001"),
            (2.421436533444215e-19, "2.42e-19"),
            (6.7e-5, "6.70e-5"),
        ] {
            assert_eq!(rate(value), text, "{value}");
        }
    }

    #[test]
    fn sizes_print_in_decimal_units() {
        assert_eq!(bytes(412), "412 bytes");
        assert_eq!(bytes(1_376), "1.4 kB");
        assert_eq!(bytes(23_982_387), "24.0 MB");
    }
}

/// `export` and `import`.
#[derive(Serialize)]
pub(crate) struct Moved {
    pub(crate) key: String,
    /// Bytes of the snapshot file.
    pub(crate) bytes: u64,
    pub(crate) seconds: f64,
    #[serde(skip)]
    pub(crate) verb: &'static str,
}

impl Report for Moved {
    fn text(&self) -> String {
        format!(
            "{} {:?}: {} bytes of file in {:.3} s",
            self.verb, self.key, self.bytes, self.seconds
        )
    }
}

/// `build`.
#[derive(Serialize)]
pub(crate) struct Built {
    pub(crate) items: u64,
    pub(crate) new: u64,
    pub(crate) bytes: u64,
    pub(crate) seconds: f64,
    /// Where the time went (the text line only: SPEC.md §5 fixes the JSON's fields).
    #[serde(skip)]
    pub(crate) spent: BuildTimes,
}

/// Where a `build`'s time went, in seconds: waiting for lines read and split (the reader runs
/// a batch ahead on a thread of its own), hashing the items and setting their bits, and
/// writing the file.
#[derive(Default)]
pub(crate) struct BuildTimes {
    pub(crate) reading: f64,
    pub(crate) hashing: f64,
    pub(crate) writing: f64,
}

impl Report for Built {
    fn text(&self) -> String {
        let BuildTimes {
            reading,
            hashing,
            writing,
        } = self.spent;
        format!(
            "{} items, {} new, {} bytes of file, in {:.3} s ({:.0} items/s; waiting for lines \
             {reading:.2} s, hashing and setting bits {hashing:.2} s, writing the file \
             {writing:.2} s)",
            self.items,
            self.new,
            self.bytes,
            self.seconds,
            per_sec(self.items, self.seconds),
        )
    }
}

#[derive(Serialize)]
pub(crate) struct Cleared {
    pub(crate) deleted: bool,
}

impl Report for Cleared {
    fn text(&self) -> String {
        if self.deleted {
            "deleted"
        } else {
            "key did not exist"
        }
        .to_owned()
    }
}

#[derive(Serialize)]
pub(crate) struct Migrated {
    /// Whether a filter under the older names was moved.
    pub(crate) moved: bool,
}

impl Report for Migrated {
    fn text(&self) -> String {
        match self.moved {
            true => "moved to today's names",
            false => "no filter under the older names",
        }
        .to_owned()
    }
}

#[derive(Serialize)]
pub(crate) struct Expiry {
    /// `None` (null) when the key does not exist, so no TTL was set.
    pub(crate) ttl_seconds: Option<u64>,
}

impl Report for Expiry {
    fn text(&self) -> String {
        match self.ttl_seconds {
            Some(secs) => format!("expires in {secs} s"),
            None => "key does not exist; no TTL set".to_owned(),
        }
    }
}

#[derive(Serialize)]
pub(crate) struct Bench {
    pub(crate) op: crate::args::BenchOp,
    pub(crate) items: u64,
    pub(crate) concurrency: u64,
    pub(crate) batch: u64,
    pub(crate) seconds: f64,
    pub(crate) items_per_sec: f64,
    pub(crate) p50_us: u64,
    pub(crate) p99_us: u64,
    pub(crate) p999_us: u64,
    pub(crate) max_us: u64,
    /// With `--op exists`: the items found present.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub(crate) present: Option<u64>,
    /// With `--near-cache`: what the copy did.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub(crate) near_cache: Option<NearCache>,
}

impl Report for Bench {
    fn text(&self) -> String {
        let mut text = format!(
            "{:?} of {} items, {} tasks, {} per call: {:.3} s, {:.0} items/s; latency per call p50 {} us, p99 {} us, p99.9 {} us, max {} us",
            self.op, self.items, self.concurrency, self.batch, self.seconds, self.items_per_sec,
            self.p50_us, self.p99_us, self.p999_us, self.max_us
        );
        if let Some(present) = self.present {
            text += &format!("; {present} present");
        }
        if let Some(near) = &self.near_cache {
            text += &format!(
                "; near cache ({} s): {} hits, {} stale hits, {} misses, {} refreshes ({} failed), \
                 {} invalidations, tracking {}{}{}",
                near.refresh_seconds,
                near.hits,
                near.stale_hits,
                near.misses,
                near.refreshes,
                near.failed_refreshes,
                near.invalidations,
                if near.tracking { "on" } else { "off" },
                if near.stale { ", stale" } else { "" },
                if near.over_budget { ", over its budget" } else { "" },
            );
        }
        text
    }
}

/// A near cache's statistics at the end of a bench (`redbloom::NearCacheStats`).
#[derive(Serialize)]
pub(crate) struct NearCache {
    /// The refresh interval given (`--near-cache`).
    pub(crate) refresh_seconds: f64,
    /// Items answered from a fresh copy, with no round trip.
    pub(crate) hits: u64,
    /// Items answered from a copy past its interval because Redis could not be reached.
    pub(crate) stale_hits: u64,
    /// Items answered by Redis (no copy yet, or the copy past its interval).
    pub(crate) misses: u64,
    /// Copies read.
    pub(crate) refreshes: u64,
    pub(crate) failed_refreshes: u64,
    /// Invalidation messages received (tracking).
    pub(crate) invalidations: u64,
    /// Since the current copy's read began; `null` when there is no copy.
    pub(crate) age_seconds: Option<f64>,
    pub(crate) stale: bool,
    /// Invalidations were being received (the tracking connection was up).
    pub(crate) tracking: bool,
    /// The copy's bytes.
    pub(crate) bytes: u64,
    pub(crate) over_budget: bool,
}

impl NearCache {
    pub(crate) fn new(refresh: std::time::Duration, stats: redbloom::NearCacheStats) -> Self {
        NearCache {
            refresh_seconds: refresh.as_secs_f64(),
            hits: stats.hits,
            stale_hits: stats.stale_hits,
            misses: stats.misses,
            refreshes: stats.refreshes,
            failed_refreshes: stats.failed_refreshes,
            invalidations: stats.invalidations,
            age_seconds: stats.age.map(|age| age.as_secs_f64()),
            stale: stats.stale,
            tracking: stats.tracking,
            bytes: stats.bytes,
            over_budget: stats.over_budget,
        }
    }
}

fn per_sec(items: u64, seconds: f64) -> f64 {
    if seconds > 0.0 {
        items as f64 / seconds
    } else {
        0.0
    }
}

/// ", interrupted by SIGINT" for a run a signal stopped early.
fn stopped(interrupted: Option<&str>) -> String {
    interrupted.map_or_else(String::new, |signal| format!(", interrupted by {signal}"))
}
