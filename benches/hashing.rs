//! CPU cost of the pure parts: an item's 14 go-zero locations, and the offsets of a batch.
//!
//! `cargo bench --bench hashing`. Each group compares `redbloom::gozero_locations` (one pass over
//! the shared 16-byte blocks, then 14 short finalizations) with the original approach kept here
//! as `reference_locations` (14 full hashes with the `murmur3` crate through `Read::chain`).

use std::hint::black_box;
use std::io::Read;
use std::time::Duration;

use criterion::{criterion_group, criterion_main, BenchmarkId, Criterion, Throughput};
use redbloom::{gozero_locations, GOZERO_HASHES};

/// go-zero's default-ish size: 20 bits per item for a million items.
const BITS: u64 = 20_000_000;

/// The original implementation: `Sum64(data ‖ byte(i)) mod bits` with 14 full crate hashes.
fn reference_locations(data: &[u8], bits: u64) -> [u64; GOZERO_HASHES] {
    std::array::from_fn(|i| {
        let suffix = [i as u8];
        let hash = murmur3::murmur3_x64_128(&mut data.chain(&suffix[..]), 0).unwrap_or_default();
        hash as u64 % bits
    })
}

/// `len` deterministic, URL-ish bytes, different for each `seed`.
fn item(len: usize, seed: usize) -> Vec<u8> {
    let text = format!("https://example.com/items/{seed}/page?ref=bench&n={seed:08}#");
    text.bytes().cycle().take(len).collect()
}

fn locations(c: &mut Criterion) {
    let mut group = c.benchmark_group("gozero_locations");
    group.throughput(Throughput::Elements(1));
    for len in [8, 40, 100, 1000] {
        let data = item(len, 42);
        assert_eq!(
            gozero_locations(&data, BITS),
            reference_locations(&data, BITS)
        );
        group.bench_with_input(BenchmarkId::new("new", len), &data, |b, data| {
            b.iter(|| gozero_locations(black_box(data), black_box(BITS)))
        });
        group.bench_with_input(BenchmarkId::new("reference", len), &data, |b, data| {
            b.iter(|| reference_locations(black_box(data), black_box(BITS)))
        });
    }
    group.finish();
}

/// The `ARGV` of a batch call: `RedisBloom`'s private `batch_args` pushes k, then the 14
/// offsets of each item into one preallocated `Vec<u64>`. Nothing new is exported to bench it;
/// this is the same public work (the bounds check it also does is a compare per offset).
fn batch(c: &mut Criterion) {
    const ITEMS: usize = 1000;
    let items: Vec<Vec<u8>> = (0..ITEMS).map(|n| item(36 + n % 9, n)).collect();
    let mut args: Vec<u64> = Vec::with_capacity(1 + ITEMS * GOZERO_HASHES);

    let mut group = c.benchmark_group("batch_args_1000x40B");
    group.throughput(Throughput::Elements(ITEMS as u64));
    group.bench_function("new", |b| {
        b.iter(|| {
            args.clear();
            args.push(GOZERO_HASHES as u64);
            for item in black_box(&items) {
                args.extend_from_slice(&gozero_locations(item, BITS));
            }
            black_box(&args);
        })
    });
    group.bench_function("reference", |b| {
        b.iter(|| {
            args.clear();
            args.push(GOZERO_HASHES as u64);
            for item in black_box(&items) {
                args.extend_from_slice(&reference_locations(item, BITS));
            }
            black_box(&args);
        })
    });
    group.finish();
}

fn config() -> Criterion {
    Criterion::default()
        .measurement_time(Duration::from_secs(2))
        .warm_up_time(Duration::from_millis(500))
        .sample_size(30)
}

criterion_group! {
    name = benches;
    config = config();
    targets = locations, batch
}
criterion_main!(benches);
