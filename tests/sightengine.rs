//! Sightengine's `/1.0/check.json` and `/1.0/text/check.json` over plain HTTP (issue 15):
//! answers and errors validated against the OpenAPI document. Sightengine's own SDK runs
//! against the image route in `tests/sdks.rs` (its SDKs have no text call).

mod common;

use common::*;
use serde_json::Value;

/// A Sightengine form with the image as `media` (named `cat.jpg`, whatever it holds).
fn image_form(fields: &[(&str, &str)], image: &[u8]) -> (String, Vec<u8>) {
    form_with_media(fields, Some(("cat.jpg", "image/jpeg", image)))
}

#[test]
fn check_json_answers_nudity_and_refuses_what_it_cannot_score() {
    let server = Server::start_with(Options {
        config: "[testing]\nallow_private_urls = true\n".into(),
        ..Options::default()
    });
    let images = ImageServer::start();
    let key = server.demo_key.clone().unwrap();
    let image = testimage("jpeg_baseline_chelsea_451x300.jpg");
    let send_image = |models: &str, image: &[u8]| -> (u16, Value) {
        let (content_type, body) = image_form(&[("models", models), ("api_secret", &key)], image);
        let (status, _, answer) = post(
            &server.url("/1.0/check.json"),
            &[("Content-Type", &content_type)],
            &body,
        );
        (status, answer)
    };
    let send = |models: &str| send_image(models, &image);
    let (status, answer) = send("nudity");
    assert_eq!(status, 200, "{answer}");
    assert_schema("SightengineAnswer", &answer);
    assert_eq!(answer["media"]["uri"], "cat.jpg");
    let (status, answer) = send("nudity-2.1");
    assert_eq!(status, 200, "{answer}");
    assert_schema("SightengineAnswer", &answer);
    assert!(answer["nudity"]["none"].as_f64().unwrap() > 0.5);
    // Round 3 of the hardening, item 9: every class of Sightengine's documented nudity-2.1
    // answer, with a number (a client reading `sexual_activity` got a KeyError).
    assert_every_nudity_2_1_class(&answer["nudity"]);
    let nudity = &answer["nudity"];
    assert_eq!(nudity["sexual_activity"], nudity["sexual_display"]);
    assert_eq!(nudity["very_suggestive"], nudity["suggestive"]);
    assert_eq!(nudity["context"]["sea_lake_pool"].as_f64(), Some(1.0 / 3.0));
    let (status, answer) = send("nudity-2.0");
    assert_eq!(status, 200, "{answer}");
    assert_schema("SightengineAnswer", &answer);
    assert_every_nudity_2_1_class(&answer["nudity"]);
    assert!(answer["nudity"]["sextoy"].as_f64().is_some(), "{answer}");
    // Properties and type, with or without nudity; `operations` counts the models.
    let (status, answer) = send("nudity,type,properties");
    assert_eq!(status, 200, "{answer}");
    assert_schema("SightengineAnswer", &answer);
    assert_eq!(answer["request"]["operations"], 3);
    // nsfwjs's drawing classes, as its reference pipeline scores this cat photo (0.77:
    // `models/image/reference_scores.json`; the README says how weak a signal that is).
    let illustration = answer["type"]["illustration"].as_f64().unwrap();
    assert!((illustration - 0.77).abs() < 0.05, "{answer}");
    assert!((answer["type"]["photo"].as_f64().unwrap() + illustration - 1.0).abs() < 1e-9);
    assert!(answer["sharpness"].as_f64().unwrap() > 0.85, "{answer}");
    assert_eq!(answer["colors"]["dominant"]["hex"], "#926c50");
    let (status, answer) = send("properties");
    assert_eq!(status, 200, "{answer}");
    assert_schema("SightengineAnswer", &answer);
    assert!(answer.get("nudity").is_none() && answer.get("type").is_none());
    assert_eq!(answer["request"]["operations"], 1);
    // What QR codes carry, as the text route lists it (no positions).
    let (status, answer) = send_image(
        "qr-content",
        &qr_webp("Fuck this, visit www.example.org or mail jane@example.com"),
    );
    assert_eq!(status, 200, "{answer}");
    assert_schema("SightengineAnswer", &answer);
    assert_eq!(
        answer["qr"],
        serde_json::json!({
            "link": [{"type": "url", "match": "www.example.org"}],
            "personal": [{"type": "email", "match": "jane@example.com"}],
            "profanity": [{"type": "inappropriate", "intensity": "high", "match": "Fuck"}],
        })
    );
    // What is written in the picture, listed as the text route lists it (no positions).
    let (status, answer) = send_image(
        "text-content,qr-content",
        &text_webp(&[
            "Fuck this, visit www.example.org",
            "or mail jane@example.com",
        ]),
    );
    assert_eq!(status, 200, "{answer}");
    assert_schema("SightengineAnswer", &answer);
    assert_eq!(answer["request"]["operations"], 2);
    assert_eq!(
        answer["text"],
        serde_json::json!({
            "link": [{"type": "url", "match": "www.example.org"}],
            "personal": [{"type": "email", "match": "jane@example.com"}],
            "profanity": [{"type": "inappropriate", "intensity": "high", "match": "Fuck"}],
        })
    );
    let nothing = serde_json::json!({"link": [], "personal": [], "profanity": []});
    assert_eq!(answer["qr"], nothing, "no QR code: {answer}");
    let (status, answer) = send("text-content");
    assert_eq!(status, 200, "{answer}");
    assert_eq!(answer["text"], nothing, "a cat: {answer}");
    // Faces: Sightengine's boxes and features, in fractions; none on the cat.
    let (status, answer) = send_image("nudity,faces", &testimage("jpeg_gray_camera_512x512.jpg"));
    assert_eq!(status, 200, "{answer}");
    assert_schema("SightengineAnswer", &answer);
    assert_eq!(answer["request"]["operations"], 2);
    let faces = answer["faces"].as_array().unwrap();
    assert_eq!(faces.len(), 1, "{answer}");
    // The reference box of the camera man's face, (198.1, 117.2) to (253.4, 192.5) of 512 px,
    // found by the package in the full image; the worker decodes this JPEG at half size (256
    // px a side is what the models need), so the box is a few pixels off.
    let x1 = faces[0]["x1"].as_f64().unwrap() * 512.0;
    assert!((x1 - 198.1).abs() < 8.0, "{answer}");
    assert!(faces[0]["features"]["nose_tip"]["x"].as_f64().unwrap() > 0.38);
    let (status, answer) = send("faces");
    assert_eq!(status, 200, "{answer}");
    assert_eq!(answer["faces"], serde_json::json!([]));
    for models in ["gore-2.0", "nudity,minors", "nudity,nudity-2.0"] {
        let (status, answer) = send(models);
        assert_sightengine_error(status, &answer, 400, "argument_error");
    }
    let url = images.url("/img/jpeg_baseline_chelsea_451x300.jpg");
    let (status, _, answer) = get(
        &server.url(&format!(
            "/1.0/check.json?models=nudity&api_user=u&api_secret={key}&url={}",
            modgate_load::prepare::percent(&url)
        )),
        &[],
    );
    assert_eq!(status, 200, "{answer}");
    assert_schema("SightengineAnswer", &answer);
    assert_eq!(answer["media"]["uri"], url);
    let (status, _, answer) = get(
        &server.url(&format!("/1.0/check.json?api_secret={key}&url=x")),
        &[],
    );
    assert_sightengine_error(status, &answer, 400, "media_error");
}

/// A plan with `quota_counts = "operations"` charges a `check.json` request one unit per
/// model, as Sightengine counts operations: the units are reserved before any model runs, a
/// request whose operations are not all left is refused whole, the journal records the units,
/// and after a `kill -9` the quota restarts from what the journal answered, units and all.
#[test]
fn a_plan_counting_operations_charges_each_model_of_a_check() {
    let data = tempfile::tempdir().unwrap();
    let start = || {
        Server::start_with(Options {
            // One shard: `X-Quota-Used` counts other shards' checks as of their last report.
            cores: Some(1),
            data: Some(data.path().to_owned()),
            config: "[plans.ops]\ntext_chars_max = 5000\nimage_pixels_max = 12000000\n\
                     rate_per_s = 100\nrate_burst = 100\nconcurrent_max = 8\n\
                     quota_per_month = 8\nkeys_max = 3\npaid = false\n\
                     quota_counts = \"operations\"\n"
                .into(),
            ..Options::default()
        })
    };
    let mut server = start();
    let (key, _) = server.new_key("opsco", "ops", &[]);
    let image = testimage("jpeg_baseline_chelsea_451x300.jpg");
    let retry_after = std::cell::Cell::new(None);
    let send = |server: &Server, models: &str| -> (u16, Option<String>, Value) {
        let (content_type, body) = image_form(&[("models", models), ("api_secret", &key)], &image);
        let (status, headers, answer) = post(
            &server.url("/1.0/check.json"),
            &[("Content-Type", &content_type)],
            &body,
        );
        let used = headers.get("x-quota-used").map(str::to_owned);
        retry_after.set(
            headers
                .get("retry-after")
                .and_then(|s| s.parse::<u64>().ok()),
        );
        (status, used, answer)
    };
    let (status, used, answer) = send(&server, "nudity,type,properties");
    assert_eq!(status, 200, "{answer}");
    assert_eq!(answer["request"]["operations"], 3);
    assert_eq!(used.as_deref(), Some("3"));
    let (status, used, answer) = send(&server, "nudity,type,properties");
    assert_eq!((status, used.as_deref()), (200, Some("6")), "{answer}");
    // Three more are not left: refused whole, in Sightengine's envelope, and nothing spent.
    let (status, used, answer) = send(&server, "nudity,type,properties");
    assert_sightengine_error(status, &answer, 429, "usage_limit");
    assert!(
        answer["error"]["message"]
            .as_str()
            .unwrap()
            .contains("8 operations"),
        "{answer}"
    );
    assert_eq!(used.as_deref(), Some("6"));
    // The two units left can never make three this month: not "retry shortly" for the two
    // the request itself reserved before it was refused.
    let retry_after = retry_after.get().unwrap();
    assert!(
        retry_after > u64::from(modgate::limits::QUOTA_HELD_RETRY_AFTER_S)
            || modgate::clock::ms_until_next_month(now_unix_ms()) < 10_000,
        "Retry-After {retry_after}: {answer}"
    );
    // The journal says what each check cost.
    let journal = server.admin_ok(&["journal", "--json"]);
    let units: Vec<u64> = journal
        .lines()
        .map(|line| {
            serde_json::from_str::<Value>(line).unwrap()["units"]
                .as_u64()
                .unwrap()
        })
        .collect();
    assert_eq!(units, [3, 3, 3], "{journal}");
    // Killed and started again: the count is what the journal answered (6), not what the
    // shards had leased, and the last two units are there to spend.
    server.kill();
    server = start();
    let (status, used, answer) = send(&server, "nudity,properties");
    assert_eq!((status, used.as_deref()), (200, Some("8")), "{answer}");
    let (status, used, answer) = send(&server, "properties");
    assert_sightengine_error(status, &answer, 429, "usage_limit");
    assert_eq!(used.as_deref(), Some("8"));
}

/// A URL-encoded form body, as `requests.post(url, data=...)` sends it.
fn urlencoded(fields: &[(&str, &str)]) -> Vec<u8> {
    fields
        .iter()
        .map(|(name, value)| format!("{name}={}", modgate_load::prepare::percent(value)))
        .collect::<Vec<_>>()
        .join("&")
        .into_bytes()
}

#[test]
fn text_check_json_lists_rule_matches_and_ml_scores() {
    let server = Server::start();
    let key = server.demo_key.clone().unwrap();
    let url = server.url("/1.0/text/check.json");
    let send_form = |fields: &[(&str, &str)]| -> (u16, Value) {
        let (content_type, body) = form(fields);
        let (status, _, answer) = post(&url, &[("Content-Type", &content_type)], &body);
        (status, answer)
    };
    let text = "Hé, you f.u.c.k.e.r! Mail jane@example.com, call +44 20 7946 0958 or \
                (555) 123-4567, and see https://cheap.example.org/x.";
    // URL-encoded, as Sightengine's documentation posts it.
    let (status, _, answer) = post(
        &url,
        &[("Content-Type", "application/x-www-form-urlencoded")],
        &urlencoded(&[
            ("text", text),
            ("lang", "en"),
            ("mode", "rules"),
            ("opt_countries", "us,gb,fr"),
            ("api_user", "u"),
            ("api_secret", &key),
        ]),
    );
    assert_eq!(status, 200, "{answer}");
    assert_schema("SightengineTextRulesAnswer", &answer);
    let matches = |category: &str| -> Vec<(String, String, u64, u64)> {
        answer[category]["matches"]
            .as_array()
            .unwrap()
            .iter()
            .map(|m| {
                (
                    m["type"].as_str().unwrap().to_owned(),
                    m["match"].as_str().unwrap().to_owned(),
                    m["start"].as_u64().unwrap(),
                    m["end"].as_u64().unwrap(),
                )
            })
            .collect()
    };
    let at = |needle: &str| text[..text.find(needle).unwrap()].chars().count() as u64;
    let span = |kind: &str, needle: &str| {
        let start = at(needle);
        let end = start + needle.chars().count() as u64 - 1;
        (kind.to_owned(), needle.to_owned(), start, end)
    };
    assert_eq!(matches("profanity"), [span("insult", "f.u.c.k.e.r")]);
    assert_eq!(answer["profanity"]["matches"][0]["intensity"], "high");
    assert_eq!(
        matches("personal"),
        [
            span("email", "jane@example.com"),
            span("phone_number_gb", "+44 20 7946 0958"),
            span("phone_number_us", "(555) 123-4567"),
        ]
    );
    assert_eq!(
        matches("link"),
        [span("url", "https://cheap.example.org/x")]
    );

    // Multipart, one category, a country list without North America.
    let (status, answer) = send_form(&[
        ("text", text),
        ("mode", "standard"),
        ("categories", "personal"),
        ("opt_countries", "fr"),
        ("api_secret", &key),
    ]);
    assert_eq!(status, 200, "{answer}");
    assert_schema("SightengineTextRulesAnswer", &answer);
    assert!(answer.get("profanity").is_none() && answer.get("link").is_none());
    let types: Vec<&str> = answer["personal"]["matches"]
        .as_array()
        .unwrap()
        .iter()
        .map(|m| m["type"].as_str().unwrap())
        .collect();
    assert_eq!(types, ["email", "phone_number_gb"]);

    // A clean text: every category present, no match.
    let (status, answer) = send_form(&[
        ("text", "Thanks, see you at 3pm in room 204."),
        ("mode", "rules"),
        ("api_secret", &key),
    ]);
    assert_eq!(status, 200, "{answer}");
    for category in ["profanity", "personal", "link"] {
        assert_eq!(
            answer[category]["matches"],
            serde_json::json!([]),
            "{answer}"
        );
    }

    // mode=ml: the harm classifier's classes under Sightengine's names.
    let (status, answer) = send_form(&[
        (
            "text",
            "You are a stupid worthless idiot and I will hurt you",
        ),
        ("mode", "ml"),
        ("models", "general"),
        ("api_secret", &key),
    ]);
    assert_eq!(status, 200, "{answer}");
    assert_schema("SightengineTextMlAnswer", &answer);
    let classes = &answer["moderation_classes"];
    assert_eq!(
        classes["available"],
        serde_json::json!(["sexual", "discriminatory", "insulting", "violent", "toxic"])
    );
    assert!(classes["insulting"].as_f64().unwrap() > 0.5, "{answer}");
    assert!(classes["toxic"].as_f64().unwrap() > 0.5, "{answer}");
    assert!(classes["sexual"].as_f64().is_some() && classes.get("self-harm").is_none());
    let (status, answer) = send_form(&[
        ("text", "Have a lovely day"),
        ("mode", "ml"),
        ("api_secret", &key),
    ]);
    assert_eq!(status, 200, "{answer}");
    assert!(
        answer["moderation_classes"]["toxic"].as_f64().unwrap() < 0.2,
        "{answer}"
    );

    // Refusals, in the compatible envelope.
    for (fields, says) in [
        (
            vec![("text", "x"), ("mode", "username")],
            "`rules` and `ml`",
        ),
        (vec![("text", "x")], "`mode` is required"),
        (
            vec![("text", "x"), ("mode", "rules"), ("categories", "drug")],
            "category `drug`",
        ),
        (
            vec![("text", "x"), ("mode", "ml"), ("models", "self-harm")],
            "model `self-harm`",
        ),
        (
            vec![("text", "x"), ("mode", "rules"), ("lang", "fr")],
            "language `fr`",
        ),
        (vec![("mode", "rules")], "no `text` field"),
    ] {
        let mut fields = fields;
        fields.push(("api_secret", &key));
        let (status, answer) = send_form(&fields);
        assert_sightengine_error(status, &answer, 400, "argument_error");
        assert!(
            answer["error"]["message"].as_str().unwrap().contains(says),
            "{answer}"
        );
    }
    let (status, answer) = send_form(&[
        ("text", "x"),
        ("mode", "rules"),
        ("api_secret", "mg_live_nope"),
    ]);
    assert_sightengine_error(status, &answer, 401, "credentials_error");
    let (status, _, answer) = post(
        &url,
        &[("Content-Type", "text/plain")],
        b"text=x&mode=rules",
    );
    assert_sightengine_error(status, &answer, 400, "argument_error");

    let journal = server.admin_ok(&["journal", "--json"]);
    let records: Vec<Value> = journal
        .lines()
        .map(|line| serde_json::from_str::<Value>(line).unwrap())
        .filter(|record| record["route"] == "/1.0/text/check.json" && record["status"] == 200)
        .collect();
    let workflows: Vec<&str> = records
        .iter()
        .map(|record| record["workflow"].as_str().unwrap())
        .collect();
    assert_eq!(
        workflows,
        [
            "text-rules",
            "text-rules",
            "text-rules",
            "text-ml",
            "text-ml"
        ],
        "{journal}"
    );
}
