//! `POST /v1/moderations` over plain HTTP (issue 15): answers and errors validated against the
//! OpenAPI document, the limits of a request, images by URL, the journal and the metrics. The
//! official SDK runs against it in `tests/sdks.rs`.

mod common;

use common::*;
use serde_json::{json, Value};

fn moderate(server: &Server, key: &str, body: &Value) -> (u16, Value) {
    let (status, _, answer) = post(
        &server.url("/v1/moderations"),
        &[
            ("Authorization", &format!("Bearer {key}")),
            ("Content-Type", "application/json"),
        ],
        body.to_string().as_bytes(),
    );
    (status, answer)
}

fn assert_openai_error(status: u16, answer: &Value, expected_status: u16, code: &str) {
    assert_eq!(status, expected_status, "{answer}");
    assert_schema("OpenAIError", answer);
    assert_eq!(answer["error"]["code"], code, "{answer}");
}

#[test]
fn moderations_answer_in_openais_shape_within_the_plans_limits() {
    let server = Server::start_with(Options {
        config: "[testing]\nallow_private_urls = true\n".into(),
        ..Options::default()
    });
    let images = ImageServer::start();
    let (key, _) = server.new_key("acme", "pro", &[]);

    let (status, answer) = moderate(
        &server,
        &key,
        &json!({"input": "you are a worthless idiot"}),
    );
    assert_eq!(status, 200, "{answer}");
    assert_schema("ModerationAnswer", &answer);
    assert_eq!(answer["model"], "omni-moderation-latest");
    assert_eq!(answer["results"][0]["flagged"], true);

    // An image by address, beside a text: one result, the image's categories applied to it
    // (and `sexual`, measured for both: the text's classifier and the image's nudity).
    let url = images.url("/img/jpeg_baseline_chelsea_451x300.jpg");
    let (status, answer) = moderate(
        &server,
        &key,
        &json!({"input": [{"type": "text", "text": "my cat"}, {"type": "image_url", "image_url": {"url": url}}]}),
    );
    assert_eq!(status, 200, "{answer}");
    assert_schema("ModerationAnswer", &answer);
    let result = &answer["results"][0];
    assert_eq!(
        result["category_applied_input_types"]["sexual"],
        json!(["text", "image"])
    );
    assert_eq!(
        result["category_applied_input_types"]["hate"],
        json!(["text"])
    );
    assert_eq!(result["flagged"], false);

    // A workflow named as the model: `advanced` scores the same categories with its own
    // thresholds.
    let (status, answer) = moderate(
        &server,
        &key,
        &json!({"input": ["a", "b"], "model": "advanced"}),
    );
    assert_eq!(status, 200, "{answer}");
    assert_eq!(answer["results"].as_array().unwrap().len(), 2);
    assert_eq!(answer["model"], "advanced");

    // Refusals, in OpenAI's shape.
    let (status, answer) = moderate(&server, &key, &json!({"input": vec!["x"; 33]}));
    assert_openai_error(status, &answer, 400, "bad_request");
    let two_images = json!({"input": [
        {"type": "image_url", "image_url": {"url": url}},
        {"type": "image_url", "image_url": {"url": url}},
    ]});
    let (status, answer) = moderate(&server, &key, &two_images);
    assert_openai_error(status, &answer, 400, "bad_request");
    let (status, answer) = moderate(&server, &key, &json!({"input": "x", "model": "gpt-9"}));
    assert_openai_error(status, &answer, 404, "model_not_found");
    let (status, answer) = moderate(&server, "mg_live_nope", &json!({"input": "x"}));
    assert_openai_error(status, &answer, 401, "invalid_api_key");
    let (free, _) = server.new_key("thrifty", "free", &[]);
    let (status, answer) = moderate(&server, &free, &json!({"input": vec!["é".repeat(1000); 6]}));
    assert_openai_error(status, &answer, 413, "text_too_long");
    let (text_only, _) = server.new_key("acme", "pro", &["--scopes", "text"]);
    let one_image = json!({"input": [{"type": "image_url", "image_url": {"url": url}}]});
    let (status, answer) = moderate(&server, &text_only, &one_image);
    assert_openai_error(status, &answer, 403, "forbidden");
    let (status, _, answer) = post(
        &server.url("/v1/moderations"),
        &[("Authorization", &format!("Bearer {key}"))],
        b"input=x",
    );
    assert_openai_error(status, &answer, 415, "unsupported_media");

    // A body of many values is refused before it is parsed (it would cost fifty times its
    // size in the parser).
    let (status, answer) = moderate(&server, &key, &json!({"input": vec![""; 200_000]}));
    assert_openai_error(status, &answer, 400, "bad_request");
    assert!(answer["error"]["message"]
        .as_str()
        .unwrap()
        .contains("values"));
    // A workflow with no checks for texts refuses texts, as the native route does, rather than
    // answering an unchecked accept.
    server.import_workflows(
        "[workflows.pictures]\ndescription = \"Images only.\"\nimage_checks = [\"open_nsfw\"]\n[workflows.pictures.categories]\nnudity = { review = 0.5, reject = 0.9 }\n",
    );
    let (status, answer) = moderate(&server, &key, &json!({"input": "x", "model": "pictures"}));
    assert_openai_error(status, &answer, 400, "bad_request");

    // Journaled and counted like every check.
    let journal = server.admin_ok(&["journal", "--json"]);
    let records: Vec<Value> = journal
        .lines()
        .map(|line| serde_json::from_str::<Value>(line).unwrap())
        .filter(|record| record["route"] == "/v1/moderations")
        .collect();
    assert_eq!(records.iter().filter(|r| r["status"] == 200).count(), 3);
    assert!(records.iter().any(|r| r["status"] == 404));
    assert!(records
        .iter()
        .all(|r| r["workflow"] != "pictures" || r["status"] == 400));
    let exposition = server.scrape();
    let answered = exposition
        .value(
            "modgate_requests_total",
            &[("route", "/v1/moderations"), ("status", "200")],
        )
        .unwrap_or(0.0);
    assert_eq!(answered, 3.0);
}
