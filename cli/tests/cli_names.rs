//! Names (SPEC.md §3, "Names, losses and records"), as the issue tried them with the CLI: `q`
//! and `{q}` share nothing; another program's string `s` is neither written nor deleted beside a
//! filter `{s}`; a window filter made under the older names that `q` and `{q}` shared is refused
//! with one line (exit 2) naming `migrate`, which moves it for the key it is given.

#[path = "../../tests/common/mod.rs"]
mod common;

use common::cli::{assert_fails, redbloom, run};

const WINDOW: &[&str] = &[
    "--window",
    "1h",
    "--capacity",
    "100000",
    "--fpr",
    "0.01",
    "--json",
];

fn lines(n: usize) -> String {
    (0..n).map(|i| format!("item-{i}\n")).collect()
}

#[tokio::test]
async fn a_key_and_its_braced_name_are_two_filters() {
    let redis = common::redis().await;
    let url = redis.url();
    let mut conn = redis.connection().await;
    let dir = tempfile::tempdir().unwrap();
    let items = dir.path().join("items.txt");
    std::fs::write(&items, lines(5_000)).unwrap();
    let items = items.to_str().unwrap();
    let q = common::unique_key("names-q");
    let braced = format!("{{{q}}}");
    let with = |key: &str, args: &[&str]| {
        let mut all = WINDOW.to_vec();
        all.extend(args);
        redbloom(url, key, &all)
    };
    let (code, json, err) = run(with(&braced, &["load", items]));
    assert_eq!((code, &json["new"]), (0, &serde_json::json!(5000)), "{err}");
    // `q` is another key: nothing stored for it, so info finds no filter, and clear has
    // nothing to delete (and touches `{q}`'s filter no more than info).
    assert_fails(redbloom(url, &q, &["info"]), &["no filter at"], None);
    let (code, json, err) = run(redbloom(url, &q, &["--json", "clear"]));
    assert_eq!(
        (code, json),
        (0, serde_json::json!({"deleted": false})),
        "{err}"
    );
    let (code, json, err) = run(with(&braced, &["check", items]));
    assert_eq!(
        (code, &json["present"]),
        (0, &serde_json::json!(5000)),
        "{err}"
    );

    // Another program's string `s`, beside a filter `{s}`: refused, left as it was.
    let s = common::unique_key("names-s");
    let (code, _, err) = run(redbloom(
        url,
        &format!("{{{s}}}"),
        &["--bits", "8192", "--json", "add", "x"],
    ));
    assert_eq!(code, 0, "{err}");
    let _: () = redis::cmd("SET")
        .arg(&s)
        .arg("session-token-xyz")
        .query_async(&mut conn)
        .await
        .unwrap();
    assert_fails(redbloom(url, &s, &["add", "x"]), &["no filter"], None);
    assert_fails(redbloom(url, &s, &["clear"]), &[&s], None);
    let kept: String = redis::cmd("GET")
        .arg(&s)
        .query_async(&mut conn)
        .await
        .unwrap();
    assert_eq!(kept, "session-token-xyz");
}

#[tokio::test]
async fn a_window_under_the_older_shared_names_is_refused_until_migrated() {
    let redis = common::redis().await;
    let url = redis.url();
    let mut conn = redis.connection().await;
    let dir = tempfile::tempdir().unwrap();
    let items = dir.path().join("items.txt");
    std::fs::write(&items, lines(2_000)).unwrap();
    let items = items.to_str().unwrap();
    let q = common::unique_key("names-legacy");
    let braced = format!("{{{q}}}");
    let mut with_window = WINDOW.to_vec();
    with_window.extend(["load", items]);
    let (code, _, err) = run(redbloom(url, &braced, &with_window));
    assert_eq!(code, 0, "{err}");
    // As an earlier build left it: `{q}:redbloom:NAME`.
    let prefix = format!("{{{q}}}:redbloom:{}:{braced}:", braced.len());
    let found = common::keys_like(&mut conn, &format!("{prefix}*")).await;
    assert!(found.len() >= 3, "{found:?}");
    for name in &found {
        let old = format!("{{{q}}}:redbloom:{}", &name[prefix.len()..]);
        let _: () = redis::cmd("RENAME")
            .arg(name)
            .arg(old)
            .query_async(&mut conn)
            .await
            .unwrap();
    }
    for key in [&q, &braced] {
        for args in [&["info"][..], &["clear"], &["check", items]] {
            let said = assert_fails(redbloom(url, key, args), &["migrate", "shared"], None);
            assert!(
                said.contains(&format!("redbloom --key {key} migrate")),
                "{said}"
            );
            // The command line's words, not the library's call (issue 53).
            assert!(!said.contains("adopt_legacy_names"), "{said}");
        }
    }
    let (code, json, err) = run(redbloom(url, &braced, &["--json", "migrate"]));
    assert_eq!(
        (code, &json["moved"]),
        (0, &serde_json::json!(true)),
        "{err}"
    );
    let (code, json, err) = run(redbloom(url, &braced, &["--json", "check", items]));
    assert_eq!(
        (code, &json["present"]),
        (0, &serde_json::json!(2000)),
        "{err}"
    );
    let (code, json, err) = run(redbloom(url, &q, &["--json", "migrate"]));
    assert_eq!(
        (code, &json["moved"]),
        (0, &serde_json::json!(false)),
        "{err}"
    );
    assert_fails(redbloom(url, &q, &["info"]), &["no filter at"], None);
}
