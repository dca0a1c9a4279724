//! SPEC sections 3 and 5 against the real server: key sources, the key lifecycle (revocation,
//! expiry, rotation with grace), suspended organizations, allow-lists, plans, workflow
//! versions, and changes made by the admin CLI while the server runs.

mod common;

use std::time::Duration;

use common::*;
use serde_json::Value;

fn workflows(server: &Server, key: &str) -> (u16, Value) {
    let (status, headers, body) = get(&server.url("/v1/workflows"), &[("X-Api-Key", key)]);
    assert!(headers.get("x-request-id").is_some());
    (status, body)
}

fn listed(body: &Value) -> Vec<(String, u64)> {
    body["workflows"]
        .as_array()
        .expect("workflows")
        .iter()
        .map(|w| {
            (
                w["name"].as_str().unwrap().to_owned(),
                w["version"].as_u64().unwrap(),
            )
        })
        .collect()
}

fn assert_unauthorized(server: &Server, key: &str) -> String {
    let (status, body) = workflows(server, key);
    assert_error(status, &body, 401, "unauthorized", false)
}

#[test]
fn both_headers_are_accepted_and_must_agree() {
    let server = Server::start();
    let key = server.demo_key.clone().unwrap();
    let (status, _, body) = get(
        &server.url("/v1/workflows"),
        &[("Authorization", &format!("Bearer {key}"))],
    );
    assert_eq!(status, 200);
    assert_schema("WorkflowList", &body);
    let (status, body) = workflows(&server, &key);
    assert_eq!(status, 200);
    assert_schema("WorkflowList", &body);

    let (other, _) = server.new_key("demo", "free", &[]);
    let (status, _, body) = get(
        &server.url("/v1/workflows"),
        &[
            ("Authorization", &format!("Bearer {key}")),
            ("X-Api-Key", &other),
        ],
    );
    assert_error(status, &body, 401, "unauthorized", false);
}

#[test]
fn missing_malformed_unknown_and_wrong_keys_are_401() {
    let server = Server::start();
    let (status, _, body) = get(&server.url("/v1/workflows"), &[]);
    assert_error(status, &body, 401, "unauthorized", false);
    let key = server.demo_key.clone().unwrap();
    let wrong_secret = format!(
        "{}{}",
        &key[..key.len() - 1],
        if key.ends_with('A') { 'B' } else { 'A' }
    );
    for bad in [
        "nonsense",
        "mg_live_short_secret",
        &format!("mg_test_{}", &key[8..]),
        "mg_live_AAAAAAAAAAAA_BBBBBBBBBBBBBBBBBBBBBBBBBBBBBBBB",
        &wrong_secret,
    ] {
        assert_unauthorized(&server, bad);
    }
    let (status, _, body) = get(
        &server.url("/v1/workflows"),
        &[("Authorization", "Basic dXNlcjpwYXNz")],
    );
    assert_error(status, &body, 401, "unauthorized", false);
}

#[test]
fn revocation_takes_effect_on_the_next_request() {
    let server = Server::start();
    let (key, id) = server.new_key("acme", "pro", &[]);
    assert_eq!(workflows(&server, &key).0, 200);
    server.admin_ok(&["key", "revoke", &id]);
    let message = assert_unauthorized(&server, &key);
    assert!(message.contains("revoked"), "{message}");
}

#[test]
fn expired_keys_are_401() {
    let server = Server::start();
    let expires = time::OffsetDateTime::now_utc() + Duration::from_secs(2);
    let expires = expires
        .format(&time::format_description::well_known::Rfc3339)
        .unwrap();
    let (key, _) = server.new_key("acme", "pro", &["--expires", &expires]);
    assert_eq!(workflows(&server, &key).0, 200);
    std::thread::sleep(Duration::from_millis(2500));
    let message = assert_unauthorized(&server, &key);
    assert!(message.contains("expired"), "{message}");
    // An expiry in the past is refused at creation.
    let output = server.admin(&[
        "key",
        "create",
        "--org",
        "acme",
        "--expires",
        "2001-01-01T00:00:00Z",
    ]);
    assert!(!output.status.success());
}

#[test]
fn rotation_with_and_without_grace() {
    let server = Server::start();
    let (old, old_id) = server.new_key(
        "acme",
        "pro",
        &["--scopes", "text", "--workflows", "default"],
    );
    let out = server.admin_ok(&["key", "rotate", &old_id, "--grace", "1h"]);
    let new = out.lines().next().unwrap().to_owned();
    assert!(new.starts_with("mg_live_") && new != old);
    assert!(
        out.contains("scopes=text") && out.contains("workflows=default"),
        "{out}"
    );
    // Both work during the grace delay.
    assert_eq!(workflows(&server, &old).0, 200);
    assert_eq!(workflows(&server, &new).0, 200);

    // A short grace ends on its own.
    let new_id = &new[8..20];
    let out = server.admin_ok(&["key", "rotate", new_id, "--grace", "1s"]);
    let newest = out.lines().next().unwrap().to_owned();
    assert_eq!(workflows(&server, &new).0, 200);
    std::thread::sleep(Duration::from_millis(1300));
    assert_unauthorized(&server, &new);
    assert_eq!(workflows(&server, &newest).0, 200);

    // No grace: the old key stops at once.
    let newest_id = &newest[8..20];
    let out = server.admin_ok(&["key", "rotate", newest_id, "--grace", "0s"]);
    let last = out.lines().next().unwrap().to_owned();
    assert_unauthorized(&server, &newest);
    assert_eq!(workflows(&server, &last).0, 200);

    // Over 24 hours is refused.
    let output = server.admin(&["key", "rotate", &last[8..20], "--grace", "25h"]);
    assert!(!output.status.success());
}

#[test]
fn keys_in_grace_count_toward_the_plan() {
    let server = Server::start_with(Options {
        config: "[plans.free]\nkeys_max = 2\n".into(),
        ..Options::default()
    });
    // The demo organization already has one key (plan free).
    let (_, id) = server.new_key("demo", "free", &[]);
    let output = server.admin(&["key", "create", "--org", "demo"]);
    assert!(!output.status.success());
    assert!(String::from_utf8_lossy(&output.stderr).contains("usable keys"));
    // Rotating with a grace delay needs a third place: refused.
    let output = server.admin(&["key", "rotate", &id, "--grace", "10m"]);
    assert!(!output.status.success());
    // Without grace the new key takes the old one's place.
    server.admin_ok(&["key", "rotate", &id, "--grace", "0s"]);
}

#[test]
fn suspended_organizations_get_403_until_resumed() {
    let server = Server::start();
    let (key, _) = server.new_key("acme", "pro", &[]);
    server.admin_ok(&["org", "suspend", "acme"]);
    let (status, body) = workflows(&server, &key);
    assert_error(status, &body, 403, "organization_suspended", false);
    server.admin_ok(&["org", "resume", "acme"]);
    assert_eq!(workflows(&server, &key).0, 200);
}

#[test]
fn workflow_lists_follow_allow_lists_and_plans() {
    let server = Server::start();
    let (pro_all, _) = server.new_key("acme", "pro", &[]);
    let (_, body) = workflows(&server, &pro_all);
    let names: Vec<String> = listed(&body).into_iter().map(|(n, _)| n).collect();
    assert_eq!(
        names,
        [
            "advanced",
            "default",
            "fast",
            "moderation",
            "perspective",
            "text-ml",
            "text-rules"
        ]
    );

    let (pro_default, _) = server.new_key("acme", "pro", &["--workflows", "default"]);
    let (_, body) = workflows(&server, &pro_default);
    assert_eq!(listed(&body).len(), 1);

    // The free plan does not see paid-only workflows (`moderation` is not one).
    let (_, body) = workflows(&server, server.demo_key.as_deref().unwrap());
    let names: Vec<String> = listed(&body).into_iter().map(|(n, _)| n).collect();
    assert_eq!(
        names,
        [
            "default",
            "fast",
            "moderation",
            "perspective",
            "text-ml",
            "text-rules"
        ]
    );

    // Unknown workflows in an allow-list are refused at creation.
    let output = server.admin(&["key", "create", "--org", "acme", "--workflows", "nope"]);
    assert!(!output.status.success());
}

#[test]
fn workflow_versions_go_up_on_change_and_show_at_once() {
    let server = Server::start();
    let (key, _) = server.new_key("acme", "pro", &[]);
    let (_, body) = workflows(&server, &key);
    let before: std::collections::BTreeMap<_, _> = listed(&body).into_iter().collect();
    // Re-importing the shipped file changes nothing.
    let out = server.admin_ok(&["workflow", "import"]);
    assert!(out.contains("unchanged"), "{out}");
    let file = server.data.join("edited.toml");
    std::fs::write(
        &file,
        "[workflows.default]\ndescription = \"Edited for the test.\"\ntext_checks = [\"pii\"]\n[workflows.extra]\ndescription = \"New.\"\ntext_checks = [\"pii\"]\n",
    )
    .unwrap();
    server.admin_ok(&["workflow", "import", file.to_str().unwrap()]);
    let (_, body) = workflows(&server, &key);
    let after: std::collections::BTreeMap<_, _> = listed(&body).into_iter().collect();
    assert_eq!(after["default"], before["default"] + 1);
    assert_eq!(after["advanced"], before["advanced"]);
    assert_eq!(after["extra"], 1);
    // A file with an unknown field is refused, naming it.
    std::fs::write(&file, "[workflows.x]\ndescription = \"x\"\nthreshold = 1\n").unwrap();
    let output = server.admin(&["workflow", "import", file.to_str().unwrap()]);
    assert!(!output.status.success());
    assert!(String::from_utf8_lossy(&output.stderr).contains("threshold"));
}

#[test]
fn key_creation_prints_the_key_alone_first() {
    let server = Server::start();
    server.admin_ok(&["org", "create", "acme", "--plan", "pro"]);
    let out = server.admin_ok(&["key", "create", "--org", "acme", "--scopes", "image"]);
    let first = out.lines().next().unwrap();
    assert_eq!(first.len(), 53);
    assert!(first.starts_with("mg_live_"));
    assert!(first[8..20].chars().all(|c| c.is_ascii_alphanumeric()));
    assert_eq!(&first[20..21], "_");
    assert!(first[21..].chars().all(|c| c.is_ascii_alphanumeric()));
    // The secret never appears in the listing.
    let list = server.admin_ok(&["key", "list", "--org", "acme"]);
    assert!(list.contains(&first[8..20]) && !list.contains(&first[21..]));
    // Unknown organization, bad scope: refused.
    assert!(!server
        .admin(&["key", "create", "--org", "nobody"])
        .status
        .success());
    assert!(!server
        .admin(&["key", "create", "--org", "acme", "--scopes", "video"])
        .status
        .success());
}

/// Issue 14, defect 1: a key with a multibyte character where the id ends panicked the shard
/// that read it (through each of the three places a key can be sent). Each such request must
/// get 401, every shard must keep serving new connections, `/health` stays 200, and the key
/// never reaches the log.
#[test]
fn a_non_ascii_api_key_is_refused_and_the_shard_keeps_serving() {
    let server = Server::start_with(Options {
        cores: Some(2),
        capture_logs: true,
        ..Options::default()
    });
    let key = "mg_live_AAAAAAAAAAA\u{e9}BBBBBBBBBBBBBBBBBBBBBBBBBBBBBBBB";
    let (content_type, form_body) = form(&[("api_secret", key), ("text", "hello")]);
    let mut compat_form = format!(
        "POST /1.0/text/check-workflow.json HTTP/1.1\r\nHost: t\r\nContent-Type: {content_type}\r\nContent-Length: {}\r\n\r\n",
        form_body.len()
    )
    .into_bytes();
    compat_form.extend_from_slice(&form_body);
    let requests: Vec<Vec<u8>> = vec![
        format!("GET /v1/workflows HTTP/1.1\r\nHost: t\r\nX-Api-Key: {key}\r\n\r\n").into_bytes(),
        format!("GET /v1/workflows HTTP/1.1\r\nHost: t\r\nAuthorization: Bearer {key}\r\n\r\n")
            .into_bytes(),
        format!(
            "GET /1.0/check-workflow.json?url=https%3A%2F%2Fexample.com%2Fa.jpg&api_secret={} HTTP/1.1\r\nHost: t\r\n\r\n",
            modgate_load::prepare::percent(key)
        )
        .into_bytes(),
        compat_form,
    ];
    for shard in 0..2u8 {
        for request in &requests {
            let mut conn = conn_on_shard(server.addr, shard);
            conn.send(request);
            let response = conn.read_response().expect("an answer, not a dead shard");
            assert_eq!(response.status, 401, "{}", String::from_utf8_lossy(request));
            // The connection is still served after the refusal.
            conn.send(b"GET /health HTTP/1.1\r\nHost: t\r\n\r\n");
            assert_eq!(conn.read_response().expect("health").status, 200);
        }
    }
    // New connections reach live shards: none hangs, /health says 200.
    let mut seen = [false; 2];
    for _ in 0..40 {
        let response = raw_request(
            server.addr,
            b"GET /health HTTP/1.1\r\nHost: t\r\nConnection: close\r\n\r\n",
        )
        .expect("every new connection is answered");
        assert_eq!(response.status, 200);
        let id = response.header("x-request-id").expect("request id");
        seen[usize::from(shard_of_request_id(id))] = true;
    }
    assert_eq!(seen, [true, true], "both shards answer");
    let output = server.output.lock().unwrap().join("\n");
    assert!(!output.contains("BBBBBBBBBBBB"), "the key reached the log");
    assert!(!output.contains("panic"), "{output}");
}

/// Issue 14, defect 1, the class of bug: a panic while a request is handled answers that
/// request 500 and closes its connection; the shard serves every other connection on, its
/// `/health` stays 200, the panic is counted, and its message (which quotes the request) is
/// not logged.
#[test]
fn a_panicking_request_closes_its_connection_and_the_shard_serves_on() {
    let server = Server::start_with(Options {
        cores: Some(2),
        capture_logs: true,
        config: "[testing]\npanic_path = \"/v1/panic\"\n".into(),
        ..Options::default()
    });
    let key = server.demo_key.clone().unwrap();
    for shard in 0..2u8 {
        let mut bystander = conn_on_shard(server.addr, shard);
        for _ in 0..3 {
            let mut conn = conn_on_shard(server.addr, shard);
            conn.send(b"GET /v1/panic?secret=SECRETSECRET HTTP/1.1\r\nHost: t\r\n\r\n");
            let response = conn
                .read_response()
                .expect("a 500, not a dropped connection");
            assert_error(response.status, &response.json(), 500, "internal", false);
            assert_eq!(response.header("connection"), Some("close"));
            assert!(conn.is_closed(), "the panicked connection is closed");
        }
        // A connection opened before the panics is still served, and so are new ones.
        bystander.send(
            format!("GET /v1/workflows HTTP/1.1\r\nHost: t\r\nX-Api-Key: {key}\r\n\r\n").as_bytes(),
        );
        assert_eq!(bystander.read_response().expect("workflows").status, 200);
    }
    for _ in 0..20 {
        let response = raw_request(
            server.addr,
            b"GET /health HTTP/1.1\r\nHost: t\r\nConnection: close\r\n\r\n",
        )
        .expect("every new connection is answered");
        assert_eq!(response.status, 200);
    }
    let metrics = server.scrape();
    assert_eq!(metrics.value("modgate_panics_total", &[]), Some(6.0));
    let output = server.output.lock().unwrap().join("\n");
    assert!(output.contains("panic"), "the panic is logged: {output}");
    assert!(
        !output.contains("SECRETSECRET"),
        "the panic message reached the log"
    );
}

/// Runs an admin command on `data` that must succeed; returns its stdout.
fn admin_ok_on(data: &std::path::Path, args: &[&str]) -> String {
    let output = admin(data, args);
    assert!(
        output.status.success(),
        "modgate {args:?} failed: {}",
        String::from_utf8_lossy(&output.stderr)
    );
    String::from_utf8(output.stdout).expect("utf-8")
}

/// Round 3 of the hardening, item 10: on a fresh data directory, `org create NAME --plan pro`
/// before the first `serve` answered "unknown plan 'pro'": only `serve` wrote the plans and
/// the shipped workflows. Every admin command now makes the store ready as `serve` does,
/// without touching what it has; the first `serve` then finds the organization, creates no
/// demo one, and answers its key.
#[test]
fn admin_commands_before_the_first_serve_find_the_plans_and_workflows() {
    let dir = tempfile::tempdir().unwrap();
    let data = dir.path().join("fresh");
    admin_ok_on(&data, &["org", "create", "acme", "--plan", "pro"]);
    let plans = admin_ok_on(&data, &["plan", "list"]);
    assert!(
        plans.lines().any(|line| line.starts_with("free\t"))
            && plans.lines().any(|line| line.starts_with("pro\t")),
        "{plans}"
    );
    let shipped = admin_ok_on(&data, &["workflow", "list"]);
    assert!(shipped.contains("default"), "{shipped}");
    let key = admin_ok_on(&data, &["key", "create", "--org", "acme"])
        .lines()
        .next()
        .expect("key line")
        .to_owned();
    // A read-only command on a store that has everything changes nothing.
    let again = admin_ok_on(&data, &["workflow", "list"]);
    assert_eq!(again, shipped);
    let server = Server::start_with(Options {
        data: Some(data.clone()),
        ..Options::default()
    });
    assert!(server.demo_key.is_none(), "{:?}", server.stdout);
    let (status, body) = workflows(&server, &key);
    assert_eq!(status, 200, "{body}");
    assert!(
        listed(&body).iter().any(|(name, _)| name == "default"),
        "{body}"
    );
}

/// Round 3 of the hardening, item 10: `serve` on a fresh data directory without models
/// created the demo organization and printed its key, then stopped on the models; the next
/// start, with them, printed no key. The models are now checked before the data directory is
/// touched: the failed start leaves nothing, and the next one creates the demo organization.
#[test]
fn a_start_that_fails_on_the_models_leaves_a_fresh_data_directory_untouched() {
    let dir = tempfile::tempdir().unwrap();
    let data = dir.path().join("fresh");
    let output = std::process::Command::new(BIN)
        .args([
            "serve",
            "--listen",
            "127.0.0.1:0",
            "--metrics-listen",
            "off",
            "--data",
        ])
        .arg(&data)
        .current_dir(dir.path())
        .env_remove("MODGATE_MODELS")
        .env("RUST_LOG", "warn")
        .output()
        .expect("serve");
    assert!(!output.status.success());
    let stderr = String::from_utf8_lossy(&output.stderr);
    assert!(stderr.contains("no models directory"), "{stderr}");
    let stdout = String::from_utf8_lossy(&output.stdout);
    assert!(!stdout.contains("demo key"), "{stdout}");
    assert!(!data.exists(), "the failed start made {}", data.display());
    std::fs::create_dir_all(&data).unwrap();
    let server = Server::start_with(Options {
        data: Some(data.clone()),
        ..Options::default()
    });
    let key = server
        .demo_key
        .clone()
        .expect("a demo key on the first real start");
    assert_eq!(workflows(&server, &key).0, 200);
}
