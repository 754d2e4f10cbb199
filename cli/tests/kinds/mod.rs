//! The runs the CLI's per-kind test files share, written once: [`acl`] for the ACL tests (a
//! private server with ACL users, their grants, the library and the CLI as such a user) and
//! [`wait`] for the `WAIT` tests (a primary and a replica started by the test, the checks of a
//! write no replica confirmed). A file includes them with `mod kinds;` beside `mod common;`.
//!
//! Each behaviour is one function; a kind's file runs it for its kind: the ACL tests through the
//! kind's [`acl::AclKind`] (its grants, keys, CLI flags and the operations only it has), the
//! `WAIT` tests through the kind's builder and CLI flags.
#![allow(dead_code)]

pub mod acl;
pub mod wait;

/// `n` items `PREFIX:i`.
pub fn items(prefix: &str, n: usize) -> Vec<String> {
    (0..n).map(|i| format!("{prefix}:{i}")).collect()
}

/// A file of `n` lines `line:I` (for the CLI's `load`, `check`, `unload`), removed when
/// dropped; its path is [`path_of`].
pub fn lines_file(n: usize) -> tempfile::NamedTempFile {
    let file = tempfile::NamedTempFile::new().unwrap();
    std::fs::write(file.path(), items("line", n).join("\n")).unwrap();
    file
}

/// The path of `file`, as the CLI takes it.
pub fn path_of(file: &tempfile::NamedTempFile) -> &str {
    file.path().to_str().unwrap()
}

/// How many of `flags` are true.
pub fn count(flags: &[bool]) -> usize {
    flags.iter().filter(|&&f| f).count()
}
