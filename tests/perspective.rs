//! `POST /v1alpha1/comments:analyze` and the discovery document over plain HTTP (issue 15):
//! answers and errors validated against the OpenAPI document, the key in the query, the
//! plan's limits, and the journal. Google's own clients run against it in `tests/sdks.rs`.

mod common;

use common::*;
use serde_json::{json, Value};

fn analyze(server: &Server, query: &str, body: &Value) -> (u16, Value) {
    let (status, _, answer) = post(
        &server.url(&format!("/v1alpha1/comments:analyze{query}")),
        &[("Content-Type", "application/json")],
        body.to_string().as_bytes(),
    );
    (status, answer)
}

/// The server's journal, and its records of `comments:analyze`.
fn analyze_records(server: &Server) -> (String, Vec<Value>) {
    let journal = server.admin_ok(&["journal", "--json"]);
    let records = journal
        .lines()
        .map(|line| serde_json::from_str::<Value>(line).unwrap())
        .filter(|record| record["route"] == "/v1alpha1/comments:analyze")
        .collect();
    (journal, records)
}

fn assert_google_error(status: u16, answer: &Value, expected: u16, google_status: &str) {
    assert_eq!(status, expected, "{answer}");
    assert_schema("GoogleError", answer);
    assert_eq!(answer["error"]["status"], google_status, "{answer}");
    assert_eq!(answer["error"]["code"], expected);
}

#[test]
fn comments_are_analyzed_in_perspectives_shape() {
    let server = Server::start();
    let key = server.demo_key.clone().unwrap();
    let query = format!("?key={key}");
    let body = json!({
        "comment": {"text": "You are a stupid worthless idiot. Have a nice day!"},
        "requestedAttributes": {"TOXICITY": {}, "SEVERE_TOXICITY": {}, "IDENTITY_ATTACK": {},
                                "INSULT": {}, "PROFANITY": {}, "THREAT": {}},
        "clientToken": "c-1",
    });
    let (status, answer) = analyze(&server, &query, &body);
    assert_eq!(status, 200, "{answer}");
    assert_schema("AnalyzeCommentResponse", &answer);
    assert_eq!(answer["attributeScores"].as_object().unwrap().len(), 6);
    assert_eq!(answer["clientToken"], "c-1");
    assert!(
        answer["attributeScores"]["INSULT"]["summaryScore"]["value"]
            .as_f64()
            .unwrap()
            > 0.7
    );

    // Google's header for the key does as well as the query.
    let (status, _, answer) = post(
        &server.url("/v1alpha1/comments:analyze"),
        &[
            ("Content-Type", "application/json"),
            ("X-Goog-Api-Key", &key),
        ],
        body.to_string().as_bytes(),
    );
    assert_eq!(status, 200, "{answer}");
    assert_schema("AnalyzeCommentResponse", &answer);

    // Google's answers: no key is 403, a key that is not valid 400.
    let (status, answer) = analyze(&server, "", &body);
    assert_google_error(status, &answer, 403, "PERMISSION_DENIED");
    let (status, answer) = analyze(&server, "?key=mg_live_nope", &body);
    assert_google_error(status, &answer, 400, "INVALID_ARGUMENT");
    let (status, answer) = analyze(
        &server,
        &query,
        &json!({"comment": {"text": "x"}, "requestedAttributes": {"SEXUALLY_EXPLICIT": {}}}),
    );
    assert_google_error(status, &answer, 400, "INVALID_ARGUMENT");
    let (status, answer) = analyze(
        &server,
        &query,
        &json!({"comment": {"text": "x"}, "requestedAttributes": {"TOXICITY": {}}, "languages": ["nl"]}),
    );
    assert_google_error(status, &answer, 400, "INVALID_ARGUMENT");
    // The free plan's 5,000 characters.
    let long =
        json!({"comment": {"text": "a ".repeat(3000)}, "requestedAttributes": {"TOXICITY": {}}});
    let (status, answer) = analyze(&server, &query, &long);
    assert_google_error(status, &answer, 400, "INVALID_ARGUMENT");

    // The discovery document names this server.
    let (status, _, document) = get(&server.url("/$discovery/rest?version=v1alpha1"), &[]);
    assert_eq!(status, 200);
    assert_eq!(document["rootUrl"], format!("http://{}/", server.addr));
    assert_eq!(
        document["resources"]["comments"]["methods"]["analyze"]["path"],
        "v1alpha1/comments:analyze"
    );
    let (status, _, answer) = get(&server.url("/$discovery/rest?version=v1"), &[]);
    assert_google_error(status, &answer, 404, "NOT_FOUND");

    let (journal, records) = analyze_records(&server);
    assert_eq!(records.iter().filter(|r| r["status"] == 200).count(), 2);
    assert_eq!(records.len(), 7, "{journal}");
}

/// An attribute is scored in the languages the checks behind it read: TOXICITY, IDENTITY_ATTACK,
/// INSULT and THREAT in the harm classifier's eight, PROFANITY and SEVERE_TOXICITY in English.
/// Without `languages`, the text's language is detected, as Perspective detects it: a comment
/// surely in a language is scored in it, or refused before any model runs if an attribute
/// cannot be read in it, with the detail Google's clients branch on; a short one is scored as
/// English, where the detector is often wrong.
#[test]
fn a_comment_is_scored_in_its_language_or_refused_as_perspective_refuses_it() {
    // One shard: `X-Quota-Used` then counts every check at once.
    let server = Server::start_with(Options {
        cores: Some(1),
        ..Options::default()
    });
    let query = format!("?key={}", server.demo_key.clone().unwrap());
    let comment = |text: &str, attribute: &str| json!({"comment": {"text": text}, "requestedAttributes": {attribute: {}}});
    let insult = |answer: &Value| {
        answer["attributeScores"]["INSULT"]["summaryScore"]["value"]
            .as_f64()
            .unwrap()
    };

    // German, found so: INSULT is read in it.
    let german = "Ich habe heute keine Zeit, weil ich den ganzen Tag arbeiten muss.";
    let (status, benign) = analyze(&server, &query, &comment(german, "INSULT"));
    assert_eq!(status, 200, "{benign}");
    assert_schema("AnalyzeCommentResponse", &benign);
    assert_eq!(benign["languages"], json!(["de"]));
    assert_eq!(benign["detectedLanguages"], json!(["de"]));
    let abusive = "Du bist ein dummer, wertloser Idiot und alle hier hassen dich.";
    let mut named = comment(abusive, "INSULT");
    named["languages"] = json!(["de-DE"]);
    let (status, answer) = analyze(&server, &query, &named);
    assert_eq!(status, 200, "{answer}");
    assert_eq!(answer["languages"], json!(["de"]));
    assert!(answer.get("detectedLanguages").is_none(), "{answer}");
    assert!(
        insult(&answer) > insult(&benign) + 0.3,
        "{answer} against {benign}"
    );

    // PROFANITY is read by an English model: refused in German, naming what was found.
    let (status, answer) = analyze(&server, &query, &comment(german, "PROFANITY"));
    assert_google_error(status, &answer, 400, "INVALID_ARGUMENT");
    assert_eq!(
        answer["error"]["message"],
        "Attribute PROFANITY does not support request languages: de"
    );
    assert_eq!(
        answer["error"]["details"],
        json!([{
            "@type": "type.googleapis.com/google.commentanalyzer.v1alpha1.Error",
            "errorType": "LANGUAGE_NOT_SUPPORTED_BY_ATTRIBUTE",
            "languageNotSupportedByAttributeError": {"attribute": "PROFANITY", "detectedLanguages": ["de"]},
        }])
    );

    // Named in `languages`, a language no check here reads: refused, naming what was asked.
    let mut named = comment("x", "INSULT");
    named["languages"] = json!(["es"]);
    let (status, answer) = analyze(&server, &query, &named);
    assert_google_error(status, &answer, 400, "INVALID_ARGUMENT");
    assert_eq!(
        answer["error"]["details"][0]["languageNotSupportedByAttributeError"],
        json!({"attribute": "INSULT", "requestedLanguages": ["es"]})
    );

    // English, found so: scored, and said so.
    let english = "What a load of rubbish, you people have no idea what you are talking about.";
    let (status, answer) = analyze(&server, &query, &comment(english, "INSULT"));
    assert_eq!(status, 200, "{answer}");
    assert_schema("AnalyzeCommentResponse", &answer);
    assert_eq!(answer["detectedLanguages"], json!(["en"]));
    // Too short to tell ("lol" reads as Spanish to the detector): scored as English.
    let (status, answer) = analyze(&server, &query, &comment("lol", "INSULT"));
    assert_eq!(status, 200, "{answer}");
    assert_eq!(answer["languages"], json!(["en"]));
    assert!(answer.get("detectedLanguages").is_none(), "{answer}");

    // The journal has every answer, the refusals as 400; they cost no quota.
    let (journal, records) = analyze_records(&server);
    let count = |status: u64| records.iter().filter(|r| r["status"] == status).count();
    assert_eq!(
        (count(400), count(200), records.len()),
        (2, 4, 6),
        "{journal}"
    );
    let (_, headers, _) = post(
        &server.url(&format!("/v1alpha1/comments:analyze{query}")),
        &[("Content-Type", "application/json")],
        comment(english, "INSULT").to_string().as_bytes(),
    );
    assert_eq!(headers.get("x-quota-used"), Some("5"));
}
