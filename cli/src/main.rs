//! `redbloom`: load, check and inspect Bloom filters kept in Redis (SPEC.md §3).
//!
//! Every failure prints one line naming its cause on stderr and exits with status 2.

mod args;
mod bench;
mod commands;
mod config;
mod connect;
mod errors;
mod kinds;
mod lines;
mod output;
mod progress;
mod tls;

use std::process::ExitCode;

fn main() -> ExitCode {
    std::panic::set_hook(Box::new(|info| {
        eprintln!("redbloom: internal error: {}", one_line(&info.to_string()));
        std::process::exit(2);
    }));
    let cli = match args::parse() {
        Ok(cli) => cli,
        Err(err) => return usage_error(err),
    };
    // One thread: the tool's work is round trips, and on a machine shared with Redis, handing
    // replies between threads cost a third of the single-item throughput (BENCHMARKS.md).
    let runtime = match tokio::runtime::Builder::new_current_thread()
        .enable_all()
        .build()
    {
        Ok(runtime) => runtime,
        Err(err) => return fail(&format!("cannot start the async runtime: {err}")),
    };
    let result = runtime.block_on(commands::run(cli));
    // Without waiting for blocking reads still in flight: standard input read by a thread of
    // the runtime (an import that gave up on a stalled pipe) would hold the exit for ever.
    runtime.shutdown_background();
    match result {
        Ok(code) => code,
        Err(err) => fail(&describe(&err)),
    }
}

/// Help and version go to stdout with status 0; any other clap error becomes one line, status 2.
fn usage_error(err: clap::Error) -> ExitCode {
    use clap::error::ErrorKind;
    match err.kind() {
        ErrorKind::DisplayHelp | ErrorKind::DisplayVersion => {
            let _ = err.print();
            ExitCode::SUCCESS
        }
        ErrorKind::DisplayHelpOnMissingArgumentOrSubcommand | ErrorKind::MissingSubcommand => fail(
            "missing command: add, exists, load, check, remove, unload, info, clear, expire, \
             export, import, build, bench or migrate (see --help)",
        ),
        _ => {
            // The message is everything before clap's usage and help hints.
            let rendered = err.render().to_string();
            let message = rendered
                .split("\n\n")
                .next()
                .unwrap_or("bad arguments")
                .trim_start_matches("error: ");
            fail(message)
        }
    }
}

/// The error and its causes on one line, each said once: redis-rs and the OS often give the
/// same words at two levels ("timed out: timed out"). The library's errors that name its calls
/// are said with the flags instead (`errors::in_flags`).
pub(crate) fn describe(err: &anyhow::Error) -> String {
    let mut parts: Vec<String> = Vec::new();
    for cause in err.chain() {
        let own = cause
            .downcast_ref::<redbloom::Error>()
            .and_then(errors::in_flags);
        let text = own.unwrap_or_else(|| cause.to_string());
        let names = text.contains("this user may not");
        if !parts.last().is_some_and(|last| last.ends_with(&text)) {
            parts.push(text);
        }
        // Its own words say it all; the server's reply below is redis-rs's rendering of a
        // pipeline or script ("Pipeline failures: [(Index 0, ...", a script's SHA).
        // (An ACL refusal that names what the user may not do, likewise.)
        match cause.downcast_ref::<redbloom::Error>() {
            Some(redbloom::Error::WrongType { .. }) => break,
            Some(redbloom::Error::NoPermission(_)) if names => break,
            _ => {}
        }
    }
    parts.join(": ")
}

fn fail(message: &str) -> ExitCode {
    eprintln!("redbloom: {}", one_line(message));
    ExitCode::from(2)
}

fn one_line(message: &str) -> String {
    message.split_whitespace().collect::<Vec<_>>().join(" ")
}
