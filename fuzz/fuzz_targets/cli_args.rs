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
            // Valid flags give a filter whose size is within the limits: at most 2^32 bits
            // per key (a sharded filter's total may be larger).
            builder.validate().expect("validated");
            let bloom = builder.build(()).expect("validated");
            let per_key = bloom.bits().div_ceil(u64::from(bloom.shards()));
            assert!((1..=redbloom::MAX_BITS).contains(&per_key));
            let timeouts = config::timeout(&cli);
            assert!(timeouts.connect > std::time::Duration::ZERO);
            assert!(timeouts.response >= timeouts.connect);
        }
    }
});
