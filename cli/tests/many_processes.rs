//! Four `redbloom load` processes and sixteen tokio tasks writing one filter at the same time:
//! every item of every writer is found afterwards (no lost writes across processes).

// The integration-test harness of the library package, shared: a real Redis for every test.
#[path = "../../tests/common/mod.rs"]
mod common;

use redbloom::RedisBloom;
use std::io::Write;
use std::process::{Command, Stdio};
use std::sync::Arc;
use tokio::sync::Barrier;

const PROCESSES: usize = 4;
const LINES: usize = 5_000;
const TASKS: usize = 16;
const PER_TASK: usize = 500;

fn line(process: usize, i: usize) -> String {
    format!("process{process}:line{i}")
}

fn task_item(task: usize, i: usize) -> String {
    format!("task{task}:item{i}")
}

/// The default batch on a 75 KB filter takes the dense path: concurrent merges of whole
/// bitmaps (through the one scratch key) from four processes.
#[tokio::test(flavor = "multi_thread", worker_threads = 4)]
async fn dense_loads_and_tasks_lose_nothing() {
    writers_lose_nothing(600_000, &[]).await;
}

/// Small batches of `BITFIELD` on a 1 MB filter, interleaved as finely as possible.
#[tokio::test(flavor = "multi_thread", worker_threads = 4)]
async fn bitfield_loads_and_tasks_lose_nothing() {
    writers_lose_nothing(8_000_000, &["--batch", "100", "--pipeline", "4"]).await;
}

async fn writers_lose_nothing(bits: u64, load_args: &[&str]) {
    let redis = common::redis().await;
    let key = common::unique_key("many-processes");
    let bloom = RedisBloom::new(redis.connection().await, &key, bits).unwrap();

    let dir = tempfile::tempdir().unwrap();
    let files: Vec<_> = (0..PROCESSES)
        .map(|p| {
            let path = dir.path().join(format!("process{p}.txt"));
            let mut file = std::fs::File::create(&path).unwrap();
            for i in 0..LINES {
                writeln!(file, "{}", line(p, i)).unwrap();
            }
            path
        })
        .collect();

    // The tasks start when the processes have been spawned, and each yields between adds so
    // that they keep writing while the processes load.
    let start = Arc::new(Barrier::new(TASKS + 1));
    let mut tasks = Vec::new();
    for task in 0..TASKS {
        let bloom = bloom.clone();
        let start = Arc::clone(&start);
        tasks.push(tokio::spawn(async move {
            start.wait().await;
            for i in 0..PER_TASK {
                bloom.add(task_item(task, i)).await.unwrap();
                if i % 50 == 0 {
                    tokio::task::yield_now().await;
                }
            }
        }));
    }
    let children: Vec<_> = files
        .iter()
        .map(|file| {
            Command::new(env!("CARGO_BIN_EXE_redbloom"))
                .env_remove("REDIS_URL")
                .args(["--url", redis.url(), "--key", &key])
                .args(["--bits", &bits.to_string(), "--json", "load"])
                .arg(file)
                .args(load_args)
                .stdout(Stdio::piped())
                .stderr(Stdio::piped())
                .spawn()
                .unwrap()
        })
        .collect();
    start.wait().await;

    for task in tasks {
        task.await.expect("an adding task failed");
    }
    let outputs = tokio::task::spawn_blocking(move || {
        children
            .into_iter()
            .map(|child| child.wait_with_output().unwrap())
            .collect::<Vec<_>>()
    })
    .await
    .unwrap();
    for (p, out) in outputs.iter().enumerate() {
        let stdout = String::from_utf8_lossy(&out.stdout);
        assert!(
            out.status.success(),
            "process {p}: {:?}: {}",
            out.status,
            String::from_utf8_lossy(&out.stderr)
        );
        let report: serde_json::Value = serde_json::from_str(stdout.trim()).unwrap();
        assert_eq!(report["items"], LINES, "process {p}: {stdout}");
    }

    let mut all: Vec<String> = (0..PROCESSES)
        .flat_map(|p| (0..LINES).map(move |i| line(p, i)))
        .collect();
    all.extend((0..TASKS).flat_map(|t| (0..PER_TASK).map(move |i| task_item(t, i))));
    assert_eq!(all.len(), PROCESSES * LINES + TASKS * PER_TASK);
    let mut missing = Vec::new();
    for chunk in all.chunks(2_000) {
        let found = bloom.exists_many(chunk).await.unwrap();
        missing.extend(
            chunk
                .iter()
                .zip(found)
                .filter(|(_, found)| !found)
                .map(|(item, _)| item.clone()),
        );
    }
    assert!(
        missing.is_empty(),
        "{} of {} items are missing, such as {:?}",
        missing.len(),
        all.len(),
        &missing[..missing.len().min(5)]
    );
    // Sanity: the filter is not saturated, so the check above could fail.
    let info = bloom.info().await.unwrap();
    assert!(info.estimated_fpr < 1e-3, "{info:?}");
    assert!(
        !bloom.exists("never added").await.unwrap() || !bloom.exists("nor this").await.unwrap()
    );
}
