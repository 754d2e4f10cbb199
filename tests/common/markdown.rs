//! The fenced code blocks of a Markdown document, for the tests that check the README and
//! docs/ (`tests/readme.rs`: Rust blocks; `cli/tests/doc_commands.rs`: shell commands).
#![allow(dead_code)]

/// A fenced code block.
#[derive(Debug)]
pub struct Fence {
    /// The info string after the opening backticks (`sh`, `rust,no_run`, `text`, or empty).
    pub info: String,
    /// The line number (1-based) of the opening fence.
    pub line: usize,
    /// The lines between the fences, as written (indentation kept), each with its line number.
    pub lines: Vec<(usize, String)>,
}

impl Fence {
    /// The lines between the fences, each with its `\n`.
    pub fn body(&self) -> String {
        self.lines
            .iter()
            .map(|(_, line)| format!("{line}\n"))
            .collect()
    }
}

/// Every fenced code block of `text`, in order (indented ones, in list items, included).
pub fn fences(text: &str) -> Vec<Fence> {
    let mut out = Vec::new();
    let mut open: Option<Fence> = None;
    for (n, line) in text.lines().enumerate() {
        let trimmed = line.trim_start();
        match open.take() {
            None if trimmed.starts_with("```") => {
                open = Some(Fence {
                    info: trimmed.trim_start_matches('`').trim().to_owned(),
                    line: n + 1,
                    lines: Vec::new(),
                });
            }
            None => {}
            Some(fence) if trimmed.starts_with("```") => out.push(fence),
            Some(mut fence) => {
                fence.lines.push((n + 1, line.to_owned()));
                open = Some(fence);
            }
        }
    }
    assert!(open.is_none(), "a code fence is never closed: {open:?}");
    out
}
