//! Quick start: a Bloom filter in a Redis string.
//!
//! ```text
//! cargo run --example quickstart                                   # throwaway redis-server
//! REDIS_URL=redis://127.0.0.1:6379 cargo run --example quickstart  # your Redis
//! ```

mod support;

use redbloom::redis;
use redbloom::{KeyTtl, RedisBloom};
use std::time::Duration;

#[tokio::main]
async fn main() -> Result<(), Box<dyn std::error::Error>> {
    support::no_arguments(
        "usage: quickstart (no arguments): a filter's add, exists, info and TTL",
    )?;
    // A Redis: $REDIS_URL, or a throwaway redis-server that stops when `_server` is dropped.
    let (url, _server) = support::redis_url()?;
    let mut conn = support::connect(&url).await?;

    // 1. Size a filter for the items you expect and the false-positive rate you accept.
    //    Nothing is sent to Redis yet: the key appears on the first add.
    let bloom = RedisBloom::builder("redbloom:example:quickstart")
        .expected_items(10_000)
        .false_positive_rate(1e-4)
        .build(conn.clone())?;
    bloom.clear().await?; // start empty, even if an earlier run was interrupted
    println!(
        "filter {:?}: {} bits ({} KiB), {} bit locations per item",
        bloom.key(),
        bloom.bits(),
        bloom.bits().div_ceil(8 * 1024),
        bloom.hashes()
    );

    // 2. add() returns true when the item is certainly new, false when it was (probably) seen.
    println!("\nadd:");
    for item in ["alice", "bob", "alice"] {
        println!("  add({item:?}) = {}", bloom.add(item).await?);
    }

    // 3. exists(): false means certainly never added; true means added (or a false positive).
    println!("exists:");
    for item in ["alice", "carol"] {
        println!("  exists({item:?}) = {}", bloom.exists(item).await?);
    }

    // 4. The batch versions: one round trip, one result per item in input order.
    //    Within a batch, a repeated item is new only at its first occurrence.
    let batch = ["bob", "carol", "dave", "carol"];
    println!("add_many({batch:?}) = {:?}", bloom.add_many(&batch).await?);
    let probe = ["alice", "dave", "erin"];
    println!(
        "exists_many({probe:?}) = {:?}",
        bloom.exists_many(&probe).await?
    );

    // 5. info(): how full the filter is. Give it a TTL first, as a daily filter might have.
    bloom.expire(Duration::from_secs(24 * 3600)).await?;
    let info = bloom.info().await?;
    println!("\ninfo:");
    println!("  bits            {}", info.bits);
    println!("  bits set        {}", info.bits_set);
    println!("  bytes in Redis  {}", info.bytes);
    println!("  estimated items {:.2}", info.estimated_items);
    println!("  estimated fpr   {:.3e}", info.estimated_fpr);
    let ttl = match info.ttl {
        KeyTtl::Missing => "key missing".to_string(),
        KeyTtl::Persistent => "never expires".to_string(),
        KeyTtl::Expires(ttl) => format!("{} s", ttl.as_millis().div_ceil(1000)),
    };
    println!("  ttl             {ttl}");

    // 6. The bytes are go-zero's: `RedisBloom::new(conn, key, bits)` is go-zero's
    //    `bloom.New(store, key, bits)`, and a Go service can read and write the same key.
    let key = "redbloom:example:quickstart:gozero";
    let gozero = RedisBloom::new(conn.clone(), key, 64)?;
    gozero.clear().await?;
    gozero.add("hello").await?;
    gozero.add("world").await?;
    let bytes: Vec<u8> = redis::cmd("GET").arg(key).query_async(&mut conn).await?;
    let hex: String = bytes.iter().map(|b| format!("{b:02x}")).collect();
    println!("\ngo-zero layout, 64 bits, after add(\"hello\") and add(\"world\"):");
    println!("  GET {key} = {hex}  (go-zero writes a52c9b5aa00a14)");

    // Clean up, so a rerun prints the same.
    bloom.clear().await?;
    gozero.clear().await?;
    Ok(())
}
