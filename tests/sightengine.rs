//! Sightengine's `/1.0/check.json` over plain HTTP (issue 15): answers and errors validated
//! against the OpenAPI document. Sightengine's own SDK runs against it in `tests/sdks.rs`.

mod common;

use common::*;
use serde_json::Value;

fn image_form(fields: &[(&str, &str)], image: &[u8]) -> (String, Vec<u8>) {
    let boundary = "seBoundary42";
    let mut body = Vec::new();
    for (name, value) in fields {
        body.extend_from_slice(
            format!("--{boundary}\r\nContent-Disposition: form-data; name=\"{name}\"\r\n\r\n{value}\r\n")
                .as_bytes(),
        );
    }
    body.extend_from_slice(
        format!("--{boundary}\r\nContent-Disposition: form-data; name=\"media\"; filename=\"cat.jpg\"\r\nContent-Type: image/jpeg\r\n\r\n")
            .as_bytes(),
    );
    body.extend_from_slice(image);
    body.extend_from_slice(format!("\r\n--{boundary}--\r\n").as_bytes());
    (format!("multipart/form-data; boundary={boundary}"), body)
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
    let send = |models: &str| -> (u16, Value) {
        let (content_type, body) = image_form(&[("models", models), ("api_secret", &key)], &image);
        let (status, _, answer) = post(
            &server.url("/1.0/check.json"),
            &[("Content-Type", &content_type)],
            &body,
        );
        (status, answer)
    };
    let (status, answer) = send("nudity");
    assert_eq!(status, 200, "{answer}");
    assert_schema("SightengineAnswer", &answer);
    assert_eq!(answer["media"]["uri"], "cat.jpg");
    let (status, answer) = send("nudity-2.1");
    assert_eq!(status, 200, "{answer}");
    assert_schema("SightengineAnswer", &answer);
    assert!(answer["nudity"]["none"].as_f64().unwrap() > 0.5);
    for models in ["properties", "nudity,faces", "nudity,nudity-2.0"] {
        let (status, answer) = send(models);
        assert_error(status, &answer, 400, "bad_request", true);
        assert_schema("CompatErrorEnvelope", &answer);
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
    assert_error(status, &answer, 400, "url_refused", true);
}
