//! Redis Sentinel (SPEC.md §3 "Sentinel and lines out", issue 52): a filter over
//! `redbloom::sentinel::SentinelConnection` follows the master across `SENTINEL FAILOVER` and
//! a killed master, and with `wait_for_replicas(2, …)` loses no acknowledged add. Every test
//! starts its own group (one master, two replicas with `appendfsync always`, three sentinels).
#![cfg(feature = "sentinel")]

mod common;

use common::sentinel::SentinelGroup;
use redbloom::sentinel::{Node, SentinelConnection, SentinelUrl};
use redbloom::{Builder, Error, Retry};
use redis::AsyncConnectionConfig;
use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::Arc;
use std::time::{Duration, Instant};

fn config() -> AsyncConnectionConfig {
    AsyncConnectionConfig::new()
        .set_connection_timeout(Some(Duration::from_secs(1)))
        // Above WAIT's own timeout, so that too few replicas is `NotReplicated`, not a timeout.
        .set_response_timeout(Some(Duration::from_secs(3)))
}

async fn master(group: &SentinelGroup) -> SentinelConnection {
    let url: SentinelUrl = group.url().parse().expect("a sentinel URL");
    SentinelConnection::open(&url, Node::Master, config())
        .await
        .expect("the sentinels name a master")
}

fn builder(key: &str) -> Builder<redbloom::kind::Plain> {
    Builder::new(key)
        .expected_items(1_000_000)
        .false_positive_rate(0.01)
        // Above what a killed master's return takes (about 15 s here until it is a replica
        // again), plus the queue of 64 callers' `WAIT`s, which take turns on the connection.
        .retry(Retry::for_duration(Duration::from_secs(60)))
        .wait_for_replicas(2, Duration::from_millis(250))
}

/// On a blocking thread: the group's faults are synchronous (process kills, polling).
async fn blocking<T: Send + 'static>(f: impl FnOnce() -> T + Send + 'static) -> T {
    tokio::task::spawn_blocking(f).await.expect("no panic")
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn follows_the_master_across_a_failover_and_reads_from_a_replica() {
    let group = Arc::new(SentinelGroup::start().expect("a Sentinel group"));
    let conn = master(&group).await;
    let first = conn.node_address().expect("connected");
    let filter = builder("sentinel-basic").build(conn.clone()).unwrap();
    assert!(filter.add(b"before").await.unwrap());

    let g = group.clone();
    blocking(move || g.failover()).await.expect("a failover");
    // The old connection's node is a replica now: the next write meets READONLY (or a closed
    // connection), asks the sentinels again, and goes to the new master.
    assert!(filter.add(b"after").await.unwrap());
    let moved = conn.node_address().expect("connected");
    assert_ne!(moved, first, "the connection follows the new master");
    assert_eq!(
        Some(moved.rsplit(':').next().unwrap().parse::<u16>().unwrap()),
        group.master_port()
    );
    assert!(
        filter.exists(b"before").await.unwrap(),
        "replicated before the failover"
    );
    assert!(!filter.add(b"after").await.unwrap(), "seen");

    // Reads from a replica the sentinels list.
    let url: SentinelUrl = group.url().parse().unwrap();
    let replica = SentinelConnection::open(&url, Node::Replica, config())
        .await
        .expect("a replica");
    assert_ne!(replica.node_address(), conn.node_address());
    let reader = builder("sentinel-basic").build(replica).unwrap();
    assert!(reader.exists(b"before").await.unwrap());
    assert!(
        reader.exists(b"after").await.unwrap(),
        "WAIT 2: every replica has it"
    );
    assert!(!reader.exists(b"never").await.unwrap());
}

#[tokio::test]
async fn a_group_no_sentinel_knows_is_an_error_naming_it() {
    let group = SentinelGroup::start().expect("a Sentinel group");
    let url: SentinelUrl = group.url().replace("/mymaster", "/other").parse().unwrap();
    let err = SentinelConnection::open(&url, Node::Master, config())
        .await
        .unwrap_err();
    assert!(err.to_string().to_lowercase().contains("master"), "{err}");
}

/// Issue 52's run through the library: 64 tasks of single-item adds for at least 60 s, with
/// `SENTINEL FAILOVER` twice and the master killed once (started again once the failover is
/// done, to rejoin as a replica); every add answers, and every item is found after. A write in
/// flight across a failover may answer "outcome unknown" (the new master cannot prove that its
/// first attempt, sent to the old one, was not applied): it is added again, as an application
/// does, and counted.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn single_adds_from_64_tasks_survive_two_failovers_and_a_killed_master() {
    const TASKS: usize = 64;
    const LENGTH: Duration = Duration::from_secs(60);
    // At most this many adds per task (a bound on the load whatever the machine's speed).
    const MOST: usize = 20_000;
    let group = Arc::new(std::sync::Mutex::new(
        SentinelGroup::start().expect("a Sentinel group"),
    ));
    let url = group.lock().unwrap().url();
    let conn = SentinelConnection::open(&url.parse().unwrap(), Node::Master, config())
        .await
        .unwrap();
    let filter = Arc::new(builder("sentinel-64").build(conn).unwrap());
    let stop = Arc::new(AtomicBool::new(false));
    let started = Instant::now();

    let writers: Vec<_> = (0..TASKS)
        .map(|task| {
            let (filter, stop) = (filter.clone(), stop.clone());
            tokio::spawn(async move {
                let (mut acked, mut errors, mut unknown) = (Vec::new(), Vec::new(), 0);
                for i in 0..MOST {
                    if stop.load(Ordering::Relaxed) {
                        break;
                    }
                    let item = format!("t{task}-{i}");
                    match filter.add(item.as_bytes()).await {
                        Ok(_) => acked.push(item),
                        // A write in flight across the failover whose record the new master
                        // cannot prove absent: its answer is unknown, and adding it again
                        // (what an application does) makes sure it is in.
                        Err(Error::OutcomeUnknown { .. }) => {
                            unknown += 1;
                            match filter.add(item.as_bytes()).await {
                                Ok(_) => acked.push(item),
                                Err(err) => errors.push(format!("{item} again: {err} ({err:?})")),
                            }
                        }
                        Err(err) => errors.push(format!("{item}: {err} ({err:?})")),
                    }
                    // Paced: about 64 × 200 adds a second, so that the run lasts.
                    tokio::time::sleep(Duration::from_millis(5)).await;
                }
                (acked, errors, unknown)
            })
        })
        .collect();

    let g = group.clone();
    let faults = blocking(move || -> std::io::Result<Vec<String>> {
        let mut done = Vec::new();
        let at = |secs: u64| {
            std::thread::sleep(Duration::from_secs(secs).saturating_sub(started.elapsed()))
        };
        at(8);
        g.lock().unwrap().failover()?;
        done.push(format!(
            "failover at {:.1} s",
            started.elapsed().as_secs_f64()
        ));
        at(22);
        g.lock().unwrap().failover()?;
        done.push(format!(
            "failover at {:.1} s",
            started.elapsed().as_secs_f64()
        ));
        at(36);
        let killed = g.lock().unwrap().kill_master()?;
        done.push(format!(
            "master killed, replaced at {:.1} s",
            started.elapsed().as_secs_f64()
        ));
        g.lock().unwrap().restart(killed)?;
        done.push(format!(
            "old master back as a replica at {:.1} s",
            started.elapsed().as_secs_f64()
        ));
        Ok(done)
    })
    .await
    .expect("the faults ran");
    let remaining = LENGTH.saturating_sub(started.elapsed());
    tokio::time::sleep(remaining).await;
    stop.store(true, Ordering::Relaxed);

    let (mut acked, mut errors, mut unknown) = (Vec::new(), Vec::new(), 0);
    for writer in writers {
        let (a, e, u) = writer.await.unwrap();
        acked.extend(a);
        errors.extend(e);
        unknown += u;
    }
    eprintln!("{faults:?}; {unknown} outcomes unknown (added again)");
    assert!(started.elapsed() >= LENGTH);
    assert!(
        errors.is_empty(),
        "{} adds failed: {:?}",
        errors.len(),
        &errors[..errors.len().min(5)]
    );
    assert!(acked.len() > 10_000, "only {} adds", acked.len());
    let found = filter.exists_many(&acked).await.unwrap();
    let missing: Vec<_> = acked
        .iter()
        .zip(&found)
        .filter(|(_, f)| !**f)
        .map(|(i, _)| i)
        .collect();
    assert!(
        missing.is_empty(),
        "{} of {} acknowledged adds not found after {faults:?}: {:?}",
        missing.len(),
        acked.len(),
        &missing[..missing.len().min(5)]
    );
    eprintln!("{} adds, none lost, through {faults:?}", acked.len());
}
