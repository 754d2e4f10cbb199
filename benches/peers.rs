//! The alternatives redbloom is measured against, run against a real server by
//! `scripts/bench.sh` (not a criterion bench):
//!
//! ```text
//! cargo bench --bench peers -- gozero URL KEY BITS add|exists ITEMS CLIENTS
//! cargo bench --bench peers -- redisbloom URL KEY add|exists PREFIX ITEMS BATCH CONCURRENCY [CAPACITY FPR]
//! cargo bench --bench peers -- bitfield URL KEY BITS add|exists ITEMS BATCH CONCURRENCY
//! ```
//!
//! `gozero` is the per-item pattern of go-zero's `core/bloom` (and most Redis-bitmap Bloom
//! clients): CLIENTS clients, each with its own connection, each sending one `EVALSHA` of
//! go-zero's set or test script per item and waiting for its reply. Items are `bench:0..N-1`,
//! as in `redbloom bench`.
//!
//! `bitfield` sends go-zero's offsets by hand, as a client without redbloom would with the
//! cheapest commands: `BITFIELD KEY SET u1 OFFSET 1 ...` to add (new: a bit was 0) and
//! `BITFIELD_RO KEY GET u1 OFFSET ...` to check, BATCH items per command, from CONCURRENCY tasks
//! sharing one connection (what redbloom's go-zero filter sent per item before its writes were
//! recorded for exact answers across retries; nothing recorded here).
//!
//! `redisbloom` drives the RedisBloom module: `BF.MADD` / `BF.MEXISTS` of BATCH items
//! (`PREFIX0..PREFIX{N-1}`) from CONCURRENCY tasks sharing one connection; with CAPACITY and
//! FPR it first runs `BF.RESERVE KEY FPR CAPACITY`.
//!
//! Each prints one JSON line: items, seconds, items_per_sec, per-call p50/p99 in µs, and the
//! number of items answered true (new for add, present for exists).

use redis::aio::MultiplexedConnection;
use std::sync::atomic::{AtomicU64, Ordering};
use std::sync::Arc;
use std::time::Instant;

#[path = "../tests/common/gozero.rs"]
mod gozero;

type Outcome = (Vec<u64>, u64);

// One thread, like `redbloom` itself, so both sides of a comparison run the same runtime.
#[tokio::main(flavor = "current_thread")]
async fn main() {
    let args: Vec<String> = std::env::args()
        .skip(1)
        .filter(|a| a != "--bench")
        .collect();
    let result = match args.first().map(String::as_str) {
        Some("gozero") if args.len() == 7 => gozero(&args[1..]).await,
        Some("redisbloom") if args.len() == 8 || args.len() == 10 => redisbloom(&args[1..]).await,
        Some("bitfield") if args.len() == 8 => bitfield(&args[1..]).await,
        // `cargo bench` with no arguments runs every bench target: nothing to do here.
        None => return,
        _ => Err("usage: see the top of benches/peers.rs".into()),
    };
    if let Err(err) = result {
        eprintln!("peers: {err}");
        std::process::exit(2);
    }
}

type Error = Box<dyn std::error::Error + Send + Sync>;

async fn gozero(args: &[String]) -> Result<(), Error> {
    let (url, key, bits) = (&args[0], args[1].clone(), args[2].parse::<u64>()?);
    let add = op(&args[3])?;
    let (items, clients) = (args[4].parse::<u64>()?, args[5].parse::<u64>()?);
    let client = redis::Client::open(url.as_str())?;
    let script = Arc::new(redis::Script::new(if add {
        gozero::SET_SCRIPT
    } else {
        gozero::TEST_SCRIPT
    }));
    let mut conns = Vec::new();
    for _ in 0..clients {
        let mut conn = client.get_multiplexed_async_connection().await?;
        script.prepare_invoke().load_async(&mut conn).await?;
        conns.push(conn);
    }
    let next = Arc::new(AtomicU64::new(0));
    let started = Instant::now();
    let tasks = conns.into_iter().map(|mut conn| {
        let (next, key, script) = (next.clone(), key.clone(), script.clone());
        tokio::spawn(async move {
            let (mut latencies, mut hits) = (Vec::new(), 0);
            loop {
                let i = next.fetch_add(1, Ordering::Relaxed);
                if i >= items {
                    return Ok::<Outcome, redis::RedisError>((latencies, hits));
                }
                let item = format!("bench:{i}");
                // go-zero sends the offsets as decimal strings.
                let offsets: Vec<String> = redbloom::gozero_locations(item.as_bytes(), bits)
                    .iter()
                    .map(u64::to_string)
                    .collect();
                let call = Instant::now();
                let reply: Option<i64> = script
                    .key(&key)
                    .arg(offsets)
                    .invoke_async(&mut conn)
                    .await?;
                latencies.push(call.elapsed().as_micros() as u64);
                hits += u64::from(reply == Some(1));
            }
        })
    });
    let outcomes = futures_util::future::join_all(tasks.collect::<Vec<_>>()).await;
    report("gozero", add, items, clients, 1, started, outcomes)
}

async fn redisbloom(args: &[String]) -> Result<(), Error> {
    let (url, key, add, prefix) = (&args[0], args[1].clone(), op(&args[2])?, args[3].clone());
    let (items, batch) = (args[4].parse::<u64>()?, args[5].parse::<u64>()?);
    let concurrency = args[6].parse::<u64>()?;
    let client = redis::Client::open(url.as_str())?;
    let mut conn: MultiplexedConnection = client.get_multiplexed_async_connection().await?;
    if let [capacity, fpr] = &args[7..] {
        let () = redis::cmd("BF.RESERVE")
            .arg(&key)
            .arg(fpr)
            .arg(capacity)
            .query_async(&mut conn)
            .await?;
    }
    let next = Arc::new(AtomicU64::new(0));
    let started = Instant::now();
    let tasks = (0..concurrency).map(|_| {
        let (next, key, prefix, mut conn) =
            (next.clone(), key.clone(), prefix.clone(), conn.clone());
        tokio::spawn(async move {
            let (mut latencies, mut hits) = (Vec::new(), 0);
            loop {
                let first = next.fetch_add(batch, Ordering::Relaxed);
                if first >= items {
                    return Ok::<Outcome, redis::RedisError>((latencies, hits));
                }
                let mut cmd = redis::cmd(if add { "BF.MADD" } else { "BF.MEXISTS" });
                cmd.arg(&key);
                for i in first..items.min(first + batch) {
                    cmd.arg(format!("{prefix}{i}"));
                }
                let call = Instant::now();
                let replies: Vec<i64> = cmd.query_async(&mut conn).await?;
                latencies.push(call.elapsed().as_micros() as u64);
                hits += replies.iter().filter(|&&r| r == 1).count() as u64;
            }
        })
    });
    let outcomes = futures_util::future::join_all(tasks.collect::<Vec<_>>()).await;
    report(
        "redisbloom",
        add,
        items,
        concurrency,
        batch,
        started,
        outcomes,
    )
}

async fn bitfield(args: &[String]) -> Result<(), Error> {
    let (url, key, bits, add) = (
        &args[0],
        args[1].clone(),
        args[2].parse::<u64>()?,
        op(&args[3])?,
    );
    let (items, batch) = (args[4].parse::<u64>()?, args[5].parse::<u64>()?.max(1));
    let concurrency = args[6].parse::<u64>()?;
    let client = redis::Client::open(url.as_str())?;
    let conn: MultiplexedConnection = client.get_multiplexed_async_connection().await?;
    let next = Arc::new(AtomicU64::new(0));
    let started = Instant::now();
    let tasks = (0..concurrency).map(|_| {
        let (next, key, mut conn) = (next.clone(), key.clone(), conn.clone());
        tokio::spawn(async move {
            let (mut latencies, mut hits) = (Vec::new(), 0);
            loop {
                let first = next.fetch_add(batch, Ordering::Relaxed);
                if first >= items {
                    return Ok::<Outcome, redis::RedisError>((latencies, hits));
                }
                let mut cmd = redis::cmd(if add { "BITFIELD" } else { "BITFIELD_RO" });
                cmd.arg(&key);
                let mut k = 0;
                for i in first..items.min(first + batch) {
                    let offsets = redbloom::gozero_locations(format!("bench:{i}").as_bytes(), bits);
                    k = offsets.len();
                    for offset in offsets {
                        match add {
                            true => cmd.arg("SET").arg("u1").arg(offset).arg(1),
                            false => cmd.arg("GET").arg("u1").arg(offset),
                        };
                    }
                }
                let call = Instant::now();
                let replies: Vec<i64> = cmd.query_async(&mut conn).await?;
                latencies.push(call.elapsed().as_micros() as u64);
                // New: one of its old bits was 0; present: all of its bits are 1.
                hits += replies
                    .chunks(k.max(1))
                    .filter(|bits| match add {
                        true => bits.contains(&0),
                        false => !bits.contains(&0),
                    })
                    .count() as u64;
            }
        })
    });
    let outcomes = futures_util::future::join_all(tasks.collect::<Vec<_>>()).await;
    report(
        "bitfield",
        add,
        items,
        concurrency,
        batch,
        started,
        outcomes,
    )
}

fn op(name: &str) -> Result<bool, Error> {
    match name {
        "add" => Ok(true),
        "exists" => Ok(false),
        other => Err(format!("op must be add or exists, not {other}").into()),
    }
}

fn report(
    peer: &str,
    add: bool,
    items: u64,
    concurrency: u64,
    batch: u64,
    started: Instant,
    outcomes: Vec<Result<Result<Outcome, redis::RedisError>, tokio::task::JoinError>>,
) -> Result<(), Error> {
    let seconds = started.elapsed().as_secs_f64();
    let (mut latencies, mut hits) = (Vec::new(), 0);
    for outcome in outcomes {
        let (l, h) = outcome??;
        latencies.extend(l);
        hits += h;
    }
    latencies.sort_unstable();
    let pct = |p: f64| {
        latencies
            [((p / 100.0 * latencies.len() as f64).ceil() as usize).clamp(1, latencies.len()) - 1]
    };
    println!(
        "{{\"peer\":\"{peer}\",\"op\":\"{}\",\"items\":{items},\"concurrency\":{concurrency},\"batch\":{batch},\"seconds\":{seconds:.3},\"items_per_sec\":{:.0},\"p50_us\":{},\"p99_us\":{},\"true\":{hits}}}",
        if add { "add" } else { "exists" },
        items as f64 / seconds,
        pct(50.0),
        pct(99.0),
    );
    Ok(())
}
