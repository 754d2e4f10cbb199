//! TLS: a real `redis-server` listening only on a TLS port, with a CA and a server certificate
//! made here (rcgen). The library works over `rediss://` with a client that trusts the CA, and
//! the CLI's `--tls-ca FILE` does the same; an unknown or wrong CA, a bad CA file, or
//! `--tls-ca` without `rediss://` are one-line errors with exit status 2.

// The integration-test harness of the library package, shared: a real Redis for every test.
#[path = "../../tests/common/mod.rs"]
mod common;

use assert_cmd::Command;
use common::cli::{redbloom, run};
use common::server::RedisServer;
use rcgen::{BasicConstraints, CertificateParams, DnType, IsCa, Issuer, KeyPair, KeyUsagePurpose};
use redbloom::{Engine, KeyTtl, Layout, RedisBloom};
use redis::aio::{ConnectionManager, ConnectionManagerConfig};
use redis::TlsCertificates;
use serde_json::json;
use std::io::Write;
use std::path::{Path, PathBuf};
use std::time::Duration;

/// PEM files written to a temporary directory.
struct Certs {
    dir: tempfile::TempDir,
}

impl Certs {
    fn path(&self, name: &str) -> PathBuf {
        self.dir.path().join(name)
    }

    fn arg(&self, name: &str) -> String {
        self.path(name).to_str().unwrap().to_owned()
    }

    /// `ca.pem` (a private CA), `server.pem` and `server.key` (signed by it, for 127.0.0.1 and
    /// localhost), `other-ca.pem` (an unrelated CA), `self-signed.pem`/`self-signed.key` (a
    /// server certificate that is its own issuer), and `other-name.pem`/`other-name.key` (signed
    /// by the CA for another host).
    fn make() -> Certs {
        let dir = tempfile::Builder::new()
            .prefix("redbloom-tls-")
            .tempdir()
            .unwrap();
        let certs = Certs { dir };
        let sans = || vec!["127.0.0.1".to_owned(), "localhost".to_owned()];

        let (ca_pem, issuer) = ca("redbloom test CA");
        certs.write("ca.pem", &ca_pem);
        let (other_pem, _) = ca("another CA");
        certs.write("other-ca.pem", &other_pem);

        let mut params = CertificateParams::new(sans()).unwrap();
        params
            .distinguished_name
            .push(DnType::CommonName, "redis test server");
        params.use_authority_key_identifier_extension = true;
        let key = KeyPair::generate().unwrap();
        let cert = params.signed_by(&key, &issuer).unwrap();
        certs.write("server.pem", &cert.pem());
        certs.write("server.key", &key.serialize_pem());

        let mut params = CertificateParams::new(sans()).unwrap();
        params
            .distinguished_name
            .push(DnType::CommonName, "self-signed redis");
        let key = KeyPair::generate().unwrap();
        let cert = params.self_signed(&key).unwrap();
        certs.write("self-signed.pem", &cert.pem());
        certs.write("self-signed.key", &key.serialize_pem());

        let params = CertificateParams::new(vec!["redis.example".to_owned()]).unwrap();
        let key = KeyPair::generate().unwrap();
        let cert = params.signed_by(&key, &issuer).unwrap();
        certs.write("other-name.pem", &cert.pem());
        certs.write("other-name.key", &key.serialize_pem());
        certs
    }

    fn write(&self, name: &str, text: &str) {
        std::fs::write(self.path(name), text).unwrap();
    }
}

/// A CA's certificate (PEM) and its signing half.
fn ca(name: &str) -> (String, Issuer<'static, KeyPair>) {
    let mut params = CertificateParams::new(Vec::new()).unwrap();
    params.is_ca = IsCa::Ca(BasicConstraints::Unconstrained);
    params.distinguished_name.push(DnType::CommonName, name);
    params.key_usages = vec![KeyUsagePurpose::KeyCertSign, KeyUsagePurpose::CrlSign];
    let key = KeyPair::generate().unwrap();
    let cert = params.self_signed(&key).unwrap();
    (cert.pem(), Issuer::new(params, key))
}

/// A private redis-server listening for TLS only, with `cert` and `key`; clients need no
/// certificate of their own.
fn tls_server(certs: &Certs, cert: &str, key: &str, ca: &str) -> RedisServer {
    let (cert, key, ca) = (certs.arg(cert), certs.arg(key), certs.arg(ca));
    RedisServer::start_tls(&[
        "--save",
        "",
        "--appendonly",
        "no",
        "--tls-cert-file",
        &cert,
        "--tls-key-file",
        &key,
        "--tls-ca-cert-file",
        &ca,
        "--tls-auth-clients",
        "no",
    ])
    .expect("redis-server (built with TLS) on PATH")
}

/// A connection manager to `url` that trusts only the CA in `ca_file`.
async fn manager(url: &str, ca_file: &Path) -> ConnectionManager {
    let client = redis::Client::build_with_tls(
        url,
        TlsCertificates {
            client_tls: None,
            root_cert: Some(std::fs::read(ca_file).unwrap()),
        },
    )
    .unwrap();
    let config = ConnectionManagerConfig::new()
        .set_connection_timeout(Some(Duration::from_secs(5)))
        .set_response_timeout(Some(Duration::from_secs(10)));
    client
        .get_connection_manager_with_config(config)
        .await
        .unwrap_or_else(|err| panic!("cannot connect to {url}: {err}"))
}

#[tokio::test]
async fn the_library_works_over_rediss_with_a_private_ca() {
    let certs = Certs::make();
    let server = tls_server(&certs, "server.pem", "server.key", "ca.pem");
    let url = server.url();
    assert!(url.starts_with("rediss://127.0.0.1:"), "{url}");
    let conn = manager(&url, &certs.path("ca.pem")).await;

    // go-zero's layout, go-zero's bytes (SPEC.md §1), through TLS.
    let bloom = RedisBloom::new(conn.clone(), "tls:gozero", 64).unwrap();
    assert!(bloom.add("hello").await.unwrap());
    assert_eq!(
        bloom.add_many(&["world", "hello"]).await.unwrap(),
        [true, false]
    );
    assert!(bloom.exists("world").await.unwrap());
    assert_eq!(
        bloom.exists_many(&["hello", "world"]).await.unwrap(),
        [true, true]
    );
    let bytes: Vec<u8> = redis::cmd("GET")
        .arg("tls:gozero")
        .query_async(&mut conn.clone())
        .await
        .unwrap();
    assert_eq!(bytes, [0xa5, 0x2c, 0x9b, 0x5a, 0xa0, 0x0a, 0x14]);
    let info = bloom.info().await.unwrap();
    assert_eq!(
        (info.bits_set, info.bytes, info.ttl),
        (22, 7, KeyTtl::Persistent)
    );
    assert!(bloom.expire(Duration::from_secs(100)).await.unwrap());
    assert!(bloom.clear().await.unwrap());

    // Big batches (the dense path's transaction and whole-filter reads), the scripts engine
    // and the native layout with its stored parameters.
    let items: Vec<String> = (0..5_000).map(|i| format!("item-{i}")).collect();
    let builders = [
        RedisBloom::builder("tls:dense").bits(200_000),
        RedisBloom::builder("tls:scripts")
            .bits(200_000)
            .engine(Engine::Scripts),
        RedisBloom::builder("tls:native")
            .expected_items(5_000)
            .false_positive_rate(0.01)
            .layout(Layout::Native),
    ];
    for builder in builders {
        let bloom = builder.build(conn.clone()).unwrap();
        let new = bloom.add_many(&items).await.unwrap();
        assert!(
            new.iter().filter(|&&n| n).count() > 4_900,
            "{}",
            bloom.key()
        );
        assert!(bloom.exists_many(&items).await.unwrap().iter().all(|&p| p));
        assert!(bloom.info().await.unwrap().bits_set > 0);
    }
}

/// [`common::cli::assert_fails`] for a command that holds no password.
fn assert_fails(cmd: Command, words: &[&str]) -> String {
    common::cli::assert_fails(cmd, words, None)
}

#[tokio::test]
async fn the_cli_trusts_the_ca_given_by_tls_ca() {
    let certs = Certs::make();
    let server = tls_server(&certs, "server.pem", "server.key", "ca.pem");
    let url = server.url();
    let ca = certs.arg("ca.pem");
    let tls = ["--tls-ca", ca.as_str(), "--bits", "100000", "--json"];

    let mut file = tempfile::NamedTempFile::new().unwrap();
    for i in 0..3_000 {
        writeln!(file, "line-{i}").unwrap();
    }
    let path = file.path().to_str().unwrap();

    let (code, out, err) = run(redbloom(
        &url,
        "tls:cli",
        &[&tls[..], &["load", path]].concat(),
    ));
    assert_eq!(code, 0, "{err}");
    assert_eq!(out["items"], 3_000);
    assert!(out["new"].as_u64().unwrap() >= 2_990, "{out}");

    let (code, out, err) = run(redbloom(
        &url,
        "tls:cli",
        &[&tls[..], &["check", path]].concat(),
    ));
    assert_eq!(code, 0, "{err}");
    assert_eq!(
        (&out["items"], &out["present"], &out["absent"]),
        (&json!(3_000), &json!(3_000), &json!(0))
    );

    let (code, out, err) = run(redbloom(&url, "tls:cli", &[&tls[..], &["info"]].concat()));
    assert_eq!(code, 0, "{err}");
    assert_eq!(
        (&out["key"], &out["bits"]),
        (&json!("tls:cli"), &json!(100_000))
    );
    assert!(out["bits_set"].as_u64().unwrap() > 30_000, "{out}");
    assert_eq!(out["ttl_seconds"], -1);

    // Single items, and the flag after the command.
    let (code, out, err) = run(redbloom(
        &url,
        "tls:cli",
        &[
            "--bits", "100000", "--json", "exists", "line-0", "--tls-ca", &ca,
        ],
    ));
    assert_eq!((code, &out["present"]), (0, &json!(1)), "{err}");
}

#[tokio::test]
async fn the_cli_refuses_an_untrusted_server_certificate() {
    let certs = Certs::make();
    let server = tls_server(&certs, "server.pem", "server.key", "ca.pem");
    let url = server.url();
    // With the default timeout and retries: a refused certificate is not a passing fault.
    let args = ["--bits", "64", "info"];

    // The system's CAs do not know the private CA.
    let stderr = assert_fails(
        redbloom(&url, "tls:x", &args),
        &["certificate", "--tls-ca", "TLS"],
    );
    assert!(
        stderr.contains(&format!("127.0.0.1:{}", server.port())),
        "{stderr}"
    );

    // A CA that did not sign the server's certificate.
    let other = certs.arg("other-ca.pem");
    assert_fails(
        redbloom(
            &url,
            "tls:x",
            &[&["--tls-ca", other.as_str()][..], &args].concat(),
        ),
        &["certificate", "tls", "not signed by the --tls-ca CA"],
    );

    // A plain client on the TLS port gets no answer it understands: an error, not a hang.
    let plain = url.replacen("rediss://", "redis://", 1);
    assert_fails(redbloom(&plain, "tls:x", &args), &["127.0.0.1"]);

    // The right CA, but a certificate for another host.
    let server = tls_server(&certs, "other-name.pem", "other-name.key", "ca.pem");
    let ca = certs.arg("ca.pem");
    assert_fails(
        redbloom(
            &server.url(),
            "tls:x",
            &[&["--tls-ca", ca.as_str()][..], &args].concat(),
        ),
        &["certificate", "does not name the host"],
    );
}

#[tokio::test]
async fn a_self_signed_server_certificate_is_trusted_as_its_own_ca() {
    let certs = Certs::make();
    let server = tls_server(
        &certs,
        "self-signed.pem",
        "self-signed.key",
        "self-signed.pem",
    );
    let ca = certs.arg("self-signed.pem");
    let (code, out, err) = run(redbloom(
        &server.url(),
        "tls:self",
        &[
            "--tls-ca", &ca, "--bits", "64", "--json", "add", "hello", "world",
        ],
    ));
    assert_eq!((code, out), (0, json!({"items": 2, "new": 2})), "{err}");

    let conn = manager(&server.url(), &certs.path("self-signed.pem")).await;
    let bloom = RedisBloom::new(conn, "tls:self", 64).unwrap();
    assert!(bloom.exists("hello").await.unwrap());
}

#[tokio::test]
async fn bad_tls_ca_files_and_plain_urls_are_one_line_errors() {
    let certs = Certs::make();
    let server = tls_server(&certs, "server.pem", "server.key", "ca.pem");
    let url = server.url();
    let args = ["--bits", "64", "info"];
    certs.write("garbage.pem", "this is not a certificate\n");
    certs.write(
        "broken.pem",
        "-----BEGIN CERTIFICATE-----\nnot base64 at all!!\n-----END CERTIFICATE-----\n",
    );
    // A private key alone is PEM, but no certificate.
    let key = std::fs::read_to_string(certs.path("server.key")).unwrap();
    certs.write("key-only.pem", &key);

    for (name, words) in [
        ("missing.pem", &["cannot read --tls-ca", "missing.pem"][..]),
        (
            "garbage.pem",
            &["invalid --tls-ca", "garbage.pem", "no PEM certificate"],
        ),
        ("broken.pem", &["invalid --tls-ca", "broken.pem"]),
        (
            "key-only.pem",
            &["invalid --tls-ca", "key-only.pem", "no PEM certificate"],
        ),
        (".", &["cannot read --tls-ca"]),
    ] {
        let file = certs.arg(name);
        assert_fails(
            redbloom(
                &url,
                "tls:x",
                &[&["--tls-ca", file.as_str()][..], &args].concat(),
            ),
            words,
        );
    }

    // --tls-ca is for rediss:// only; the password in the URL is never shown.
    let ca = certs.arg("ca.pem");
    let plain = format!("redis://user:hunter2secret@127.0.0.1:{}", server.port());
    let stderr = assert_fails(
        redbloom(
            &plain,
            "tls:x",
            &[&["--tls-ca", ca.as_str()][..], &args].concat(),
        ),
        &["--tls-ca", "rediss://"],
    );
    assert!(!stderr.contains("hunter2secret"), "{stderr}");
}

/// `openssl req -x509 ...` exactly as SPEC.md §3's recipe: a self-signed certificate for
/// localhost and 127.0.0.1, which openssl marks a CA (basicConstraints CA:TRUE). Writes
/// `NAME.pem` and `NAME.key`; `san` replaces the recipe's subjectAltName when given.
fn openssl_self_signed(certs: &Certs, name: &str, san: Option<&str>) {
    let (cert, key) = (
        certs.arg(&format!("{name}.pem")),
        certs.arg(&format!("{name}.key")),
    );
    let san = san.unwrap_or("DNS:localhost,IP:127.0.0.1");
    let out = std::process::Command::new("openssl")
        .args(["req", "-x509", "-newkey", "rsa:2048", "-nodes"])
        .args(["-subj", "/CN=localhost", "-addext"])
        .arg(format!("subjectAltName={san}"))
        .args(["-keyout", &key, "-out", &cert])
        .output()
        .unwrap_or_else(|err| {
            panic!("this test needs the openssl binary on PATH (apt-get install openssl): {err}")
        });
    assert!(
        out.status.success(),
        "{}",
        String::from_utf8_lossy(&out.stderr)
    );
    let text = std::process::Command::new("openssl")
        .args(["x509", "-noout", "-text", "-in", &cert])
        .output()
        .unwrap();
    assert!(
        String::from_utf8_lossy(&text.stdout).contains("CA:TRUE"),
        "openssl marks its self-signed certificate a CA"
    );
}

/// SPEC.md §3: `--tls-ca FILE` holding the server's own self-signed certificate, made by
/// `openssl req -x509` (marked a CA, which webpki alone refuses as a server's certificate:
/// `CaUsedAsEndEntity`), trusts that exact certificate, as `redis-cli --tls --cacert` does. Another
/// self-signed certificate, or the same one reached by a name it does not hold, is refused.
#[tokio::test]
async fn an_openssl_self_signed_certificate_is_trusted_as_itself() {
    let certs = Certs::make();
    openssl_self_signed(&certs, "openssl", None);
    openssl_self_signed(&certs, "openssl-other", None);
    let server = tls_server(&certs, "openssl.pem", "openssl.key", "openssl.pem");
    let ca = certs.arg("openssl.pem");
    let args = |extra: &[&'static str]| {
        [
            &["--tls-ca", ca.as_str(), "--bits", "64", "--json"][..],
            extra,
        ]
        .concat()
    };

    for host in ["127.0.0.1", "localhost"] {
        let url = format!("rediss://{host}:{}", server.port());
        let (code, out, err) = run(redbloom(&url, "tls:openssl", &args(&["add", "hello"])));
        assert_eq!((code, &out["items"]), (0, &json!(1)), "{url}: {err}");
        let (code, out, err) = run(redbloom(&url, "tls:openssl", &args(&["exists", "hello"])));
        assert_eq!(
            (code, out["present"].as_u64()),
            (0, Some(1)),
            "{url}: {err}"
        );
    }

    // Another openssl certificate (same name, not the same bytes) is not trusted.
    let other = certs.arg("openssl-other.pem");
    assert_fails(
        redbloom(
            &server.url(),
            "tls:x",
            &["--tls-ca", other.as_str(), "--bits", "64", "info"],
        ),
        &["TLS handshake failed", "self-signed", "--tls-ca"],
    );

    // The exact certificate, but for another name than the URL's host.
    openssl_self_signed(&certs, "openssl-elsewhere", Some("DNS:redis.example"));
    let elsewhere = tls_server(
        &certs,
        "openssl-elsewhere.pem",
        "openssl-elsewhere.key",
        "openssl-elsewhere.pem",
    );
    let ca = certs.arg("openssl-elsewhere.pem");
    assert_fails(
        redbloom(
            &elsewhere.url(),
            "tls:x",
            &["--tls-ca", ca.as_str(), "--bits", "64", "info"],
        ),
        &["does not name the host"],
    );
}

/// The exact certificate is trusted only while it is valid: an expired one, marked a CA like
/// openssl's, is refused for having expired.
#[tokio::test]
async fn an_expired_self_signed_certificate_is_refused() {
    let certs = Certs::make();
    let mut params =
        CertificateParams::new(vec!["127.0.0.1".to_owned(), "localhost".to_owned()]).unwrap();
    params.is_ca = IsCa::Ca(BasicConstraints::Unconstrained);
    params.not_before = rcgen::date_time_ymd(2020, 1, 1);
    params.not_after = rcgen::date_time_ymd(2021, 1, 1);
    let key = KeyPair::generate().unwrap();
    let cert = params.self_signed(&key).unwrap();
    certs.write("expired.pem", &cert.pem());
    certs.write("expired.key", &key.serialize_pem());
    let server = tls_server(&certs, "expired.pem", "expired.key", "expired.pem");
    let ca = certs.arg("expired.pem");
    assert_fails(
        redbloom(
            &server.url(),
            "tls:x",
            &["--tls-ca", ca.as_str(), "--bits", "64", "info"],
        ),
        &["TLS handshake failed", "expired"],
    );
}

/// With such a certificate the CLI opens its TLS connections itself; after a restart of the
/// server in the middle of a load, the next call reconnects and the load completes.
#[tokio::test]
async fn the_own_tls_connection_reconnects_after_a_restart() {
    let certs = Certs::make();
    openssl_self_signed(&certs, "openssl", None);
    let mut server = tls_server(&certs, "openssl.pem", "openssl.key", "openssl.pem");
    let mut file = tempfile::NamedTempFile::new().unwrap();
    for i in 0..100_000 {
        writeln!(file, "line-{i}").unwrap();
    }
    let ca = certs.arg("openssl.pem");
    let url = server.url();
    let mut load = std::process::Command::new(assert_cmd::cargo::cargo_bin("redbloom"))
        .env_remove("REDIS_URL")
        .args(["--url", &url, "--key", "tls:restart", "--tls-ca", &ca])
        .args(["--bits", "4000000", "--json", "load"])
        .arg(file.path())
        .args(["--batch", "50", "--pipeline", "1"])
        .stdout(std::process::Stdio::piped())
        .stderr(std::process::Stdio::piped())
        .spawn()
        .unwrap();
    tokio::time::sleep(Duration::from_millis(700)).await;
    assert!(
        load.try_wait().unwrap().is_none(),
        "the load ended too soon"
    );
    server.restart().unwrap();
    let out = load.wait_with_output().unwrap();
    let stderr = String::from_utf8_lossy(&out.stderr);
    assert_eq!(out.status.code(), Some(0), "{stderr}");
    let out: serde_json::Value = serde_json::from_slice(&out.stdout).unwrap();
    assert_eq!(out["items"], 100_000);
}

#[test]
fn an_endless_tls_ca_file_is_refused_in_bounded_memory() {
    // Under a 1 GiB address-space cap, so that an unbounded read fails here, not the machine.
    let bin = assert_cmd::cargo::cargo_bin("redbloom");
    let mut cmd = Command::new("sh");
    cmd.env_remove("REDIS_URL").args([
        "-c",
        "ulimit -v 1048576; exec \"$0\" \"$@\"",
        bin.to_str().unwrap(),
        "--url",
        "rediss://127.0.0.1:1",
        "--key",
        "tls:endless",
        "--tls-ca",
        "/dev/zero",
        "--bits",
        "64",
        "info",
    ]);
    assert_fails(cmd, &["invalid --tls-ca", "/dev/zero", "longer than"]);
}

/// `rediss+sentinel://` with `--tls-ca` (SPEC.md §3 "Sentinel and lines out"): sentinels and
/// nodes over TLS with certificates for 127.0.0.1 (the address the sentinels announce), the
/// commands follow `SENTINEL FAILOVER`, and a CA that signed neither is refused in one line.
#[test]
fn a_sentinel_group_over_tls_follows_a_failover() {
    use common::sentinel::{SentinelGroup, TlsFiles};
    let certs = Certs::make();
    let files = TlsFiles {
        cert: certs.arg("server.pem"),
        key: certs.arg("server.key"),
        ca: certs.arg("ca.pem"),
    };
    let group = SentinelGroup::start_tls(&files).expect("a Sentinel group over TLS");
    let url = group.url();
    assert!(url.starts_with("rediss+sentinel://"), "{url}");
    let ca = certs.arg("ca.pem");
    let args = |more: &[&str]| -> Vec<String> {
        let size = ["--tls-ca", &ca, "--capacity", "10000", "--fpr", "0.01"];
        let wait = ["--wait-replicas", "2", "--json"];
        [&size[..], &wait[..], more]
            .concat()
            .iter()
            .map(|a| a.to_string())
            .collect()
    };
    let add = |item: &str| {
        let args = args(&["add", item]);
        let args: Vec<&str> = args.iter().map(String::as_str).collect();
        run(redbloom(&url, "tls:sentinel", &args))
    };
    let (code, out, err) = add("a");
    assert_eq!((code, &out["new"]), (0, &json!(1)), "{err}");
    group.failover().expect("a failover");
    let (code, out, err) = add("b");
    assert_eq!((code, &out["new"]), (0, &json!(1)), "{err}");
    let check = args(&["exists", "a", "b", "c"]);
    let check: Vec<&str> = check.iter().map(String::as_str).collect();
    let (code, out, err) = run(redbloom(&url, "tls:sentinel", &check));
    assert_eq!(
        (code, &out["present"], &out["absent"]),
        (1, &json!(2), &json!(1)),
        "{err}"
    );
    let other = certs.arg("other-ca.pem");
    assert_fails(
        redbloom(
            &url,
            "tls:sentinel",
            &["--tls-ca", &other, "--retry-for", "0", "exists", "a"],
        ),
        &["certificate"],
    );
}
