//! Plan limits against the real server: every 429, the limit headers, the sharded rate's
//! tolerance, the quota across a restart, 503 busy. Windows are crossed with the test-only
//! clock offset (`testing.clock_offset_file`), not by sleeping.

mod common;

use std::time::{Duration, Instant};

use common::*;
use serde_json::json;

/// A server whose clock can be moved by writing milliseconds into `offset`.
fn server_with_clock(extra: &str, cores: usize) -> (Server, std::path::PathBuf) {
    let dir = tempfile::tempdir().unwrap().keep();
    let offset = dir.join("clock-offset");
    std::fs::write(&offset, "0").unwrap();
    let server = Server::start_with(Options {
        cores: Some(cores),
        config: format!(
            "[testing]\nclock_offset_file = \"{}\"\n{extra}",
            offset.display()
        ),
        ..Options::default()
    });
    (server, offset)
}

fn limited_key(server: &Server, org: &str, limits: &[&str]) -> String {
    let (key, _) = server.new_key(org, "pro", &[]);
    let mut args = vec!["org", "set-limits", org];
    args.extend_from_slice(limits);
    server.admin_ok(&args);
    key
}

fn header_u64(response: &RawResponse, name: &str) -> u64 {
    response
        .header(name)
        .unwrap_or_else(|| panic!("{name} missing"))
        .parse()
        .unwrap_or_else(|_| panic!("{name} not a number"))
}

#[test]
fn one_connection_can_use_a_keys_whole_rate_then_429() {
    let (server, offset) = server_with_clock("", 2);
    let key = limited_key(
        &server,
        "acme",
        &["--rate-per-s", "1", "--rate-burst", "20"],
    );
    let mut conn = RawConn::connect(server.addr);
    let request = format!("GET /v1/workflows HTTP/1.1\r\nHost: t\r\nX-Api-Key: {key}\r\n\r\n");
    let mut remaining = Vec::new();
    for _ in 0..20 {
        conn.send(request.as_bytes());
        let response = conn.read_response().unwrap();
        assert_eq!(response.status, 200);
        assert_eq!(header_u64(&response, "ratelimit-limit"), 20);
        remaining.push(header_u64(&response, "ratelimit-remaining"));
        assert!(
            response.header("x-quota-used").is_some() && response.header("x-quota-limit").is_some()
        );
    }
    assert!(remaining.windows(2).all(|w| w[1] <= w[0]), "{remaining:?}");
    assert_eq!(*remaining.last().unwrap(), 0, "{remaining:?}");
    conn.send(request.as_bytes());
    let refused = conn.read_response().unwrap();
    assert_error(refused.status, &refused.json(), 429, "rate_limited", false);
    assert!(header_u64(&refused, "retry-after") >= 1);
    assert_eq!(header_u64(&refused, "ratelimit-remaining"), 0);
    assert!(
        header_u64(&refused, "ratelimit-reset") >= 19,
        "seconds until full at 1/s"
    );
    // Five seconds later (on the injected clock), five tokens are back.
    std::fs::write(&offset, "5000").unwrap();
    let mut ok = 0;
    for _ in 0..8 {
        conn.send(request.as_bytes());
        if conn.read_response().unwrap().status == 200 {
            ok += 1;
        }
    }
    assert!(
        (5..=6).contains(&ok),
        "{ok} checks after a 5 s refill at 1/s"
    );
}

#[test]
fn connections_over_every_shard_stay_within_burst_plus_rate() {
    let server = Server::start_with(Options {
        cores: Some(2),
        ..Options::default()
    });
    let key = limited_key(
        &server,
        "acme",
        &["--rate-per-s", "2", "--rate-burst", "30"],
    );
    let started = Instant::now();
    let mut ok = 0;
    let request = format!(
        "GET /v1/workflows HTTP/1.1\r\nHost: t\r\nX-Api-Key: {key}\r\nConnection: close\r\n\r\n"
    );
    for _ in 0..80 {
        // A new connection each time: the kernel spreads them over both shards.
        let response = raw_request(server.addr, request.as_bytes()).unwrap();
        match response.status {
            200 => ok += 1,
            429 => assert_eq!(response.json()["error"]["type"], "rate_limited"),
            other => panic!("status {other}"),
        }
    }
    let elapsed = started.elapsed().as_secs_f64();
    // The documented tolerance: at most burst + rate × elapsed, leases add nothing.
    let ceiling = 30 + (2.0 * elapsed).ceil() as u32;
    assert!(ok <= ceiling, "{ok} > {ceiling} in {elapsed:.2}s");
    assert!(ok >= 30, "the burst was not available: {ok}");
}

#[test]
fn the_limit_headers_are_on_every_authenticated_answer_only() {
    let server = Server::start();
    let key = server.new_key("acme", "pro", &[]).0;
    let mut conn = RawConn::connect(server.addr);
    conn.send(&text_request(&key, r#"{"text":"hello"}"#));
    let ok = conn.read_response().unwrap();
    conn.send(&text_request(&key, r#"{"text":"hello","workflow":"nope"}"#));
    let refused = conn.read_response().unwrap();
    assert_eq!((ok.status, refused.status), (200, 400));
    for response in [&ok, &refused] {
        for name in [
            "ratelimit-limit",
            "ratelimit-remaining",
            "ratelimit-reset",
            "x-quota-used",
            "x-quota-limit",
        ] {
            header_u64(response, name);
        }
    }
    // Unauthenticated answers carry none.
    conn.send(&text_request(
        "mg_live_AAAAAAAAAAAA_BBBBBBBBBBBBBBBBBBBBBBBBBBBBBBBB",
        r#"{"text":"x"}"#,
    ));
    let unauthorized = conn.read_response().unwrap();
    assert_eq!(unauthorized.status, 401);
    assert!(unauthorized.header("ratelimit-limit").is_none());
}

#[test]
fn too_many_concurrent_checks() {
    let server = Server::start_with(Options {
        cores: Some(1),
        ..Options::default()
    });
    let key = limited_key(&server, "acme", &["--concurrent-max", "1"]);
    // A check holds its permit from admission to its answer: this one waits for its body.
    let body = r#"{"text":"hello"}"#;
    let mut slow = RawConn::connect(server.addr);
    let request = text_request(&key, body);
    slow.send(&request[..request.len() - 5]);
    std::thread::sleep(Duration::from_millis(200));
    let mut other = RawConn::connect(server.addr);
    other.send(&text_request(&key, body));
    let refused = other.read_response().unwrap();
    assert_error(
        refused.status,
        &refused.json(),
        429,
        "too_many_concurrent",
        false,
    );
    assert!(header_u64(&refused, "retry-after") >= 1);
    slow.send(&request[request.len() - 5..]);
    assert_eq!(slow.read_response().unwrap().status, 200);
    // The permit is back.
    other.send(&text_request(&key, body));
    assert_eq!(other.read_response().unwrap().status, 200);
}

#[test]
fn one_check_at_a_time_is_never_refused_whichever_shard_serves_it() {
    // A cap below the shard count: no shard may keep a permit after its check, or the other
    // would refuse a check while nothing is in progress.
    let server = Server::start_with(Options {
        cores: Some(2),
        ..Options::default()
    });
    let key = limited_key(&server, "acme", &["--concurrent-max", "1"]);
    let mut conns = [conn_on_shard(server.addr, 0), conn_on_shard(server.addr, 1)];
    for i in 0..10 {
        let conn = &mut conns[i % 2];
        conn.send(&text_request(&key, r#"{"text":"hello"}"#));
        let response = conn.read_response().unwrap();
        assert_eq!(response.status, 200, "check {i} on shard {}", i % 2);
    }
}

#[test]
fn quota_counts_checks_that_ran_and_resets_with_the_month() {
    let (server, offset) = server_with_clock("", 2);
    let key = limited_key(&server, "acme", &["--quota-per-month", "5"]);
    let mut conn = RawConn::connect(server.addr);
    // Refusals after admission do not count.
    conn.send(&text_request(&key, r#"{"text":"x","ref":""}"#));
    assert_eq!(conn.read_response().unwrap().status, 400);
    for i in 1..=5 {
        conn.send(&text_request(&key, r#"{"text":"hello"}"#));
        let response = conn.read_response().unwrap();
        assert_eq!(response.status, 200, "check {i}");
        assert_eq!(header_u64(&response, "x-quota-limit"), 5);
        assert_eq!(header_u64(&response, "x-quota-used"), i);
    }
    conn.send(&text_request(&key, r#"{"text":"hello"}"#));
    let refused = conn.read_response().unwrap();
    assert_error(
        refused.status,
        &refused.json(),
        429,
        "quota_exceeded",
        false,
    );
    let retry = header_u64(&refused, "retry-after");
    assert!(
        (1..=31 * 86_400).contains(&retry),
        "until the next month: {retry}"
    );
    // Listing workflows is not a check: it still works.
    conn.send(
        format!("GET /v1/workflows HTTP/1.1\r\nHost: t\r\nX-Api-Key: {key}\r\n\r\n").as_bytes(),
    );
    assert_eq!(conn.read_response().unwrap().status, 200);
    // The next month starts a new count.
    std::fs::write(&offset, (retry * 1000 + 60_000).to_string()).unwrap();
    conn.send(&text_request(&key, r#"{"text":"hello"}"#));
    let response = conn.read_response().unwrap();
    assert_eq!(response.status, 200);
    assert_eq!(header_u64(&response, "x-quota-used"), 1);
}

/// A check admitted in the last seconds of a month and answered in the next is charged to the
/// month it was admitted in, where its unit was reserved. It used to be journaled under the
/// month of its answer, so after a crash the start's reconciliation (which sets each month's
/// ledger back to the journal's counts) charged it to the new month as well.
#[test]
fn a_check_across_midnight_is_charged_to_the_month_it_was_admitted_in() {
    let data = tempfile::tempdir().unwrap();
    let offset = data.path().join("clock-offset");
    let start = || {
        Server::start_with(Options {
            cores: Some(1),
            data: Some(data.path().to_owned()),
            config: format!("[testing]\nclock_offset_file = \"{}\"\n", offset.display()),
            ..Options::default()
        })
    };
    let now_ms = now_unix_ms();
    // Two minutes before the month ends (on the server's clock): room for a slow start and the
    // key's creation before the check is admitted (ten seconds were not always enough).
    const MARGIN_MS: i64 = 120_000;
    let before_midnight = modgate::clock::ms_until_next_month(now_ms) - MARGIN_MS;
    // Written whole, by a rename: the server reads the file on every clock read, and a
    // truncated file reads as no offset at all.
    let set_offset = |ms: i64| {
        let next = offset.with_extension("next");
        std::fs::write(&next, ms.to_string()).unwrap();
        std::fs::rename(&next, &offset).unwrap();
    };
    set_offset(before_midnight);
    let mut server = start();
    let key = limited_key(&server, "acme", &["--quota-per-month", "1"]);
    // Admitted before midnight: the check holds its unit while it waits for its body.
    let request = text_request(&key, r#"{"text":"hello"}"#);
    let mut crossing = RawConn::connect(server.addr);
    crossing.send(&request[..request.len() - 5]);
    std::thread::sleep(Duration::from_millis(300));
    set_offset(before_midnight + MARGIN_MS + 60_000);
    crossing.send(&request[request.len() - 5..]);
    assert_eq!(crossing.read_response().unwrap().status, 200);
    drop(crossing);
    // A crash, and the start sets the ledger back to what the journal counted per month.
    server.kill();
    let server = start();
    let mut conn = RawConn::connect(server.addr);
    conn.send(&text_request(&key, r#"{"text":"hello"}"#));
    let response = conn.read_response().unwrap();
    assert_eq!(
        response.status,
        200,
        "the new month's quota of 1 is untouched: {:?}",
        response.json()
    );
    assert_eq!(header_u64(&response, "x-quota-used"), 1);
    // The journal dates the first check at its admission, before midnight.
    let journal = server.admin_ok(&["journal", "--json", "--org", "acme"]);
    let times: Vec<i64> = journal
        .lines()
        .map(|line| {
            serde_json::from_str::<serde_json::Value>(line).unwrap()["unix_ms"]
                .as_i64()
                .unwrap()
        })
        .collect();
    let midnight = now_ms + before_midnight + MARGIN_MS;
    assert_eq!(times.len(), 2, "{journal}");
    assert!(times[0] < midnight && times[1] >= midnight, "{journal}");
}

#[test]
fn quota_used_counts_every_shards_checks() {
    let server = Server::start_with(Options {
        cores: Some(2),
        ..Options::default()
    });
    let key = limited_key(&server, "acme", &["--quota-per-month", "1000"]);
    // New connections land on both shards (SO_REUSEPORT); each shard leases its own block of
    // the quota, and the header must count checks, not leases.
    for _ in 0..10 {
        let request = text_request(&key, r#"{"text":"hello"}"#);
        assert_eq!(raw_request(server.addr, &request).unwrap().status, 200);
    }
    // Shards share what they spent on their janitor tick; after one, every shard knows all.
    for i in 1..=3 {
        std::thread::sleep(Duration::from_millis(1000));
        let request = text_request(&key, r#"{"text":"hello"}"#);
        let response = raw_request(server.addr, &request).unwrap();
        assert_eq!(header_u64(&response, "x-quota-used"), 10 + i);
    }
}

#[test]
fn the_last_units_of_a_quota_are_not_held_by_an_idle_shard() {
    let server = Server::start_with(Options {
        cores: Some(2),
        ..Options::default()
    });
    let key = limited_key(&server, "acme", &["--quota-per-month", "3"]);
    let mut first = conn_on_shard(server.addr, 0);
    let mut second = conn_on_shard(server.addr, 1);
    for i in 1..=2 {
        first.send(&text_request(&key, r#"{"text":"hello"}"#));
        let response = first.read_response().unwrap();
        assert_eq!(response.status, 200, "check {i} on shard 0");
    }
    // The third unit is free in the ledger: shard 0 must not have taken it ahead of need
    // (nor held it until it idles, QUOTA_IDLE_RETURN_MS). Shards share their counts on the
    // janitor tick (IDLE_RETURN_MS): after two, shard 1 knows shard 0's checks.
    std::thread::sleep(Duration::from_millis(450));
    second.send(&text_request(&key, r#"{"text":"hello"}"#));
    let response = second.read_response().unwrap();
    assert_eq!(response.status, 200, "the last unit, on shard 1");
    assert_eq!(header_u64(&response, "x-quota-used"), 3);
    second.send(&text_request(&key, r#"{"text":"hello"}"#));
    let refused = second.read_response().unwrap();
    assert_eq!(refused.status, 429);
    assert_eq!(header_u64(&refused, "x-quota-used"), 3);
}

#[test]
fn units_left_on_an_idle_shard_go_back_to_the_ledger() {
    let server = Server::start_with(Options {
        cores: Some(2),
        ..Options::default()
    });
    // Leases of 100 / (4 × 2) = 12 units: shard 0 spends one and holds the rest.
    let key = limited_key(&server, "acme", &["--quota-per-month", "100"]);
    let mut first = conn_on_shard(server.addr, 0);
    first.send(&text_request(&key, r#"{"text":"hello"}"#));
    assert_eq!(first.read_response().unwrap().status, 200);
    // The organization goes on on shard 1 until it is refused: shard 0's units may still be
    // out then. Near the end of the quota, idle units go back (QUOTA_IDLE_RETURN_MS, 1 s),
    // and then every unit of the 100 is usable.
    let mut second = conn_on_shard(server.addr, 1);
    let mut accepted = 1;
    let mut refusals = Vec::new();
    let mut accepted_in_turn = Vec::new();
    for _ in 0..2 {
        loop {
            second.send(&text_request(&key, r#"{"text":"hello"}"#));
            let response = second.read_response().unwrap();
            if response.status != 200 {
                assert_eq!(response.status, 429);
                refusals.push(response);
                break;
            }
            accepted += 1;
            assert!(accepted <= 100, "over the quota");
        }
        accepted_in_turn.push(accepted);
        std::thread::sleep(Duration::from_millis(1500));
    }
    assert_eq!(accepted, 100);
    // While shard 0 held units, the refusal said to come back in seconds, not next month;
    // once every unit is spent, it says next month. (On a machine slow enough that shard 0
    // gave its units back before shard 1 ran out, the first turn took all 100.)
    let until_next_month = |response: &RawResponse| {
        let retry = header_u64(response, "retry-after");
        let expected = (modgate::clock::ms_until_next_month(now_unix_ms()) + 999) / 1000;
        retry.abs_diff(expected as u64) <= 5
    };
    let held = &refusals[0];
    if accepted_in_turn[0] < 100 {
        let body = held.json();
        assert_eq!(body["error"]["type"], "quota_exceeded", "{body}");
        assert!(
            body["error"]["message"]
                .as_str()
                .is_some_and(|message| message.contains("not spent yet")),
            "{body}"
        );
        assert_eq!(
            header_u64(held, "retry-after"),
            u64::from(modgate::limits::QUOTA_HELD_RETRY_AFTER_S)
        );
    } else {
        assert!(until_next_month(held));
    }
    assert!(until_next_month(&refusals[1]));
}

#[test]
fn the_quota_survives_restarts() {
    let data = tempfile::tempdir().unwrap();
    let start = || {
        Server::start_with(Options {
            cores: Some(2),
            data: Some(data.path().to_owned()),
            ..Options::default()
        })
    };
    let mut server = start();
    let key = limited_key(&server, "acme", &["--quota-per-month", "20"]);
    let send = |server: &Server, n: usize| -> Vec<u16> {
        (0..n)
            .map(|_| {
                let request = text_request(&key, r#"{"text":"hello"}"#);
                raw_request(server.addr, &request).unwrap().status
            })
            .collect()
    };
    assert!(send(&server, 6).iter().all(|&s| s == 200));
    // A graceful stop returns the unspent leases: exactly 6 are counted.
    server.signal(15);
    assert!(server.wait_exit(Duration::from_secs(10)).success());
    let mut server = start();
    // Before any check: every shard reads the count from the ledger.
    for shard in 0..2 {
        let mut conn = conn_on_shard(server.addr, shard);
        conn.send(
            format!("GET /v1/workflows HTTP/1.1\r\nHost: t\r\nX-Api-Key: {key}\r\n\r\n").as_bytes(),
        );
        let response = conn.read_response().unwrap();
        assert_eq!(response.status, 200);
        assert_eq!(header_u64(&response, "x-quota-used"), 6, "shard {shard}");
    }
    let mut conn = RawConn::connect(server.addr);
    conn.send(&text_request(&key, r#"{"text":"hello"}"#));
    let response = conn.read_response().unwrap();
    assert_eq!(header_u64(&response, "x-quota-used"), 7);
    drop(conn);
    // A crash (SIGKILL) loses the leases the shards held, and the next start sets the ledger
    // back to the checks the journals recorded: exactly the rest of the quota is left.
    server.kill();
    let server = start();
    let statuses = send(&server, 20);
    let accepted = statuses.iter().filter(|&&s| s == 200).count();
    assert_eq!(
        accepted, 13,
        "20 - 7 checks left after the crash: {statuses:?}"
    );
    assert!(statuses.contains(&429));
}

#[test]
fn a_full_model_queue_answers_503_busy() {
    // The worker niced below the shard, so that it takes jobs off the queue more slowly than
    // the shard puts them on (with the weights of the old defaults it kept up with eight
    // requests).
    let server = Server::start_with(Options {
        cores: Some(1),
        config: "[inference]\nqueue_depth_max = 1\nbatch_rows_max = 1\ncore_sharing = \"weights\"\nworker_nice = 10\nshard_nice = 0\n"
            .into(),
        ..Options::default()
    });
    let key = server.new_key("acme", "pro", &[]).0;
    // Every text its own words: tox-block keeps the scores of windows it has seen
    // (`inference.toxblock_windows_kept`), and a text seen before would not reach the queue.
    let body = |n: usize| {
        let long =
            format!("the weather report {n} says it will be sunny with light winds ").repeat(300);
        json!({"text": long, "workflow": "advanced"}).to_string()
    };
    // Bursts of 24 at once, up to four: under a loaded machine (CI runs the other tests beside
    // this one) the worker kept up with a burst once.
    let mut busy = 0;
    for round in 0..4 {
        let mut conns: Vec<RawConn> = (0..24).map(|_| RawConn::connect(server.addr)).collect();
        for (n, conn) in conns.iter_mut().enumerate() {
            conn.send(&text_request(&key, &body(round * 24 + n)));
        }
        for conn in &mut conns {
            let response = conn.read_response().unwrap();
            match response.status {
                200 => {}
                503 => {
                    assert_error(503, &response.json(), 503, "busy", false);
                    assert!(header_u64(&response, "retry-after") >= 1);
                    busy += 1;
                }
                other => panic!("status {other}"),
            }
        }
        if busy > 0 {
            break;
        }
    }
    assert!(busy >= 1, "no request found the queue full");
    // The 503s are counted by type.
    let metrics = server.scrape();
    let counted = metrics
        .value(
            "modgate_errors_total",
            &[("route", "/v1/text"), ("type", "busy")],
        )
        .unwrap_or(0.0);
    assert_eq!(counted, busy as f64);
}
