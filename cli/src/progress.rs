//! The progress bar of `load` and `check`: on stderr, and only when stderr is a terminal.

use indicatif::{ProgressBar, ProgressDrawTarget, ProgressStyle};
use std::io::IsTerminal;

pub(crate) struct Progress(ProgressBar);

/// A bar over `size` bytes, or a spinner counting items when the size is unknown.
pub(crate) fn bar(size: Option<u64>) -> Progress {
    if !std::io::stderr().is_terminal() {
        return Progress(ProgressBar::with_draw_target(
            size,
            ProgressDrawTarget::hidden(),
        ));
    }
    let bar = match size {
        Some(size) => ProgressBar::new(size).with_style(
            ProgressStyle::with_template("{bar:40} {bytes}/{total_bytes} {msg} ({eta})")
                .unwrap_or_else(|_| ProgressStyle::default_bar()),
        ),
        None => ProgressBar::new_spinner(),
    };
    Progress(bar)
}

impl Progress {
    pub(crate) fn update(&self, bytes: u64, items: u64) {
        self.0.set_position(bytes);
        self.0.set_message(format!("{items} items"));
    }

    pub(crate) fn finish(&self) {
        self.0.finish_and_clear();
    }
}
