//! The platform's own judgement end to end, through the real server and the real CLI: checks,
//! feedback on them (the route and a CSV import), `modgate calibrate` suggesting thresholds
//! that reach the asked precision on those labels, `modgate replay` flipping exactly the
//! checks the test expects from the scores itself, and `GET /v1/checks/{id}` explaining all of
//! it, under the version of the workflow each check was decided under.

mod common;

use std::collections::BTreeMap;

use common::*;
use serde_json::{json, Value};

const WORKFLOW: &str = r#"
[workflows.judged]
description = "The linear profanity model alone."
text_checks = ["profanity_svm"]
[workflows.judged.categories.profanity]
review = 0.7
reject = 0.9
"#;

/// Texts and whether each is profane (the test's own labels).
const TEXTS: &[(&str, bool)] = &[
    ("What a lovely morning for a walk in the park.", false),
    ("The meeting moved to Thursday at three.", false),
    ("Thanks for the quick reply, that helps a lot.", false),
    ("I think the second chapter drags a little.", false),
    ("Could you send me the slides from today?", false),
    ("The bus was late again this morning.", false),
    ("Our team won the match by two goals.", false),
    ("This recipe needs more garlic, honestly.", false),
    ("That movie was damn long but worth it.", false),
    ("What the hell happened to the schedule?", false),
    ("This crap printer jammed three times today.", false),
    ("I love this song so much.", false),
    ("You are a fucking idiot.", true),
    ("Shut up, you stupid bitch.", true),
    ("Go fuck yourself, asshole.", true),
    ("What a piece of shit you are.", true),
    ("You dumb motherfucker, get lost.", true),
    ("Eat shit and die, loser.", true),
    ("Nobody likes you, dickhead.", true),
    ("Fuck off with your bullshit.", true),
    ("You're such a worthless cunt.", true),
    ("Stop being a whiny little prick.", true),
];

fn post_json(server: &Server, path: &str, key: &str, body: &Value) -> (u16, Value) {
    let (status, _, answer) = post(
        &server.url(path),
        &[("X-Api-Key", key), ("Content-Type", "application/json")],
        body.to_string().as_bytes(),
    );
    (status, answer)
}

fn explain(server: &Server, key: &str, id: &str) -> (u16, Value) {
    let (status, _, body) = get(
        &server.url(&format!("/v1/checks/{id}")),
        &[("X-Api-Key", key)],
    );
    (status, body)
}

/// The action the decision rule gives a profanity score under `thresholds`.
fn action_of(score: f64, (review, reject): (f64, f64)) -> &'static str {
    if score >= reject {
        "reject"
    } else if score >= review {
        "review"
    } else {
        "accept"
    }
}

/// Renders `page` in headless Chromium (Debian's, as `make test` installs it) and returns the
/// screenshot's RGB pixels and what Chromium logged.
fn render(page: &std::path::Path) -> (Vec<[u8; 3]>, String) {
    let dir = tempfile::tempdir().expect("tempdir");
    let shot = dir.path().join("shot.png");
    let output = std::process::Command::new("chromium")
        .args([
            "--headless",
            "--no-sandbox",
            "--disable-gpu",
            "--disable-quic",
            "--no-first-run",
            "--disable-background-networking",
            "--disable-component-update",
            "--disable-sync",
            "--disable-dev-shm-usage",
            "--enable-logging=stderr",
            "--v=0",
            "--window-size=1200,1600",
        ])
        .arg(format!(
            "--user-data-dir={}",
            dir.path().join("profile").display()
        ))
        .arg(format!("--screenshot={}", shot.display()))
        .arg(format!("file://{}", page.display()))
        .output()
        .expect("chromium runs (make test installs Debian's chromium)");
    let log = String::from_utf8_lossy(&output.stderr).into_owned();
    assert!(output.status.success(), "chromium failed: {log}");
    let png = std::fs::read(&shot).expect("a screenshot");
    let mut decoder =
        zune_png::PngDecoder::new(zune_png::zune_core::bytestream::ZCursor::new(&png));
    let pixels = match decoder.decode().expect("the screenshot decodes") {
        zune_png::zune_core::result::DecodingResult::U8(pixels) => pixels,
        _ => panic!("8-bit screenshot"),
    };
    let channels = match decoder.colorspace() {
        Some(zune_png::zune_core::colorspace::ColorSpace::RGBA) => 4,
        _ => 3,
    };
    let rgb = pixels
        .chunks_exact(channels)
        .map(|p| [p[0], p[1], p[2]])
        .collect();
    (rgb, log)
}

/// Pixels of `pixels` within a few levels of the colour `hex` (`#rrggbb`).
fn pixels_of(pixels: &[[u8; 3]], hex: &str) -> usize {
    let value = u32::from_str_radix(hex.trim_start_matches('#'), 16).expect("hex colour");
    let want = [(value >> 16) as u8, (value >> 8) as u8, value as u8];
    pixels
        .iter()
        .filter(|p| p.iter().zip(want).all(|(a, b)| a.abs_diff(b) <= 3))
        .count()
}

/// The threshold (among the scores seen) that reaches `precision` with the most recall, the
/// highest of those with that recall, by brute force over every candidate.
fn best_reaching(pairs: &[(f64, bool)], precision: f64) -> Option<f64> {
    let mut candidates: Vec<f64> = pairs.iter().map(|(score, _)| *score).collect();
    candidates.sort_by(f64::total_cmp);
    candidates.dedup();
    let hits_at = |t: f64| {
        let flagged: Vec<bool> = pairs
            .iter()
            .filter(|(score, _)| *score >= t)
            .map(|(_, label)| *label)
            .collect();
        let hits = flagged.iter().filter(|label| **label).count();
        (hits, flagged.len())
    };
    let reaching: Vec<(f64, usize)> = candidates
        .into_iter()
        .filter_map(|t| {
            let (hits, flagged) = hits_at(t);
            (hits as f64 >= precision * flagged as f64).then_some((t, hits))
        })
        .collect();
    let most = reaching.iter().map(|(_, hits)| *hits).max()?;
    reaching
        .into_iter()
        .filter(|(_, hits)| *hits == most)
        .map(|(t, _)| t)
        .reduce(f64::max)
}

#[test]
fn feedback_calibration_replay_and_explain_on_the_platforms_own_checks() {
    let server = Server::start();
    server.import_workflows(WORKFLOW);
    let (key, _) = server.new_key("acme", "pro", &["--scopes", "text,feedback"]);
    let (checks_only, _) = server.new_key("acme", "pro", &["--scopes", "text"]);
    let (other_org, _) = server.new_key("globex", "pro", &["--scopes", "text,feedback"]);

    // The checks, with the scores and actions they were answered with.
    let mut checked: Vec<(String, f64, String, bool)> = Vec::new();
    for (text, profane) in TEXTS {
        let (status, answer) = post_json(
            &server,
            "/v1/text",
            &key,
            &json!({"text": text, "workflow": "judged"}),
        );
        assert_eq!(status, 200, "{answer}");
        let id = answer["request_id"].as_str().expect("id").to_owned();
        let action = answer["summary"]["action"]
            .as_str()
            .expect("action")
            .to_owned();
        let score = answer["scores"]["profanity"].as_f64().expect("score");
        checked.push((id, score, action, *profane));
    }
    let (other_status, other_answer) = post_json(
        &server,
        "/v1/text",
        &other_org,
        &json!({"text": "You are a fucking idiot.", "workflow": "judged"}),
    );
    assert_eq!(other_status, 200);
    let other_id = other_answer["request_id"].as_str().expect("id").to_owned();

    // Explain, before any feedback: the journaled scores, the thresholds of version 1.
    let (first_id, first_score, first_action, _) = &checked[0];
    let (status, explained) = explain(&server, &key, first_id);
    assert_eq!(status, 200, "{explained}");
    assert_schema("ExplainedCheck", &explained);
    assert_eq!(
        explained["workflow"],
        json!({"name": "judged", "version": 1})
    );
    assert_eq!(explained["action"], json!(first_action));
    assert_eq!(explained["thresholds_kept"], json!(true));
    assert_eq!(explained["thresholds_give_action"], json!(true));
    assert_eq!(explained["feedback"], Value::Null);
    let category = &explained["categories"][0];
    assert_eq!(category["category"], "profanity");
    assert!((category["score"].as_f64().expect("score") - first_score).abs() < 1e-3);
    assert_eq!(
        (category["review"].as_f64(), category["reject"].as_f64()),
        (Some(0.7), Some(0.9))
    );

    // Refusals: no scope, another organization's check, an id no check has, bad feedback.
    let (status, body) = explain(&server, &checks_only, first_id);
    assert_error(status, &body, 403, "forbidden", false);
    let (status, body) = explain(&server, &key, &other_id);
    assert_error(status, &body, 404, "bad_request", false);
    let (status, body) = explain(&server, &key, "01KC0000000000000000000000");
    assert_error(status, &body, 404, "bad_request", false);
    let (status, body) = explain(&server, &key, "not-an-id");
    assert_error(status, &body, 404, "bad_request", false);
    let refused = [
        json!({"request_id": first_id, "labels": {"Profanity": true}}),
        json!({"request_id": first_id, "action": "delete"}),
        json!({"request_id": first_id}),
        json!({"request_id": first_id, "labels": {"profanity": "yes"}}),
        json!({"request_id": first_id, "unknown": 1}),
    ];
    for body in refused {
        let (status, answer) = post_json(&server, "/v1/feedback", &key, &body);
        assert_error(status, &answer, 400, "bad_request", false);
    }
    let (status, answer) = post_json(
        &server,
        "/v1/feedback",
        &key,
        &json!({"request_id": other_id, "labels": {"profanity": true}}),
    );
    assert_error(status, &answer, 404, "bad_request", false);
    let (status, answer) = post_json(
        &server,
        "/v1/feedback",
        &checks_only,
        &json!({"request_id": first_id, "labels": {"profanity": true}}),
    );
    assert_error(status, &answer, 403, "forbidden", false);

    // Feedback: half through the route (a first word, then the last), half from a CSV.
    let (through_route, imported) = checked.split_at(checked.len() / 2);
    for (id, _, _, profane) in through_route {
        let (status, answer) = post_json(
            &server,
            "/v1/feedback",
            &key,
            &json!({"request_id": id, "labels": {"profanity": !profane}, "note": "first look"}),
        );
        assert_eq!(status, 200, "{answer}");
        let (status, answer) = post_json(
            &server,
            "/v1/feedback",
            &key,
            &json!({"request_id": id, "labels": {"profanity": profane}}),
        );
        assert_eq!(status, 200, "{answer}");
        assert_schema("FeedbackAnswer", &answer);
        assert_eq!(answer["feedback"]["labels"]["profanity"], json!(profane));
        assert_eq!(answer["feedback"]["note"], "first look");
    }
    // Feedback given at once is committed in groups, none lost.
    std::thread::scope(|scope| {
        for (id, _, _, _) in imported {
            let (server, key) = (&server, &key);
            scope.spawn(move || {
                let (status, answer) = post_json(
                    server,
                    "/v1/feedback",
                    key,
                    &json!({"request_id": id, "note": "queued for review"}),
                );
                assert_eq!(status, 200, "{answer}");
            });
        }
    });
    for (id, _, _, _) in imported {
        let (_, explained) = explain(&server, &key, id);
        assert_eq!(explained["feedback"]["note"], "queued for review");
    }
    let csv: String = std::iter::once("request_id,label,value\n".to_owned())
        .chain(
            imported
                .iter()
                .map(|(id, _, _, profane)| format!("{id},profanity,{profane}\n")),
        )
        .collect();
    let csv_file = server.data.join("labels.csv");
    std::fs::write(&csv_file, &csv).expect("csv");
    let csv_path = csv_file.to_str().expect("path");
    // A file naming another organization's check is refused whole.
    let foreign = server.data.join("foreign.csv");
    std::fs::write(&foreign, format!("{csv}{other_id},profanity,true\n")).expect("csv");
    let output = server.admin(&[
        "feedback",
        "import",
        foreign.to_str().expect("path"),
        "--org",
        "acme",
    ]);
    assert!(!output.status.success());
    assert!(String::from_utf8_lossy(&output.stderr).contains("not checks of 'acme'"));
    let said = server.admin_ok(&["feedback", "import", csv_path, "--org", "acme"]);
    assert!(
        said.contains(&format!("feedback on {} checks imported", imported.len())),
        "{said}"
    );

    // Calibration: the suggested thresholds reach each precision with the most recall.
    let suggested_file = server.data.join("suggested.toml");
    let calibration_page = server.data.join("calibration.html");
    let replay_page = server.data.join("replay.html");
    let report: Value = serde_json::from_str(&server.admin_ok(&[
        "calibrate",
        "--workflow",
        "judged",
        "--org",
        "acme",
        "--precision",
        "0.75",
        "--reject-precision",
        "0.95",
        "--json",
        "--write",
        suggested_file.to_str().expect("path"),
        "--html",
        calibration_page.to_str().expect("path"),
    ]))
    .expect("json report");
    assert_eq!(report["checks"], json!(TEXTS.len()));
    assert_eq!(report["with_feedback"], json!(TEXTS.len()));
    let profanity = &report["categories"][0];
    assert_eq!(profanity["category"], "profanity");
    assert_eq!(profanity["labelled"], json!(TEXTS.len()));
    let positives = TEXTS.iter().filter(|(_, profane)| *profane).count();
    assert_eq!(profanity["positives"], json!(positives));
    let pairs: Vec<(f64, bool)> = checked
        .iter()
        .map(|(id, _, _, profane)| {
            let (_, explained) = explain(&server, &key, id);
            (
                explained["categories"][0]["score"].as_f64().expect("score"),
                *profane,
            )
        })
        .collect();
    let review = profanity["suggested_review"]["threshold"]
        .as_f64()
        .expect("review");
    let reject = profanity["suggested_reject"]["threshold"]
        .as_f64()
        .expect("reject");
    let expected_review = best_reaching(&pairs, 0.75).expect("a review threshold");
    assert_eq!(review, expected_review, "{profanity}");
    let expected_reject = best_reaching(&pairs, 0.95).unwrap_or(0.9).max(review);
    assert_eq!(reject, expected_reject, "{profanity}");
    let flagged = |t: f64| pairs.iter().filter(move |(score, _)| *score >= t);
    let precision_at =
        |t: f64| flagged(t).filter(|(_, label)| *label).count() as f64 / flagged(t).count() as f64;
    assert!(precision_at(review) >= 0.75);
    let at = profanity["suggested_review"]["at"]["precision"]
        .as_f64()
        .expect("precision");
    assert!((at - precision_at(review)).abs() < 1e-12);

    // Replay of the suggested thresholds flips exactly what the scores say.
    let replayed: Value = serde_json::from_str(&server.admin_ok(&[
        "replay",
        "--workflow",
        "judged",
        "--org",
        "acme",
        "--thresholds",
        suggested_file.to_str().expect("path"),
        "--json",
        "--html",
        replay_page.to_str().expect("path"),
    ]))
    .expect("json replay");
    let mut expected_flips: BTreeMap<String, usize> = BTreeMap::new();
    for ((_, _, answered, _), (score, _)) in checked.iter().zip(&pairs) {
        let now = action_of(*score, (review, reject));
        if now != answered {
            *expected_flips
                .entry(format!("{answered} -> {now}"))
                .or_default() += 1;
        }
    }
    let flips: BTreeMap<String, usize> = replayed["flips"]
        .as_object()
        .expect("flips")
        .iter()
        .map(|(kind, flips)| {
            (
                kind.clone(),
                flips["count"].as_u64().expect("count") as usize,
            )
        })
        .collect();
    assert_eq!(flips, expected_flips, "{replayed}");
    assert_eq!(replayed["checks"], json!(TEXTS.len()));
    assert_eq!(
        replayed["flipped"],
        json!(expected_flips.values().sum::<usize>())
    );

    // The reports render in a browser: the curve and the histogram's bars drawn, the flips
    // marked, no console message.
    let (pixels, log) = render(&calibration_page);
    assert!(!log.contains(":CONSOLE"), "{log}");
    assert!(
        pixels_of(&pixels, "#1f5fbf") > 100,
        "no precision-recall curve drawn"
    );
    assert!(pixels_of(&pixels, "#c0392b") > 100, "no bars of harm drawn");
    assert!(
        pixels_of(&pixels, "#7f8c8d") > 100,
        "no bars of not harm drawn"
    );
    let (pixels, log) = render(&replay_page);
    assert!(!log.contains(":CONSOLE"), "{log}");
    assert!(
        pixels_of(&pixels, "#fde2e0") > 100,
        "no flip marked in the matrix"
    );

    // The suggested thresholds go live as version 2; a check of version 1 is still explained
    // by version 1's thresholds, with its feedback.
    server.admin_ok(&["workflow", "import", suggested_file.to_str().expect("path")]);
    let (last_id, _, _, profane) = checked.last().expect("a check");
    let (status, explained) = explain(&server, &key, last_id);
    assert_eq!(status, 200);
    assert_eq!(explained["workflow"]["version"], json!(1));
    assert_eq!(explained["categories"][0]["review"].as_f64(), Some(0.7));
    assert_eq!(explained["feedback"]["labels"]["profanity"], json!(profane));
    assert_eq!(explained["feedback"]["given_by"], "import");
    assert_schema("ExplainedCheck", &explained);
    let (status, answer) = post_json(
        &server,
        "/v1/text",
        &key,
        &json!({"text": TEXTS[12].0, "workflow": "judged"}),
    );
    assert_eq!(status, 200);
    let (_, explained) = explain(&server, &key, answer["request_id"].as_str().expect("id"));
    assert_eq!(explained["workflow"]["version"], json!(2));
    assert_eq!(explained["categories"][0]["review"].as_f64(), Some(review));
    if explained["action"] != "accept" {
        assert_eq!(explained["decided_by"], json!(["profanity"]));
    }
}
