//! The journal against the real server: every check and every refused check request is
//! recorded before its answer leaves, so a SIGKILL right after the last answer loses none;
//! `modgate journal` merges the shards with filters, and `prune` deletes old records.

mod common;

use std::collections::{HashMap, HashSet};
use std::time::{Duration, Instant};

use common::*;
use serde_json::{json, Value};

fn journal_json(data: &std::path::Path, args: &[&str]) -> Vec<Value> {
    let mut full = vec!["journal", "--json"];
    full.extend_from_slice(args);
    let output = admin(data, &full);
    assert!(
        output.status.success(),
        "{}",
        String::from_utf8_lossy(&output.stderr)
    );
    String::from_utf8(output.stdout)
        .unwrap()
        .lines()
        .map(|line| serde_json::from_str(line).expect("a JSON record"))
        .collect()
}

fn check(server: &Server, key: &str, body: &Value) -> (u16, String) {
    let (status, headers, _) = post(
        &server.url("/v1/text"),
        &[("Content-Type", "application/json"), ("X-Api-Key", key)],
        body.to_string().as_bytes(),
    );
    (status, headers.get("x-request-id").unwrap().to_owned())
}

fn sigkill_loses_no_answered_check(sync: &str) {
    let data = tempfile::tempdir().unwrap();
    let mut server = Server::start_with(Options {
        cores: Some(2),
        data: Some(data.path().to_owned()),
        config: format!("[journal]\nsync = \"{sync}\"\n"),
        ..Options::default()
    });
    let (key, key_id) = server.new_key("acme", "pro", &[]);
    let mut sent = HashMap::new();
    for i in 0..60 {
        let body = json!({"text": format!("message {i}: hello there"), "ref": format!("r-{i}")});
        let (status, id) = check(&server, &key, &body);
        assert_eq!(status, 200);
        sent.insert(id, format!("r-{i}"));
    }
    // Checks on the compatible route are journaled too.
    let (content_type, form) = form(&[("api_secret", &key), ("text", "compat hello")]);
    let (status, headers, _) = post(
        &server.url("/1.0/text/check-workflow.json"),
        &[("Content-Type", &content_type)],
        &form,
    );
    assert_eq!(status, 200);
    let compat_id = headers.get("x-request-id").unwrap().to_owned();
    server.kill(); // SIGKILL, right after the last answer
    let records = journal_json(data.path(), &[]);
    let by_id: HashMap<&str, &Value> = records
        .iter()
        .map(|r| (r["request_id"].as_str().unwrap(), r))
        .collect();
    for (id, reference) in &sent {
        let record = by_id
            .get(id.as_str())
            .unwrap_or_else(|| panic!("{id} lost ({sync})"));
        assert_eq!(record["key_id"], key_id.as_str());
        assert_eq!(record["org"], "acme");
        assert_eq!(record["ref"], reference.as_str());
        assert_eq!(record["route"], "/v1/text");
        assert_eq!(record["workflow"], "default");
        assert!(record["workflow_version"].as_u64().unwrap() >= 1);
        assert_eq!(record["status"], 200);
        assert_eq!(record["action"], "accept");
        assert!(!record["scores"].as_array().unwrap().is_empty());
    }
    assert_eq!(
        by_id[compat_id.as_str()]["route"],
        "/1.0/text/check-workflow.json"
    );
    // Time order across shards: the merge is on request ids, which begin with the time the
    // request arrived. (Not on `unix_ms`, a check's admission: two checks sent one after the
    // other in the same millisecond to different shards sort by shard, and the later one's
    // admission can fall in the next millisecond.)
    let ids: Vec<&str> = records
        .iter()
        .map(|r| r["request_id"].as_str().unwrap())
        .collect();
    assert!(ids.windows(2).all(|w| w[0] <= w[1]), "{ids:?}");
}

#[test]
fn sigkill_loses_nothing_with_interval_sync() {
    sigkill_loses_no_answered_check("interval");
}

#[test]
fn sigkill_loses_nothing_with_always_sync() {
    sigkill_loses_no_answered_check("always");
}

/// The staging mover fsyncs the disk journal once an interval: under a steady stream of
/// checks it does not chase the records staged while its last move ran, move after move.
#[test]
fn under_steady_load_staging_is_moved_once_an_interval() {
    let server = Server::start_with(Options {
        cores: Some(1),
        config: "[journal]\nsync = \"interval\"\nsync_interval_ms = 400\n".into(),
        ..Options::default()
    });
    let (key, _) = server.new_key("acme", "pro", &[]);
    let fsyncs = || {
        server
            .scrape()
            .value("modgate_journal_fsync_duration_seconds_count", &[])
            .unwrap_or(0.0)
    };
    let before = fsyncs();
    let started = Instant::now();
    let mut checks = 0;
    while started.elapsed() < Duration::from_millis(1_300) {
        let (status, _) = check(
            &server,
            &key,
            &json!({ "text": format!("message {checks}") }),
        );
        // Past the plan's rate a check is refused, and a refusal is journaled too.
        assert!(status == 200 || status == 429, "{status}");
        checks += 1;
    }
    let elapsed = started.elapsed();
    std::thread::sleep(Duration::from_millis(500));
    let moves = fsyncs() - before;
    let intervals = (elapsed.as_millis() + 500) as f64 / 400.0;
    assert!(
        moves >= 1.0 && moves <= intervals.ceil() + 1.0,
        "{moves} moves for {checks} checks in {elapsed:?} and 500 ms after"
    );
}

#[test]
fn refused_check_requests_are_recorded_with_status_and_type() {
    let server = Server::start();
    let (key, key_id) = server.new_key("acme", "pro", &[]);
    let (status, bad_ref) = check(&server, &key, &json!({"text": "x", "ref": ""}));
    assert_eq!(status, 400);
    let (status, unknown) = check(&server, &key, &json!({"text": "x", "workflow": "nope"}));
    assert_eq!(status, 400);
    let revoked_key = server.new_key("acme", "pro", &[]);
    server.admin_ok(&["key", "revoke", &revoked_key.1]);
    let (status, revoked) = check(&server, &revoked_key.0, &json!({"text": "x"}));
    assert_eq!(status, 401);
    // Refused once the workflow is known: the record names it.
    let (free_key, _) = server.new_key("smallco", "free", &[]);
    let (status, paid_only) = check(
        &server,
        &free_key,
        &json!({"text": "x", "workflow": "advanced"}),
    );
    assert_eq!(status, 403);
    let (status, too_long) = check(&server, &free_key, &json!({"text": "x".repeat(5001)}));
    assert_eq!(status, 413);
    // Refused before routing (its framing), on a check route: recorded too.
    let framing = raw_request(
        server.addr,
        b"POST /v1/text HTTP/1.1\r\nHost: t\r\nContent-Length: 2\r\nContent-Length: 3\r\n\r\n{}",
    )
    .unwrap();
    assert_eq!(framing.status, 400);
    let framing = framing.header("x-request-id").unwrap().to_owned();
    // Not a check route: not journaled.
    let (status, _, _) = get(&server.url("/v1/workflows"), &[("X-Api-Key", &key)]);
    assert_eq!(status, 200);
    let refused = raw_request(server.addr, b"GET /health HTTP/1.1\r\nBad Name: 1\r\n\r\n").unwrap();
    assert_eq!(refused.status, 400);
    let records = journal_json(&server.data, &[]);
    let by_id: HashMap<&str, &Value> = records
        .iter()
        .map(|r| (r["request_id"].as_str().unwrap(), r))
        .collect();
    assert_eq!(records.len(), 6);
    assert_eq!(by_id[paid_only.as_str()]["status"], 403);
    assert_eq!(by_id[paid_only.as_str()]["workflow"], "advanced");
    assert_eq!(by_id[too_long.as_str()]["error_type"], "text_too_long");
    assert_eq!(by_id[too_long.as_str()]["workflow"], "default");
    assert_eq!(by_id[too_long.as_str()]["workflow_version"], 1);
    assert_eq!(by_id[framing.as_str()]["route"], "/v1/text");
    assert_eq!(by_id[framing.as_str()]["error_type"], "bad_request");
    assert_eq!(by_id[framing.as_str()]["key_id"], Value::Null);
    assert_eq!(by_id[bad_ref.as_str()]["error_type"], "bad_request");
    assert_eq!(by_id[bad_ref.as_str()]["key_id"], key_id.as_str());
    assert_eq!(by_id[bad_ref.as_str()]["action"], Value::Null);
    assert_eq!(by_id[unknown.as_str()]["error_type"], "unknown_workflow");
    assert_eq!(by_id[revoked.as_str()]["status"], 401);
    assert_eq!(by_id[revoked.as_str()]["key_id"], revoked_key.1.as_str());
    assert_eq!(by_id[revoked.as_str()]["org"], Value::Null);
}

#[test]
fn filters_text_output_and_prune() {
    let server = Server::start();
    let (a, a_id) = server.new_key("acme", "pro", &[]);
    let (b, _) = server.new_key("other", "pro", &[]);
    for i in 0..3 {
        check(&server, &a, &json!({"text": "hi", "ref": format!("a{i}")}));
        check(&server, &b, &json!({"text": "hi", "ref": "b"}));
    }
    assert_eq!(journal_json(&server.data, &["--key", &a_id]).len(), 3);
    assert_eq!(journal_json(&server.data, &["--org", "other"]).len(), 3);
    assert_eq!(journal_json(&server.data, &["--ref", "a1"]).len(), 1);
    assert_eq!(
        journal_json(&server.data, &["--since", "2999-01-01T00:00:00Z"]).len(),
        0
    );
    assert_eq!(
        journal_json(&server.data, &["--until", "2999-01-01T00:00:00Z"]).len(),
        6
    );
    // The table for people: a header and a line per record.
    let table = server.admin_ok(&["journal", "--key", &a_id]);
    assert_eq!(table.lines().count(), 4, "{table}");
    assert!(table.lines().nth(1).unwrap().contains("default@"));
    // Retention: nothing is older than 2000; everything is older than 2999.
    assert!(server
        .admin_ok(&["journal", "prune", "--before", "2000-01-01T00:00:00Z"])
        .contains("deleted 0"));
    assert!(server
        .admin_ok(&["journal", "prune", "--before", "2999-01-01T00:00:00Z"])
        .contains("deleted 6"));
    assert!(journal_json(&server.data, &[]).is_empty());
    // The server keeps journaling after a prune.
    let (status, id) = check(&server, &a, &json!({"text": "after"}));
    assert_eq!(status, 200);
    std::thread::sleep(Duration::from_millis(50));
    let ids: HashSet<String> = journal_json(&server.data, &[])
        .iter()
        .map(|r| r["request_id"].as_str().unwrap().to_owned())
        .collect();
    assert!(ids.contains(&id));
}
