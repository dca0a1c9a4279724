//! Operating modgate: `/metrics` (strict Prometheus text, counters that move, bounded
//! labels), structured logs and their reload on SIGHUP, the configuration's refusals, and
//! `modgate check`.

mod common;

use std::process::Command;
use std::time::Duration;

use common::prometheus::{self, Exposition};
use common::*;
use serde_json::Value;

fn text_check(server: &Server, key: &str, body: &str) -> u16 {
    post(
        &server.url("/v1/text"),
        &[("X-Api-Key", key), ("Content-Type", "application/json")],
        body.as_bytes(),
    )
    .0
}

fn value(exposition: &Exposition, name: &str, labels: &[(&str, &str)]) -> f64 {
    exposition.value(name, labels).unwrap_or(0.0)
}

#[test]
fn metrics_are_strict_prometheus_text_and_move_with_requests() {
    let server = Server::start();
    let key = server.demo_key.clone().unwrap();
    let before = server.scrape();
    assert_eq!(value(&before, "modgate_shards", &[]), 2.0);
    assert_eq!(value(&before, "modgate_shards_answering", &[]), 2.0);
    assert_eq!(value(&before, "modgate_ready", &[]), 1.0);

    for _ in 0..3 {
        assert_eq!(text_check(&server, &key, r#"{"text":"hello there"}"#), 200);
    }
    assert_eq!(text_check(&server, &key, r#"{"text":"#), 400);
    let (status, _, _) = post_image(&server, &key, "", &testimage("png_rgb_coffee_16x12.png"));
    assert_eq!(status, 200);
    let (status, _, _) = get(&server.url("/nowhere"), &[]);
    assert_eq!(status, 404);

    let after = server.scrape();
    let moved = |name: &str, labels: &[(&str, &str)]| {
        value(&after, name, labels) - value(&before, name, labels)
    };
    let text_ok = [("route", "/v1/text"), ("status", "200")];
    assert_eq!(moved("modgate_requests_total", &text_ok), 3.0);
    assert_eq!(
        moved(
            "modgate_requests_total",
            &[("route", "/v1/text"), ("status", "400")]
        ),
        1.0
    );
    assert_eq!(
        moved(
            "modgate_errors_total",
            &[("route", "/v1/text"), ("type", "bad_request")]
        ),
        1.0
    );
    assert_eq!(
        moved(
            "modgate_requests_total",
            &[("route", "none"), ("status", "404")]
        ),
        1.0
    );
    assert_eq!(
        moved(
            "modgate_checks_total",
            &[
                ("kind", "text"),
                ("workflow", "default"),
                ("action", "accept")
            ]
        ),
        3.0
    );
    assert_eq!(
        moved(
            "modgate_checks_total",
            &[
                ("kind", "image"),
                ("workflow", "default"),
                ("action", "accept")
            ]
        ),
        1.0
    );
    assert_eq!(
        moved(
            "modgate_request_duration_seconds_count",
            &[("route", "/v1/text")]
        ),
        4.0
    );
    assert!(
        value(
            &after,
            "modgate_request_duration_seconds_sum",
            &[("route", "/v1/image")]
        ) > 0.0
    );
    assert_eq!(
        moved(
            "modgate_image_decode_duration_seconds_count",
            &[("format", "png")]
        ),
        1.0
    );
    for model in ["open_nsfw", "nsfwjs"] {
        assert_eq!(
            moved("modgate_model_duration_seconds_count", &[("model", model)]),
            1.0
        );
        assert_eq!(
            moved(
                "modgate_image_resize_duration_seconds_count",
                &[("model", model)]
            ),
            1.0
        );
    }
    // Every check and refused check is journaled: 5 records in at least one commit.
    assert_eq!(moved("modgate_journal_commit_records_sum", &[]), 5.0);
    assert!(moved("modgate_journal_commits_total", &[("outcome", "ok")]) >= 1.0);
    assert_eq!(after.types["modgate_requests_total"], "counter");
    assert_eq!(after.types["modgate_request_duration_seconds"], "histogram");
    assert_eq!(after.types["modgate_open_connections"], "gauge");
    for shard in ["0", "1"] {
        assert!(after
            .value("modgate_open_connections", &[("shard", shard)])
            .is_some());
    }

    // The listener serves only /metrics, without a key, and never to browsers.
    let addr = server.metrics_addr.unwrap();
    let other = raw_request(addr, b"GET / HTTP/1.1\r\nHost: t\r\n\r\n").unwrap();
    assert_eq!(other.status, 404);
    let browser = raw_request(
        addr,
        b"GET /metrics HTTP/1.1\r\nHost: t\r\nOrigin: https://x\r\n\r\n",
    )
    .unwrap();
    assert_eq!(browser.status, 403);
}

/// A server of one shard on its defaults (`kept`), or with `[inference] field` at 0.
fn one_shard_keeping(field: &str, kept: bool) -> Server {
    let config = match kept {
        true => String::new(),
        false => format!("[inference]\n{field} = 0\n"),
    };
    Server::start_with(Options {
        cores: Some(1),
        config,
        ..Options::default()
    })
}

/// An image sent again byte for byte is answered from the result of its first check (kept by
/// default, `inference.image_results_kept`): the same answer, no second decode or model run,
/// the reuse counted. Other bytes, or other checks of the same bytes, run the models; with the
/// setting at 0 every check runs them.
#[test]
fn a_repeated_image_is_answered_from_its_kept_result() {
    for kept in [true, false] {
        let server = one_shard_keeping("image_results_kept", kept);
        server.import_workflows(
            "[workflows.pictures]\ndescription = \"open-NSFW alone.\"\nimage_checks = [\"open_nsfw\"]\n[workflows.pictures.categories]\nnudity = { review = 0.5, reject = 0.9 }\n",
        );
        let key = server.new_key("acme", "pro", &[]).0;
        let check = |image: &str, workflow: &str| {
            let (status, _, answer) = post_image(
                &server,
                &key,
                &format!("?workflow={workflow}"),
                &testimage(image),
            );
            assert_eq!(status, 200, "{image}: {answer:?}");
            (answer["summary"].clone(), answer["scores"].clone())
        };
        let runs = |exposition: &Exposition| {
            value(
                exposition,
                "modgate_model_duration_seconds_count",
                &[("model", "open_nsfw")],
            )
        };
        let before = server.scrape();
        let first = check("jpeg_baseline_chelsea_451x300.jpg", "default");
        let again = check("jpeg_baseline_chelsea_451x300.jpg", "default");
        assert_eq!(first, again, "a repeat answers as the first check did");
        assert!(first.1["nudity"].is_number(), "{first:?}");
        let repeated = server.scrape();
        let reused = value(&repeated, "modgate_image_results_reused_total", &[]);
        if kept {
            assert_eq!(reused, 1.0);
            assert_eq!(
                runs(&repeated) - runs(&before),
                1.0,
                "one model run for two checks"
            );
        } else {
            assert_eq!(reused, 0.0);
            assert_eq!(runs(&repeated) - runs(&before), 2.0);
        }
        // Other bytes run the model; so do the same bytes for a workflow of other checks
        // (open-NSFW alone).
        check("jpeg_baseline_coffee_256x256.jpg", "default");
        check("jpeg_baseline_chelsea_451x300.jpg", "pictures");
        let after = server.scrape();
        assert_eq!(
            value(&after, "modgate_image_results_reused_total", &[]),
            reused
        );
        assert_eq!(runs(&after) - runs(&repeated), 2.0);

        // Checks at once on the one shard, kept and new: each looks up and keeps while others
        // hash their files or wait for the worker.
        let images = [
            "jpeg_baseline_chelsea_451x300.jpg",
            "jpeg_baseline_astronaut_512x384.jpg",
            "png_rgb_hubble_320x240.png",
            "jpeg_progressive_coffee_600x400.jpg",
        ];
        std::thread::scope(|scope| {
            let checks: Vec<_> = (0..12)
                .map(|i| scope.spawn(move || check(images[i % images.len()], "default")))
                .collect();
            for check in checks {
                assert!(check.join().is_ok(), "every check answered 200");
            }
        });
    }
}

/// A tox-block window of words the shard has scored before is not run through the model again
/// (`inference.toxblock_windows_kept`, on by default): the same text gets the same scores
/// without a model run, and a text that differs in its first words runs only the window that
/// holds them. With the setting at 0, every check runs every window.
#[test]
fn repeated_toxblock_windows_are_scored_from_kept_results() {
    // 250 words tox-block knows: windows of 100 aligned to the end, so 50, 100 and 100 words.
    let sentence = "you are a good person and i like your work ";
    let text = sentence.repeat(25);
    let changed = format!("they{}", &text["you".len()..]);
    let mut changed_scores = Vec::new();
    for kept in [true, false] {
        let server = one_shard_keeping("toxblock_windows_kept", kept);
        let key = server.new_key("acme", "pro", &[]).0;
        let check = |text: &str| {
            let body = serde_json::json!({ "text": text, "workflow": "advanced" }).to_string();
            let (status, _, answer) = post(
                &server.url("/v1/text"),
                &[("X-Api-Key", &key), ("Content-Type", "application/json")],
                body.as_bytes(),
            );
            assert_eq!(status, 200, "{answer:?}");
            answer["scores"].clone()
        };
        let counts = |exposition: &Exposition| {
            (
                value(
                    exposition,
                    "modgate_model_duration_seconds_count",
                    &[("model", "toxblock")],
                ),
                value(exposition, "modgate_toxblock_windows_reused_total", &[]),
            )
        };
        let (runs, reused) = counts(&server.scrape());
        let first = check(&text);
        assert!(first["toxic"].is_number(), "{first}");
        let after_first = counts(&server.scrape());
        assert_eq!(after_first, (runs + 1.0, reused), "the first check runs");
        let again = check(&text);
        assert_eq!(first, again, "a repeat scores as the first check did");
        let after_again = counts(&server.scrape());
        let other = check(&changed);
        let after_other = counts(&server.scrape());
        if kept {
            assert_eq!(
                after_again,
                (runs + 1.0, reused + 3.0),
                "no run for a repeat"
            );
            assert_eq!(
                after_other,
                (runs + 2.0, reused + 5.0),
                "one run, for the changed window alone"
            );
        } else {
            assert_eq!(after_again, (runs + 2.0, reused));
            assert_eq!(after_other, (runs + 3.0, reused));
        }
        assert!(other["toxic"].is_number(), "{other}");
        changed_scores.push(other);

        // Checks at once on the one shard, kept windows and new ones: each looks up and keeps
        // while others wait for the worker.
        std::thread::scope(|scope| {
            let checks: Vec<_> = (0..12)
                .map(|i| {
                    let text = format!("{}{}", ["you ", "they ", "we "][i % 3], text);
                    scope.spawn(move || check(&text))
                })
                .collect();
            for check in checks {
                assert!(check.join().is_ok(), "every check answered 200");
            }
        });
    }
    // Two of the changed text's three windows came from kept results on the first server and
    // from the model on the second: the same scores.
    assert_eq!(changed_scores[0], changed_scores[1]);
}

#[test]
fn metrics_count_downloads_their_refusals_and_fsyncs() {
    let server = Server::start_with(Options {
        config: "[testing]\nallow_private_urls = true\n[journal]\nsync_interval_ms = 50\n".into(),
        ..Options::default()
    });
    let key = server.demo_key.clone().unwrap();
    let images = ImageServer::start();
    let before = server.scrape();
    let image = testimage("png_rgb_hubble_320x240.png");
    let url = images.url("/img/png_rgb_hubble_320x240.png");
    let by_url = |url: &str| {
        let url = modgate_load::prepare::percent(url);
        post(
            &server.url(&format!("/v1/image?url={url}")),
            &[("X-Api-Key", &key)],
            b"",
        )
        .0
    };
    assert_eq!(by_url(&url), 200);
    assert_eq!(by_url("ftp://example.com/a.png"), 400);
    // A commit, then an fsync within the interval.
    std::thread::sleep(Duration::from_millis(300));
    let after = server.scrape();
    let moved = |name: &str, labels: &[(&str, &str)]| {
        value(&after, name, labels) - value(&before, name, labels)
    };
    assert_eq!(
        moved("modgate_download_bytes_total", &[]),
        image.len() as f64
    );
    assert_eq!(moved("modgate_downloads_total", &[]), 1.0);
    assert_eq!(
        moved("modgate_download_refusals_total", &[("reason", "scheme")]),
        1.0
    );
    assert!(moved("modgate_journal_fsync_duration_seconds_count", &[]) >= 1.0);
    for gauge in ["modgate_uploads_in_progress", "modgate_model_queue_depth"] {
        for shard in ["0", "1"] {
            assert_eq!(
                after.value(gauge, &[("shard", shard)]),
                Some(0.0),
                "{gauge}"
            );
        }
    }
}

#[test]
fn metric_labels_stay_bounded_whatever_callers_send() {
    let server = Server::start();
    let key = server.demo_key.clone().unwrap();
    // The random part of every ref, url and workflow name sent.
    let mut tags = Vec::new();
    let mut burst = |round: u32| {
        for i in 0..12 {
            let mut random = [0u8; 6];
            getrandom::fill(&mut random).unwrap();
            let tag: String = random.iter().map(|b| format!("{b:02x}")).collect();
            let reference = format!("ref-{round}-{i}-{tag}");
            let body = format!(r#"{{"text":"hello","ref":"{reference}","workflow":"default"}}"#);
            assert_eq!(text_check(&server, &key, &body), 200);
            // Refused downloads: a private address and an unknown scheme, each with a
            // never-seen path.
            for url in [
                format!("http://10.{}.{}.1/{tag}.png", random[0], random[1]),
                format!("ftp://example.com/{tag}.png"),
            ] {
                let target = format!(
                    "/v1/image?ref={reference}&url={}",
                    url.replace(':', "%3A").replace('/', "%2F")
                );
                let (status, _, _) = post(&server.url(&target), &[("X-Api-Key", &key)], b"");
                assert_eq!(status, 400);
            }
            // A workflow name nobody defined is refused, not counted under its name.
            let unknown = format!(r#"{{"text":"x","workflow":"wf-{tag}"}}"#);
            assert_eq!(text_check(&server, &key, &unknown), 400);
            tags.push(tag);
        }
    };
    burst(1);
    let first = server.scrape();
    burst(2);
    let second = server.scrape();
    assert_eq!(
        first.series(),
        second.series(),
        "new label values appeared after new refs, urls and workflow names"
    );
    for sample in &second.samples {
        for label in sample.labels.values() {
            assert!(
                !tags.iter().any(|tag| label.contains(tag.as_str())),
                "caller input in a label: {label}"
            );
            assert!(!label.contains("ref-") && !label.contains("wf-"), "{label}");
            assert!(!label.contains(&key[8..20]), "a key id in a label");
        }
    }
    assert_eq!(
        value(
            &second,
            "modgate_download_refusals_total",
            &[("reason", "address")]
        ),
        24.0
    );
    assert_eq!(
        value(
            &second,
            "modgate_download_refusals_total",
            &[("reason", "scheme")]
        ),
        24.0
    );
}

#[test]
fn metrics_can_be_turned_off() {
    let server = Server::start_with(Options {
        config: "[metrics]\nlisten = \"\"\n".into(),
        ..Options::default()
    });
    assert!(server.metrics_addr.is_none());
    assert!(!server.stdout.iter().any(|line| line.contains("metrics on")));
}

#[test]
fn a_configuration_with_an_unknown_field_is_refused_with_its_line() {
    let dir = tempfile::tempdir().unwrap();
    let config = dir.path().join("modgate.toml");
    std::fs::write(
        &config,
        "[server]\ncores = 1\n\n[limits]\nbody_read_timeout = 5\n",
    )
    .unwrap();
    let output = Command::new(BIN)
        .args(["serve", "--listen", "127.0.0.1:0", "--config"])
        .arg(&config)
        .arg("--data")
        .arg(dir.path().join("data"))
        .output()
        .unwrap();
    assert!(!output.status.success());
    let stderr = String::from_utf8_lossy(&output.stderr);
    assert!(stderr.contains("modgate.toml"), "{stderr}");
    assert!(stderr.contains("line 5"), "{stderr}");
    assert!(stderr.contains("body_read_timeout"), "{stderr}");
    // And a value out of its bounds is refused with the field named.
    std::fs::write(&config, "[plans.pro]\ntext_chars_max = 50000\n").unwrap();
    let output = Command::new(BIN)
        .args(["serve", "--config"])
        .arg(&config)
        .arg("--data")
        .arg(dir.path().join("data"))
        .output()
        .unwrap();
    assert!(!output.status.success());
    assert!(String::from_utf8_lossy(&output.stderr).contains("plans.pro.text_chars_max"));
}

/// The JSON log lines of `server` that carry `request_id`.
fn log_lines_of(server: &Server, request_id: &str) -> Vec<Value> {
    server
        .output
        .lock()
        .unwrap()
        .iter()
        .filter_map(|line| serde_json::from_str::<Value>(line).ok())
        .filter(|line| line["request_id"] == request_id)
        .collect()
}

#[test]
fn sighup_reloads_the_log_level_and_workflow_thresholds() {
    let dir = tempfile::tempdir().unwrap();
    let workflows = dir.path().join("workflows.toml");
    let shipped = std::fs::read_to_string(concat!(
        env!("CARGO_MANIFEST_DIR"),
        "/src/defaults/workflows.toml"
    ))
    .unwrap();
    std::fs::write(&workflows, &shipped).unwrap();
    let server = Server::start_with(Options {
        config: format!(
            "[log]\nlevel = \"info\"\nformat = \"json\"\n[workflows]\nfile = \"{}\"\n",
            workflows.display()
        ),
        capture_logs: true,
        ..Options::default()
    });
    let key = server.demo_key.clone().unwrap();
    let secret_text = "my-very-private-sentence-7f3a";
    let check = || {
        // `fast`: the word list and the profanity model (`default` does not flag profanity).
        let body = format!(
            r#"{{"text":"{secret_text} you fucking idiot","ref":"r-77","workflow":"fast"}}"#
        );
        let (status, headers, answer) = post(
            &server.url("/v1/text"),
            &[("X-Api-Key", &key), ("Content-Type", "application/json")],
            body.as_bytes(),
        );
        assert_eq!(status, 200);
        (headers.get("x-request-id").unwrap().to_owned(), answer)
    };

    // At info, an answered check writes no line; a refusal writes one, with its fields.
    let profanity_reject = |answer: &Value| {
        answer["summary"]["reject_reason"]
            .as_array()
            .unwrap()
            .iter()
            .find(|reason| reason["id"] == "profanity")
            .map(|reason| reason["threshold"].as_f64().unwrap())
    };
    let (quiet, answer) = check();
    assert_eq!(answer["workflow_version"], 1);
    assert_eq!(profanity_reject(&answer), Some(0.9), "{answer}");
    let (status, headers, _) = post(&server.url("/v1/text"), &[("X-Api-Key", &key)], b"{}");
    assert_eq!(status, 415);
    let refused_id = headers.get("x-request-id").unwrap().to_owned();
    server
        .wait_output(Duration::from_secs(5), |line| line.contains(&refused_id))
        .expect("a line for the refusal");
    let refusal = &log_lines_of(&server, &refused_id)[0];
    assert_eq!(refusal["level"], "INFO");
    assert_eq!(refusal["status"], 415);
    assert_eq!(refusal["error_type"], "unsupported_media");
    assert_eq!(refusal["route"], "/v1/text");
    assert!(refusal["shard"].is_u64() && refusal["time_us"].is_u64());
    assert!(log_lines_of(&server, &quiet).is_empty());

    // Debug level and a higher profanity reject threshold, then SIGHUP.
    let config = std::fs::read_to_string(&server.config_path).unwrap();
    std::fs::write(
        &server.config_path,
        config.replace("level = \"info\"", "level = \"debug\""),
    )
    .unwrap();
    let lowered = shipped.replacen(
        "profanity = { review = 0.7, reject = 0.9 }",
        "profanity = { review = 0.7, reject = 0.95 }",
        1,
    );
    assert_ne!(lowered, shipped);
    std::fs::write(&workflows, lowered).unwrap();
    server.signal(1);
    let outcome = server
        .wait_output(Duration::from_secs(5), |line| line.starts_with("reloaded:"))
        .expect("the reload says what it did");
    assert!(outcome.contains("log.level info -> debug"), "{outcome}");
    assert!(outcome.contains("workflows fast v2"), "{outcome}");

    let (loud, answer) = check();
    assert_eq!(answer["workflow_version"], 2);
    assert_eq!(profanity_reject(&answer), Some(0.95), "{answer}");
    server
        .wait_output(Duration::from_secs(5), |line| line.contains(&loud))
        .expect("a debug line per answer after the reload");
    let line = &log_lines_of(&server, &loud)[0];
    assert_eq!(line["level"], "DEBUG");
    assert_eq!(line["status"], 200);
    assert_eq!(line["workflow"], "fast");

    // Nothing the caller must keep private reaches the log.
    for line in server.output.lock().unwrap().iter() {
        assert!(!line.contains(secret_text), "a text in the log: {line}");
        assert!(
            !line.contains(&key[21..]),
            "a key secret in the log: {line}"
        );
        assert!(!line.contains("r-77"), "a ref in the log: {line}");
    }
}

fn check_command(server: &Server, key: &str, args: &[&str]) -> (bool, String, String) {
    let output = Command::new(BIN)
        .arg("check")
        .args(args)
        .env("MODGATE_SERVER", server.url(""))
        .env("MODGATE_KEY", key)
        .output()
        .unwrap();
    (
        output.status.success(),
        String::from_utf8_lossy(&output.stdout).into_owned(),
        String::from_utf8_lossy(&output.stderr).into_owned(),
    )
}

#[test]
fn the_check_client_prints_decisions() {
    let server = Server::start();
    let key = server.demo_key.clone().unwrap();
    let (ok, out, err) = check_command(
        &server,
        &key,
        &[
            "--text",
            "you are a fucking idiot, write to bob@example.com",
            "--workflow",
            "fast",
        ],
    );
    assert!(ok, "{err}");
    let first = out.lines().next().unwrap();
    assert!(first.starts_with("REJECT  (workflow fast v1"), "{out}");
    assert!(out.contains("reject: Profanity (profanity)"), "{out}");
    assert!(
        out.contains("review: E-mail address (pii_email) 0.95 >= 0.90"),
        "{out}"
    );
    assert!(out.contains("scores:\n  profanity"), "{out}");
    assert!(out.contains('█'), "{out}");

    let image = format!(
        "{}/models/image/testimages/jpeg_baseline_chelsea_451x300.jpg",
        env!("CARGO_MANIFEST_DIR")
    );
    let (ok, out, err) = check_command(&server, &key, &[&image, "--workflow", "default"]);
    assert!(ok, "{err}");
    assert!(out.starts_with("ACCEPT  (workflow default v1"), "{out}");
    for category in ["nudity", "suggestive", "drawn_nudity"] {
        assert!(out.contains(&format!("  {category} ")), "{out}");
    }

    let (ok, out, _) = check_command(&server, &key, &["--text", "hello", "--json"]);
    assert!(ok);
    let answer: Value = serde_json::from_str(out.trim()).unwrap();
    assert_schema("Answer", &answer);

    // A refusal fails the command and says why.
    let (ok, _, err) = check_command(&server, "mg_live_nope", &["--text", "hello"]);
    assert!(!ok);
    assert!(err.contains("401 unauthorized"), "{err}");
}

#[test]
fn the_metrics_checker_refuses_what_it_should() {
    let good = "# HELP a_total x\n# TYPE a_total counter\na_total{k=\"v\\\"\"} 1\n# TYPE h histogram\nh_bucket{le=\"1\"} 1\nh_bucket{le=\"+Inf\"} 2\nh_sum 3\nh_count 2\n";
    prometheus::parse(good).unwrap();
    for bad in [
        "a_total 1\n",
        "# TYPE a counter\na 1\n",
        "# TYPE a_total counter\na_total{k=v} 1\n",
        "# TYPE a_total counter\na_total 1\na_total 2\n",
        "# TYPE a_total counter\na_total x\n",
        "# TYPE h histogram\nh_bucket{le=\"1\"} 3\nh_bucket{le=\"+Inf\"} 2\nh_sum 3\nh_count 2\n",
        "# TYPE h histogram\nh_bucket{le=\"+Inf\"} 2\nh_sum 3\nh_count 1\n",
        "# TYPE a gauge\n# TYPE b gauge\na 1\nb 1\na{x=\"1\"} 1\n",
    ] {
        assert!(prometheus::parse(bad).is_err(), "accepted: {bad}");
    }
}

/// The scheduling of each thread of `server`'s process by its name: (niceness, policy) pairs.
fn thread_scheduling(server: &Server) -> std::collections::BTreeMap<String, Vec<(i32, u32)>> {
    let tasks = format!("/proc/{}/task", server.pid());
    let mut threads = std::collections::BTreeMap::new();
    for task in std::fs::read_dir(&tasks).unwrap() {
        let dir = task.unwrap().path();
        let comm = std::fs::read_to_string(dir.join("comm")).unwrap_or_default();
        let stat = std::fs::read_to_string(dir.join("stat")).unwrap_or_default();
        // Fields 19 and 41 are the niceness and the policy; fields are counted after the
        // command's closing parenthesis, which ends field 2.
        let Some(after) = stat.rsplit_once(") ").map(|(_, rest)| rest) else {
            continue;
        };
        let fields: Vec<&str> = after.split(' ').collect();
        let nice: i32 = fields[19 - 3].parse().unwrap();
        let policy: u32 = fields[41 - 3].parse().unwrap();
        threads
            .entry(comm.trim().to_owned())
            .or_insert_with(Vec::new)
            .push((nice, policy));
    }
    threads
}

/// `SCHED_OTHER` and `SCHED_IDLE` as /proc shows a thread's policy.
const SCHED_OTHER: u32 = 0;
const SCHED_IDLE: u32 = 5;

/// Issue 13: with `inference.core_sharing = "weights"` a shard and its model worker share one
/// core by the niceness the configuration gives them (`inference.shard_nice`,
/// `inference.worker_nice`); each thread runs at its own.
#[test]
fn shards_and_model_workers_share_by_weights_at_their_configured_niceness() {
    let server = Server::start_with(Options {
        cores: Some(1),
        config: "[inference]\ncore_sharing = \"weights\"\nworker_nice = 1\nshard_nice = 4\n".into(),
        ..Options::default()
    });
    let threads = thread_scheduling(&server);
    assert_eq!(
        threads["modgate-model-0"],
        [(1, SCHED_OTHER)],
        "{threads:?}"
    );
    // The shard's blocking threads carry its name too, at the default niceness.
    assert!(
        threads["modgate-shard-1"].contains(&(4, SCHED_OTHER)),
        "{threads:?}"
    );
}

/// Issue 13: by default (`inference.core_sharing = "paced"`) the model worker runs at
/// `SCHED_IDLE`, so the shard takes the core back the moment a request arrives, and the shard
/// is an ordinary thread at `inference.shard_nice`.
#[test]
fn model_workers_run_at_sched_idle_when_paced() {
    let server = Server::start_with(Options {
        cores: Some(1),
        config: "[inference]\nshard_nice = 2\n".into(),
        ..Options::default()
    });
    let threads = thread_scheduling(&server);
    assert_eq!(threads["modgate-model-0"].len(), 1, "{threads:?}");
    assert_eq!(threads["modgate-model-0"][0].1, SCHED_IDLE, "{threads:?}");
    assert!(
        threads["modgate-shard-1"].contains(&(2, SCHED_OTHER)),
        "{threads:?}"
    );
}

/// `modgate eval` over texts and images, offline: the tally on stdout, and with `--decisions`
/// one JSON line per item with its action, reasons, every category's score and what the
/// measuring checks found (a text's language, an image's face count and text).
#[test]
fn eval_reports_each_items_decision_scores_language_and_faces() {
    let dir = tempfile::tempdir().unwrap();
    let workflows = dir.path().join("workflows.toml");
    std::fs::write(
        &workflows,
        "[workflows.study]\ndescription = \"Words, language and faces.\"\n\
         text_checks = [\"wordlist\", \"language\"]\nimage_checks = [\"faces\", \"ocr\"]\n\
         [workflows.study.categories]\nprofanity = { review = 0.7, reject = 0.9 }\n\
         unread_language = { review = 0.8, reject = 1.0 }\nface = { review = 0.9, reject = 1.0 }\n",
    )
    .unwrap();
    let texts = dir.path().join("texts.jsonl");
    std::fs::write(
        &texts,
        "{\"text\":\"What a lovely afternoon we spent walking along the river with our friends.\"}\n\
         {\"text\":\"Nous avons passé une très belle journée au bord de la rivière avec nos amis.\"}\n\
         {\"text\":\"you are a fucking idiot\"}\n",
    )
    .unwrap();
    let images = dir.path().join("images");
    std::fs::create_dir(&images).unwrap();
    for name in [
        "png_rgb_astronaut_224x224.png",
        "png_rgba_chelsea_300x200.png",
    ] {
        std::fs::write(images.join(name), testimage(name)).unwrap();
    }
    std::fs::write(images.join("words.webp"), text_webp(&["Just words here"])).unwrap();
    let models = concat!(env!("CARGO_MANIFEST_DIR"), "/models");
    let run = |input: &str, path: &std::path::Path, out: &std::path::Path| -> Vec<Value> {
        let status = Command::new(BIN)
            .args(["eval", input])
            .arg(path)
            .args(["--workflow", "study", "--workflows"])
            .arg(&workflows)
            .args(["--models", models, "--decisions"])
            .arg(out)
            .status()
            .unwrap();
        assert!(status.success());
        std::fs::read_to_string(out)
            .unwrap()
            .lines()
            .map(|line| serde_json::from_str(line).unwrap())
            .collect()
    };
    let lines = run("--texts", &texts, &dir.path().join("texts.out"));
    assert_eq!(lines.len(), 3);
    assert_eq!(
        (&lines[0]["language"], &lines[1]["language"]),
        (&"en".into(), &"fr".into())
    );
    for line in &lines[..2] {
        let confidence = line["language_confidence"].as_f64().unwrap();
        assert!((0.9..=1.0).contains(&confidence), "{line}");
    }
    // French is read by no word check of this workflow.
    assert_ne!(lines[1]["action"], "accept", "{}", lines[1]);
    assert_eq!(lines[1]["reasons"][0], "unread_language");
    assert_eq!(lines[0]["action"], "accept", "{}", lines[0]);
    assert_eq!(lines[2]["reasons"][0], "profanity");
    assert!(
        lines[2]["scores"]["profanity"].as_f64().unwrap() >= 0.7,
        "{}",
        lines[2]
    );
    let lines = run("--images", &images, &dir.path().join("images.out"));
    let faces: Vec<(&str, u64)> = lines
        .iter()
        .map(|line| {
            (
                line["item"].as_str().unwrap(),
                line["face_count"].as_u64().unwrap(),
            )
        })
        .collect();
    assert_eq!(
        faces,
        [
            ("png_rgb_astronaut_224x224.png", 1),
            ("png_rgba_chelsea_300x200.png", 0),
            ("words.webp", 0),
        ]
    );
    assert_eq!(lines[0]["action"], "review");
    assert_eq!(lines[2]["image_text"], "Just words here", "{}", lines[2]);
    // Checked on every image (the cat's fur reads as a "0" here, as in the reference package).
    assert!(lines[1]["image_text"].is_string(), "{}", lines[1]);
}
