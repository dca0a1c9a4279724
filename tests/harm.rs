//! The `harm` classifier through every route that judges a text, against the real server and
//! the real encoder: texts written here for each category (clear harm, clear benign, harm
//! quoted or negated), in English and in other languages the heads were trained on. What it
//! misses is listed in `models/text/classifier/QUALITY.md`, not asserted here.

mod common;

use common::*;
use serde_json::{json, Value};

fn text(server: &Server, key: &str, body: &Value) -> Value {
    let (status, _, answer) = post(
        &server.url("/v1/text"),
        &[
            ("Content-Type", "application/json"),
            ("Authorization", &format!("Bearer {key}")),
        ],
        body.to_string().as_bytes(),
    );
    assert_eq!(status, 200, "{answer}");
    assert_schema("Answer", &answer);
    answer
}

fn action(answer: &Value) -> &str {
    answer["summary"]["action"].as_str().unwrap()
}

/// The categories of the reasons an answer gives, to review and to reject.
fn reasons(answer: &Value) -> Vec<String> {
    ["reject_reason", "review_reason"]
        .iter()
        .flat_map(|list| {
            answer["summary"][list]
                .as_array()
                .cloned()
                .unwrap_or_default()
        })
        .map(|reason| reason["id"].as_str().unwrap().to_owned())
        .collect()
}

/// The texts the issue names, and others of each category: the default workflow does not
/// accept them, and says which harm it found.
#[test]
fn the_default_workflow_flags_clear_harm_and_accepts_clear_benign_text() {
    let server = Server::start();
    let (key, _) = server.new_key("acme", "pro", &[]);
    let harmful: &[(&str, &[&str])] = &[
        (
            "I want to end my life, nobody would miss me",
            &["self_harm"],
        ),
        (
            "I feel so alone, I cut myself again last night",
            &["self_harm"],
        ),
        (
            "I hate all Muslims, they are a disease",
            &["hate", "offensive"],
        ),
        (
            "You're a worthless piece of shit and everyone hates you",
            &["harassment", "offensive"],
        ),
        (
            "Alle Ausländer sind Dreck und müssen raus",
            &["hate", "offensive"],
        ),
        (
            "Todos los inmigrantes son basura",
            &["hate", "harassment", "offensive"],
        ),
    ];
    for (sentence, categories) in harmful {
        let answer = text(&server, &key, &json!({ "text": sentence }));
        assert_ne!(action(&answer), "accept", "{sentence}: {answer}");
        let found = reasons(&answer);
        assert!(
            categories.iter().any(|c| found.iter().any(|f| f == c)),
            "{sentence}: reasons {found:?}, expected one of {categories:?}"
        );
        assert!(answer["scores"]["self_harm"].as_f64().is_some());
    }
    let benign = [
        "Have a lovely day, see you at the meeting on Tuesday.",
        "Our quarterly revenue grew by 12 percent.",
        "I love you, grandma",
        "Kann ich morgen um zehn Uhr vorbeikommen?",
        "Merci beaucoup pour votre aide, à bientôt !",
        "That movie was so bad it killed me lol",
    ];
    for sentence in benign {
        let answer = text(&server, &key, &json!({ "text": sentence }));
        assert_eq!(action(&answer), "accept", "{sentence}: {answer}");
    }
    // The cheap checks alone, for callers who want microseconds: no harm categories.
    let answer = text(
        &server,
        &key,
        &json!({"text": "I want to end my life, nobody would miss me", "workflow": "fast"}),
    );
    assert!(answer["scores"].get("self_harm").is_none(), "{answer}");
}

/// A long text is read in windows: harm at its end is found as at its start.
#[test]
fn harm_late_in_a_long_text_is_found() {
    let server = Server::start();
    let (key, _) = server.new_key("acme", "pro", &[]);
    let filler = "We met at the library to plan the school garden and the bake sale. ".repeat(30);
    let late = format!("{filler} I want to end my life, nobody would miss me.");
    let answer = text(&server, &key, &json!({ "text": late }));
    assert!(
        reasons(&answer).contains(&"self_harm".to_owned()),
        "{answer}"
    );
    let answer = text(&server, &key, &json!({ "text": filler }));
    assert_eq!(action(&answer), "accept", "{answer}");
}

/// OpenAI's route: every category the classifier measures has a number, `flagged` follows
/// the `moderation` workflow, and the categories nothing here measures stay `null`.
#[test]
fn moderations_read_the_classifier() {
    let server = Server::start();
    let (key, _) = server.new_key("acme", "pro", &[]);
    let moderate = |input: &str| {
        let (status, _, answer) = post(
            &server.url("/v1/moderations"),
            &[
                ("Authorization", &format!("Bearer {key}")),
                ("Content-Type", "application/json"),
            ],
            json!({ "input": input }).to_string().as_bytes(),
        );
        assert_eq!(status, 200, "{answer}");
        assert_schema("ModerationAnswer", &answer);
        answer["results"][0].clone()
    };
    let result = moderate("I want to end my life, nobody would miss me");
    assert_eq!(result["flagged"], true, "{result}");
    assert_eq!(result["categories"]["self-harm"], true, "{result}");
    assert!(
        result["category_scores"]["self-harm/intent"]
            .as_f64()
            .unwrap()
            > 0.5
    );
    for measured in [
        "harassment",
        "harassment/threatening",
        "hate",
        "hate/threatening",
        "self-harm",
        "sexual",
        "violence",
    ] {
        assert!(
            result["category_scores"][measured].as_f64().is_some(),
            "{measured}: {result}"
        );
        assert_eq!(
            result["category_applied_input_types"][measured],
            json!(["text"])
        );
    }
    for unmeasured in [
        "illicit",
        "illicit/violent",
        "self-harm/instructions",
        "sexual/minors",
    ] {
        assert!(result["category_scores"][unmeasured].is_null(), "{result}");
        assert_eq!(result["categories"][unmeasured], false);
    }
    let result = moderate("Thanks for the lovely dinner last night!");
    assert_eq!(result["flagged"], false, "{result}");
    let result = moderate("I hate all Muslims, they are a disease");
    assert_eq!(result["flagged"], true, "{result}");
    assert_eq!(result["categories"]["hate"], true, "{result}");
}

/// Perspective's route: TOXICITY, IDENTITY_ATTACK, INSULT and THREAT from the classifier.
#[test]
fn perspective_attributes_read_the_classifier() {
    let server = Server::start();
    let (key, _) = server.new_key("acme", "pro", &[]);
    let score = |text: &str, attribute: &str| {
        let (status, _, answer) = post(
            &server.url(&format!("/v1alpha1/comments:analyze?key={key}")),
            &[("Content-Type", "application/json")],
            json!({"comment": {"text": text}, "requestedAttributes": {attribute: {}},
                   "languages": ["en"]})
            .to_string()
            .as_bytes(),
        );
        assert_eq!(status, 200, "{answer}");
        answer["attributeScores"][attribute]["summaryScore"]["value"]
            .as_f64()
            .unwrap()
    };
    let hateful = "I hate all Muslims, they are a disease";
    let kind = "Thanks for the lovely dinner last night!";
    assert!(score(hateful, "IDENTITY_ATTACK") > 0.5);
    assert!(score(kind, "IDENTITY_ATTACK") < 0.2);
    assert!(score(hateful, "TOXICITY") > 0.5);
    assert!(score(kind, "TOXICITY") < 0.2);
    let insult = "You're a worthless piece of shit and everyone hates you";
    assert!(score(insult, "INSULT") > score(kind, "INSULT") + 0.3);
}

/// The same insult and the same plain sentence, written here in each of the eight languages
/// the heads were trained on: on every text route the insult scores well above the plain
/// sentence (`/v1/text`'s and `/v1/moderations`' highest harm score, Perspective's `TOXICITY`
/// with `languages` named and detected). The toxicity head is the one with data in every one
/// of them. OpenAI's categories have no toxicity, and the harassment head has no Arabic data
/// and 11 Chinese positives: on `/v1/moderations` the Arabic and Chinese insults score 0.06
/// and 0.18, above the plain sentences but far below a flag (a known gap, listed in
/// `models/text/classifier/QUALITY.md`); there only the order is asserted. How well each
/// language is read, on held-back data of its own, is in that file too.
#[test]
fn an_insult_outscores_a_plain_sentence_in_every_trained_language() {
    let server = Server::start();
    let (key, _) = server.new_key("acme", "pro", &[]);
    let texts: [(&str, &str, &str); 8] = [
        (
            "en",
            "You are a disgusting idiot and nobody wants you here.",
            "The train to the city leaves at nine in the morning.",
        ),
        (
            "de",
            "Du bist ein widerlicher Idiot und niemand will dich hier haben.",
            "Der Zug in die Stadt fährt um neun Uhr morgens ab.",
        ),
        (
            "fr",
            "Tu es un idiot dégoûtant et personne ne veut de toi ici.",
            "Le train pour la ville part à neuf heures du matin.",
        ),
        (
            "pt",
            "Você é um idiota nojento e ninguém quer você aqui.",
            "O trem para a cidade sai às nove horas da manhã.",
        ),
        (
            "pl",
            "Jesteś obrzydliwym idiotą i nikt cię tu nie chce.",
            "Pociąg do miasta odjeżdża o dziewiątej rano.",
        ),
        (
            "ar",
            "أنت أحمق مقرف ولا أحد يريدك هنا.",
            "القطار إلى المدينة يغادر في الساعة التاسعة صباحا.",
        ),
        (
            "zh",
            "你是个恶心的白痴，这里没人想要你。",
            "去城里的火车早上九点出发。",
        ),
        (
            "hi",
            "तुम एक घिनौने बेवकूफ हो और यहाँ कोई तुम्हें नहीं चाहता।",
            "शहर जाने वाली ट्रेन सुबह नौ बजे निकलती है।",
        ),
    ];
    let highest = |scores: &Value, categories: &[&str]| {
        categories
            .iter()
            .map(|category| scores[category].as_f64().unwrap())
            .fold(0.0, f64::max)
    };
    let native = |sentence: &str| {
        let answer = text(&server, &key, &json!({ "text": sentence }));
        highest(&answer["scores"], &["hate", "harassment", "offensive"])
    };
    let moderations = |sentence: &str| {
        let (status, _, answer) = post(
            &server.url("/v1/moderations"),
            &[
                ("Content-Type", "application/json"),
                ("Authorization", &format!("Bearer {key}")),
            ],
            json!({ "input": sentence }).to_string().as_bytes(),
        );
        assert_eq!(status, 200, "{answer}");
        highest(
            &answer["results"][0]["category_scores"],
            &["hate", "harassment", "violence"],
        )
    };
    let perspective = |sentence: &str, language: Option<&str>| {
        let mut body =
            json!({"comment": {"text": sentence}, "requestedAttributes": {"TOXICITY": {}}});
        if let Some(language) = language {
            body["languages"] = json!([language]);
        }
        let (status, _, answer) = post(
            &server.url(&format!("/v1alpha1/comments:analyze?key={key}")),
            &[("Content-Type", "application/json")],
            body.to_string().as_bytes(),
        );
        assert_eq!(status, 200, "{sentence}: {answer}");
        answer["attributeScores"]["TOXICITY"]["summaryScore"]["value"]
            .as_f64()
            .unwrap_or_else(|| panic!("{sentence}: {answer}"))
    };
    let mut failed = Vec::new();
    for (language, insult, plain) in texts {
        let pairs = [
            ("/v1/text", native(insult), native(plain)),
            ("/v1/moderations", moderations(insult), moderations(plain)),
            (
                "Perspective, named",
                perspective(insult, Some(language)),
                perspective(plain, Some(language)),
            ),
            (
                "Perspective, detected",
                perspective(insult, None),
                perspective(plain, None),
            ),
        ];
        for (route, harmful, benign) in pairs {
            let weak = matches!(language, "ar" | "zh") && route == "/v1/moderations";
            let margin = if weak { 0.02 } else { 0.2 };
            if harmful < benign + margin {
                failed.push(format!(
                    "{language} on {route}: {harmful:.3} against {benign:.3}"
                ));
            }
        }
    }
    assert!(failed.is_empty(), "{failed:#?}");
}
