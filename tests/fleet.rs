//! The fleet's control plane against a real PostgreSQL (issue 12): three `modgate serve`
//! processes follow one control plane; keys made once work everywhere; a revocation reaches
//! every live node within a second; a node keeps answering while PostgreSQL is down and
//! catches up after.

mod common;

use std::time::{Duration, Instant};

use common::engines::Postgres;
use common::fleet::*;
use common::*;

fn status_on(server: &Server, key: &str) -> u16 {
    let (status, _, _) = get(&server.url("/v1/workflows"), &[("X-Api-Key", key)]);
    status
}

fn start_node(postgres: &Postgres, node: &str) -> Server {
    Server::start_with(Options {
        cores: Some(1),
        config: cluster_config(postgres, node),
        ..Options::default()
    })
}

#[test]
fn serve_refuses_a_database_without_the_schema_and_migrate_is_idempotent() {
    let postgres = Postgres::start();
    let dir = tempfile::tempdir().unwrap();
    let config = admin_config(&postgres, dir.path());
    let output = std::process::Command::new(BIN)
        .args(["serve", "--listen", "127.0.0.1:0", "--data"])
        .arg(dir.path().join("node"))
        .arg("--config")
        .arg(&config)
        .args(["--models", MODELS, "--metrics-listen", "off"])
        .output()
        .expect("serve");
    assert!(!output.status.success());
    let stderr = String::from_utf8_lossy(&output.stderr);
    assert!(stderr.contains("modgate db migrate"), "{stderr}");
    let first = fleet_admin_ok(&config, &["db", "migrate"]);
    assert!(
        first.contains("applied schema versions [1, 2, 3, 4, 5]"),
        "{first}"
    );
    // A quota grant's sum over the nodes reads the (org, month) index `db migrate` makes.
    let plan = postgres.psql(
        "SET enable_seqscan = off; EXPLAIN SELECT coalesce(sum(spent), 0) FROM quota_leases WHERE org = 'acme' AND month = 24322",
    );
    assert!(plan.contains("quota_leases_org_month"), "{plan}");
    let second = fleet_admin_ok(&config, &["db", "migrate"]);
    assert!(second.contains("up to date"), "{second}");
    let plans = fleet_admin_ok(&config, &["plan", "list"]);
    assert!(plans.contains("free") && plans.contains("pro"), "{plans}");
    let workflows = fleet_admin_ok(&config, &["workflow", "list"]);
    assert!(workflows.contains("default\tversion 1"), "{workflows}");
    // A fleet made by a version that shipped fewer workflows gets the new ones from the next
    // migrate, and keeps its own edits of the others.
    postgres.psql("DELETE FROM control_records WHERE tbl = 'workflows' AND key = 'text-rules'");
    let edited = dir.path().join("edited.toml");
    std::fs::write(
        &edited,
        "[workflows.default]\ndescription = 'ours'\ntext_checks = ['wordlist']\n",
    )
    .unwrap();
    fleet_admin_ok(&config, &["workflow", "import", edited.to_str().unwrap()]);
    let third = fleet_admin_ok(&config, &["db", "migrate"]);
    assert!(
        third.contains("shipped workflows added: text-rules"),
        "{third}"
    );
    let workflows = fleet_admin_ok(&config, &["workflow", "list"]);
    assert!(workflows.contains("text-rules\tversion 1"), "{workflows}");
    assert!(
        workflows.contains("default\tversion 2\tours"),
        "{workflows}"
    );
}

/// A journal shipped under schema 4 (`record jsonb`, the database's collation) comes through
/// migration 5 whole: every record, read back by `modgate journal`, now `json` and with its
/// keys compared bytewise.
#[test]
fn migration_5_keeps_the_journal_shipped_before_it() {
    let postgres = Postgres::start();
    let dir = tempfile::tempdir().unwrap();
    let config = admin_config(&postgres, dir.path());
    // The database as `db migrate` of schema 4 left it, with two records shipped.
    let mut sql = String::from(
        "CREATE TABLE modgate_schema (version integer PRIMARY KEY,
             applied_at timestamptz NOT NULL DEFAULT now());",
    );
    for (version, migration) in &modgate::fleet::schema::MIGRATIONS[..4] {
        sql += &format!("{migration}; INSERT INTO modgate_schema (version) VALUES ({version});");
    }
    for (n, id) in ["01KAAAAAAAAAAAAAAAAAAAAAA1", "01KAAAAAAAAAAAAAAAAAAAAAA2"]
        .iter()
        .enumerate()
    {
        let ms = 1_790_000_000_000u64 + n as u64;
        let record = format!(
            r#"{{"request_id":"{id}","unix_ms":{ms},"route":"/v1/text","kind":"text","key_id":"k1","org":"acme","ref":"r-{n}","workflow":"default","workflow_version":1,"status":200,"error_type":null,"action":"accept","scores":[["profanity",0.25]],"unchecked":["language"],"time_ms":0,"units":1}}"#,
        );
        sql += &format!(
            "INSERT INTO journal (request_id, node_id, shard, unix_ms, org, key_id, ref, record)
             VALUES ('{id}', 'node-a', 0, {ms}, 'acme', 'k1', 'r-{n}', '{record}'::jsonb);"
        );
    }
    postgres.psql(&sql);
    assert_eq!(
        postgres.psql("SELECT pg_typeof(record) FROM journal LIMIT 1"),
        "jsonb"
    );
    let migrated = fleet_admin_ok(&config, &["db", "migrate"]);
    assert!(
        migrated.contains("applied schema versions [5]"),
        "{migrated}"
    );
    assert_eq!(
        postgres.psql("SELECT pg_typeof(record) FROM journal LIMIT 1"),
        "json"
    );
    assert_eq!(
        postgres.psql(
            "SELECT string_agg(column_name || ' ' || collation_name, ', ' ORDER BY column_name)
             FROM information_schema.columns
             WHERE table_name = 'journal' AND column_name IN ('request_id', 'org')"
        ),
        "org C, request_id C"
    );
    let json = fleet_admin_ok(&config, &["journal", "--json"]);
    let records: Vec<serde_json::Value> = json
        .lines()
        .map(|line| serde_json::from_str(line).unwrap())
        .collect();
    assert_eq!(records.len(), 2, "{json}");
    for (n, record) in records.iter().enumerate() {
        assert_eq!(record["ref"], format!("r-{n}"));
        assert_eq!(record["scores"][0][1], 0.25, "{record}");
        assert_eq!(record["unchecked"][0], "language");
    }
}

#[test]
fn keys_made_once_work_on_every_node_and_a_revocation_reaches_them_within_a_second() {
    let postgres = Postgres::start();
    let dir = tempfile::tempdir().unwrap();
    let config = migrated(&postgres, dir.path(), ROOMY_PLANS);
    let nodes: Vec<Server> = ["node-a", "node-b", "node-c"]
        .iter()
        .map(|node| start_node(&postgres, node))
        .collect();
    fleet_admin_ok(&config, &["org", "create", "acme", "--plan", "free"]);
    let status = fleet_admin_ok(&config, &["fleet", "status"]);
    for node in ["node-a", "node-b", "node-c"] {
        assert!(
            status
                .lines()
                .any(|l| l.starts_with(node) && l.contains("\tyes\t")),
            "{status}"
        );
    }
    for round in 0..3 {
        let key = fleet_key(&config, "acme");
        // `key create` returns once every live node has the key.
        for node in &nodes {
            assert_eq!(
                status_on(node, &key),
                200,
                "round {round}: a new key on {}",
                node.addr
            );
        }
        let id = &key["mg_live_".len().."mg_live_".len() + 12];
        let started = Instant::now();
        fleet_admin_ok(&config, &["key", "revoke", id]);
        for node in &nodes {
            assert_eq!(
                status_on(node, &key),
                401,
                "round {round}: revoked on {}",
                node.addr
            );
        }
        let took = started.elapsed();
        assert!(
            took < Duration::from_secs(1),
            "round {round}: revocation took {took:?} to reach every node"
        );
    }
    // Suspension too, and the JSON status agrees on the revision.
    let key = fleet_key(&config, "acme");
    fleet_admin_ok(&config, &["org", "suspend", "acme"]);
    for node in &nodes {
        assert_eq!(status_on(node, &key), 403);
    }
    let json: serde_json::Value =
        serde_json::from_str(&fleet_admin_ok(&config, &["fleet", "status", "--json"])).unwrap();
    let revision = json["revision"].as_i64().unwrap();
    assert!(revision > 0);
    for node in json["nodes"].as_array().unwrap() {
        assert_eq!(node["applied_revision"].as_i64(), Some(revision), "{json}");
        assert_eq!(node["live"], true);
    }
    for node in &nodes {
        let scrape = node.scrape();
        assert_eq!(
            scrape.value("modgate_control_plane_revision", &[]),
            Some(revision as f64)
        );
    }
}

#[test]
fn a_node_answers_while_postgres_is_down_and_catches_up_after() {
    let mut postgres = Postgres::start();
    let dir = tempfile::tempdir().unwrap();
    let config = migrated(&postgres, dir.path(), ROOMY_PLANS);
    let node = start_node(&postgres, "node-a");
    fleet_admin_ok(&config, &["org", "create", "acme", "--plan", "free"]);
    let key = fleet_key(&config, "acme");
    let id = key["mg_live_".len().."mg_live_".len() + 12].to_owned();
    postgres.stop();
    // The node keeps answering from what it applied, and says it is getting stale.
    std::thread::sleep(Duration::from_millis(2500));
    assert_eq!(status_on(&node, &key), 200);
    let stale = node
        .scrape()
        .value("modgate_control_plane_staleness_seconds", &[])
        .expect("a staleness gauge");
    assert!(stale >= 1.0, "staleness {stale}");
    // An admin command cannot change anything meanwhile, and says why.
    let refused = fleet_admin(&config, &["key", "revoke", &id]);
    assert!(!refused.status.success());
    postgres.restart();
    // Back: a change made now reaches the node (it reconnects and catches up).
    fleet_admin_ok(&config, &["key", "revoke", &id]);
    let deadline = Instant::now() + Duration::from_secs(5);
    while status_on(&node, &key) != 401 {
        assert!(Instant::now() < deadline, "the node did not catch up");
        std::thread::sleep(Duration::from_millis(50));
    }
}

fn check_text(node: &Server, key: &str, n: usize) -> String {
    let body = format!(r#"{{"text": "message {n}", "ref": "r-{n}"}}"#);
    let (status, _, answer) = post(
        &node.url("/v1/text"),
        &[("X-Api-Key", key), ("Content-Type", "application/json")],
        body.as_bytes(),
    );
    assert_eq!(status, 200, "{answer}");
    answer["request_id"]
        .as_str()
        .expect("request id")
        .to_owned()
}

#[test]
fn journals_ship_to_one_table_exactly_once_even_across_a_kill() {
    let postgres = Postgres::start();
    let dir = tempfile::tempdir().unwrap();
    let config = migrated(&postgres, dir.path(), ROOMY_PLANS);
    // Two shards each: node-a ships over one connection per shard (the default), node-b
    // over the one its configuration asks for.
    let node_options = |node: &str| {
        std::fs::create_dir_all(dir.path().join(node)).unwrap();
        let mut config = cluster_config(&postgres, node);
        if node == "node-b" {
            config.push_str("shipping_connections = 1\n");
        }
        Options {
            cores: Some(2),
            config,
            data: Some(dir.path().join(node)),
            ..Options::default()
        }
    };
    let mut a = Server::start_with(node_options("node-a"));
    let b = Server::start_with(node_options("node-b"));
    fleet_admin_ok(&config, &["org", "create", "acme", "--plan", "free"]);
    let key = fleet_key(&config, "acme");
    let mut answered = Vec::new();
    for n in 0..30 {
        answered.push(check_text(&a, &key, n));
        answered.push(check_text(&b, &key, 100 + n));
    }
    // Killed right after its last answer: what it had not shipped yet is shipped after its
    // restart, from its own journal.
    a.kill();
    let a = Server::start_with(node_options("node-a"));
    for n in 30..40 {
        answered.push(check_text(&a, &key, n));
    }
    let deadline = Instant::now() + Duration::from_secs(15);
    loop {
        let count: usize = postgres
            .psql("SELECT count(*) FROM journal")
            .parse()
            .unwrap();
        if count >= answered.len() {
            break;
        }
        assert!(
            Instant::now() < deadline,
            "{count} of {} records shipped",
            answered.len()
        );
        std::thread::sleep(Duration::from_millis(100));
    }
    assert_eq!(
        postgres.psql("SELECT count(*) FROM journal"),
        answered.len().to_string(),
        "every answered check once, nothing else"
    );
    let listed = fleet_admin_ok(&config, &["journal"]);
    for id in &answered {
        assert!(
            listed.contains(id.as_str()),
            "{id} missing from `modgate journal`"
        );
    }
    // Stored as the node wrote it (`jsonb` would have reordered its keys, `org` first).
    let stored = postgres.psql("SELECT record FROM journal WHERE ref = 'r-105'");
    assert!(stored.starts_with(r#"{"request_id":""#), "{stored}");
    let json = fleet_admin_ok(&config, &["journal", "--json", "--ref", "r-105"]);
    let lines: Vec<&str> = json.lines().collect();
    assert_eq!(lines.len(), 1, "{json}");
    let record: serde_json::Value = serde_json::from_str(lines[0]).unwrap();
    assert_eq!(record["ref"], "r-105");
    assert_eq!(record["org"], "acme");
    // Every node reports nothing left to ship.
    let deadline = Instant::now() + Duration::from_secs(5);
    loop {
        let status: serde_json::Value =
            serde_json::from_str(&fleet_admin_ok(&config, &["fleet", "status", "--json"])).unwrap();
        let lag: i64 = status["nodes"]
            .as_array()
            .unwrap()
            .iter()
            .map(|n| n["journal_unshipped"].as_i64().unwrap())
            .sum();
        if lag == 0 {
            break;
        }
        assert!(
            Instant::now() < deadline,
            "journal lag stays at {lag}: {status}"
        );
        std::thread::sleep(Duration::from_millis(200));
    }
    assert_eq!(
        b.scrape()
            .value("modgate_journal_unshipped_records", &[("shard", "0")]),
        Some(0.0)
    );
    // Each connection names its role and node. node-a's shards took turns at its two
    // connections (more than two batches since its restart); node-b had one.
    let shipping = |node: &str| {
        postgres.psql(&format!(
            "SELECT count(*) FROM pg_stat_activity WHERE application_name = 'modgate ship {node}'"
        ))
    };
    assert_eq!(shipping("node-a"), "2");
    assert_eq!(shipping("node-b"), "1");
}

/// The records of a node's own journal, read from its data directory (the staged ones too).
fn local_journal(node: &Server) -> Vec<serde_json::Value> {
    node.admin_ok(&["journal", "--json"])
        .lines()
        .map(|line| serde_json::from_str(line).unwrap())
        .collect()
}

fn table_count(postgres: &Postgres) -> usize {
    postgres
        .psql("SELECT count(*) FROM journal")
        .parse()
        .unwrap()
}

/// Waits up to `seconds` for `done`, saying `what` if it never is.
fn wait_for(seconds: u64, what: &str, mut done: impl FnMut() -> bool) {
    let deadline = Instant::now() + Duration::from_secs(seconds);
    while !done() {
        assert!(Instant::now() < deadline, "{what}");
        std::thread::sleep(Duration::from_millis(100));
    }
}

/// A node deletes its own copies of the records it shipped (here at once:
/// `local_journal_keep_minutes = 0`), so that its journal does not grow until its map is
/// full, and never one it has not shipped: those stay while PostgreSQL is down, and go once
/// they are in the table.
#[test]
fn a_node_prunes_what_it_shipped_and_keeps_what_it_has_not() {
    let mut postgres = Postgres::start();
    let dir = tempfile::tempdir().unwrap();
    let config = migrated(&postgres, dir.path(), ROOMY_PLANS);
    let node = Server::start_with(Options {
        cores: Some(1),
        config: cluster_config(&postgres, "node-a") + "local_journal_keep_minutes = 0\n",
        ..Options::default()
    });
    fleet_admin_ok(&config, &["org", "create", "acme", "--plan", "free"]);
    let key = fleet_key(&config, "acme");
    for n in 0..20 {
        check_text(&node, &key, n);
    }
    wait_for(15, "the first 20 records were not shipped", || {
        table_count(&postgres) == 20
    });
    wait_for(
        15,
        "the shipped records stayed in the node's journal",
        || local_journal(&node).is_empty(),
    );
    // PostgreSQL down: what is answered meanwhile stays in the node's journal through
    // several passes of the prune (one a second here).
    postgres.stop();
    let unshipped: Vec<String> = (20..25).map(|n| check_text(&node, &key, n)).collect();
    std::thread::sleep(Duration::from_secs(3));
    let kept: Vec<String> = local_journal(&node)
        .iter()
        .map(|record| record["request_id"].as_str().unwrap().to_owned())
        .collect();
    assert_eq!(kept, unshipped, "the unshipped records, all of them");
    // Nor does `journal prune` on the node's data directory take them.
    node.admin_ok(&["journal", "prune", "--before", "2100-01-01T00:00:00Z"]);
    let kept: Vec<String> = local_journal(&node)
        .iter()
        .map(|record| record["request_id"].as_str().unwrap().to_owned())
        .collect();
    assert_eq!(kept, unshipped, "journal prune left the unshipped records");
    postgres.restart();
    wait_for(
        20,
        "the records answered while PostgreSQL was down were not shipped",
        || table_count(&postgres) == 25,
    );
    wait_for(
        15,
        "the records shipped late stayed in the node's journal",
        || local_journal(&node).is_empty(),
    );
    let listed = fleet_admin_ok(&config, &["journal"]);
    for id in &unshipped {
        assert!(listed.contains(id.as_str()), "{id} missing from the table");
    }
    assert_eq!(
        node.scrape()
            .value("modgate_journal_pruned_records_total", &[]),
        Some(25.0)
    );
}

/// A node restarted on fewer cores: what the shards it no longer runs had not shipped is
/// shipped all the same (before, it stayed in their journals for good).
#[test]
fn a_node_restarted_on_fewer_cores_ships_what_its_other_shards_had_not() {
    let mut postgres = Postgres::start();
    let dir = tempfile::tempdir().unwrap();
    let config = migrated(&postgres, dir.path(), ROOMY_PLANS);
    let data = dir.path().join("node-a");
    std::fs::create_dir_all(&data).unwrap();
    let node_config = cluster_config(&postgres, "node-a");
    let options = |cores| Options {
        cores: Some(cores),
        config: node_config.clone(),
        data: Some(data.clone()),
        ..Options::default()
    };
    let mut node = Server::start_with(options(2));
    fleet_admin_ok(&config, &["org", "create", "acme", "--plan", "free"]);
    let key = fleet_key(&config, "acme");
    let mut answered = vec![check_text(&node, &key, 0)];
    // PostgreSQL down: nothing ships; the checks, each on a connection of its own, spread
    // over both shards. Killed, the node leaves them in its two journals.
    postgres.stop();
    for n in 1..25 {
        answered.push(check_text(&node, &key, n));
    }
    node.kill();
    postgres.restart();
    let _node = Server::start_with(options(1));
    wait_for(
        20,
        "the records of the shard not run were not shipped",
        || table_count(&postgres) == answered.len(),
    );
    let listed = fleet_admin_ok(&config, &["journal"]);
    for id in &answered {
        assert!(listed.contains(id.as_str()), "{id} missing from the table");
    }
}

/// A control plane restored from an older backup (its revisions behind what a node applied):
/// the node takes a snapshot instead of waiting for revisions it has already passed, so a
/// change made after the restore reaches it and what the restore took away is gone from it.
#[test]
fn a_node_follows_a_control_plane_restored_behind_it() {
    restored_control_plane_is_followed(1);
}

/// The same, with the restored control plane written on past the node's revision before the
/// node sees it: the node's last change is not in it as the node applied it, so the node takes
/// a snapshot rather than the changes after its revision (which would mix two histories).
#[test]
fn a_node_follows_a_control_plane_restored_and_written_on_since() {
    restored_control_plane_is_followed(1_000);
}

/// A restore whose next revision is `next_revision`.
fn restored_control_plane_is_followed(next_revision: i64) {
    let postgres = Postgres::start();
    let dir = tempfile::tempdir().unwrap();
    let config = migrated(&postgres, dir.path(), ROOMY_PLANS);
    let node = start_node(&postgres, "node-a");
    fleet_admin_ok(&config, &["org", "create", "acme", "--plan", "free"]);
    let mut old_keys = Vec::new();
    for _ in 0..3 {
        old_keys.push(fleet_key(&config, "acme"));
    }
    assert_eq!(status_on(&node, &old_keys[0]), 200);
    // The "restore": an empty control plane with its revisions starting over.
    postgres.psql(&format!(
        "DELETE FROM control_changes; DELETE FROM control_records; SELECT setval('control_revision', {next_revision}, false);"
    ));
    fleet_admin_ok(&config, &["db", "migrate"]);
    fleet_admin_ok(&config, &["org", "create", "acme", "--plan", "free"]);
    let key = fleet_key(&config, "acme");
    let deadline = Instant::now() + Duration::from_secs(10);
    while status_on(&node, &key) != 200 {
        assert!(
            Instant::now() < deadline,
            "the node never took the restored control plane"
        );
        std::thread::sleep(Duration::from_millis(100));
    }
    assert_eq!(
        status_on(&node, &old_keys[0]),
        401,
        "a key the restore removed"
    );
}

/// The change log is pruned by admin writes: changes older than `change_log_keep_hours` that
/// every live node has applied go, the latest stays, and a node that was down past the
/// retention takes a snapshot when it comes back, so it misses nothing (a revoked key).
#[test]
fn the_change_log_is_pruned_and_a_node_back_after_the_retention_misses_nothing() {
    let postgres = Postgres::start();
    let dir = tempfile::tempdir().unwrap();
    let config = migrated(&postgres, dir.path(), ROOMY_PLANS);
    let node_a = start_node(&postgres, "node-a");
    let data_b = tempfile::tempdir().unwrap();
    let start_b = || {
        Server::start_with(Options {
            cores: Some(1),
            config: cluster_config(&postgres, "node-b"),
            data: Some(data_b.path().to_owned()),
            ..Options::default()
        })
    };
    let mut node_b = start_b();
    fleet_admin_ok(&config, &["org", "create", "acme", "--plan", "free"]);
    let first = fleet_key(&config, "acme");
    assert_eq!(status_on(&node_b, &first), 200);
    // Node b goes down (and is seen as down), then the fleet changes without it.
    node_b.kill();
    postgres
        .psql("UPDATE nodes SET heartbeat_at = now() - interval '1 hour' WHERE node_id = 'node-b'");
    fleet_admin_ok(
        &config,
        &[
            "key",
            "revoke",
            &first["mg_live_".len().."mg_live_".len() + 12],
        ],
    );
    let second = fleet_key(&config, "acme");
    // Every change but the latest is now past the retention (7 days by default).
    postgres.psql(
        "UPDATE control_changes SET changed_at = now() - interval '8 days'
         WHERE revision < (SELECT max(revision) FROM control_changes)",
    );
    let revisions_before: i64 = postgres
        .psql("SELECT count(DISTINCT revision) FROM control_changes")
        .trim()
        .parse()
        .unwrap();
    assert!(revisions_before >= 4, "{revisions_before}");
    let third = fleet_key(&config, "acme");
    // What node a (the one live node) had applied, and the new revision, are all that is left.
    assert_eq!(
        postgres
            .psql("SELECT count(DISTINCT revision) FROM control_changes")
            .trim(),
        "2"
    );
    assert_eq!(
        postgres
            .psql("SELECT count(*) FROM control_changes WHERE changed_at < now() - interval '7 days' AND revision < (SELECT max(revision) - 1 FROM control_changes)")
            .trim(),
        "0"
    );
    for key in [&second, &third] {
        assert_eq!(status_on(&node_a, key), 200);
    }
    assert_eq!(status_on(&node_a, &first), 401);
    // Node b's last change is gone from the log: it takes a snapshot and has everything.
    let node_b = start_b();
    assert_eq!(status_on(&node_b, &third), 200);
    assert_eq!(status_on(&node_b, &second), 200);
    assert_eq!(
        status_on(&node_b, &first),
        401,
        "a key revoked while node b was down"
    );
}
