//! A crawler's "URL seen?" check: crawl each URL of the frontier once, with a filter that
//! grows, since nobody knows in advance how many URLs a crawl will find.
//!
//! ```text
//! cargo run --example crawler                            # a synthetic frontier of 200,000 URLs, ~30% repeats
//! cargo run --example crawler -- urls.txt                # your URLs, one per line
//! cargo run --example crawler -- --capacity 1000 urls.txt  # a smaller first level (default 10,000)
//! ```
//!
//! The filter (a growing one, `GrowingBloom`) starts with a first level for `--capacity`
//! URLs; when a level has taken that many new URLs, the next add makes a level twice as large
//! at a tighter false-positive rate, so that the whole filter stays at or below the rate asked
//! for however many URLs arrive. It remembers every URL in a number of bits that does not
//! depend on how long the URLs are, and every crawler process pointed at the same key shares
//! it. The price is false positives: a URL never seen before whose bits all happen to be set
//! already in some level is wrongly skipped. It is never the other way round: a URL is crawled
//! at most once.

mod support;

use redbloom::{Error, GrowingBloom};
use std::collections::HashSet;
use std::time::Instant;

/// URLs per round trip to Redis.
const BATCH: usize = 1_000;
/// The first level's URLs when `--capacity` is not given: small, as the frontier's size is
/// unknown; the filter grows from there.
const FIRST_LEVEL: u64 = 10_000;
/// Each level's capacity over the one before.
const GROWTH: u32 = 2;
const KEY: &str = "redbloom:example:crawler";

#[tokio::main]
async fn main() -> Result<(), Box<dyn std::error::Error>> {
    support::answer_help(USAGE);
    let (capacity, path) = parse_args(std::env::args().skip(1))?;
    let frontier = match path {
        Some(path) => read_urls(&path)?,
        None => synthetic_frontier(200_000, 0.30),
    };

    // A Redis: $REDIS_URL, or a throwaway redis-server that stops when `_server` is dropped.
    let (url, _server) = support::redis_url()?;
    let conn = support::connect(&url).await?;

    // The first level for `capacity` URLs; the whole filter at 1 false positive in 10,000
    // checks of a new URL, however far it grows.
    let fpr = 1e-4;
    let seen = GrowingBloom::builder(KEY)
        .expected_items(capacity)
        .false_positive_rate(fpr)
        .growth(GROWTH)
        .build(conn)?;
    // Start empty, even if an earlier run was interrupted.
    match seen.clear().await {
        Ok(_) => {}
        Err(err @ Error::ParamsMismatch { .. }) => {
            return Err(support::Fatal(format!(
                "{err}: an interrupted earlier run with another --capacity (or an older \
                 version of this example) left it; run again with that --capacity, or delete \
                 its keys (redis-cli --scan --pattern '*{KEY}*' | xargs redis-cli del)"
            ))
            .into())
        }
        Err(err) => return Err(err.into()),
    }
    println!(
        "frontier: {} URLs; filter: a first level for {capacity} URLs, each next level {GROWTH}x \
         larger (at most {} levels, {} URLs), for a false-positive rate of {fpr:e}",
        frontier.len(),
        seen.max_levels(),
        seen.max_capacity()
    );

    let started = Instant::now();
    let (mut crawled, mut skipped) = (0u64, 0u64);
    // The truth, only to grade the filter: a real crawler would not keep these sets, as they
    // grow with every URL (that is what the filter is for).
    let mut fetched: HashSet<&str> = HashSet::new();
    let mut crawled_twice = 0u64;
    for batch in frontier.chunks(BATCH) {
        // One round trip marks the whole batch as seen. `true` = certainly new: crawl it.
        let new = seen.add_many(batch).await?;
        for (url, is_new) in batch.iter().zip(new) {
            if is_new {
                crawled += 1; // a real crawler would fetch `url` here
                if !fetched.insert(url) {
                    crawled_twice += 1;
                }
            } else {
                skipped += 1;
            }
        }
    }
    let seconds = started.elapsed().as_secs_f64();
    println!(
        "crawled {crawled}, skipped {skipped} as already seen, in {seconds:.2} s \
         ({:.0} URLs/s, batches of {BATCH})",
        frontier.len() as f64 / seconds
    );
    println!("crawled twice: {crawled_twice} URL(s)");

    let distinct = frontier.iter().collect::<HashSet<_>>().len() as u64;
    println!(
        "distinct URLs {distinct}: {} new URL(s) wrongly skipped as false positives \
         (expected at most about {:.1})",
        distinct - crawled,
        distinct as f64 * fpr
    );

    let info = seen.info().await?;
    println!(
        "filter info: {} level(s) of at most {}, {} items in a capacity of {} so far; \
         {} of {} bits set, false-positive rate now {:.2e}",
        info.levels,
        info.max_levels,
        info.items,
        info.capacity,
        info.filter.bits_set,
        info.filter.bits,
        info.filter.estimated_fpr
    );

    seen.clear().await?; // clean up, so a rerun prints the same

    // What the filter promises, checked: no URL crawled twice, each crawl one new item.
    if crawled_twice > 0 || info.items != crawled {
        return Err(support::Fatal(format!(
            "{crawled_twice} URL(s) crawled twice; the filter counted {} new items for \
             {crawled} crawls",
            info.items
        ))
        .into());
    }
    Ok(())
}

/// `[--capacity N] [FILE]`: the first level's URLs, and the file of URLs.
const USAGE: &str = "usage: crawler [--capacity N] [urls.txt]: crawl each URL once (a synthetic \
                     frontier without a file; --capacity: the first level's URLs, 10,000)";

fn parse_args(
    mut args: impl Iterator<Item = String>,
) -> Result<(u64, Option<String>), support::Fatal> {
    let usage = USAGE;
    let (mut capacity, mut path) = (FIRST_LEVEL, None);
    while let Some(arg) = args.next() {
        let value = if arg == "--capacity" {
            args.next()
        } else if let Some(value) = arg.strip_prefix("--capacity=") {
            Some(value.to_owned())
        } else if arg.starts_with('-') {
            return Err(support::Fatal(format!("unknown option {arg}; {usage}")));
        } else if path.is_none() {
            path = Some(arg);
            continue;
        } else {
            return Err(support::Fatal(format!("one file of URLs at most; {usage}")));
        };
        capacity = value
            .and_then(|v| v.parse::<u64>().ok())
            .filter(|&n| n > 0)
            .ok_or_else(|| {
                support::Fatal(format!(
                    "--capacity takes a whole number of URLs, 1 or more; {usage}"
                ))
            })?;
    }
    Ok((capacity, path))
}

/// The non-empty lines of the file at `path` (a trailing `\r` is dropped).
fn read_urls(path: &str) -> Result<Vec<String>, support::Fatal> {
    let text = std::fs::read_to_string(path)
        .map_err(|err| support::Fatal(format!("cannot read {path}: {err}")))?;
    Ok(text
        .lines()
        .map(str::trim_end)
        .filter(|line| !line.is_empty())
        .map(String::from)
        .collect())
}

/// `count` URLs in which about `repeat_share` of them repeat an earlier URL, always the same
/// ones (a fixed-seed generator, no `rand` needed).
fn synthetic_frontier(count: usize, repeat_share: f64) -> Vec<String> {
    let mut rng = Lcg(42);
    let mut urls: Vec<String> = Vec::with_capacity(count);
    let mut distinct = 0;
    while urls.len() < count {
        if distinct > 0 && rng.next_f64() < repeat_share {
            // A link to a page found before.
            let earlier = rng.next_below(distinct);
            urls.push(page_url(earlier));
        } else {
            urls.push(page_url(distinct));
            distinct += 1;
        }
    }
    urls
}

fn page_url(n: u64) -> String {
    format!("https://site{}.example/articles/{n}?ref=frontier", n % 97)
}

/// A tiny linear congruential generator (Knuth's MMIX constants): fixed seed, same output.
struct Lcg(u64);

impl Lcg {
    fn next_u64(&mut self) -> u64 {
        self.0 = self
            .0
            .wrapping_mul(6364136223846793005)
            .wrapping_add(1442695040888963407);
        self.0 >> 11 // the high bits are the random ones
    }

    /// Uniform in [0, 1).
    fn next_f64(&mut self) -> f64 {
        self.next_u64() as f64 / (1u64 << 53) as f64
    }

    /// Uniform-ish in 0..n (the modulo bias is negligible here).
    fn next_below(&mut self, n: u64) -> u64 {
        self.next_u64() % n
    }
}
