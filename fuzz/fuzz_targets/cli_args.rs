//! The CLI's argument parsing and validation with arbitrary arguments (NUL-separated bytes):
//! every input is either refused with an error or gives a valid configuration, never a panic.
//! `cargo +nightly fuzz run cli_args`
#![no_main]

use clap::Parser;
use libfuzzer_sys::fuzz_target;
use std::ffi::OsStr;
use std::os::unix::ffi::OsStrExt;

#[path = "../../cli/src/args.rs"]
#[allow(dead_code)]
mod args;
#[path = "../../cli/src/config.rs"]
#[allow(dead_code)]
mod config;

fuzz_target!(|data: &[u8]| {
    let argv = std::iter::once(OsStr::new("redbloom"))
        .chain(data.split(|&b| b == 0).map(OsStr::from_bytes));
    if let Ok(cli) = args::Cli::try_parse_from(argv) {
        if let Ok(builder) = config::builder(&cli) {
            // Valid flags give a filter whose size is within the limits.
            let bloom = builder.build(()).expect("validated");
            assert!((1..=redbloom::MAX_BITS).contains(&bloom.bits()));
            let timeouts = config::timeout(&cli);
            assert!(timeouts.connect > std::time::Duration::ZERO);
            assert!(timeouts.response >= timeouts.connect);
        }
    }
});
