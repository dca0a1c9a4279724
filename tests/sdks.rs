//! The official SDKs of the hosted APIs modgate imitates, unchanged, against the real server
//! (issue 15). Each runs as its users run it, except for DNS and the trust store: the SDK's
//! own host name resolves to 127.0.0.1 in a mount namespace of the test's (`unshare`, root;
//! `/etc/hosts` bind-mounted), where modgate serves TLS on port 443 with a certificate of the
//! test's authority, which the SDK trusts through `SSL_CERT_FILE`. The SDKs are pinned in
//! `tests/sdk/requirements.txt` and installed by `make sdks` (part of `make test`).

mod common;

use common::*;
use serde_json::Value;

/// The SDKs' tests share port 443: one at a time. A test holds it until its server has
/// exited: the server listens with `SO_REUSEPORT`, so a second one would bind beside it and
/// take some of the next test's connections with another authority's certificate.
static PORT_443: std::sync::Mutex<()> = std::sync::Mutex::new(());

/// A server on port 443 and the hold on the port, released after the server has exited
/// (fields are dropped in their order).
struct On443 {
    server: Server,
    _port: std::sync::MutexGuard<'static, ()>,
}

const VENV_PYTHON: &str = concat!(env!("CARGO_MANIFEST_DIR"), "/target/sdk-venv/bin/python");

/// A test authority and a certificate it issued for `host`: (authority PEM, certificate
/// path, key path) under `dir`.
fn authority_and_certificate(
    dir: &std::path::Path,
    host: &str,
) -> (std::path::PathBuf, std::path::PathBuf, std::path::PathBuf) {
    use rcgen::{BasicConstraints, CertificateParams, CertifiedIssuer, DnType, IsCa, KeyPair};
    let mut authority = CertificateParams::new(Vec::<String>::new()).unwrap();
    authority.is_ca = IsCa::Ca(BasicConstraints::Unconstrained);
    authority
        .distinguished_name
        .push(DnType::CommonName, "modgate test authority");
    let authority = CertifiedIssuer::self_signed(authority, KeyPair::generate().unwrap()).unwrap();
    let key = KeyPair::generate().unwrap();
    let certificate = CertificateParams::new(vec![host.to_owned()])
        .unwrap()
        .signed_by(&key, &authority)
        .unwrap();
    let paths = (
        dir.join("authority.pem"),
        dir.join("cert.pem"),
        dir.join("key.pem"),
    );
    std::fs::write(&paths.0, authority.pem()).unwrap();
    std::fs::write(&paths.1, certificate.pem()).unwrap();
    std::fs::write(&paths.2, key.serialize_pem()).unwrap();
    paths
}

/// How an SDK's language runs and is told of the test's authority.
struct Runtime {
    program: &'static str,
    trust_variable: &'static str,
}

const PYTHON: Runtime = Runtime {
    program: VENV_PYTHON,
    trust_variable: "SSL_CERT_FILE",
};
/// Google's client library reaches the network through httplib2, which has a trust store of
/// its own.
const PYTHON_HTTPLIB2: Runtime = Runtime {
    program: VENV_PYTHON,
    trust_variable: "HTTPLIB2_CA_CERTS",
};
/// Sightengine's SDK uses requests, which reads its trust store from this variable.
const PYTHON_REQUESTS: Runtime = Runtime {
    program: VENV_PYTHON,
    trust_variable: "REQUESTS_CA_BUNDLE",
};
const NODE: Runtime = Runtime {
    program: "node",
    trust_variable: "NODE_EXTRA_CA_CERTS",
};

/// Runs `script` in a mount namespace where `host` is 127.0.0.1 and `authority` is trusted;
/// its standard output as JSON.
fn run_sdk(
    runtime: &Runtime,
    dir: &std::path::Path,
    host: &str,
    authority: &std::path::Path,
    env: &[(&str, &str)],
    script: &str,
    args: &[&str],
) -> Value {
    let installed = match runtime.program {
        VENV_PYTHON => std::path::Path::new(VENV_PYTHON).exists(),
        _ => std::path::Path::new(concat!(
            env!("CARGO_MANIFEST_DIR"),
            "/tests/sdk/node_modules/openai"
        ))
        .exists(),
    };
    assert!(installed, "the SDKs are not installed: run `make sdks`");
    let hosts = dir.join("hosts");
    std::fs::write(&hosts, format!("127.0.0.1 localhost\n127.0.0.1 {host}\n")).unwrap();
    let script = format!("{}/tests/sdk/{script}", env!("CARGO_MANIFEST_DIR"));
    let mut command = std::process::Command::new("unshare");
    command
        .args(["--mount", "--propagation", "private", "--", "sh", "-c"])
        .arg(r#"mount --bind "$0" /etc/hosts && exec "$@""#)
        .arg(&hosts)
        .arg(runtime.program)
        .arg(&script)
        .args(args)
        .env(runtime.trust_variable, authority);
    for name in [
        "OPENAI_BASE_URL",
        "HTTPS_PROXY",
        "https_proxy",
        "ALL_PROXY",
        "all_proxy",
    ] {
        command.env_remove(name);
    }
    for (name, value) in env {
        command.env(name, value);
    }
    let output = command.output().expect("run unshare (util-linux)");
    assert!(
        output.status.success(),
        "{script} failed (root is needed for unshare --mount):\n{}\n{}",
        String::from_utf8_lossy(&output.stdout),
        String::from_utf8_lossy(&output.stderr)
    );
    serde_json::from_slice(&output.stdout).unwrap_or_else(|error| {
        panic!(
            "{script}: {error}: {}",
            String::from_utf8_lossy(&output.stdout)
        )
    })
}

/// A modgate serving TLS on 127.0.0.1:443 as `host`, its demo key, and the test authority's
/// PEM.
fn serve_as(dir: &std::path::Path, host: &str) -> (Server, String, std::path::PathBuf) {
    let (authority, cert, key) = authority_and_certificate(dir, host);
    let server = Server::start_with(Options {
        cores: Some(1),
        tls: Some((cert, key)),
        listen: Some("127.0.0.1:443".into()),
        // `url` checks fetch from the test's image server on 127.0.0.1 (test-only setting).
        config: "[testing]\nallow_private_urls = true\n".into(),
        ..Options::default()
    });
    let api_key = server.demo_key.clone().unwrap();
    (server, api_key, authority)
}

/// What both OpenAI SDKs must have got: the answers of a string, a list and parts, and the
/// errors, as their own objects, from `https://api.openai.com/v1`; each answer journaled.
fn assert_openai_answers(out: &Value, server: &Server) {
    assert_eq!(
        out["base_url"].as_str().unwrap().trim_end_matches('/'),
        "https://api.openai.com/v1",
        "the SDK's own address"
    );
    let one = &out["one"];
    assert!(one["id"].as_str().unwrap().starts_with("modr-"));
    assert_eq!(one["model"], "omni-moderation-latest");
    let result = &one["results"][0];
    assert_eq!(result["flagged"], true, "{one}");
    assert_eq!(result["categories"]["harassment"], true, "{one}");
    assert!(result["category_scores"]["harassment"].as_f64().unwrap() > 0.9);
    // What no model here measures is not applied and has no score, never a zero.
    assert_eq!(result["category_scores"]["illicit"], Value::Null);
    assert_eq!(result["categories"]["illicit"], false);
    assert_eq!(
        result["category_applied_input_types"]["illicit"],
        serde_json::json!([])
    );
    assert_eq!(
        result["category_applied_input_types"]["harassment"],
        serde_json::json!(["text"])
    );

    let many = out["many"]["results"].as_array().unwrap();
    assert_eq!(many.len(), 2, "one result per string");
    assert_eq!(many[0]["flagged"], false);
    assert_eq!(many[1]["flagged"], true, "{many:?}");

    let parts = out["parts"]["results"].as_array().unwrap();
    assert_eq!(parts.len(), 1, "one result for the parts together");
    let applied = &parts[0]["category_applied_input_types"];
    // `sexual` is measured for both: the text's classifier and the image's nudity models.
    assert_eq!(applied["sexual"], serde_json::json!(["text", "image"]));
    assert_eq!(applied["harassment"], serde_json::json!(["text"]));
    assert!(parts[0]["category_scores"]["sexual"].as_f64().unwrap() < 0.5);

    assert_eq!(out["unknown_model"]["status"], 404);
    assert_eq!(out["unknown_model"]["code"], "model_not_found");
    assert_eq!(out["unknown_model"]["type"], "invalid_request_error");
    assert_eq!(
        out["bad_key"],
        serde_json::json!({"status": 401, "code": "invalid_api_key"})
    );

    // Every answer was journaled as a check of the `moderation` workflow.
    let journal = server.admin_ok(&["journal", "--json"]);
    let checks: Vec<Value> = journal
        .lines()
        .map(|line| serde_json::from_str(line).unwrap())
        .filter(|record: &Value| record["route"] == "/v1/moderations" && record["status"] == 200)
        .collect();
    assert_eq!(checks.len(), 3, "{journal}");
    assert!(checks
        .iter()
        .all(|record| record["workflow"] == "moderation"));
}

fn test_image() -> String {
    format!("{MODELS}/image/testimages/jpeg_baseline_chelsea_64x48.jpg")
}

/// OpenAI's SDK in `runtime`, the calls of `script` against `https://api.openai.com`; what it
/// printed, once the answers common to both SDKs are checked.
fn openai_sdk(runtime: &Runtime, script: &str) -> Value {
    let _port = PORT_443
        .lock()
        .unwrap_or_else(|poisoned| poisoned.into_inner());
    let dir = tempfile::tempdir().unwrap();
    let (server, api_key, authority) = serve_as(dir.path(), "api.openai.com");
    let out = run_sdk(
        runtime,
        dir.path(),
        "api.openai.com",
        &authority,
        &[("OPENAI_API_KEY", &api_key)],
        script,
        &[&test_image()],
    );
    assert_openai_answers(&out, &server);
    out
}

/// OpenAI's Python SDK (PyPI `openai`): `moderations.create` with a string, a list of strings
/// and text and image parts, and its errors, against `https://api.openai.com`.
#[test]
fn openai_python_sdk_moderations_work_unchanged() {
    let out = openai_sdk(&PYTHON, "openai_sdk.py");
    // The SDK's typed objects read the answer, not only its JSON.
    assert_eq!(out["one_flagged_attr"], true);
    assert_eq!(
        out["one_harassment_attr"],
        out["one"]["results"][0]["category_scores"]["harassment"]
    );
}

/// OpenAI's Node SDK (npm `openai`), the same calls.
#[test]
fn openai_node_sdk_moderations_work_unchanged() {
    let out = openai_sdk(&NODE, "openai_sdk.mjs");
    assert_eq!(out["unknown_model"]["not_found"], true, "NotFoundError");
}

const PERSPECTIVE_HOST: &str = "commentanalyzer.googleapis.com";

/// What both Perspective clients must have got for "You are a stupid worthless idiot. Have a
/// nice day!" with TOXICITY, INSULT and PROFANITY: high summary scores from the models, and an unknown
/// attribute refused with Google's 400.
fn assert_perspective_scores(analyze: &Value) {
    let scores = &analyze["attributeScores"];
    for attribute in ["TOXICITY", "INSULT", "PROFANITY"] {
        let summary = &scores[attribute]["summaryScore"];
        assert_eq!(summary["type"], "PROBABILITY", "{analyze}");
        assert!(
            summary["value"].as_f64().unwrap() > 0.7,
            "{attribute}: {analyze}"
        );
    }
    assert_eq!(analyze["languages"], serde_json::json!(["en"]));
}

/// A Perspective client in `runtime`, the calls of `script` against
/// `https://commentanalyzer.googleapis.com`: what it printed, and the server, still holding
/// the port.
fn perspective_client(runtime: &Runtime, script: &str) -> (Value, On443) {
    let port = PORT_443
        .lock()
        .unwrap_or_else(|poisoned| poisoned.into_inner());
    let dir = tempfile::tempdir().unwrap();
    let (server, api_key, authority) = serve_as(dir.path(), PERSPECTIVE_HOST);
    let out = run_sdk(
        runtime,
        dir.path(),
        PERSPECTIVE_HOST,
        &authority,
        &[("PERSPECTIVE_API_KEY", &api_key)],
        script,
        &[],
    );
    (
        out,
        On443 {
            server,
            _port: port,
        },
    )
}

/// Google's API client library for Python, built from the discovery document Perspective's
/// documentation points at, then `comments().analyze()`.
#[test]
fn google_api_python_client_analyzes_comments_unchanged() {
    let (out, on_443) = perspective_client(&PYTHON_HTTPLIB2, "perspective_sdk.py");
    let analyze = &out["analyze"];
    assert_perspective_scores(analyze);
    // THREAT was asked with a threshold of 0.99 it does not reach: left out.
    assert!(
        analyze["attributeScores"].get("THREAT").is_none(),
        "{analyze}"
    );
    // spanAnnotations: one span per sentence, tiling the text; the insult is in the first.
    let spans = analyze["attributeScores"]["INSULT"]["spanScores"]
        .as_array()
        .unwrap();
    assert_eq!(spans.len(), 2, "{analyze}");
    assert_eq!(
        (spans[0]["begin"].as_u64(), spans[1]["end"].as_u64()),
        (Some(0), Some(50))
    );
    assert!(
        spans[0]["score"]["value"].as_f64().unwrap() > spans[1]["score"]["value"].as_f64().unwrap()
    );
    assert_eq!(out["unknown_attribute"]["status"], 400);
    assert!(out["unknown_attribute"]["reason"]
        .as_str()
        .unwrap()
        .contains("Unknown attribute: FLIRTATION"));
    // A comment found in German: refused with the detail Perspective's clients branch on.
    let other = &out["other_language"];
    assert_eq!(other["status"], 400, "{other}");
    let detail = &other["details"][0];
    assert_eq!(
        detail["errorType"], "LANGUAGE_NOT_SUPPORTED_BY_ATTRIBUTE",
        "{other}"
    );
    assert_eq!(
        detail["languageNotSupportedByAttributeError"]["detectedLanguages"],
        serde_json::json!(["de"]),
        "{other}"
    );
    let journal = on_443.server.admin_ok(&["journal", "--json"]);
    assert!(journal.lines().any(|line| {
        let record: Value = serde_json::from_str(line).unwrap();
        record["route"] == "/v1alpha1/comments:analyze"
            && record["status"] == 200
            && record["workflow"] == "perspective"
    }));
}

/// npm `perspective-api-client`, which posts to Perspective's address with `?key=`.
#[test]
fn perspective_api_client_analyzes_comments_unchanged() {
    let (out, _on_443) = perspective_client(&NODE, "perspective_sdk.cjs");
    assert_perspective_scores(&out["analyze"]);
    let spans = out["analyze"]["attributeScores"]["TOXICITY"]["spanScores"]
        .as_array()
        .unwrap();
    assert_eq!(
        spans.len(),
        1,
        "one span for the whole text without spanAnnotations"
    );
    assert_eq!(out["unknown_attribute"]["status"], 400);
    assert!(out["unknown_attribute"]["message"]
        .as_str()
        .unwrap()
        .contains("Unknown attribute: FLIRTATION"));
}

/// What both Sightengine SDKs must have got: `nudity` for a file and a URL, `nudity-2.1` for
/// bytes, `properties` and `type` for a URL, and a refusal of a model this server does not
/// answer; each answer journaled.
fn assert_sightengine_answers(out: &Value, url: &str, server: &Server) {
    for case in ["file", "url"] {
        let answer = &out[case];
        assert_eq!(answer["status"], "success", "{answer}");
        let nudity = &answer["nudity"];
        let (raw, safe, partial) = (
            nudity["raw"].as_f64().unwrap(),
            nudity["safe"].as_f64().unwrap(),
            nudity["partial"].as_f64().unwrap(),
        );
        assert!(raw < 0.5 && safe > 0.5, "a cat: {answer}");
        assert!((safe - (1.0 - raw.max(partial))).abs() < 1e-9);
        assert_eq!(answer["request"]["operations"], 1);
        assert!(answer["media"]["id"].as_str().unwrap().starts_with("med_"));
    }
    assert_eq!(out["url"]["media"]["uri"], url);
    let v2 = &out["bytes"]["nudity"];
    assert!(v2["none"].as_f64().unwrap() > 0.5, "{v2}");
    // Every class of the documented nudity-2.1 answer (round 3 of the hardening, item 9):
    // absent ones were a KeyError in a client that reads them.
    assert_every_nudity_2_1_class(v2);
    if let Some(read) = out.get("nudity_2_1_read") {
        let mut read: Vec<&str> = read
            .as_object()
            .unwrap()
            .keys()
            .map(String::as_str)
            .collect();
        let mut documented = SIGHTENGINE_NUDITY_2_1.to_vec();
        read.sort_unstable();
        documented.sort_unstable();
        assert_eq!(read, documented, "the SDK's client read every class");
    }
    let refused = &out["unsupported"];
    assert_eq!(refused["status"], "failure", "{refused}");
    assert!(refused["error"]["message"]
        .as_str()
        .unwrap()
        .contains("model `gore-2.0` is not available"));
    let properties = &out["properties"];
    assert_eq!(properties["status"], "success", "{properties}");
    assert_eq!(properties["request"]["operations"], 2);
    assert!(
        properties["sharpness"].as_f64().unwrap() > 0.85,
        "{properties}"
    );
    assert_eq!(properties["colors"]["dominant"]["hex"], "#926c50");
    assert!(properties["type"]["illustration"].as_f64().is_some());
    assert!(properties.get("nudity").is_none());
    let journal = server.admin_ok(&["journal", "--json"]);
    let answered = journal
        .lines()
        .map(|line| serde_json::from_str::<Value>(line).unwrap())
        .filter(|record| record["route"] == "/1.0/check.json" && record["status"] == 200)
        .count();
    assert_eq!(answered, 4, "{journal}");
}

/// Sightengine's SDK in `runtime`: `check(nudity)` with a file, `check(nudity-2.1)` with
/// bytes, a URL, and a model this server does not answer.
fn sightengine_sdk(runtime: &Runtime, script: &str) {
    let _port = PORT_443
        .lock()
        .unwrap_or_else(|poisoned| poisoned.into_inner());
    let dir = tempfile::tempdir().unwrap();
    let (server, api_key, authority) = serve_as(dir.path(), "api.sightengine.com");
    let images = ImageServer::start();
    let url = images.url("/img/jpeg_baseline_chelsea_64x48.jpg");
    let out = run_sdk(
        runtime,
        dir.path(),
        "api.sightengine.com",
        &authority,
        &[("SIGHTENGINE_SECRET", &api_key)],
        script,
        &[&test_image(), &url],
    );
    assert_sightengine_answers(&out, &url, &server);
}

/// Sightengine's Python SDK (PyPI `sightengine`).
#[test]
fn sightengine_python_sdk_checks_images_unchanged() {
    sightengine_sdk(&PYTHON_REQUESTS, "sightengine_sdk.py");
}

/// Sightengine's Node SDK (npm `sightengine`), which streams the file chunked.
#[test]
fn sightengine_node_sdk_checks_images_unchanged() {
    sightengine_sdk(&NODE, "sightengine_sdk.cjs");
}
