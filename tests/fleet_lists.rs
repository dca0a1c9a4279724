//! Organizations' lists in a fleet (issues 12 and 17), against a real PostgreSQL: a list made
//! and filled through one node's routes is matched by another within a second; the CLI
//! writes and reads the same lists; a node that joins later replays them; a refusal on one
//! node is the same on the others; with PostgreSQL down a write is refused, never kept on one
//! node.

mod common;

use std::time::{Duration, Instant};

use common::engines::Postgres;
use common::fleet::*;
use common::*;
use serde_json::{json, Value};

const WORKFLOWS: &str = r#"
[workflows.known]
description = "Known images only."
image_checks = ["hashlist"]
lists = ["banned"]
[workflows.known.categories.known_image]
review = 0.5
reject = 0.9
"#;

const CAT: &str = "jpeg_baseline_chelsea_451x300.jpg";
const OTHER: &str = "png_rgb_astronaut_224x224.png";

fn start_node(postgres: &Postgres, node: &str) -> Server {
    Server::start_with(Options {
        cores: Some(1),
        config: cluster_config(postgres, node),
        ..Options::default()
    })
}

fn send(
    node: &Server,
    key: &str,
    method: &str,
    path: &str,
    kind: &str,
    body: &[u8],
) -> (u16, Value) {
    let mut builder = ureq::http::Request::builder()
        .method(method)
        .uri(node.url(path))
        .header("X-Api-Key", key);
    if !kind.is_empty() {
        builder = builder.header("Content-Type", kind);
    }
    let mut response = agent()
        .run(builder.body(body.to_vec()).unwrap())
        .expect("request");
    let status = response.status().as_u16();
    let text = response.body_mut().read_to_string().expect("body");
    (
        status,
        serde_json::from_str(&text).unwrap_or(Value::String(text)),
    )
}

/// The action of `/v1/image` on `file` with the `known` workflow.
fn action(node: &Server, key: &str, file: &str) -> String {
    let path = "/v1/image?workflow=known";
    let (status, answer) = send(
        node,
        key,
        "POST",
        path,
        "application/octet-stream",
        &testimage(file),
    );
    assert_eq!(status, 200, "{answer}");
    answer["summary"]["action"].as_str().unwrap().to_owned()
}

#[test]
fn lists_written_on_one_node_or_the_cli_are_matched_on_every_node() {
    let mut postgres = Postgres::start();
    let dir = tempfile::tempdir().unwrap();
    let config = migrated(&postgres, dir.path(), ROOMY_PLANS);
    let cli_data = dir.path().join("cli");
    let cli = |args: &[&str]| {
        let mut all = args.to_vec();
        all.extend(["--data", cli_data.to_str().unwrap()]);
        fleet_admin_ok(&config, &all)
    };
    fleet_admin_ok(&config, &["org", "create", "acme", "--plan", "free"]);
    let workflows = dir.path().join("known.toml");
    std::fs::write(&workflows, WORKFLOWS).unwrap();
    fleet_admin_ok(
        &config,
        &["workflow", "import", workflows.to_str().unwrap()],
    );
    let key = fleet_admin_ok(
        &config,
        &["key", "create", "--org", "acme", "--scopes", "image,lists"],
    )
    .lines()
    .next()
    .unwrap()
    .to_owned();
    let (a, b) = (
        start_node(&postgres, "node-a"),
        start_node(&postgres, "node-b"),
    );

    // Made on node a; node b refuses the same name, as a single node would.
    let create = serde_json::to_vec(&json!({"name": "banned", "kind": "block"})).unwrap();
    let (status, answer) = send(&a, &key, "POST", "/v1/lists", "application/json", &create);
    assert_eq!(status, 201, "{answer}");
    let (status, answer) = send(&b, &key, "POST", "/v1/lists", "application/json", &create);
    assert_eq!(status, 409, "{answer}");
    assert!(answer["error"]["message"]
        .as_str()
        .unwrap()
        .contains("already exists"));
    assert_eq!(action(&b, &key, CAT), "accept");

    // An image added on node a is matched on node b within a second of the answer.
    let path = "/v1/lists/banned/entries?label=cat";
    let (status, added) = send(
        &a,
        &key,
        "POST",
        path,
        "application/octet-stream",
        &testimage(CAT),
    );
    assert_eq!(status, 201, "{added}");
    // Each try is a whole check (a few hundred ms in a debug build): what counts is when the
    // first try that matched was sent.
    let answered = Instant::now();
    let matched_from = loop {
        let sent = answered.elapsed();
        if action(&b, &key, CAT) == "reject" {
            break sent;
        }
        assert!(
            answered.elapsed() < Duration::from_secs(3),
            "an entry added on node a was not matched on node b"
        );
    };
    println!(
        "an entry added on node a was matched on node b by a check sent {} ms after the answer",
        matched_from.as_millis()
    );
    assert!(
        matched_from < Duration::from_secs(1),
        "node b matched the entry only {matched_from:?} after node a's answer"
    );
    // Both nodes gave the entries the same ids: node b pages what node a added.
    let (status, page) = send(&b, &key, "GET", "/v1/lists/banned/entries", "", b"");
    assert_eq!(status, 200, "{page}");
    assert_eq!(page["entries"], added["added"], "{page}");
    assert_eq!(action(&a, &key, OTHER), "accept");

    // The CLI sees the same list, and its additions reach the nodes.
    let entries = cli(&["list", "entries", "--org", "acme", "banned"]);
    assert_eq!(entries.lines().count(), 4, "{entries}");
    let other = format!("{MODELS}/image/testimages/{OTHER}");
    cli(&["list", "add", "--org", "acme", "banned", "--image", &other]);
    eventually(|| action(&a, &key, OTHER) == "reject" && action(&b, &key, OTHER) == "reject");

    // A removal on node b reaches node a.
    let first = added["added"][0]["entry_id"].as_u64().unwrap();
    for entry in added["added"].as_array().unwrap() {
        let id = entry["entry_id"].as_u64().unwrap();
        let path = format!("/v1/lists/banned/entries/{id}");
        let (status, answer) = send(&b, &key, "DELETE", &path, "", b"");
        assert_eq!(status, 200, "{answer}");
    }
    let path = format!("/v1/lists/banned/entries/{first}");
    let (status, _) = send(&a, &key, "DELETE", &path, "", b"");
    assert_eq!(status, 404, "removed on node b, so gone on node a too");
    eventually(|| action(&a, &key, CAT) == "accept");

    // A node that joins now replays the log: it matches at once.
    let c = start_node(&postgres, "node-c");
    assert_eq!(action(&c, &key, OTHER), "reject");
    assert_eq!(action(&c, &key, CAT), "accept");
    let status: Value =
        serde_json::from_str(&fleet_admin_ok(&config, &["fleet", "status", "--json"])).unwrap();
    assert!(status["list_revision"].as_i64().unwrap() >= 5, "{status}");
    eventually(|| {
        let status: Value =
            serde_json::from_str(&fleet_admin_ok(&config, &["fleet", "status", "--json"])).unwrap();
        status["nodes"]
            .as_array()
            .unwrap()
            .iter()
            .all(|node| node["lists_behind"] == 0)
    });

    // PostgreSQL down: a write is refused (503, nothing kept on one node), matching goes on.
    postgres.stop();
    let (status, answer) = send(
        &a,
        &key,
        "POST",
        "/v1/lists/banned/entries?label=cat",
        "application/octet-stream",
        &testimage(CAT),
    );
    assert_eq!(status, 503, "{answer}");
    assert_eq!(answer["error"]["type"], "busy", "{answer}");
    assert_eq!(action(&a, &key, OTHER), "reject");
    postgres.restart();
    let (status, answer) = send(&a, &key, "DELETE", "/v1/lists/banned", "", b"");
    assert_eq!(status, 200, "{answer}");
    eventually(|| action(&b, &key, OTHER) == "accept" && action(&c, &key, OTHER) == "accept");
    let shown = cli(&["list", "show", "--org", "acme"]);
    assert_eq!(shown.lines().count(), 1, "only the header: {shown}");

    // The database restored from an older backup, and written on since (here: rows this build
    // cannot read), so its log is as long as the nodes' but not the one they replayed: each
    // store drops its lists and replays the log as it now is.
    let make = |name: &str| {
        let body = serde_json::to_vec(&json!({"name": name, "kind": "block"})).unwrap();
        let (status, answer) = send(&a, &key, "POST", "/v1/lists", "application/json", &body);
        assert_eq!(status, 201, "{answer}");
        let status = fleet_admin_ok(&config, &["fleet", "status", "--json"]);
        serde_json::from_str::<Value>(&status).unwrap()["list_revision"]
            .as_i64()
            .unwrap()
    };
    let kept = make("kept");
    let end = make("lost") + 1;
    postgres.psql(&format!(
        "DELETE FROM list_log WHERE revision > {kept};
         INSERT INTO list_log (revision, org, change)
             SELECT n, 'acme', '\\x00'::bytea FROM generate_series({}, {end}) AS n;
         SELECT setval('list_revision', {end});",
        kept + 1
    ));
    let names = |node: &Server| -> Vec<String> {
        let (_, answer) = send(node, &key, "GET", "/v1/lists", "", b"");
        answer["lists"]
            .as_array()
            .unwrap()
            .iter()
            .map(|list| list["name"].as_str().unwrap().to_owned())
            .collect()
    };
    for node in [&a, &b, &c] {
        eventually(|| names(node) == ["kept"]);
    }
}
