//! The fleet's budgets against real engines (issue 12): rate and concurrency in Redis shared
//! by three `modgate serve` processes, permits of a node killed with `kill -9` back within
//! the TTL, and Redis killed and restarted empty under load.

mod common;

use std::sync::atomic::{AtomicBool, AtomicUsize, Ordering};
use std::sync::Arc;
use std::time::{Duration, Instant};

use common::engines::{Postgres, Redis};
use common::fleet::*;
use common::*;

/// Permits of a dead node expire this long after its last word with Redis (in the tests).
/// Nodes restate every second (a third of this), so a dead node's permits come back between
/// two and three seconds after it died; the checks leave a second for a loaded machine.
const PERMIT_TTL_MS: u64 = 3_000;

/// Plans of the tests: `free` serves on its share while Redis is down (`engine_down` is
/// "open" by default), `pro` refuses, `ops` counts Sightengine's operations.
const PLANS: &str = r#"
[plans.free]
rate_per_s = 20
rate_burst = 20
concurrent_max = 100
quota_per_month = 1000000000

[plans.pro]
engine_down = "closed"

[plans.ops]
text_chars_max = 5000
image_pixels_max = 12000000
rate_per_s = 100
rate_burst = 100
concurrent_max = 8
quota_per_month = 8
keys_max = 3
paid = false
quota_counts = "operations"
"#;

struct Fleet {
    postgres: Postgres,
    redis: Redis,
    dir: tempfile::TempDir,
    config: std::path::PathBuf,
}

impl Fleet {
    fn start() -> Fleet {
        let postgres = Postgres::start();
        let redis = Redis::start();
        let dir = tempfile::tempdir().unwrap();
        let config = migrated(&postgres, dir.path(), PLANS);
        Fleet {
            postgres,
            redis,
            dir,
            config,
        }
    }

    fn node(&self, node: &str) -> Server {
        let data = self.dir.path().join(node);
        std::fs::create_dir_all(&data).unwrap();
        Server::start_with(Options {
            cores: Some(1),
            config: format!(
                "{}redis_url = \"{}\"\npermit_ttl_ms = {PERMIT_TTL_MS}\n{PLANS}",
                cluster_config(&self.postgres, node),
                self.redis.url()
            ),
            data: Some(data),
            // The logs are read (the quota's settlement after a crash) and shown on failure.
            capture_logs: true,
            ..Options::default()
        })
    }

    fn key(&self, org: &str, plan: &str, limits: &[&str]) -> String {
        fleet_admin_ok(&self.config, &["org", "create", org, "--plan", plan]);
        if !limits.is_empty() {
            let mut args = vec!["org", "set-limits", org];
            args.extend_from_slice(limits);
            fleet_admin_ok(&self.config, &args);
        }
        fleet_key(&self.config, org)
    }
}

/// Sets its flag when dropped: load threads in a scope stop even when the test's own thread
/// panics (the scope would otherwise wait for them forever).
struct StopOnDrop(Arc<AtomicBool>);

impl Drop for StopOnDrop {
    fn drop(&mut self) {
        self.0.store(true, Ordering::Relaxed);
    }
}

/// A key of a new organization "acme" with a monthly quota of `quota` and no rate to speak of.
fn quota_key(fleet: &Fleet, quota: usize) -> String {
    fleet.key(
        "acme",
        "free",
        &[
            "--quota-per-month",
            &quota.to_string(),
            "--rate-per-s",
            "100000",
            "--rate-burst",
            "100000",
        ],
    )
}

/// The tests' check: a short text.
const BODY: &str = r#"{"text":"hello"}"#;

/// One check on a connection of its own; its status and error type.
fn check(node: &Server, key: &str) -> (u16, String) {
    let response = raw_request(node.addr, &text_request(key, BODY)).expect("an answer");
    let kind = if response.status == 200 {
        String::new()
    } else {
        response.json()["error"]["type"]
            .as_str()
            .unwrap_or("")
            .to_owned()
    };
    (response.status, kind)
}

/// A check that holds its permit: everything but the last bytes of its body is sent.
fn held_check(node: &Server, key: &str) -> (RawConn, Vec<u8>) {
    let request = text_request(key, BODY);
    let mut conn = RawConn::connect(node.addr);
    conn.send(&request[..request.len() - 3]);
    (conn, request[request.len() - 3..].to_vec())
}

/// Checks on `node` until `quota` are answered in all (`answered` so far), retrying refusals
/// for units not back yet, for at most 20 s; then one more is refused: exactly the quota.
fn spend_the_rest(node: &Server, key: &str, mut answered: usize, quota: usize) {
    let deadline = Instant::now() + Duration::from_secs(20);
    while answered < quota {
        assert!(
            Instant::now() < deadline,
            "only {answered} of a quota of {quota} could be spent"
        );
        match check(node, key) {
            (200, _) => answered += 1,
            (429, kind) if kind == "quota_exceeded" => {
                std::thread::sleep(Duration::from_millis(100))
            }
            other => panic!("{other:?}"),
        }
    }
    assert_eq!(check(node, key), (429, "quota_exceeded".to_owned()));
}

/// Waits until a check on `node` gets `status`, for at most `within`; how long it took.
fn until_status(node: &Server, key: &str, status: u16, within: Duration) -> Duration {
    let started = Instant::now();
    loop {
        let (got, kind) = check(node, key);
        if got == status {
            return started.elapsed();
        }
        assert!(
            started.elapsed() < within,
            "still {got} {kind} after {within:?}, want {status}"
        );
        std::thread::sleep(Duration::from_millis(20));
    }
}

#[test]
fn one_key_hammered_on_three_nodes_stays_within_the_fleets_rate_bound() {
    let fleet = Fleet::start();
    let nodes = [
        fleet.node("node-a"),
        fleet.node("node-b"),
        fleet.node("node-c"),
    ];
    let key = fleet.key("acme", "free", &[]);
    let admitted = Arc::new(AtomicUsize::new(0));
    let refused = Arc::new(AtomicUsize::new(0));
    let run_for = Duration::from_secs(3);
    let started = Instant::now();
    std::thread::scope(|scope| {
        for node in &nodes {
            for _ in 0..2 {
                let (admitted, refused, key) = (admitted.clone(), refused.clone(), key.clone());
                scope.spawn(move || {
                    let mut conn = RawConn::connect(node.addr);
                    while started.elapsed() < run_for {
                        conn.send(&text_request(&key, BODY));
                        let response = conn.read_response().expect("an answer");
                        match response.status {
                            200 => admitted.fetch_add(1, Ordering::Relaxed),
                            429 => {
                                assert_eq!(response.json()["error"]["type"], "rate_limited");
                                refused.fetch_add(1, Ordering::Relaxed)
                            }
                            other => panic!("status {other}: {}", response.json()),
                        };
                    }
                });
            }
        }
    });
    let elapsed = started.elapsed().as_secs_f64();
    let admitted = admitted.load(Ordering::Relaxed) as f64;
    // The README's bound: rate_burst + rate_per_s × T + one block per node, a node's block
    // being a tenth of a second of the rate held and as much lent (2 × 2 tokens here) plus
    // its one shard's lease (1 token).
    let (rate, burst, block_per_node) = (20.0, 20.0, 5.0);
    let bound = burst + rate * elapsed + 3.0 * block_per_node;
    assert!(
        admitted <= bound,
        "{admitted} checks admitted in {elapsed:.2}s, bound {bound}"
    );
    // Shared, not three buckets: three nodes alone would have admitted up to three times as
    // much; and the rate was there to be used.
    assert!(
        admitted >= burst + rate * elapsed * 0.5,
        "only {admitted} admitted in {elapsed:.2}s"
    );
    assert!(refused.load(Ordering::Relaxed) > 0);
    let round_trips = nodes[0]
        .scrape()
        .value("modgate_budget_engine_round_trips_total", &[])
        .expect("the round-trip counter");
    assert!(round_trips > 0.0);
    assert_eq!(
        nodes[0].scrape().value("modgate_budget_engine_up", &[]),
        Some(1.0)
    );
}

#[test]
fn the_concurrency_cap_holds_across_nodes_and_a_killed_nodes_permits_come_back() {
    let fleet = Fleet::start();
    let mut a = fleet.node("node-a");
    let b = fleet.node("node-b");
    let c = fleet.node("node-c");
    let key = fleet.key("acme", "free", &["--concurrent-max", "3"]);
    // concurrent_max = 3: two checks in progress on a, one on b.
    let held_a = [held_check(&a, &key), held_check(&a, &key)];
    let (mut held_b, rest_b) = held_check(&b, &key);
    std::thread::sleep(Duration::from_millis(300));
    for node in [&a, &b, &c] {
        assert_eq!(
            check(node, &key),
            (429, "too_many_concurrent".to_owned()),
            "a fourth check"
        );
    }
    // b's check ends: its permit is free for any node.
    held_b.send(&rest_b);
    assert_eq!(held_b.read_response().unwrap().status, 200);
    until_status(&c, &key, 200, Duration::from_secs(1));
    // a dies with two checks in progress and c holds the third: nothing is free until
    // Redis lets a's permits expire (within the TTL), then b gets one.
    let (mut held_c, rest_c) = held_check(&c, &key);
    std::thread::sleep(Duration::from_millis(300));
    a.kill();
    drop(held_a);
    let killed = Instant::now();
    assert_eq!(check(&b, &key), (429, "too_many_concurrent".to_owned()));
    until_status(&b, &key, 200, Duration::from_millis(PERMIT_TTL_MS + 2_000));
    let back = killed.elapsed();
    assert!(
        back >= Duration::from_millis(PERMIT_TTL_MS / 3),
        "a's permits came back before their TTL: {back:?}"
    );
    // Three at once again: one on c, two on b; the dead node holds nothing, and a fourth is
    // refused.
    std::thread::sleep(Duration::from_millis(300));
    let held_b: Vec<_> = (0..2).map(|_| held_check(&b, &key)).collect();
    std::thread::sleep(Duration::from_millis(300));
    assert_eq!(check(&c, &key), (429, "too_many_concurrent".to_owned()));
    held_c.send(&rest_c);
    assert_eq!(held_c.read_response().unwrap().status, 200);
    for (mut conn, rest) in held_b {
        conn.send(&rest);
        assert_eq!(conn.read_response().unwrap().status, 200);
    }
    eprintln!("a killed node's permits came back after {back:?}");
}

#[test]
fn redis_killed_and_restarted_empty_under_load() {
    let mut fleet = Fleet::start();
    let nodes = [fleet.node("node-a"), fleet.node("node-b")];
    let open_key = fleet.key("loadco", "free", &[]);
    let closed_key = fleet.key("bigco", "pro", &[]);
    let capped_key = fleet.key("acme", "free", &["--concurrent-max", "3"]);
    for node in &nodes {
        assert_eq!(check(node, &open_key).0, 200);
        assert_eq!(check(node, &closed_key).0, 200);
    }
    // Load on every node while Redis goes away and comes back.
    let stop = Arc::new(AtomicBool::new(false));
    let statuses = Arc::new(std::sync::Mutex::new(std::collections::BTreeMap::new()));
    std::thread::scope(|scope| {
        for node in &nodes {
            let (stop, statuses, key) = (stop.clone(), statuses.clone(), open_key.clone());
            scope.spawn(move || {
                while !stop.load(Ordering::Relaxed) {
                    let (status, kind) = check(node, &key);
                    *statuses.lock().unwrap().entry((status, kind)).or_insert(0) += 1;
                    std::thread::sleep(Duration::from_millis(5));
                }
            });
        }
        let _stop = StopOnDrop(stop.clone());
        std::thread::sleep(Duration::from_millis(500));
        fleet.redis.kill();
        // Down: the open plan serves on each node's share, the closed one refuses with 503.
        let deadline = Instant::now() + Duration::from_secs(5);
        while nodes[0].scrape().value("modgate_budget_engine_up", &[]) != Some(0.0) {
            assert!(Instant::now() < deadline, "the node never saw Redis down");
            std::thread::sleep(Duration::from_millis(50));
        }
        std::thread::sleep(Duration::from_millis(500));
        for node in &nodes {
            let (status, kind) = check(node, &closed_key);
            assert_eq!((status, kind.as_str()), (503, "busy"));
        }
        // The loader on this node takes the same key's share of the rate every 5 ms, so a check
        // of ours can wait a while for a token (a CI run missed it within 2 s).
        until_status(&nodes[1], &open_key, 200, Duration::from_secs(10));
        fleet.redis.restart();
        let deadline = Instant::now() + Duration::from_secs(5);
        for node in &nodes {
            while node.scrape().value("modgate_budget_engine_up", &[]) != Some(1.0) {
                assert!(Instant::now() < deadline, "the node never saw Redis back");
                std::thread::sleep(Duration::from_millis(50));
            }
            until_status(node, &closed_key, 200, Duration::from_secs(2));
        }
        std::thread::sleep(Duration::from_millis(500));
        stop.store(true, Ordering::Relaxed);
    });
    let statuses = statuses.lock().unwrap().clone();
    // Every answer was a check or a limit's refusal: no 500, no hang, no dropped connection.
    for ((status, kind), count) in &statuses {
        assert!(
            *status == 200 || (*status == 429 && kind == "rate_limited"),
            "{count} answers {status} {kind}: {statuses:?}"
        );
    }
    assert!(
        nodes[0]
            .scrape()
            .value("modgate_budget_fallback_takes_total", &[])
            .unwrap_or(0.0)
            > 0.0,
        "the fallback share was used"
    );
    // Redis restarted empty: the cap holds again.
    let held: Vec<_> = (0..3).map(|_| held_check(&nodes[0], &capped_key)).collect();
    std::thread::sleep(Duration::from_millis(300));
    assert_eq!(
        check(&nodes[1], &capped_key),
        (429, "too_many_concurrent".to_owned())
    );
    for (mut conn, rest) in held {
        conn.send(&rest);
        assert_eq!(conn.read_response().unwrap().status, 200);
    }
}

/// One request on a connection of its own; an error if the node cannot be reached or the
/// connection ends without an answer (a node killed meanwhile).
fn try_request(addr: std::net::SocketAddr, bytes: &[u8]) -> std::io::Result<RawResponse> {
    let stream = std::net::TcpStream::connect(addr)?;
    stream.set_read_timeout(Some(Duration::from_secs(15)))?;
    let mut conn = RawConn::from_stream(stream);
    std::io::Write::write_all(&mut conn.stream, bytes)?;
    conn.read_response()
}

#[test]
fn a_quota_spent_across_nodes_is_never_exceeded_and_a_killed_nodes_units_come_back() {
    const QUOTA: usize = 300;
    let fleet = Fleet::start();
    let mut nodes = [
        fleet.node("node-a"),
        fleet.node("node-b"),
        fleet.node("node-c"),
    ];
    let key = quota_key(&fleet, QUOTA);
    // One client per node, checks back to back; the node a client talks to can change (node a
    // is restarted on a new port).
    let addrs: Vec<_> = nodes
        .iter()
        .map(|node| Arc::new(std::sync::Mutex::new(node.addr)))
        .collect();
    let answered = Arc::new(std::sync::Mutex::new(Vec::<String>::new()));
    let last_answer = Arc::new(std::sync::Mutex::new(Instant::now()));
    let unanswered = Arc::new(AtomicUsize::new(0));
    let stop = Arc::new(AtomicBool::new(false));
    std::thread::scope(|scope| {
        let _stop = StopOnDrop(stop.clone());
        for addr in &addrs {
            let (addr, answered, last_answer, unanswered, stop, key) = (
                addr.clone(),
                answered.clone(),
                last_answer.clone(),
                unanswered.clone(),
                stop.clone(),
                key.clone(),
            );
            scope.spawn(move || {
                while !stop.load(Ordering::Relaxed) {
                    let to = *addr.lock().unwrap();
                    match try_request(to, &text_request(&key, BODY)) {
                        Ok(response) if response.status == 200 => {
                            let id = response.json()["request_id"].as_str().unwrap().to_owned();
                            answered.lock().unwrap().push(id);
                            *last_answer.lock().unwrap() = Instant::now();
                        }
                        Ok(response) => {
                            assert_eq!(
                                (response.status, &response.json()["error"]["type"]),
                                (429, &serde_json::json!("quota_exceeded"))
                            );
                            std::thread::sleep(Duration::from_millis(20));
                        }
                        Err(_) => {
                            unanswered.fetch_add(1, Ordering::Relaxed);
                            std::thread::sleep(Duration::from_millis(20));
                        }
                    }
                }
            });
        }
        // A third of the quota spent, node a dies mid-load holding units it leased, and comes
        // back a moment later.
        while answered.lock().unwrap().len() < QUOTA / 3 {
            std::thread::sleep(Duration::from_millis(5));
        }
        nodes[0].kill();
        std::thread::sleep(Duration::from_millis(300));
        nodes[0] = fleet.node("node-a");
        *addrs[0].lock().unwrap() = nodes[0].addr;
        // The restarted node settles what it held at its first lease. Wait for that before
        // watching for the end: on a loaded machine the restart alone can outlast the idle
        // window below (a CI run failed so, with 42 units still held by the dead run).
        let settled = nodes[0].wait_output(Duration::from_secs(30), |line| {
            line.contains("settled with the ledger")
        });
        assert!(
            settled.is_some(),
            "the restarted node never settled its units: {:#?}",
            nodes[0].output.lock().unwrap()
        );
        // The idle window starts now: the other nodes may have spent the rest of the quota and
        // gone quiet while node a was starting (a CI run ended the test 38 units short so, the
        // units returned at the settlement not yet leased by anyone).
        *last_answer.lock().unwrap() = Instant::now();
        // Until nothing has been answered for 2.5 s: units left on a node no request reached go
        // back to the ledger after `QUOTA_IDLE_RETURN_MS` (1 s) and are spent elsewhere.
        let deadline = Instant::now() + Duration::from_secs(60);
        while last_answer.lock().unwrap().elapsed() < Duration::from_millis(2500) {
            assert!(
                Instant::now() < deadline,
                "checks still answered after 60 s"
            );
            std::thread::sleep(Duration::from_millis(50));
        }
    });
    let answered = answered.lock().unwrap().clone();
    let unanswered = unanswered.load(Ordering::Relaxed);
    assert!(
        answered.len() <= QUOTA,
        "{} checks over a quota of {QUOTA}",
        answered.len()
    );
    // Every charged check reaches the fleet's journal (the restarted node ships what it had not).
    let charged = "SELECT count(*) FROM journal WHERE org = 'acme' AND record->>'error_type' IS NULL AND record->>'action' IS NOT NULL";
    let count = |sql: &str| fleet.postgres.psql(sql).parse::<usize>().unwrap_or(0);
    let deadline = Instant::now() + Duration::from_secs(10);
    while count(charged) < answered.len()
        || nodes.iter().any(|node| {
            node.scrape()
                .value("modgate_journal_unshipped_records", &[("shard", "0")])
                != Some(0.0)
        })
    {
        assert!(
            Instant::now() < deadline,
            "{} charged records shipped for {} answered checks",
            count(charged),
            answered.len()
        );
        std::thread::sleep(Duration::from_millis(100));
    }
    // The units node a held when it died came back: the whole quota was spent, never more.
    // The only charged checks without an answer are those the kill cut off (their records
    // committed, their answers not sent).
    let charged = count(charged);
    assert_eq!(
        charged, QUOTA,
        "{unanswered} requests unanswered around the kill"
    );
    assert!(
        QUOTA - answered.len() <= unanswered,
        "{} answered, {unanswered} cut off by the kill",
        answered.len()
    );
    // The ledger, the answered checks and the fleet's journal agree (the request id is the
    // table's key: no duplicates).
    assert_eq!(
        count("SELECT sum(used) FROM quota_ledger WHERE org = 'acme'"),
        QUOTA
    );
    assert_eq!(
        count("SELECT sum(spent) FROM quota_leases WHERE org = 'acme'"),
        QUOTA
    );
    let shipped: usize = answered
        .chunks(500)
        .map(|ids| {
            count(&format!(
                "SELECT count(*) FROM journal WHERE request_id IN ('{}')",
                ids.join("','")
            ))
        })
        .sum();
    assert_eq!(
        shipped,
        answered.len(),
        "every answered check is in the journal"
    );
}

#[test]
fn postgres_stopped_and_started_under_load() {
    let mut fleet = Fleet::start();
    let nodes = [fleet.node("node-a"), fleet.node("node-b")];
    let load_key = fleet.key(
        "loadco",
        "free",
        &["--rate-per-s", "100000", "--rate-burst", "100000"],
    );
    // Never used before the ledger goes: their first checks need a lease.
    let fresh_key = fleet.key("newco", "free", &["--quota-per-month", "1000"]);
    let closed_key = fleet.key("bigco", "pro", &[]);
    // Load on both nodes, every answered request id kept.
    let stop = Arc::new(AtomicBool::new(false));
    let answered = Arc::new(std::sync::Mutex::new(Vec::<String>::new()));
    let statuses = Arc::new(std::sync::Mutex::new(std::collections::BTreeMap::new()));
    let mut fresh_answered = 0;
    std::thread::scope(|scope| {
        for node in &nodes {
            let (stop, answered, statuses, key) = (
                stop.clone(),
                answered.clone(),
                statuses.clone(),
                load_key.clone(),
            );
            scope.spawn(move || {
                while !stop.load(Ordering::Relaxed) {
                    let response =
                        raw_request(node.addr, &text_request(&key, BODY)).expect("an answer");
                    let body = response.json();
                    if response.status == 200 {
                        let id = body["request_id"].as_str().unwrap().to_owned();
                        answered.lock().unwrap().push(id);
                    }
                    let kind = body["error"]["type"].as_str().unwrap_or("").to_owned();
                    *statuses
                        .lock()
                        .unwrap()
                        .entry((response.status, kind))
                        .or_insert(0) += 1;
                    std::thread::sleep(Duration::from_millis(5));
                }
            });
        }
        let _stop = StopOnDrop(stop.clone());
        std::thread::sleep(Duration::from_millis(500));
        fleet.postgres.stop();
        // Down: an open plan's first check leases from the node's share of the quota, a closed
        // plan's is refused with 503 (the control plane and the journal carry on as before).
        for node in &nodes {
            assert_eq!(check(node, &fresh_key), (200, String::new()));
            fresh_answered += 1;
            assert_eq!(check(node, &closed_key), (503, "busy".to_owned()));
            let scrape = node.scrape();
            assert_eq!(scrape.value("modgate_quota_ledger_up", &[]), Some(0.0));
            assert!(
                scrape
                    .value("modgate_quota_fallback_units_total", &[])
                    .unwrap_or(0.0)
                    > 0.0
            );
        }
        std::thread::sleep(Duration::from_millis(1000));
        fleet.postgres.restart();
        // Back: the units granted meanwhile are written, and the closed plan is served again.
        let deadline = Instant::now() + Duration::from_secs(10);
        for node in &nodes {
            while node.scrape().value("modgate_quota_ledger_up", &[]) != Some(1.0) {
                assert!(
                    Instant::now() < deadline,
                    "the node never saw the ledger back"
                );
                std::thread::sleep(Duration::from_millis(50));
            }
            until_status(node, &closed_key, 200, Duration::from_secs(5));
        }
        std::thread::sleep(Duration::from_millis(500));
        stop.store(true, Ordering::Relaxed);
    });
    let statuses = statuses.lock().unwrap().clone();
    assert_eq!(
        statuses.keys().collect::<Vec<_>>(),
        [&(200, String::new())],
        "the open plan's load was answered throughout: {statuses:?}"
    );
    // Shipping resumed: every answered check is in the fleet's journal, once.
    let answered = answered.lock().unwrap().clone();
    let loadco = "SELECT count(*) FROM journal WHERE org = 'loadco'";
    let deadline = Instant::now() + Duration::from_secs(15);
    while fleet.postgres.psql(loadco) != answered.len().to_string() {
        assert!(
            Instant::now() < deadline,
            "{} records shipped for {} answered checks",
            fleet.postgres.psql(loadco),
            answered.len()
        );
        std::thread::sleep(Duration::from_millis(100));
    }
    let shipped = answered
        .chunks(500)
        .map(|ids| {
            fleet
                .postgres
                .psql(&format!(
                    "SELECT count(*) FROM journal WHERE request_id IN ('{}')",
                    ids.join("','")
                ))
                .parse::<usize>()
                .unwrap()
        })
        .sum::<usize>();
    assert_eq!(shipped, answered.len(), "every answered check shipped");
    // The units granted from the nodes' shares reached the ledger: it counts at least the
    // checks they answered, and the checks are counted once.
    let newco = |sql: &str| fleet.postgres.psql(sql).parse::<u64>().unwrap_or(0);
    let deadline = Instant::now() + Duration::from_secs(10);
    while newco("SELECT sum(spent) FROM quota_leases WHERE org = 'newco'") != fresh_answered {
        assert!(Instant::now() < deadline, "newco's checks were not counted");
        std::thread::sleep(Duration::from_millis(100));
    }
    assert!(newco("SELECT sum(used) FROM quota_ledger WHERE org = 'newco'") >= fresh_answered);
    assert_eq!(
        newco("SELECT sum(leased) - sum(returned) FROM quota_leases WHERE org = 'newco'"),
        newco("SELECT sum(used) FROM quota_ledger WHERE org = 'newco'"),
        "the ledger and the nodes' leases agree"
    );
}

#[test]
fn a_node_gone_for_good_is_forgotten_and_its_quota_units_come_back() {
    const QUOTA: usize = 40;
    let fleet = Fleet::start();
    let mut a = fleet.node("node-a");
    let b = fleet.node("node-b");
    let key = quota_key(&fleet, QUOTA);
    let mut answered = 0;
    for _ in 0..5 {
        assert_eq!(check(&a, &key).0, 200);
        assert_eq!(check(&b, &key).0, 200);
        answered += 2;
    }
    // Node a's checks are in the fleet's journal (what it answered and had not shipped would
    // be unknown once it is gone), then it dies holding units it leased.
    let shipped = "SELECT count(*) FROM journal WHERE node_id = 'node-a'";
    let deadline = Instant::now() + Duration::from_secs(10);
    while fleet.postgres.psql(shipped) != "5" {
        assert!(
            Instant::now() < deadline,
            "node a's checks were not shipped"
        );
        std::thread::sleep(Duration::from_millis(100));
    }
    a.kill();
    // A live node is not forgotten.
    let refused = fleet_admin(&fleet.config, &["fleet", "forget", "node-b"]);
    assert!(!refused.status.success());
    assert!(String::from_utf8_lossy(&refused.stderr).contains("is live"));
    // Node a, once its heartbeat is older than 5 s, is.
    let deadline = Instant::now() + Duration::from_secs(15);
    loop {
        let forgot = fleet_admin(&fleet.config, &["fleet", "forget", "node-a"]);
        if forgot.status.success() {
            let said = String::from_utf8_lossy(&forgot.stdout);
            assert!(said.contains("forgot node node-a"), "{said}");
            break;
        }
        assert!(Instant::now() < deadline, "node a was never forgotten");
        std::thread::sleep(Duration::from_millis(500));
    }
    // `fleet status` no longer shows it, and pings Redis.
    let with_redis = fleet.dir.path().join("admin-redis.toml");
    std::fs::write(
        &with_redis,
        format!(
            "{}redis_url = \"{}\"\n",
            cluster_config(&fleet.postgres, "admin"),
            fleet.redis.url()
        ),
    )
    .unwrap();
    let status = fleet_admin_ok(&with_redis, &["fleet", "status"]);
    assert!(!status.contains("node-a"), "{status}");
    assert!(status.contains("redis ok"), "{status}");
    // The units node a held came back: node b spends exactly the rest of the quota.
    spend_the_rest(&b, &key, answered, QUOTA);
}

/// A plan counting operations (issue 15) in a fleet: a `check.json` request naming three
/// models is three units of the PostgreSQL ledger, of its shipped record and of its node's
/// spent count; a node killed right after its last answers (records likely not shipped yet)
/// settles what it held at its next start by the units its journal answered, so the ledger,
/// the nodes' counts and the fleet's journal agree.
#[test]
fn a_fleet_charges_each_operation_under_a_plan_that_counts_them() {
    const QUOTA: usize = 8;
    let fleet = Fleet::start();
    let mut a = fleet.node("node-a");
    let key = fleet.key("opsco", "ops", &[]);
    let image = testimage("jpeg_baseline_chelsea_451x300.jpg");
    let send = |node: &Server, models: &str| -> u16 {
        let (content_type, body) = form_with_media(
            &[("models", models), ("api_secret", &key)],
            Some(("cat.jpg", "image/jpeg", &image)),
        );
        post(
            &node.url("/1.0/check.json"),
            &[("Content-Type", &content_type)],
            &body,
        )
        .0
    };
    assert_eq!(send(&a, "nudity,type,properties"), 200);
    assert_eq!(send(&a, "nudity,type,properties"), 200);
    assert_eq!(
        send(&a, "nudity,type,properties"),
        429,
        "only two units left"
    );
    assert_eq!(send(&a, "type,properties"), 200);
    assert_eq!(send(&a, "properties"), 429);
    a.kill();
    let a = fleet.node("node-a");
    let count = |sql: &str| fleet.postgres.psql(sql).parse::<usize>().unwrap_or(0);
    let charged = "SELECT coalesce(sum((record->>'units')::int), 0) FROM journal
                   WHERE org = 'opsco' AND record->>'error_type' IS NULL";
    let deadline = Instant::now() + Duration::from_secs(10);
    while count(charged) < QUOTA {
        assert!(
            Instant::now() < deadline,
            "{} units shipped",
            count(charged)
        );
        std::thread::sleep(Duration::from_millis(100));
    }
    assert_eq!(count(charged), QUOTA);
    assert_eq!(
        count("SELECT sum(spent) FROM quota_leases WHERE org = 'opsco'"),
        QUOTA
    );
    // What node a held when it died went back at its start: used is what was answered.
    let used = "SELECT sum(used) FROM quota_ledger WHERE org = 'opsco'";
    let deadline = Instant::now() + Duration::from_secs(10);
    while count(used) != QUOTA {
        assert!(Instant::now() < deadline, "the ledger says {}", count(used));
        std::thread::sleep(Duration::from_millis(100));
    }
    assert_eq!(send(&a, "properties"), 429);
}

/// Units a node holds after the traffic moved to another node go back near the end of the
/// quota: the idle node reads the fleet's checks spent (`SPENT_REFRESH_EVERY`), sees the end
/// near, and gives back what has been idle for a second, so the other node spends the whole
/// quota. (Before, a node learned of the others' checks only at its own grants: node a kept
/// its units all month, and node b spent 76 of the 100.)
#[test]
fn units_left_on_a_node_the_traffic_moved_away_from_come_back() {
    const QUOTA: usize = 100;
    let fleet = Fleet::start();
    let a = fleet.node("node-a");
    let b = fleet.node("node-b");
    let key = quota_key(&fleet, QUOTA);
    // Node a's one shard leases 100 / (4 × 1) = 25 units, spends one and holds 24.
    assert_eq!(check(&a, &key), (200, String::new()));
    spend_the_rest(&b, &key, 1, QUOTA);
    assert_eq!(check(&a, &key), (429, "quota_exceeded".to_owned()));
}
