//! Every command in the README and docs/ runs as written (issue 53). Each command line of a
//! fenced block tagged `sh` or `console` (there, the lines after `$ `) in README.md and
//! docs/*.md is run with `sh -c`, in order, against a private redis-server with RedisBloom
//! (tests/common/module.rs, so that `--module` and `redis-cli BF.…` lines run too), and must
//! exit as the doc says: 0, or the status a trailing comment `# exit N` names.
//!
//! - Each file starts on an emptied server, in a new directory holding the input files its
//!   commands read (`urls.txt`, `lifted.txt`…: every `*.txt` word not after `>` or `--out`),
//!   made first; its blocks then run in order, as a reader would run them, so a later block may
//!   use a filter or a file an earlier one made.
//! - `redbloom` on `PATH` is this build's binary; `redis-cli` is the system's, pointed at the
//!   same server; `REDIS_URL` names it.
//! - Commands that cannot run here (a cluster at 10.0.0.1, a Sentinel group) belong in blocks
//!   tagged `text`. The few commands of `sh` blocks run elsewhere (`cargo …`) are listed in
//!   [`ELSEWHERE`] with what runs them. The commands run plus those listed must be every
//!   command found: none is skipped silently, and a line this test does not know how to run
//!   fails it, saying so.
//!
//! docs/SPEC.md is left out: a verbatim copy of the shared contract (tests/readme.rs), whose
//! blocks are untagged.
//!
//! Commands that need `load --emit new` and `check --emit absent|present` (SPEC.md §3 "Sentinel
//! and lines out") and `import FILE` taking the kind and parameters from the file (SPEC.md §3)
//! pass only with those.

// The integration-test harness of the library package, shared: a real Redis for every test.
#[path = "../../tests/common/mod.rs"]
mod common;

use common::markdown::{fences, Fence};
use std::path::{Path, PathBuf};
use std::process::{Command, Stdio};
use std::time::{Duration, Instant};

/// Commands of `sh` blocks that this test does not run, each with what runs it.
const ELSEWHERE: [(&str, &str); 2] = [
    (
        "cargo run --example quickstart",
        "tests/examples.rs runs the quickstart example's binary against a private server",
    ),
    (
        "cargo test --workspace --all-features",
        ".ci/run runs the whole suite with this very command",
    ),
];

/// The first words of the command lines this test runs.
const RUNS: [&str; 2] = ["redbloom", "redis-cli"];

/// How long one command may take before the test fails it (a doc command takes well under a
/// second; one that waits for an unreachable server would retry for 30 s).
const PATIENCE: Duration = Duration::from_secs(20);

/// A command line of a document.
#[derive(Debug)]
struct DocCommand {
    /// `FILE:LINE` of its first line.
    at: String,
    /// The command, continuation lines joined, as `sh -c` gets it.
    text: String,
}

impl DocCommand {
    /// The command without its trailing comment.
    fn bare(&self) -> &str {
        match self.text.find(" #") {
            Some(i) => self.text[..i].trim(),
            None => self.text.trim(),
        }
    }

    /// The exit status the doc says: `# exit N` in its comment, else 0.
    fn expected_exit(&self) -> i32 {
        let Some(i) = self.text.find("# exit ") else {
            return 0;
        };
        let digits: String = self.text[i + "# exit ".len()..]
            .chars()
            .take_while(char::is_ascii_digit)
            .collect();
        digits
            .parse()
            .unwrap_or_else(|_| panic!("{}: `# exit` without a status", self.at))
    }

    /// The files it reads: every `*.txt` word that is not a redirection's or `--out`'s target.
    fn inputs(&self) -> Vec<String> {
        let words: Vec<&str> = self.bare().split_whitespace().collect();
        let mut out = Vec::new();
        for (i, word) in words.iter().enumerate() {
            let after = i.checked_sub(1).map(|j| words[j]);
            if word.ends_with(".txt")
                && !word.starts_with('>')
                && !matches!(after, Some(">" | ">>" | "--out"))
            {
                out.push(word.trim_start_matches('<').to_owned());
            }
        }
        out
    }
}

/// The command lines of a block tagged `sh` or `console`; none for other blocks.
fn commands(file: &str, fence: &Fence) -> Vec<DocCommand> {
    let console = match fence.info.as_str() {
        "sh" => false,
        "console" => true,
        _ => return Vec::new(),
    };
    let mut out: Vec<DocCommand> = Vec::new();
    let mut pending: Option<DocCommand> = None;
    for (n, line) in &fence.lines {
        let line = line.trim();
        if let Some(mut command) = pending.take() {
            // A continuation of the line before, which ended with `\`.
            command.text.push(' ');
            command.text.push_str(line.trim_end_matches('\\').trim());
            if line.ends_with('\\') {
                pending = Some(command);
            } else {
                out.push(command);
            }
            continue;
        }
        let line = match (console, line.strip_prefix("$ ")) {
            (true, Some(command)) => command,
            (true, None) => continue, // a line of output
            (false, _) => line,
        };
        if line.is_empty() || line.starts_with('#') {
            continue;
        }
        let command = DocCommand {
            at: format!("{file}:{n}"),
            text: line.trim_end_matches('\\').trim().to_owned(),
        };
        if line.ends_with('\\') {
            pending = Some(command);
        } else {
            out.push(command);
        }
    }
    assert!(
        pending.is_none(),
        "{file}:{}: the block ends inside a command",
        fence.line
    );
    out
}

fn repo() -> PathBuf {
    Path::new(env!("CARGO_MANIFEST_DIR")).join("..")
}

/// README.md, then docs/*.md by name (docs/SPEC.md left out: see the module's docs).
fn documents() -> Vec<PathBuf> {
    let mut docs: Vec<PathBuf> = std::fs::read_dir(repo().join("docs"))
        .expect("docs/ exists")
        .map(|entry| entry.unwrap().path())
        .filter(|path| path.extension().is_some_and(|ext| ext == "md"))
        .filter(|path| !path.ends_with("SPEC.md"))
        .collect();
    docs.sort();
    let mut files = vec![repo().join("README.md")];
    files.extend(docs);
    files
}

/// An executable named `name` on `PATH`.
fn on_path(name: &str) -> Option<PathBuf> {
    std::env::split_paths(&std::env::var_os("PATH")?)
        .map(|dir| dir.join(name))
        .find(|path| path.is_file())
}

/// A directory for `PATH`'s front: `redbloom`, this build's; `redis-cli`, the system's pointed
/// at `url`.
fn bin_dir(url: &str) -> tempfile::TempDir {
    let dir = tempfile::Builder::new()
        .prefix("redbloom-doc-bin-")
        .tempdir()
        .unwrap();
    std::os::unix::fs::symlink(
        assert_cmd::cargo::cargo_bin!("redbloom"),
        dir.path().join("redbloom"),
    )
    .unwrap();
    let cli = on_path("redis-cli")
        .expect("redis-cli on PATH for the docs' redis-cli lines (apt-get install redis-tools)");
    let wrapper = dir.path().join("redis-cli");
    std::fs::write(
        &wrapper,
        format!("#!/bin/sh\nexec '{}' -u '{url}' \"$@\"\n", cli.display()),
    )
    .unwrap();
    use std::os::unix::fs::PermissionsExt;
    std::fs::set_permissions(&wrapper, std::fs::Permissions::from_mode(0o755)).unwrap();
    dir
}

/// The lines of an input file the docs name: URLs, as a crawler's frontier has them.
/// `day1.txt` holds the first half of the others' lines, so that a later load has new ones.
fn input_lines(name: &str) -> String {
    let count = if name == "day1.txt" { 100 } else { 200 };
    (0..count)
        .map(|i| format!("https://example.com/page/{i}\n"))
        .collect()
}

/// Runs `command` with `sh -c` in `dir`, or fails the test naming it.
fn run(command: &DocCommand, dir: &Path, path: &std::ffi::OsStr, url: &str) {
    let mut child = Command::new("sh")
        .arg("-c")
        .arg(&command.text)
        .current_dir(dir)
        .env("PATH", path)
        .env("REDIS_URL", url)
        .env_remove("REDIS_SENTINEL_USER")
        .env_remove("REDIS_SENTINEL_PASSWORD")
        .stdin(Stdio::null())
        .stdout(Stdio::piped())
        .stderr(Stdio::piped())
        .spawn()
        .unwrap();
    let start = Instant::now();
    while child.try_wait().unwrap().is_none() {
        if start.elapsed() > PATIENCE {
            let _ = child.kill();
            let out = child.wait_with_output().unwrap();
            panic!(
                "{}: `{}` still ran after {PATIENCE:?} (a server it cannot reach? Tag such a \
                 block `text`): {}",
                command.at,
                command.text,
                String::from_utf8_lossy(&out.stderr)
            );
        }
        std::thread::sleep(Duration::from_millis(5));
    }
    let out = child.wait_with_output().unwrap();
    let stdout = String::from_utf8_lossy(&out.stdout);
    let stderr = String::from_utf8_lossy(&out.stderr);
    let status = out.status.code().unwrap_or(-1);
    let expected = command.expected_exit();
    assert!(
        status == expected && !stderr.contains("panicked"),
        "{}: `{}` exited {status} where the doc says {expected}\nstdout: {}\nstderr: {stderr}",
        command.at,
        command.text,
        stdout.chars().take(2000).collect::<String>()
    );
}

#[test]
fn every_command_of_the_readme_and_docs_runs() {
    let started = Instant::now();
    let redis = common::module::redis_with_bloom();
    let url = redis.url().to_owned();
    let bin = bin_dir(&url);
    let mut path = std::ffi::OsString::from(bin.path());
    path.push(":");
    path.push(std::env::var_os("PATH").unwrap_or_default());
    let mut server = redbloom::redis::Client::open(url.as_str())
        .unwrap()
        .get_connection()
        .unwrap();

    let (mut found, mut ran, mut elsewhere) = (0, 0, 0);
    let mut elsewhere_seen = [false; ELSEWHERE.len()];
    for file in documents() {
        let name = file.strip_prefix(repo()).unwrap().display().to_string();
        let text = std::fs::read_to_string(&file).unwrap();
        let mut commands: Vec<DocCommand> = Vec::new();
        for fence in fences(&text) {
            let of_block = self::commands(&name, &fence);
            assert!(
                of_block.is_empty() == !matches!(fence.info.as_str(), "sh" | "console"),
                "{name}:{}: a block tagged `{}` with no command (or a command in a block of \
                 another tag): tag it `text`",
                fence.line,
                fence.info
            );
            commands.extend(of_block);
        }
        found += commands.len();
        if commands.is_empty() {
            continue;
        }
        // A new directory with the inputs, and an emptied server.
        let dir = tempfile::Builder::new()
            .prefix("redbloom-doc-")
            .tempdir()
            .unwrap();
        for input in commands.iter().flat_map(DocCommand::inputs) {
            let input = dir.path().join(input);
            if !input.exists() {
                let name = input.file_name().unwrap().to_string_lossy().into_owned();
                std::fs::write(&input, input_lines(&name)).unwrap();
            }
        }
        let _: () = redbloom::redis::cmd("FLUSHALL").query(&mut server).unwrap();
        for command in &commands {
            if let Some(i) = ELSEWHERE.iter().position(|(c, _)| *c == command.bare()) {
                elsewhere += 1;
                elsewhere_seen[i] = true;
                continue;
            }
            let first = command.bare().split_whitespace().next().unwrap_or_default();
            assert!(
                RUNS.contains(&first),
                "{}: `{}`: this test runs only {RUNS:?} lines; tag a block of commands that \
                 cannot run here `text`, or list the command in ELSEWHERE with what runs it",
                command.at,
                command.text
            );
            run(command, dir.path(), &path, &url);
            ran += 1;
        }
    }
    for ((command, by), seen) in ELSEWHERE.iter().zip(elsewhere_seen) {
        assert!(
            seen,
            "ELSEWHERE lists `{command}` ({by}), which no doc has any more: remove it"
        );
    }
    assert_eq!(
        ran + elsewhere,
        found,
        "every command found was run, or is run elsewhere"
    );
    assert!(ran >= 30, "only {ran} commands ran: is the parsing broken?");
    eprintln!(
        "{ran} doc commands ran, {elsewhere} run elsewhere, in {:?}",
        started.elapsed()
    );
}
