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
    assert_eq!(names, ["advanced", "default"]);

    let (pro_default, _) = server.new_key("acme", "pro", &["--workflows", "default"]);
    let (_, body) = workflows(&server, &pro_default);
    assert_eq!(listed(&body).len(), 1);

    // The free plan does not see paid-only workflows.
    let (_, body) = workflows(&server, server.demo_key.as_deref().unwrap());
    let names: Vec<String> = listed(&body).into_iter().map(|(n, _)| n).collect();
    assert_eq!(names, ["default"]);

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
