//! `redbloom load` and `check` stay in bounded memory whatever the input: a stream without
//! newlines (`/dev/zero`) or a line over the 64 KiB item limit fails at once with one line
//! naming it, and `--batch 1000000 --pipeline 1024` over hundreds of megabytes of long lines
//! keeps the CLI's peak RSS under 224 MiB (its items in flight are bounded by 128 MiB, see
//! `cli/src/commands/stream.rs`; the rest is the library's calls and the binary). Each child
//! runs under `ulimit -v` so that a regression fails the test instead of taking the machine.
//!
//! Its peak RSS is its own alone: GNU time's `%M` when `/usr/bin/time` is installed (the
//! `ru_maxrss` of a process time forked itself, so that what it held before `exec` is time's
//! few hundred KiB), else `VmHWM` polled from `/proc/PID/status` until it exits. Not the
//! `ru_maxrss` of a child of the test process: the test spawns by `vfork`, and Linux keeps the
//! memory the child held before its first `exec` (the test process's own, 157 MiB seen for a
//! CLI of 19 MiB) in its `ru_maxrss`.

// The integration-test harness of the library package, shared: a real Redis for every test.
#[path = "../../tests/common/mod.rs"]
mod common;

use common::cli::{assert_fails, redbloom};
use std::io::{Read, Write};
use std::process::{Command, Stdio};
use std::time::Duration;

/// The item limit (`lines::MAX_ITEM_BYTES`).
const LIMIT: usize = 64 * 1024;
/// Address space the child may map: room for the runtime's thread stacks and malloc arenas,
/// far below what an unbounded read reaches (5 GB in 4 s before the limit existed).
const CAP_KIB: u64 = 2 << 20;
/// The peak RSS allowed to a failing read: the item limit, buffers and the binary.
const FAIL_RSS_KIB: u64 = 48 << 10;
/// The peak RSS allowed to the big load: 128 MiB of items in flight, the 1 MiB read buffer, a
/// line, a chunk, the library's work on the batches in flight (at most 64 MiB of items each, so
/// two at most), each with a 1 MiB filter's dense bitmaps, and the binary's ~12 MiB. Measured:
/// 156 MiB from a pipe (165 MiB with batches of at most 16 MiB; about 195 MiB from a file);
/// before the bound, 333 MiB for this 300 MiB input, growing with it.
const LOAD_RSS_KIB: u64 = 224 << 10;

/// GNU time, which reports the peak RSS of the command it runs (`-f %M`).
const GNU_TIME: &str = "/usr/bin/time";

/// Whether [`GNU_TIME`] is there and writes `%M` to a file (`-o`), as GNU time does (checked
/// once).
fn gnu_time() -> bool {
    static WORKS: std::sync::OnceLock<bool> = std::sync::OnceLock::new();
    *WORKS.get_or_init(|| {
        let Ok(report) = tempfile::NamedTempFile::new() else {
            return false;
        };
        let ran = Command::new(GNU_TIME)
            .args(["-f", "%M", "-o"])
            .arg(report.path())
            .arg("true")
            .stdout(Stdio::null())
            .stderr(Stdio::null())
            .status();
        ran.is_ok_and(|status| status.success()) && peak_in_report(report.path()).is_some()
    })
}

/// The peak RSS (KiB) in GNU time's `-o` file: its last line (a line before it says how a
/// command that failed ended).
fn peak_in_report(path: &std::path::Path) -> Option<u64> {
    let text = std::fs::read_to_string(path).ok()?;
    text.lines().last()?.trim().parse().ok()
}

/// Exit status, stdout, stderr and peak RSS (KiB) of `redbloom ARGS` under [`CAP_KIB`], fed
/// `input` (a writer of standard input) when given. The peak is the child's own: see the
/// module's documentation.
fn measured(
    url: &str,
    key: &str,
    args: &[&str],
    input: Option<Box<dyn FnOnce(std::process::ChildStdin) + Send>>,
) -> (i32, String, String, u64) {
    let bin = assert_cmd::cargo::cargo_bin("redbloom");
    let report = tempfile::NamedTempFile::new().unwrap();
    let timed = gnu_time();
    let mut command = match timed {
        true => {
            let mut time = Command::new(GNU_TIME);
            time.args(["-f", "%M", "-o"]).arg(report.path()).arg("sh");
            time
        }
        false => Command::new("sh"),
    };
    let mut child = command
        .arg("-c")
        .arg(format!("ulimit -v {CAP_KIB} && exec \"$0\" \"$@\""))
        .arg(bin)
        .env_remove("REDIS_URL")
        .args(["--url", url, "--key", key])
        .args(args)
        .stdin(if input.is_some() {
            Stdio::piped()
        } else {
            Stdio::null()
        })
        .stdout(Stdio::piped())
        .stderr(Stdio::piped())
        .spawn()
        .unwrap();
    let pid = child.id();
    let writer = input.map(|write| {
        let stdin = child.stdin.take().unwrap();
        std::thread::spawn(move || write(stdin))
    });
    let drain = |mut pipe: Box<dyn Read + Send>| {
        std::thread::spawn(move || {
            let mut text = String::new();
            let _ = pipe.read_to_string(&mut text);
            text
        })
    };
    let stdout = drain(Box::new(child.stdout.take().unwrap()));
    let stderr = drain(Box::new(child.stderr.take().unwrap()));
    // Without GNU time: the child's VmHWM (the CLI's, once `sh` has exec'd it), polled until
    // it exits. A high-water mark, so a poll at any moment after the peak sees it.
    let mut polled = 0u64;
    let status = loop {
        if !timed {
            polled = polled.max(vm_hwm_kib(pid).unwrap_or(0));
        }
        if let Some(status) = child.try_wait().unwrap() {
            break status;
        }
        std::thread::sleep(Duration::from_millis(2));
    };
    if let Some(writer) = writer {
        writer.join().unwrap();
    }
    let (stdout, stderr) = (stdout.join().unwrap(), stderr.join().unwrap());
    let peak = match timed {
        true => peak_in_report(report.path())
            .unwrap_or_else(|| panic!("no peak RSS from {GNU_TIME}: {stderr}")),
        false => polled,
    };
    // GNU time exits 128 + N for a command killed by signal N.
    let code = status.code().filter(|&code| !(timed && code > 128));
    let Some(code) = code else {
        let signal = std::os::unix::process::ExitStatusExt::signal(&status)
            .or(status.code().map(|code| code - 128));
        panic!("killed by signal {signal:?} (the memory cap?): {stderr}");
    };
    (code, stdout, stderr, peak)
}

/// `VmHWM` (peak RSS, KiB) of a running process.
fn vm_hwm_kib(pid: u32) -> Option<u64> {
    let status = std::fs::read_to_string(format!("/proc/{pid}/status")).ok()?;
    let line = status.lines().find(|line| line.starts_with("VmHWM:"))?;
    line.split_whitespace().nth(1)?.parse().ok()
}

#[tokio::test]
async fn a_stream_without_newlines_fails_at_once_in_bounded_memory() {
    let redis = common::redis().await;
    let key = common::unique_key("cli-zero");
    for command in ["load", "check"] {
        let args = ["--bits", "100000", command, "/dev/zero"];
        let (code, stdout, stderr, peak) = measured(redis.url(), &key, &args, None);
        println!("{command} /dev/zero: peak RSS {peak} KiB");
        assert_eq!(code, 2, "{stderr}");
        assert!(stdout.is_empty(), "{stdout}");
        assert!(
            peak < FAIL_RSS_KIB,
            "{command}: peak RSS {peak} KiB, bound {FAIL_RSS_KIB} KiB"
        );
        // The same run through the shared checks of a failure: one line naming the cause.
        let mut cmd = redbloom(redis.url(), &key, &args);
        cmd.timeout(Duration::from_secs(60));
        assert_fails(
            cmd,
            &["line 1 of /dev/zero is longer than the 65536-byte limit for one item"],
            None,
        );
    }
}

#[tokio::test]
async fn a_line_just_over_the_limit_is_named_and_one_at_it_is_loaded() {
    let redis = common::redis().await;
    let key = common::unique_key("cli-long-line");
    let dir = tempfile::tempdir().unwrap();
    let at_limit = dir.path().join("at-limit.txt");
    let mut text = b"first\n".to_vec();
    text.extend(std::iter::repeat_n(b'a', LIMIT));
    text.extend(b"\r\n\nlast\n");
    std::fs::write(&at_limit, &text).unwrap();
    let over = dir.path().join("over.txt");
    let mut text = b"first\n\n".to_vec();
    text.extend(std::iter::repeat_n(b'b', LIMIT + 1));
    text.extend(b"\nlast\n");
    std::fs::write(&over, &text).unwrap();

    let path = at_limit.to_str().unwrap();
    for command in ["load", "check"] {
        let args = ["--bits", "100000", "--json", command, path];
        let (code, stdout, stderr, _) = measured(redis.url(), &key, &args, None);
        assert_eq!(code, 0, "{command} of a line at the limit: {stderr}");
        let out: serde_json::Value = serde_json::from_str(&stdout).unwrap();
        assert_eq!(out["items"], 3, "{command}: {out}");
    }

    let path = over.to_str().unwrap();
    for command in ["load", "check"] {
        let args = ["--bits", "100000", command, path];
        let (code, _, stderr, peak) = measured(redis.url(), &key, &args, None);
        assert_eq!(code, 2, "{stderr}");
        assert!(peak < FAIL_RSS_KIB, "{command}: peak RSS {peak} KiB");
        let line = assert_fails(
            redbloom(redis.url(), &key, &args),
            &[&format!("line 3 of {path}"), "65536-byte limit"],
            None,
        );
        // The item before the bad line was sent and acknowledged.
        assert!(line.contains("(1 items before it"), "{line}");
    }
}

#[tokio::test]
async fn huge_batches_and_pipelines_keep_memory_bounded() {
    const LINE: usize = 4096;
    const LINES: usize = 300 << 20 >> 12; // 300 MiB of 4 KiB lines
    let redis = common::redis().await;
    let key = common::unique_key("cli-big-load");
    let generate = Box::new(|mut stdin: std::process::ChildStdin| {
        let mut line = vec![b'x'; LINE];
        line[LINE - 1] = b'\n';
        for i in 0..LINES {
            let id = format!("{i:>12}");
            line[..12].copy_from_slice(id.as_bytes());
            if stdin.write_all(&line).is_err() {
                return;
            }
        }
    });
    let args = [
        "--bits",
        "8000000",
        "--json",
        "load",
        "-",
        "--batch",
        "1000000",
        "--pipeline",
        "1024",
    ];
    let started = std::time::Instant::now();
    let (code, stdout, stderr, peak) = measured(redis.url(), &key, &args, Some(generate));
    println!(
        "load of {LINES} lines of {LINE} bytes with --batch 1000000 --pipeline 1024: \
         peak RSS {peak} KiB in {:?}",
        started.elapsed()
    );
    assert_eq!(code, 0, "{stderr}");
    let out: serde_json::Value = serde_json::from_str(&stdout).unwrap();
    assert_eq!(out["items"], LINES as u64, "{out}");
    assert!(
        peak < LOAD_RSS_KIB,
        "peak RSS {peak} KiB, bound {LOAD_RSS_KIB} KiB"
    );
}
