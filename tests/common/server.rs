//! A private `redis-server` on a free loopback port, killed when dropped.
//!
//! Shared by the integration tests (through `tests/common/mod.rs`) and the examples (which
//! include this file by path), so the throwaway server is written once.
#![allow(dead_code)]

use std::io::{Read, Write};
use std::net::{TcpListener, TcpStream};
use std::path::{Path, PathBuf};
use std::process::{Child, Command, Stdio};
use std::time::{Duration, Instant};

/// A `redis-server` child process with its own port and data directory.
pub struct RedisServer {
    child: Option<Child>,
    port: u16,
    dir: tempfile::TempDir,
    extra: Vec<String>,
    /// Listening for TLS only (`--port 0 --tls-port PORT`).
    tls: bool,
}

impl RedisServer {
    /// Starts `redis-server` from `PATH` with no persistence, on a free loopback port.
    ///
    /// Fails with `io::ErrorKind::NotFound` when there is no `redis-server` binary.
    pub fn start() -> std::io::Result<Self> {
        Self::start_with(&["--save", "", "--appendonly", "no"])
    }

    /// Starts `redis-server` with extra configuration arguments (`--name value` pairs).
    pub fn start_with(extra: &[&str]) -> std::io::Result<Self> {
        Self::start_mode(extra, false)
    }

    /// Starts `redis-server` with no persistence that loads the module at `module`
    /// (`--loadmodule PATH`): a server with RedisBloom's `BF.*` commands
    /// (`common::module::redis_with_bloom` finds the module).
    pub fn start_with_module(module: &Path) -> std::io::Result<Self> {
        let module = module.to_string_lossy();
        Self::start_with(&["--save", "", "--appendonly", "no", "--loadmodule", &module])
    }

    /// Starts `redis-server` with `maxmemory 100mb` and `policy` (`allkeys-lru`,
    /// `volatile-lru`, ...): a server that may evict keys.
    pub fn start_evicting(policy: &str) -> std::io::Result<Self> {
        let args = ["--save", "", "--appendonly", "no", "--maxmemory", "100mb"];
        Self::start_with(&[&args[..], &["--maxmemory-policy", policy]].concat())
    }

    /// Starts `redis-server` whose `busy-reply-threshold` is 20 ms: another client's script
    /// soon makes it answer `BUSY` (`common::busy::hold_busy`).
    pub fn start_busy_soon() -> std::io::Result<Self> {
        let args = [
            "--save",
            "",
            "--appendonly",
            "no",
            "--busy-reply-threshold",
            "20",
        ];
        Self::start_with(&args)
    }

    /// Starts `redis-server` listening for TLS only (`--port 0 --tls-port PORT`); `extra` must
    /// give its certificate files (`--tls-cert-file`, `--tls-key-file`, `--tls-ca-cert-file`).
    /// Ready once the port accepts a TCP connection (a plain `PING` cannot pass TLS).
    pub fn start_tls(extra: &[&str]) -> std::io::Result<Self> {
        Self::start_mode(extra, true)
    }

    fn start_mode(extra: &[&str], tls: bool) -> std::io::Result<Self> {
        let mut server = RedisServer {
            child: None,
            port: 0,
            dir: tempfile::Builder::new()
                .prefix("redbloom-redis-")
                .tempdir()?,
            extra: extra.iter().map(|s| s.to_string()).collect(),
            tls,
        };
        // A port found free can be taken before the server binds it: try a few.
        let mut attempts = 0;
        loop {
            server.port = free_port()?;
            match server.spawn() {
                Ok(()) => return Ok(server),
                Err(err) if err.kind() == std::io::ErrorKind::NotFound => return Err(err),
                Err(err) if attempts == 4 => return Err(err),
                Err(_) => attempts += 1,
            }
        }
    }

    /// Starts `redis-server` on `port` (for a cluster node, whose bus port must be free too).
    pub fn start_on(port: u16, extra: &[&str]) -> std::io::Result<Self> {
        let mut server = RedisServer {
            child: None,
            port,
            dir: tempfile::Builder::new()
                .prefix("redbloom-redis-")
                .tempdir()?,
            extra: extra.iter().map(|s| s.to_string()).collect(),
            tls: false,
        };
        server.spawn()?;
        Ok(server)
    }

    /// Whether the process is up (not killed).
    pub fn is_running(&self) -> bool {
        self.child.is_some()
    }

    /// `redis://127.0.0.1:PORT` (`rediss://` for a TLS server).
    pub fn url(&self) -> String {
        let scheme = if self.tls { "rediss" } else { "redis" };
        format!("{scheme}://127.0.0.1:{}", self.port)
    }

    /// The server's TCP port.
    pub fn port(&self) -> u16 {
        self.port
    }

    /// The server's working directory (where an AOF or RDB file would go).
    pub fn dir(&self) -> &Path {
        self.dir.path()
    }

    /// Kills the server at once (SIGKILL), as a crash would.
    pub fn kill(&mut self) {
        if let Some(mut child) = self.child.take() {
            let _ = child.kill();
            let _ = child.wait();
        }
    }

    /// Stops the server (SIGSTOP): commands in flight wait, unanswered, until
    /// [`resume`](Self::resume).
    pub fn pause(&self) {
        self.signal("-STOP");
    }

    /// Resumes a [`pause`](Self::pause)d server (SIGCONT).
    pub fn resume(&self) {
        self.signal("-CONT");
    }

    fn signal(&self, signal: &str) {
        let child = self.child.as_ref().expect("the server runs");
        let done = Command::new("kill")
            .arg(signal)
            .arg(child.id().to_string())
            .status()
            .expect("kill runs");
        assert!(done.success(), "kill {signal} failed");
    }

    /// Starts the server again on the same port and directory after [`kill`](Self::kill),
    /// from its AOF, with a transaction the kill cut short cut off first
    /// ([`cut_torn_transaction`](Self::cut_torn_transaction)).
    pub fn restart(&mut self) -> std::io::Result<()> {
        self.kill();
        self.cut_torn_transaction()?;
        self.spawn()
    }

    /// A kill while the server appends a transaction to its AOF (a script's writes go as one
    /// `MULTI`/`EXEC` block) can leave the block's head at the end of the file, and Redis
    /// 7.0 (7.0.15 here) loads it with `aof-load-truncated yes` (the default) by cutting the
    /// file at the last whole command, inside the block: the next start then runs that head,
    /// a write never acknowledged (its client sent it again), with the first transaction
    /// written after it (seen in `tests/chaos.rs`: a counting filter's remove applied twice
    /// for 28 of its 40 items; Valkey fixed it in valkey-io/valkey#4342). Cut here before the
    /// block, as `redis-check-aof --fix` does and the fixed servers do themselves, so that the
    /// fault tests test the client against a server that keeps what it acknowledged
    /// (`a_transaction_cut_short_by_a_kill_is_never_run`).
    fn cut_torn_transaction(&self) -> std::io::Result<()> {
        let manifest = self
            .dir
            .path()
            .join("appendonlydir")
            .join("appendonly.aof.manifest");
        if !manifest.exists() {
            return Ok(());
        }
        // The checker of the server's own version (a Valkey or Redis 7.4 AOF is not one
        // Redis 7.0's tool reads): the server's binary, run by the checker's name.
        use std::os::unix::process::CommandExt;
        let mut check = Command::new("redis-server")
            .arg0("redis-check-aof")
            .arg("--fix")
            .arg(&manifest)
            .stdin(Stdio::piped())
            .stdout(Stdio::piped())
            .stderr(Stdio::piped())
            .spawn()
            .map_err(|err| {
                std::io::Error::other(format!(
                    "redis-server as redis-check-aof, to mend an AOF after a kill: {err}"
                ))
            })?;
        // It asks before it cuts (and exits without asking when there is nothing to cut).
        let _ = check.stdin.take().expect("piped").write_all(b"y\n");
        let done = check.wait_with_output()?;
        if !done.status.success() {
            return Err(std::io::Error::other(format!(
                "redis-check-aof --fix failed: {}",
                String::from_utf8_lossy(&done.stdout)
            )));
        }
        Ok(())
    }

    fn spawn(&mut self) -> std::io::Result<()> {
        let log: PathBuf = self.dir.path().join("redis.log");
        // Written once the server listens: a server that lost its port to another one (two
        // tests handed the same free port) writes none, while that other one answers PING.
        let pidfile: PathBuf = self.dir.path().join("redis.pid");
        let _ = std::fs::remove_file(&pidfile);
        let port = self.port.to_string();
        let ports: &[&str] = match self.tls {
            false => &["--port", &port],
            true => &["--port", "0", "--tls-port", &port],
        };
        let mut child = Command::new("redis-server")
            .args(ports)
            .args(["--bind", "127.0.0.1"])
            .args(["--dir", &self.dir.path().to_string_lossy()])
            .args(["--logfile", &log.to_string_lossy()])
            .args(["--pidfile", &pidfile.to_string_lossy()])
            .args(&self.extra)
            // An AOF's base in commands, not RDB: Valkey 9's checker cannot read its own RDB
            // (`VALKEY080`) base, and the fault tests mend an AOF after a kill.
            .args(["--aof-use-rdb-preamble", "no"])
            .stdin(Stdio::null())
            .stdout(Stdio::null())
            .stderr(Stdio::null())
            .spawn()?;
        let deadline = Instant::now() + Duration::from_secs(10);
        while Instant::now() < deadline {
            // (Valkey writes its pidfile before it binds: the server that answers must say
            // it is this process.)
            let ready = match self.tls {
                false => ping(self.port) && process_id(self.port) == Some(child.id()),
                true => TcpStream::connect(("127.0.0.1", self.port)).is_ok(),
            };
            if ready && writes_pid(&pidfile, child.id()) {
                self.child = Some(child);
                return Ok(());
            }
            if let Some(status) = child.try_wait()? {
                let tail = std::fs::read_to_string(&log).unwrap_or_default();
                return Err(std::io::Error::other(format!(
                    "redis-server exited with {status}: {}",
                    tail.lines().last().unwrap_or("")
                )));
            }
            std::thread::sleep(Duration::from_millis(20));
        }
        let _ = child.kill();
        let _ = child.wait();
        Err(std::io::Error::other(
            "redis-server did not answer PING within 10 s",
        ))
    }
}

impl Drop for RedisServer {
    fn drop(&mut self) {
        self.kill();
    }
}

/// Whether `pidfile` names `pid`: that process, not another server, listens on the port.
fn writes_pid(pidfile: &Path, pid: u32) -> bool {
    std::fs::read_to_string(pidfile).is_ok_and(|text| text.trim() == pid.to_string())
}

fn free_port() -> std::io::Result<u16> {
    Ok(TcpListener::bind("127.0.0.1:0")?.local_addr()?.port())
}

/// The `process_id` that `INFO server` of the server on `port` gives.
fn process_id(port: u16) -> Option<u32> {
    use std::io::BufRead;
    let mut stream = TcpStream::connect(("127.0.0.1", port)).ok()?;
    stream.set_read_timeout(Some(Duration::from_secs(1))).ok()?;
    stream.write_all(b"INFO server\r\n").ok()?;
    let mut reader = std::io::BufReader::new(stream);
    let mut header = String::new();
    reader.read_line(&mut header).ok()?;
    let length: usize = header.trim().strip_prefix('$')?.parse().ok()?;
    let mut body = vec![0u8; length + 2];
    reader.read_exact(&mut body).ok()?;
    String::from_utf8_lossy(&body)
        .lines()
        .find_map(|line| line.strip_prefix("process_id:")?.trim().parse().ok())
}

/// Whether a server on `port` answers `PING` with `+PONG`.
fn ping(port: u16) -> bool {
    let Ok(mut stream) = TcpStream::connect(("127.0.0.1", port)) else {
        return false;
    };
    let _ = stream.set_read_timeout(Some(Duration::from_secs(1)));
    let mut reply = [0u8; 7];
    stream.write_all(b"PING\r\n").is_ok()
        && stream.read_exact(&mut reply).is_ok()
        && &reply == b"+PONG\r\n"
}
