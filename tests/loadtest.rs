//! The load tool itself: its open loop keeps its schedule against a slow server and counts
//! the waiting in latency (no coordinated omission), and its report's counts equal what the
//! server journaled.

mod common;

use std::collections::BTreeMap;
use std::io::{Read, Write};
use std::net::{SocketAddr, TcpListener, TcpStream};
use std::time::Duration;

use common::*;
use modgate_load::generator::{run, Arrivals, Load, RunConfig};
use modgate_load::prepare::{prepare, Target};
use modgate_load::report::Report;
use modgate_load::scenario::Scenario;
use serde_json::Value;

/// A server that takes `delay` to answer each request, one request at a time per connection.
fn slow_server(delay: Duration) -> SocketAddr {
    let listener = TcpListener::bind("127.0.0.1:0").unwrap();
    let addr = listener.local_addr().unwrap();
    std::thread::spawn(move || {
        for stream in listener.incoming().flatten() {
            std::thread::spawn(move || answer_slowly(stream, delay));
        }
    });
    addr
}

fn answer_slowly(mut stream: TcpStream, delay: Duration) {
    let _ = stream.set_nodelay(true);
    let mut pending = Vec::new();
    let mut chunk = [0u8; 4096];
    loop {
        while let Some(end) = pending.windows(4).position(|w| w == b"\r\n\r\n") {
            pending.drain(..end + 4);
            std::thread::sleep(delay);
            let answer = b"HTTP/1.1 200 OK\r\nContent-Length: 15\r\n\r\n{\"status\":\"ok\"}";
            if stream.write_all(answer).is_err() {
                return;
            }
        }
        match stream.read(&mut chunk) {
            Ok(0) | Err(_) => return,
            Ok(n) => pending.extend_from_slice(&chunk[..n]),
        }
    }
}

fn health_scenario() -> (Scenario, Vec<modgate_load::prepare::Prepared>) {
    let scenario = Scenario::parse(
        "name = \"health\"\n[[requests]]\nname = \"health\"\nkind = \"health\"\nweight = 1\n",
        std::path::Path::new("."),
    )
    .unwrap();
    let requests = prepare(
        &scenario,
        &Target {
            host: "t",
            key: "unused",
            image_server: None,
        },
    )
    .unwrap();
    (scenario, requests)
}

#[test]
fn the_open_loop_keeps_its_schedule_and_counts_the_wait() {
    let server = slow_server(Duration::from_millis(50));
    let (_, requests) = health_scenario();
    let rate = 100.0;
    let seconds = 3;

    // Two connections at 50 ms each serve 40/s, less than the 100/s asked: requests queue.
    let mut open = RunConfig::new(
        server,
        Load::Open {
            rate,
            arrivals: Arrivals::Uniform,
        },
        Duration::from_secs(seconds),
    );
    open.connections_max = 2;
    open.drain_timeout = Duration::from_secs(30);
    let result = run(&open, &requests).unwrap();
    let report = Report::new("health", open.load, &result, &requests);
    // The schedule is kept: every request came due, whatever the server did.
    assert!((299..=301).contains(&report.sent), "{}", report.sent);
    assert_eq!(report.completed, report.sent);
    assert_eq!(report.unfinished + report.dropped, 0);
    // The waiting counts: the last requests waited for ~(300 - 120) / 40 s behind the others.
    assert!(report.latency.max_us > 3_000_000, "{:?}", report.latency);
    assert!(report.latency.p50_us > 1_000_000, "{:?}", report.latency);

    // With connections to spare, the rate is met and latency is the server's 50 ms.
    let mut roomy = open.clone();
    roomy.connections_max = 64;
    let result = run(&roomy, &requests).unwrap();
    let report = Report::new("health", roomy.load, &result, &requests);
    assert!(
        (299..=301).contains(&report.completed),
        "{}",
        report.completed
    );
    assert!(
        (report.throughput_per_s - rate).abs() < 2.0,
        "{}",
        report.throughput_per_s
    );
    assert!(
        report.latency.p50_us >= 50_000 && report.latency.p99_us < 150_000,
        "{:?}",
        report.latency
    );

    // A closed loop against the same slow server sees only the service time: the wait a
    // real arrival rate would have caused is hidden, which is why the report flags it.
    let closed = RunConfig::new(
        server,
        Load::Closed { connections: 2 },
        Duration::from_secs(2),
    );
    let result = run(&closed, &requests).unwrap();
    let report = Report::new("health", closed.load, &result, &requests);
    assert!(report.coordinated_omission);
    assert!(report.latency.p99_us < 150_000, "{:?}", report.latency);
    // Two connections at 50 ms a request: at most 40 answers a second.
    assert!(
        (34.0..=40.5).contains(&report.throughput_per_s),
        "{}",
        report.throughput_per_s
    );
}

#[test]
fn the_reports_counts_equal_what_the_server_journaled() {
    let server = Server::start_with(Options {
        config: "[testing]\nallow_private_urls = true\n".into(),
        ..Options::default()
    });
    let (key, _) = server.new_key("load", "pro", &[]);
    let images = concat!(env!("CARGO_MANIFEST_DIR"), "/models/image/testimages");
    let scenario = Scenario::parse(
        &format!(
            r#"
name = "every-kind"
[[requests]]
name = "text"
kind = "text"
weight = 30
text = "hello there"
[[requests]]
name = "profane"
kind = "text"
weight = 10
text = "you fucking idiot"
[[requests]]
name = "bad-key"
kind = "bad_key"
weight = 5
text = "hello"
[[requests]]
name = "malformed"
kind = "malformed"
weight = 5
text = "cut short"
[[requests]]
name = "compat-text"
kind = "compat_text"
weight = 10
text = "hello"
[[requests]]
name = "image"
kind = "image"
weight = 10
image = "{images}/png_rgb_coffee_16x12.png"
[[requests]]
name = "compat-image"
kind = "compat_image"
weight = 10
image = "{images}/jpeg_baseline_chelsea_64x48.jpg"
[[requests]]
name = "url"
kind = "url"
weight = 5
image = "{images}/gif_transparent_coffee_120x90.gif"
[[requests]]
name = "compat-url"
kind = "compat_url"
weight = 5
image = "{images}/webp_lossless_rgba_chelsea_150x100.webp"
[[requests]]
name = "health"
kind = "health"
weight = 10
"#
        ),
        std::path::Path::new("."),
    )
    .unwrap();
    let host = server.addr.to_string();
    let requests = modgate_load::prepare_scenario(&scenario, &host, &key).unwrap();
    let config = RunConfig::new(
        server.addr,
        Load::Open {
            rate: 60.0,
            arrivals: Arrivals::Poisson,
        },
        Duration::from_secs(4),
    );
    let result = run(&config, &requests).unwrap();
    let report = Report::new(&scenario.name, config.load, &result, &requests);
    assert_eq!(report.errors, 0, "{}", report.table());
    assert!(report.completed > 150, "{}", report.completed);

    // Every check route's answers, by status, as the journal has them.
    let output = server.admin_ok(&["journal", "--json"]);
    let mut journaled: BTreeMap<String, BTreeMap<u16, u64>> = BTreeMap::new();
    for line in output.lines() {
        let record: Value = serde_json::from_str(line).unwrap();
        *journaled
            .entry(record["route"].as_str().unwrap().to_owned())
            .or_default()
            .entry(record["status"].as_u64().unwrap() as u16)
            .or_default() += 1;
    }
    let mut reported = report.by_route_status.clone();
    let health = reported.remove("/health").unwrap_or_default();
    assert!(health.get(&200).copied().unwrap_or(0) > 0);
    assert_eq!(reported, journaled, "{}", report.table());
    for route in [
        "/v1/text",
        "/v1/image",
        "/1.0/text/check-workflow.json",
        "/1.0/check-workflow.json",
    ] {
        assert!(
            journaled.contains_key(route),
            "{route} missing: {journaled:?}"
        );
    }
    assert!(journaled["/v1/text"].contains_key(&401));
    assert!(journaled["/v1/text"].contains_key(&400));
}

/// `fresh` requests carry content the server has not seen: a server on its defaults (results
/// kept for repeats) runs its models for every one of them, reusing no tox-block window and no
/// image result, while the same scenario without `fresh` is answered from kept results. A
/// stamped JPEG scores as the file it was made from (its stamp is in a comment segment).
#[test]
fn fresh_requests_are_never_answered_from_kept_results() {
    let images = concat!(env!("CARGO_MANIFEST_DIR"), "/models/image/testimages");
    // 250 words tox-block knows (three windows), stamped into about 290.
    let text = "you are a good person and i like your work ".repeat(25);
    for fresh in [true, false] {
        let server = Server::start_with(Options {
            cores: Some(1),
            ..Options::default()
        });
        server.import_workflows(
            "[workflows.pictures]\ndescription = \"open-NSFW alone.\"\nimage_checks = [\"open_nsfw\"]\n[workflows.pictures.categories]\nnudity = { review = 0.5, reject = 0.9 }\n",
        );
        let (key, _) = server.new_key("load", "pro", &[]);
        let scenario = Scenario::parse(
            &format!(
                r#"
name = "fresh"
[[requests]]
name = "text"
kind = "text"
workflow = "advanced"
weight = 3
fresh = {fresh}
text = "{text}"
[[requests]]
name = "image"
kind = "image"
workflow = "pictures"
weight = 1
fresh = {fresh}
image = "{images}/jpeg_baseline_chelsea_64x48.jpg"
[[requests]]
name = "compat-image"
kind = "compat_image"
workflow = "pictures"
weight = 1
fresh = {fresh}
image = "{images}/jpeg_progressive_coffee_600x400.jpg"
"#
            ),
            std::path::Path::new("."),
        )
        .unwrap();
        let requests =
            modgate_load::prepare_scenario(&scenario, &server.addr.to_string(), &key).unwrap();
        let config = RunConfig::new(
            server.addr,
            Load::Closed { connections: 1 },
            Duration::from_secs(2),
        );
        let result = run(&config, &requests).unwrap();
        let report = Report::new(&scenario.name, config.load, &result, &requests);
        assert_eq!(report.errors, 0, "{}", report.table());
        let images_checked = report.by_route_status["/v1/image"][&200]
            + report.by_route_status["/1.0/check-workflow.json"][&200];
        assert!(
            report.by_route_status["/v1/text"][&200] > 10 && images_checked > 5,
            "{}",
            report.table()
        );

        let metrics = server.scrape();
        let metric = |name: &str| metrics.value(name, &[]).unwrap_or(0.0);
        let windows_reused = metric("modgate_toxblock_windows_reused_total");
        let images_reused = metric("modgate_image_results_reused_total");
        let runs = |model: &str| {
            metrics
                .value("modgate_model_duration_seconds_count", &[("model", model)])
                .unwrap_or(0.0)
        };
        if !fresh {
            assert!(windows_reused > 0.0 && images_reused > 0.0);
            continue;
        }
        assert_eq!((windows_reused, images_reused), (0.0, 0.0));
        // ... because the models ran for every one (one connection: a run per check).
        let texts = report.by_route_status["/v1/text"][&200] as f64;
        assert!(runs("toxblock") >= texts, "{} {texts}", runs("toxblock"));
        assert!(runs("open_nsfw") >= images_checked as f64);

        // A stamp leaves the pixels alone: the stamped file scores as the original.
        let image = requests.iter().find(|r| r.name == "image").unwrap();
        let mut bytes = image.bytes.to_vec();
        modgate_load::prepare::stamp(12_345, &mut bytes[image.stamps[0]..]);
        let stamped = raw_request(server.addr, &bytes).unwrap();
        assert_eq!(stamped.status, 200);
        let stamped: Value = serde_json::from_slice(&stamped.body).unwrap();
        let (status, _, original) = post_image(
            &server,
            &key,
            "?workflow=pictures",
            &testimage("jpeg_baseline_chelsea_64x48.jpg"),
        );
        assert_eq!(status, 200);
        assert_eq!(stamped["scores"], original["scores"]);
        assert!(original["scores"]["nudity"].is_number(), "{original}");
    }
}
