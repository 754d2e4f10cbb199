//! A crawler's "URL seen?" check: crawl each URL of the frontier once.
//!
//! ```text
//! cargo run --example crawler              # a synthetic frontier of 200,000 URLs, ~30% repeats
//! cargo run --example crawler -- urls.txt  # your URLs, one per line
//! ```
//!
//! The filter remembers every URL in a fixed number of bits, however long the URLs are, and
//! every crawler process pointed at the same key shares it. The price is false positives: a
//! URL never seen before whose bits all happen to be set already is wrongly skipped. It is
//! never the other way round: a URL is crawled at most once.

mod support;

use redbloom::RedisBloom;
use std::collections::HashSet;
use std::time::Instant;

/// URLs per round trip to Redis.
const BATCH: usize = 1_000;

#[tokio::main]
async fn main() -> Result<(), Box<dyn std::error::Error>> {
    let frontier = match std::env::args().nth(1) {
        Some(path) => read_urls(&path)?,
        None => synthetic_frontier(200_000, 0.30),
    };

    // A Redis: $REDIS_URL, or a throwaway redis-server that stops when `_server` is dropped.
    let (url, _server) = support::redis_url()?;
    let conn = support::connect(&url).await?;

    // Size the filter for the number of URLs (an upper bound on the distinct ones) at 1 false
    // positive in 10,000 checks of a new URL.
    let fpr = 1e-4;
    let seen = RedisBloom::builder("redbloom:example:crawler")
        .expected_items(frontier.len().max(1) as u64)
        .false_positive_rate(fpr)
        .build(conn)?;
    seen.clear().await?; // start empty, even if an earlier run was interrupted
    println!(
        "frontier: {} URLs; filter: {} bits ({} KiB) for a false-positive rate of {fpr:e}",
        frontier.len(),
        seen.bits(),
        seen.bits().div_ceil(8 * 1024)
    );

    let started = Instant::now();
    let (mut crawled, mut skipped) = (0u64, 0u64);
    for batch in frontier.chunks(BATCH) {
        // One round trip marks the whole batch as seen. `true` = certainly new: crawl it.
        let new = seen.add_many(batch).await?;
        for (_url, is_new) in batch.iter().zip(new) {
            if is_new {
                crawled += 1; // a real crawler would fetch `_url` here
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

    // The truth, only to grade the filter: a real crawler would not keep this set, as it
    // grows with every URL (that is what the filter is for).
    let distinct = frontier.iter().collect::<HashSet<_>>().len() as u64;
    println!(
        "distinct URLs {distinct}: {} new URL(s) wrongly skipped as false positives \
         (expected at most about {:.1})",
        distinct - crawled,
        distinct as f64 * fpr
    );

    let info = seen.info().await?;
    println!(
        "filter info: {} of {} bits set, ~{:.0} items, false-positive rate now {:.2e}",
        info.bits_set, info.bits, info.estimated_items, info.estimated_fpr
    );

    seen.clear().await?; // clean up, so a rerun prints the same
    Ok(())
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
