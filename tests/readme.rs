//! The README and docs/ tell the truth about themselves:
//! - the README's "In your own code" program is copied below, kept identical to the README by a
//!   test, and runs twice in a row against a private redis-server (a second run must pass too);
//! - every Rust block in the README and docs/ is written as a new crate would write it (only
//!   `redbloom`, `tokio` and `std`; redis-rs as `redbloom::redis`), and is a doc test;
//! - docs/SPEC.md is the shared SPEC.md, and its §1 test vectors are what the code computes;
//! - every relative link in README.md and docs/*.md points to a file (and heading) that exists.

mod common;

use common::markdown::fences;
use std::collections::HashSet;
use std::path::{Path, PathBuf};

// The README's "In your own code" block, line for line between the two marker lines (compared
// with the README by `the_readme_program_is_the_copy_in_this_test`). Not formatted by rustfmt,
// so that it stays exactly as a reader would paste it into a new crate.
#[rustfmt::skip]
mod readme_program {
// ---- README "In your own code" begins
use redbloom::{redis, RedisBloom, Retry};
use std::time::Duration;

#[tokio::main]
async fn main() -> Result<(), Box<dyn std::error::Error>> {
    let url = std::env::var("REDIS_URL").unwrap_or_else(|_| "redis://127.0.0.1:6379".into());
    let client = redis::Client::open(url)?;
    // A multiplexed connection never reconnects; the manager does, and `retry` bridges the gap.
    let conn = client.get_connection_manager().await?;

    // Sized for 1M items at a 0.01% false-positive rate, in go-zero's layout (k = 14).
    let seen = RedisBloom::builder("events:seen")
        .expected_items(1_000_000)
        .false_positive_rate(1e-4)
        .retry(Retry::for_duration(Duration::from_secs(30)))
        .build(conn)?;

    // `true` only the first time: a second run of this program adds nothing new.
    if seen.add("event-42").await? {
        println!("first time: process it");
    }
    assert!(seen.exists("event-42").await?);

    // One call for a whole batch; one answer per item, in input order.
    let new = seen.add_many(&["a", "b", "event-42"]).await?;
    assert!(!new[2], "event-42 was added above");
    assert_eq!(seen.exists_many(&["a", "b"]).await?, [true, true]);
    Ok(())
}
// ---- README "In your own code" ends

    /// Runs the README's `main` (which builds its own tokio runtime).
    pub(super) fn run() -> Result<(), Box<dyn std::error::Error>> {
        main()
    }
}

const BEGIN: &str = "// ---- README \"In your own code\" begins";
const END: &str = "// ---- README \"In your own code\" ends";

fn repo() -> PathBuf {
    PathBuf::from(env!("CARGO_MANIFEST_DIR"))
}

fn read(path: &Path) -> String {
    std::fs::read_to_string(path).unwrap_or_else(|err| panic!("{}: {err}", path.display()))
}

/// `text` without its fenced code blocks (links in code are not links).
fn prose(text: &str) -> String {
    let mut out = String::new();
    let mut in_fence = false;
    for line in text.lines() {
        if line.trim_start().starts_with("```") {
            in_fence = !in_fence;
        } else if !in_fence {
            out.push_str(line);
        }
        out.push('\n');
    }
    out
}

/// Whether rustdoc compiles a block with this info string as Rust (an empty one included).
fn is_rust(info: &str) -> bool {
    info.is_empty() || info.split(',').any(|attr| attr.trim() == "rust")
}

#[test]
fn the_readme_program_is_the_copy_in_this_test() {
    let readme = read(&repo().join("README.md"));
    let section = readme
        .split_once("\n## In your own code\n")
        .expect("the README has a section \"## In your own code\"")
        .1;
    let block = fences(section)
        .into_iter()
        .find(|fence| is_rust(&fence.info))
        .expect("a Rust block in \"In your own code\"");
    assert_eq!(
        block.info, "rust,no_run",
        "it needs a server: compiled, not run, by the doc tests"
    );

    let this = include_str!("readme.rs");
    let lines: Vec<&str> = this.lines().collect();
    let begin = lines
        .iter()
        .position(|l| *l == BEGIN)
        .expect("begin marker")
        + 1;
    let end = lines.iter().position(|l| *l == END).expect("end marker");
    let copy: String = lines[begin..end].iter().map(|l| format!("{l}\n")).collect();
    assert_eq!(
        copy,
        block.body(),
        "the copy in tests/readme.rs differs from the README's block: make them equal"
    );
}

#[test]
fn the_readme_program_passes_twice_against_a_private_server() {
    let server = common::server::RedisServer::start()
        .expect("a private redis-server (apt-get install redis-server)");
    let url = server.url();
    // Only this test reads REDIS_URL in this binary; the program takes its server from it.
    std::env::set_var("REDIS_URL", &url);

    for run in 1..=2 {
        if let Err(err) = readme_program::run() {
            panic!("run {run} of the README's program failed: {err}");
        }
    }

    // It used the private server: the filter and its stored parameters are there, and the
    // ring of its records of exact answers (it retries: `Builder::retry`).
    let mut conn = redbloom::redis::Client::open(url.as_str())
        .unwrap()
        .get_connection()
        .unwrap();
    let keys: Vec<String> = redbloom::redis::cmd("KEYS")
        .arg("*")
        .query(&mut conn)
        .unwrap();
    let ring = "{events:seen}:redbloom:11:events:seen:once:";
    let (records, keys): (Vec<&str>, Vec<&str>) = keys
        .iter()
        .map(String::as_str)
        .partition(|key| key.starts_with(ring));
    assert_eq!(
        keys.into_iter().collect::<HashSet<_>>(),
        HashSet::from([
            "events:seen",
            "{events:seen}:redbloom:11:events:seen:params"
        ])
    );
    assert!(!records.is_empty(), "its writes were recorded");
}

/// The crates a new crate's snippet may name: its two dependencies and the standard library.
const ALLOWED_CRATES: [&str; 5] = ["redbloom", "tokio", "std", "core", "alloc"];

/// The Markdown files whose Rust blocks are doc tests, and the file that includes each.
fn doc_tested_markdown() -> Vec<PathBuf> {
    let mut files = vec![repo().join("README.md")];
    let mut docs: Vec<PathBuf> = std::fs::read_dir(repo().join("docs"))
        .expect("docs/ exists")
        .map(|entry| entry.unwrap().path())
        .filter(|path| path.extension().is_some_and(|ext| ext == "md"))
        // SPEC.md is a verbatim copy of the shared contract; its blocks are not Rust.
        .filter(|path| !path.ends_with("SPEC.md"))
        .collect();
    docs.sort();
    files.extend(docs);
    files
}

#[test]
fn every_rust_block_is_a_doc_test_a_new_crate_could_write() {
    let lib = read(&repo().join("src/lib.rs"));
    let mut rust_blocks = 0;
    for file in doc_tested_markdown() {
        let name = file.strip_prefix(repo()).unwrap().display().to_string();
        let text = read(&file);
        let blocks = fences(&text);
        for block in &blocks {
            let at = format!("{name}:{}", block.line);
            assert!(
                !block.info.is_empty(),
                "{at}: a block without a language is compiled as Rust by rustdoc; name it"
            );
            if !is_rust(&block.info) {
                continue;
            }
            rust_blocks += 1;
            assert!(
                !block.info.contains("ignore"),
                "{at}: never `ignore`: use `no_run` for blocks that need a server"
            );
            check_crates(&at, &block.body());
        }
        if blocks.iter().any(|b| is_rust(&b.info)) {
            let include = format!("include_str!(\"../{name}\")");
            assert!(
                lib.contains(&include),
                "{name} has Rust blocks, but src/lib.rs does not doc-test it ({include})"
            );
        }
    }
    assert!(rust_blocks >= 4, "only {rust_blocks} Rust blocks found");
}

/// Fails when `code` names a crate a new crate with only `redbloom` and `tokio` would not have.
fn check_crates(at: &str, code: &str) {
    let code: String = code
        .lines()
        .map(|line| line.trim_start().trim_start_matches("# "))
        .collect::<Vec<_>>()
        .join("\n");
    let imports_redis = code.lines().any(|line| {
        let line = line.trim();
        line.starts_with("use redbloom::")
            && (line == "use redbloom::redis;"
                || line.contains("{redis,")
                || line.contains(" redis,")
                || line.contains(" redis}"))
    });
    for line in code.lines() {
        if let Some(path) = line.trim().strip_prefix("use ") {
            let first = path.split("::").next().unwrap_or_default();
            let first = first.trim_end_matches(';');
            assert!(
                ALLOWED_CRATES.contains(&first) || (first == "redis" && imports_redis),
                "{at}: `use {path}` names a crate a new crate does not depend on"
            );
        }
    }
    // Every path through redis-rs goes through the re-export, or follows `use redbloom::redis`.
    let mut rest = code.as_str();
    while let Some(i) = rest.find("redis::") {
        let before = &rest[..i];
        let qualified = before.ends_with("redbloom::");
        let word_inside = before
            .chars()
            .last()
            .is_some_and(|c| c.is_alphanumeric() || c == '_');
        let absolute = before.ends_with("::") && !qualified;
        assert!(
            qualified || word_inside || (imports_redis && !absolute),
            "{at}: `redis::` without `redbloom::` (a new crate has no `redis` dependency): \
             write `redbloom::redis::` or `use redbloom::redis;`"
        );
        rest = &rest[i + "redis::".len()..];
    }
}

/// The shared contract, next to the repository, when this checkout has it.
fn shared_spec() -> PathBuf {
    repo().join("../shared/SPEC.md")
}

#[test]
fn docs_spec_is_the_shared_spec_and_its_vectors_hold() {
    let ours = read(&repo().join("docs/SPEC.md"));
    let shared = shared_spec();
    if shared.exists() {
        assert!(
            ours == read(&shared),
            "docs/SPEC.md differs from {}: copy it again (cp ../shared/SPEC.md docs/SPEC.md)",
            shared.display()
        );
    }
    // Whether or not ../shared is here: the copy holds §1's vectors, and the code agrees.
    let vectors = ours
        .split_once("### Test vectors")
        .expect("docs/SPEC.md has §1's test vectors")
        .1;
    let mut checked = 0;
    for row in vectors.lines().take_while(|l| !l.starts_with("## ")) {
        let cells: Vec<&str> = row.split('|').map(str::trim).collect();
        // | data | bits | locations |
        let [_, data, bits, locations, _] = cells[..] else {
            continue;
        };
        let Ok(bits) = bits.parse::<u64>() else {
            continue;
        };
        let data: Vec<u8> = match data.strip_prefix("bytes ") {
            Some(hex) => hex
                .split(' ')
                .map(|b| u8::from_str_radix(b, 16).unwrap())
                .collect(),
            None => data.trim_matches('"').as_bytes().to_vec(),
        };
        let expected: Vec<u64> = locations.split(' ').map(|n| n.parse().unwrap()).collect();
        assert_eq!(
            redbloom::gozero_locations(&data, bits).to_vec(),
            expected,
            "SPEC.md's locations of {data:?} in {bits} bits"
        );
        checked += 1;
    }
    assert_eq!(checked, 8, "docs/SPEC.md's table of locations has 8 rows");
    assert!(ours.contains("after add(\"hello\") and add(\"world\") `a52c9b5aa00a14`"));
}

/// GitHub's anchor for a heading: lower case, punctuation dropped, spaces as hyphens.
fn anchor(heading: &str) -> String {
    heading
        .trim()
        .to_lowercase()
        .chars()
        .filter(|c| c.is_alphanumeric() || matches!(c, ' ' | '-' | '_'))
        .map(|c| if c == ' ' { '-' } else { c })
        .collect()
}

/// The anchors of every heading of a Markdown file.
fn anchors(text: &str) -> HashSet<String> {
    prose(text)
        .lines()
        .filter(|line| line.starts_with('#'))
        .map(|line| anchor(line.trim_start_matches('#')))
        .collect()
}

/// Every `](target)` of `text` outside code blocks.
fn link_targets(text: &str) -> Vec<String> {
    let prose = prose(text);
    let mut out = Vec::new();
    let mut rest = prose.as_str();
    while let Some(i) = rest.find("](") {
        rest = &rest[i + 2..];
        let end = rest.find(')').expect("a link's closing parenthesis");
        out.push(rest[..end].to_owned());
        rest = &rest[end..];
    }
    out
}

#[test]
fn every_relative_link_points_to_something_that_exists() {
    let mut files = vec![repo().join("README.md")];
    for entry in std::fs::read_dir(repo().join("docs")).expect("docs/ exists") {
        let path = entry.unwrap().path();
        // docs/crate.md is rustdoc's (intra-doc links): the next test checks it.
        if path.extension().is_some_and(|ext| ext == "md") && !path.ends_with("crate.md") {
            files.push(path);
        }
    }
    let mut checked = 0;
    for file in &files {
        let text = read(file);
        for target in link_targets(&text) {
            if target.starts_with("http://")
                || target.starts_with("https://")
                || target.starts_with("mailto:")
            {
                continue;
            }
            let (path, fragment) = match target.split_once('#') {
                Some((path, fragment)) => (path, Some(fragment)),
                None => (target.as_str(), None),
            };
            let linked = match path {
                "" => file.clone(),
                path => file.parent().unwrap().join(path),
            };
            assert!(
                linked.exists(),
                "{}: the link ({target}) points to {}, which does not exist",
                file.display(),
                linked.display()
            );
            if let Some(fragment) = fragment {
                assert!(
                    linked.extension().is_some_and(|ext| ext == "md"),
                    "{}: ({target}): anchors are checked in Markdown files only",
                    file.display()
                );
                assert!(
                    anchors(&read(&linked)).contains(fragment),
                    "{}: the link ({target}) names a heading {} does not have",
                    file.display(),
                    linked.display()
                );
            }
            checked += 1;
        }
    }
    assert!(checked >= 20, "only {checked} relative links found");
}

/// Whether a link's target names a file by a path relative to the repository (`BENCHMARKS.md`,
/// `docs/SPEC.md#3`, `../x.rs`): such a link works on GitHub and breaks on docs.rs.
fn is_relative_file(target: &str) -> bool {
    let path = target.split('#').next().unwrap_or_default();
    !target.starts_with("http://")
        && !target.starts_with("https://")
        && !path.is_empty()
        && (path.contains('/')
            || [".md", ".rs", ".sh", ".toml", ".yml"]
                .iter()
                .any(|ext| path.ends_with(ext)))
}

/// The rendered docs (the crate's page, docs/crate.md, and every doc comment under src/) link no
/// file by a relative path: on docs.rs only web addresses and intra-doc links (`Bloom::add`)
/// work. Files are named as text instead.
#[test]
fn the_rendered_docs_link_no_file_by_a_relative_path() {
    let lib = read(&repo().join("src/lib.rs"));
    let page = lib
        .lines()
        .find(|line| line.starts_with("#![doc = include_str!("))
        .expect("src/lib.rs takes its page from a file");
    assert_eq!(
        page, "#![doc = include_str!(\"../docs/crate.md\")]",
        "the crate's page is docs/crate.md (the README's links are relative)"
    );
    assert!(is_relative_file("BENCHMARKS.md#a") && is_relative_file("docs/SPEC.md"));
    assert!(!is_relative_file("Bloom::add") && !is_relative_file("crate::Error"));
    assert!(!is_relative_file("https://docs.rs/redbloom") && !is_relative_file("#features"));
    let mut sources = vec![(
        "docs/crate.md".to_owned(),
        read(&repo().join("docs/crate.md")),
    )];
    let mut dirs = vec![repo().join("src")];
    while let Some(dir) = dirs.pop() {
        for entry in std::fs::read_dir(&dir).unwrap() {
            let path = entry.unwrap().path();
            if path.is_dir() {
                dirs.push(path);
            } else if path.extension().is_some_and(|ext| ext == "rs") {
                // The doc comments' text, one line each.
                let docs: String = read(&path)
                    .lines()
                    .filter_map(|line| {
                        let line = line.trim_start();
                        line.strip_prefix("///")
                            .or_else(|| line.strip_prefix("//!"))
                            .map(|doc| format!("{doc}\n"))
                    })
                    .collect();
                let name = path.strip_prefix(repo()).unwrap().display().to_string();
                sources.push((name, docs));
            }
        }
    }
    let mut links = 0;
    for (name, text) in &sources {
        for target in link_targets(text) {
            links += 1;
            assert!(
                !is_relative_file(&target),
                "{name}: the link ({target}) names a file by a relative path, which breaks on \
                 docs.rs: name the file as text, or link an item"
            );
        }
    }
    assert!(links >= 50, "only {links} links found in the rendered docs");
}
