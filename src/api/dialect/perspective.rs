//! Google's Perspective API, `POST /v1alpha1/comments:analyze`, and the discovery document
//! Google's client libraries build their client from (`GET /$discovery/rest?version=v1alpha1`),
//! so that `google-api-python-client` and npm `perspective-api-client` work against modgate
//! with only DNS changed. (Google shuts Perspective down at the end of 2026.)
//!
//! - The key comes as `?key=`, as Perspective takes it, or in Google's `X-Goog-Api-Key` header
//!   (read as `X-Api-Key` by the head parser); modgate's own headers work too.
//! - `comment.text` is checked by the shipped `perspective` workflow: the linear profanity
//!   model and tox-block. Each requested attribute is read from the modgate category of the
//!   same meaning ([`ATTRIBUTE_MAP`]); an attribute no model here measures is refused with 400
//!   `INVALID_ARGUMENT`, naming it and the supported ones, as Perspective refuses an unknown
//!   attribute. `scoreThreshold` leaves out an attribute scored below it.
//! - `summaryScore` is the score of the whole text; `spanScores` has one span for the whole
//!   text, or, with `spanAnnotations`, one per sentence (each scored on its own, at most
//!   [`SPANS_MAX`]). Offsets count Unicode code points.
//! - `languages`: an attribute is scored in the languages the checks behind it read (the
//!   registry's coverage list: the multilingual harm classifier's eight for TOXICITY,
//!   IDENTITY_ATTACK, INSULT and THREAT; English for PROFANITY and SEVERE_TOXICITY, read by
//!   English models); a language one of the requested attributes cannot be read in is refused
//!   as Perspective refuses it (400, with Google's `LANGUAGE_NOT_SUPPORTED_BY_ATTRIBUTE` in
//!   `error.details`, which its clients branch on). A code with a region (`pt-BR`) is read as
//!   its language. Without `languages`, Perspective detects the language, and so does this
//!   route ([`crate::text::langid`]): a text it surely finds in a language
//!   ([`LANGUAGE_REFUSAL_LETTERS_MIN`], [`LANGUAGE_REFUSAL_CONFIDENCE_MIN`]) is scored in it,
//!   or refused the same way before any model runs if an attribute cannot be read in it; the
//!   answer says what was found in `detectedLanguages`. Any other text is scored as English:
//!   on a few words the detector's sure findings are often wrong ("lol" reads as Spanish),
//!   where Perspective refuses them. (Without the detector's profiles,
//!   `models.required = false`, every text is scored as English.) `doNotStore` is
//!   accepted: modgate never stores a text (the journal keeps scores, not texts).
//!   `clientToken` is echoed.
//! - Errors are in Google's shape: `{error: {code, message, status, details}}`.

use std::borrow::Cow;
use std::collections::BTreeMap;

use futures_lite::{AsyncRead, AsyncWrite};
use serde::{Deserialize, Serialize};

use crate::api::buffers::JsonBuffers;
use crate::api::context::Context;
use crate::api::envelope::json_response;
use crate::api::request::truncated;
use crate::api::request::{scored, CheckSummary, RequestNotes};
use crate::api::text::{parse_object, read_json_body};
use crate::checks::registry;
use crate::content::ContentKind;
use crate::decision::decide;
use crate::error::{ApiError, ApiResult, ErrorDetail, ErrorKind};
use crate::http::conn::Exchange;
use crate::http::query;
use crate::http::response::Response;

/// The workflow that scores Perspective's attributes.
pub const PERSPECTIVE_WORKFLOW: &str = "perspective";
/// Sentences scored at most with `spanAnnotations`; the rest join the last span.
pub const SPANS_MAX: usize = 32;
/// JSON values of a request body, at most, checked before parsing (six attributes with their
/// options, languages and the other fields fit many times over).
pub const VALUES_MAX: usize = 128;
/// The API version the discovery document describes.
pub const DISCOVERY_VERSION: &str = "v1alpha1";
/// A text sent without `languages` is refused as another language only when the detector's
/// sample (its first [`crate::text::langid::SAMPLE_CHARS_MAX`] characters) has at least this
/// many letters, and its finding at least [`LANGUAGE_REFUSAL_CONFIDENCE_MIN`]. On Debian's
/// fortune cookies (`models/text/perspective_language_study.py`, `LANGUAGE_STATS.md`) this
/// refuses 27 of 44,329 lines and 9 of 12,158 cookies of the English sets (13 of the 36 are
/// quotations in German, French or Italian, 15 lines of one protein's chemical name), and
/// 72 % of 76,241 cookies in seven other languages; from 20 letters, 0.30 % of the English
/// lines would be refused.
pub const LANGUAGE_REFUSAL_LETTERS_MIN: usize = 40;
/// See [`LANGUAGE_REFUSAL_LETTERS_MIN`].
pub const LANGUAGE_REFUSAL_CONFIDENCE_MIN: f64 = 0.99;
/// The language a text is scored as when none is named or surely found.
const DEFAULT_LANGUAGE: &str = "en";

/// Perspective's attributes this server scores, and the modgate category each is read from
/// (the `perspective` workflow): the harm classifier's for TOXICITY, IDENTITY_ATTACK, INSULT
/// and THREAT, the linear profanity model's for PROFANITY (a measure of words, as Perspective
/// defines it), tox-block's for SEVERE_TOXICITY (the harm classifier has no such head).
pub const ATTRIBUTE_MAP: &[(&str, &str)] = &[
    ("TOXICITY", "offensive"),
    ("SEVERE_TOXICITY", "severe_toxic"),
    ("IDENTITY_ATTACK", "hate"),
    ("INSULT", "harassment"),
    ("PROFANITY", "profanity"),
    ("THREAT", "violence"),
];

#[derive(Deserialize)]
#[serde(rename_all = "camelCase")]
struct AnalyzeRequest<'a> {
    #[serde(borrow)]
    comment: Option<Comment<'a>>,
    #[serde(borrow, default)]
    requested_attributes: BTreeMap<Cow<'a, str>, AttributeRequest>,
    #[serde(borrow, default)]
    languages: Vec<Cow<'a, str>>,
    #[serde(default)]
    span_annotations: bool,
    #[serde(default, rename = "doNotStore")]
    _do_not_store: bool,
    #[serde(borrow, default)]
    client_token: Option<Cow<'a, str>>,
}

#[derive(Deserialize)]
struct Comment<'a> {
    #[serde(borrow)]
    text: Option<Cow<'a, str>>,
}

#[derive(Deserialize, Default)]
#[serde(rename_all = "camelCase")]
struct AttributeRequest {
    #[serde(default)]
    score_threshold: Option<f64>,
}

#[derive(Serialize)]
#[serde(rename_all = "camelCase")]
struct AnalyzeAnswer<'a> {
    attribute_scores: BTreeMap<&'static str, AttributeScores>,
    /// The language the text was scored as.
    languages: [String; 1],
    /// For a request without `languages`, the language the detector surely found (absent when
    /// it found nothing sure: the text is scored as English).
    #[serde(skip_serializing_if = "Option::is_none")]
    detected_languages: Option<[&'static str; 1]>,
    #[serde(skip_serializing_if = "Option::is_none")]
    client_token: Option<&'a str>,
}

#[derive(Serialize)]
#[serde(rename_all = "camelCase")]
struct AttributeScores {
    span_scores: Vec<SpanScore>,
    summary_score: Score,
}

#[derive(Serialize)]
struct SpanScore {
    begin: usize,
    end: usize,
    score: Score,
}

#[derive(Serialize)]
struct Score {
    value: f64,
    #[serde(rename = "type")]
    kind: &'static str,
}

impl Score {
    fn probability(value: f64) -> Score {
        Score {
            value,
            kind: "PROBABILITY",
        }
    }
}

pub async fn analyze<S: AsyncRead + AsyncWrite + Unpin>(
    cx: &Context,
    exchange: &mut Exchange<'_, S>,
    notes: &mut RequestNotes,
) -> ApiResult<Response> {
    let key = query_key(exchange.head.query())?;
    let caller = notes
        .admit_check(cx, &exchange.head, key.as_deref(), ContentKind::Text)
        .await?;
    let mut body = read_json_body(
        cx,
        exchange,
        &cx.text_buffers,
        cx.request_limits.text_body_bytes_max,
    )
    .await?;
    let request = parse(&cx.json_buffers, &mut body)?;
    let attributes = requested(&request)?;
    let text = request
        .comment
        .as_ref()
        .and_then(|comment| comment.text.as_deref())
        .filter(|text| !text.is_empty())
        .ok_or_else(|| ApiError::bad_request("comment.text is required"))?;
    let workflows = cx.workflows()?;
    notes.note_workflow(&workflows, PERSPECTIVE_WORKFLOW);
    let chars_max = caller.org.limits.text_chars_max as usize;
    let chars = text.chars().count();
    if chars > chars_max {
        return Err(ApiError::new(
            ErrorKind::TextTooLong,
            format!("comment.text is {chars} characters, over the {chars_max} of this plan"),
        ));
    }
    let workflow = caller.authorize(ContentKind::Text, PERSPECTIVE_WORKFLOW, &workflows)?;
    let checks = &workflow.definition.text_checks;
    let (language, detected) = match request.languages.first() {
        Some(_) => {
            let requested: Vec<String> = request
                .languages
                .iter()
                .map(|language| truncated(language).to_owned())
                .collect();
            // Every language named must be one each requested attribute is read in; the text
            // is scored in the first.
            let mut scored_in = None;
            for named in &request.languages {
                let language = read_in(checks, &attributes, named).map_err(|attribute| {
                    language_not_supported(
                        attribute,
                        truncated(named),
                        requested.clone(),
                        Vec::new(),
                    )
                })?;
                scored_in.get_or_insert(language);
            }
            let language = scored_in.unwrap_or_else(|| DEFAULT_LANGUAGE.to_owned());
            (language, None)
        }
        None => match cx.checks.language_of(text).flatten() {
            Some(found) if sure_finding(text, &found) => {
                let refuse = |attribute| {
                    language_not_supported(attribute, found.code, Vec::new(), vec![found.code])
                };
                let language = read_in(checks, &attributes, found.code).map_err(refuse)?;
                (language, Some([found.code]))
            }
            _ => (DEFAULT_LANGUAGE.to_owned(), None),
        },
    };
    let lists = cx.lists_of(&caller.org.record.name, &workflow.definition.lists);
    let whole = cx.checks.check_text(checks, &lists, text, None).await?;
    let spans = if request.span_annotations {
        let mut spans = Vec::new();
        for (begin, end, sentence) in sentences(text) {
            spans.push((
                begin,
                end,
                cx.checks.check_text(checks, &lists, sentence, None).await?,
            ));
        }
        spans
    } else {
        Vec::new()
    };
    let decision = decide(&workflow.definition, &whole);
    notes.check = Some(CheckSummary::of(workflow, &decision));
    let mut attribute_scores = BTreeMap::new();
    for (attribute, category, threshold) in attributes {
        let summary = scored(&whole, category)?;
        if threshold.is_some_and(|threshold| summary < threshold) {
            continue;
        }
        let span_scores = if spans.is_empty() {
            vec![SpanScore {
                begin: 0,
                end: chars,
                score: Score::probability(summary),
            }]
        } else {
            spans
                .iter()
                .map(|(begin, end, board)| {
                    Ok(SpanScore {
                        begin: *begin,
                        end: *end,
                        score: Score::probability(scored(board, category)?),
                    })
                })
                .collect::<ApiResult<_>>()?
        };
        attribute_scores.insert(
            attribute,
            AttributeScores {
                span_scores,
                summary_score: Score::probability(summary),
            },
        );
    }
    Ok(json_response(
        200,
        &AnalyzeAnswer {
            attribute_scores,
            languages: [language],
            detected_languages: detected,
            client_token: request.client_token.as_deref(),
        },
    ))
}

/// The `key` of the query, if any (a repeated one is refused).
fn query_key(raw: &str) -> ApiResult<Option<String>> {
    let mut key = None;
    for pair in query::pairs(raw) {
        let (name, value) = pair.map_err(ApiError::bad_request)?;
        if name == "key" && key.replace(value.into_owned()).is_some() {
            return Err(ApiError::bad_request("query parameter `key` given twice"));
        }
    }
    Ok(key)
}

/// The request in `body` (parsed in place).
fn parse<'b>(json: &JsonBuffers, body: &'b mut [u8]) -> ApiResult<AnalyzeRequest<'b>> {
    parse_object(
        json,
        body,
        VALUES_MAX,
        "the body is not an AnalyzeCommentRequest: comment.text is a string, \
             requestedAttributes an object of attribute names, languages an array of strings",
    )
}

/// The requested attributes with their categories and thresholds, or the refusal of one
/// this server cannot score.
fn requested(
    request: &AnalyzeRequest<'_>,
) -> ApiResult<Vec<(&'static str, &'static str, Option<f64>)>> {
    if request.requested_attributes.is_empty() {
        return Err(ApiError::bad_request(
            "requestedAttributes must name at least one attribute",
        ));
    }
    let supported = || {
        ATTRIBUTE_MAP
            .iter()
            .map(|(name, _)| *name)
            .collect::<Vec<_>>()
            .join(", ")
    };
    let mut out = Vec::new();
    for (name, options) in &request.requested_attributes {
        let Some(&(attribute, category)) = ATTRIBUTE_MAP.iter().find(|(a, _)| a == name) else {
            return Err(ApiError::bad_request(format!(
                "Unknown attribute: {}. This server scores {}",
                truncated(name),
                supported()
            )));
        };
        out.push((attribute, category, options.score_threshold));
    }
    Ok(out)
}

/// `language` (a code, `pt-BR` read as `pt`, in lower case) if every requested attribute can
/// be scored in it by the workflow's `checks`: some check of theirs that scores the
/// attribute's category reads it (the registry's coverage list; a check that does not judge
/// words reads every language alike; an attribute no check of theirs scores is left to the
/// answer, which cannot give it). Otherwise the first attribute that cannot be, to refuse.
fn read_in(
    checks: &[String],
    attributes: &[(&'static str, &'static str, Option<f64>)],
    language: &str,
) -> Result<String, &'static str> {
    let base = language
        .split(['-', '_'])
        .next()
        .unwrap_or_default()
        .to_ascii_lowercase();
    for &(attribute, category, _) in attributes {
        let mut scoring = checks
            .iter()
            .filter_map(|name| registry::find(name))
            .filter(|check| check.categories.contains(&category))
            .peekable();
        // No check of the workflow scores it at all: that is not the language's fault (the
        // attribute is answered 503, as a model that is not loaded).
        if scoring.peek().is_none() {
            continue;
        }
        let read = scoring.any(|check| {
            check
                .languages
                .is_none_or(|languages| languages.contains(&base.as_str()))
        });
        if !read {
            return Err(attribute);
        }
    }
    Ok(base)
}

/// Whether the detector's `language` for `text` is sure enough to refuse the text for (see
/// [`LANGUAGE_REFUSAL_LETTERS_MIN`]).
fn sure_finding(text: &str, language: &crate::text::language::Language) -> bool {
    let sample = crate::text::first_chars(text, crate::text::langid::SAMPLE_CHARS_MAX);
    language.reliable
        && language.confidence >= LANGUAGE_REFUSAL_CONFIDENCE_MIN
        && sample.chars().filter(|c| c.is_alphabetic()).count() >= LANGUAGE_REFUSAL_LETTERS_MIN
}

/// 400, as Perspective refuses a comment in a `language` that `attribute` does not read: one
/// of the `requested`, or the one `detected`.
fn language_not_supported(
    attribute: &'static str,
    language: &str,
    requested: Vec<String>,
    detected: Vec<&'static str>,
) -> ApiError {
    ApiError::bad_request(format!(
        "Attribute {attribute} does not support request languages: {language}"
    ))
    .with_detail(ErrorDetail::LanguageNotSupported {
        attribute,
        requested,
        detected,
    })
}

/// The sentences of `text` as (begin, end, sentence), offsets in code points: each ends after
/// a run of `.`, `!` or `?` and the whitespace that follows; past [`SPANS_MAX`] the rest is
/// the last one.
fn sentences(text: &str) -> Vec<(usize, usize, &str)> {
    let mut out = Vec::new();
    let mut start = (0usize, 0usize); // (byte, code point)
    let mut chars = text.char_indices().enumerate().peekable();
    while let Some((n, (at, c))) = chars.next() {
        let ends = matches!(c, '.' | '!' | '?')
            && chars
                .peek()
                .is_none_or(|(_, (_, next))| next.is_whitespace());
        if ends && out.len() + 1 < SPANS_MAX {
            let mut end = (at + c.len_utf8(), n + 1);
            while let Some((m, (at, next))) = chars.peek().copied() {
                if !next.is_whitespace() {
                    break;
                }
                end = (at + next.len_utf8(), m + 1);
                chars.next();
            }
            out.push((start.1, end.1, &text[start.0..end.0]));
            start = end;
        }
    }
    if start.0 < text.len() {
        out.push((start.1, text.chars().count(), &text[start.0..]));
    }
    out
}

/// Google's error envelope for `error` (`status` from the HTTP status, as Google's APIs):
/// no key is 403 `PERMISSION_DENIED` there, a key that is not valid 400 `INVALID_ARGUMENT`,
/// and an argument too large is 400 like any other bad argument. (The journal and the metrics
/// keep modgate's kind, `unauthorized`, as on every route.)
pub fn error_response(error: &ApiError) -> Response {
    #[derive(Serialize)]
    struct Envelope<'a> {
        error: Body<'a>,
    }
    #[derive(Serialize)]
    struct Body<'a> {
        code: u16,
        message: &'a str,
        status: &'static str,
        #[serde(skip_serializing_if = "Vec::is_empty")]
        details: Vec<Detail<'a>>,
    }
    #[derive(Serialize)]
    #[serde(rename_all = "camelCase")]
    struct Detail<'a> {
        #[serde(rename = "@type")]
        kind: &'static str,
        error_type: &'static str,
        language_not_supported_by_attribute_error: LanguageError<'a>,
    }
    #[derive(Serialize)]
    #[serde(rename_all = "camelCase")]
    struct LanguageError<'a> {
        attribute: &'static str,
        #[serde(skip_serializing_if = "<[_]>::is_empty")]
        requested_languages: &'a [String],
        #[serde(skip_serializing_if = "<[_]>::is_empty")]
        detected_languages: &'a [&'static str],
    }
    let (code, status) = match error.kind.status() {
        401 if error.message.starts_with(crate::auth::MISSING_KEY) => (403, "PERMISSION_DENIED"),
        400 | 401 | 413 | 414 | 415 | 431 => (400, "INVALID_ARGUMENT"),
        code => (code, google_status(code)),
    };
    json_response(
        code,
        &Envelope {
            error: Body {
                code,
                message: &error.message,
                status,
                details: error
                    .detail
                    .iter()
                    .map(|detail| match &**detail {
                        ErrorDetail::LanguageNotSupported {
                            attribute,
                            requested,
                            detected,
                        } => Detail {
                            kind: ERROR_DETAIL_TYPE,
                            error_type: "LANGUAGE_NOT_SUPPORTED_BY_ATTRIBUTE",
                            language_not_supported_by_attribute_error: LanguageError {
                                attribute,
                                requested_languages: requested,
                                detected_languages: detected,
                            },
                        },
                    })
                    .collect(),
            },
        },
    )
}

/// The `@type` of Perspective's error details.
const ERROR_DETAIL_TYPE: &str = "type.googleapis.com/google.commentanalyzer.v1alpha1.Error";

/// The canonical status Google's APIs pair with an HTTP status.
fn google_status(code: u16) -> &'static str {
    match code {
        400 => "INVALID_ARGUMENT",
        401 => "UNAUTHENTICATED",
        403 => "PERMISSION_DENIED",
        404 => "NOT_FOUND",
        405 => "UNIMPLEMENTED",
        408 => "DEADLINE_EXCEEDED",
        429 => "RESOURCE_EXHAUSTED",
        503 => "UNAVAILABLE",
        _ if code >= 500 => "INTERNAL",
        _ => "FAILED_PRECONDITION",
    }
}

/// `GET /$discovery/rest?version=v1alpha1`: the discovery document of this API with this
/// server (as the request named it) as `rootUrl`. No key needed, as at Google.
pub fn discovery(cx: &Context, host: Option<&str>, raw_query: &str) -> ApiResult<Response> {
    let mut version = None;
    for pair in query::pairs(raw_query) {
        let (name, value) = pair.map_err(ApiError::bad_request)?;
        if name == "version" {
            version = Some(value.into_owned());
        }
    }
    if version.as_deref() != Some(DISCOVERY_VERSION) {
        return Err(ApiError::new(
            ErrorKind::NotFound,
            format!("no discovery document for this version: ask for version={DISCOVERY_VERSION}"),
        ));
    }
    let host = host
        .filter(|host| {
            !host.is_empty()
                && host
                    .bytes()
                    .all(|b| b.is_ascii_alphanumeric() || b"-.:[]".contains(&b))
        })
        .ok_or_else(|| ApiError::bad_request("the Host header is not a host name"))?;
    let root_url = simd_json::to_string(&format!("{}://{host}/", cx.scheme))
        .map_err(|_| ApiError::internal("the discovery document could not be written"))?;
    let document = DISCOVERY_JSON.replace("\"__ROOT_URL__\"", &root_url);
    Ok(Response::json(200, document.into_bytes()))
}

/// The discovery document, written for this server (`rootUrl` and `baseUrl`, `"__ROOT_URL__"`
/// here, are set per request).
const DISCOVERY_JSON: &str = include_str!("perspective_discovery.json");

#[cfg(test)]
mod tests {
    use super::*;
    use proptest::prelude::*;

    #[test]
    fn sentences_cover_the_text_in_code_points() {
        assert_eq!(
            sentences("Hé you. Go away!  Now"),
            [(0, 8, "Hé you. "), (8, 18, "Go away!  "), (18, 21, "Now")]
        );
        assert_eq!(sentences("v1.2 is out"), [(0, 11, "v1.2 is out")]);
        assert_eq!(sentences(""), []);
        let many = "a. ".repeat(SPANS_MAX + 5);
        let spans = sentences(&many);
        assert_eq!(spans.len(), SPANS_MAX);
        assert_eq!(spans.last().unwrap().1, many.chars().count());
    }

    fn request(body: &[u8]) -> Result<Vec<&'static str>, String> {
        let mut body = body.to_vec();
        let request = parse(&JsonBuffers::default(), &mut body).map_err(|e| e.message)?;
        let attributes = requested(&request).map_err(|e| e.message)?;
        Ok(attributes.into_iter().map(|(a, _, _)| a).collect())
    }

    #[test]
    fn requests_are_read_or_refused_as_perspective_does() {
        assert_eq!(
            request(br#"{"comment":{"text":"hi"},"requestedAttributes":{"TOXICITY":{},"THREAT":{"scoreThreshold":0.5}},"languages":["en"],"doNotStore":true,"spanAnnotations":true}"#),
            Ok(vec!["THREAT", "TOXICITY"])
        );
        let refused = |body: &[u8], says: &str| {
            let message = request(body).unwrap_err();
            assert!(message.contains(says), "{message}");
        };
        refused(
            br#"{"comment":{"text":"hi"},"requestedAttributes":{"FLIRTATION":{}}}"#,
            "Unknown attribute: FLIRTATION",
        );
        refused(
            br#"{"comment":{"text":"hi"},"requestedAttributes":{}}"#,
            "at least one",
        );
        refused(br#"{"comment":{"text":1}}"#, "not an AnalyzeCommentRequest");
        refused(br#"[]"#, "JSON object");
    }

    #[test]
    fn errors_are_in_googles_shape() {
        // A key that is not valid is 400 at Google, and so is an argument over its limit.
        let response = error_response(&ApiError::new(ErrorKind::Unauthorized, "unknown key"));
        assert_eq!(response.status, 400);
        assert_eq!(
            serde_json::from_slice::<serde_json::Value>(&response.body).unwrap(),
            serde_json::json!({"error": {"code": 400, "message": "unknown key", "status": "INVALID_ARGUMENT"}})
        );
        let response = error_response(&ApiError::unauthorized(
            "missing API key: send 'Authorization: Bearer <key>' or 'X-Api-Key: <key>'",
        ));
        assert_eq!(response.status, 403);
        assert!(std::str::from_utf8(&response.body)
            .unwrap()
            .contains("PERMISSION_DENIED"));
        let response = error_response(&ApiError::new(ErrorKind::TextTooLong, "long"));
        assert_eq!(response.status, 400);
        let response = error_response(&ApiError::new(ErrorKind::RateLimited, "slow down"));
        assert_eq!(response.status, 429);
        assert!(std::str::from_utf8(&response.body)
            .unwrap()
            .contains("RESOURCE_EXHAUSTED"));
        let document: serde_json::Value = serde_json::from_str(DISCOVERY_JSON).unwrap();
        assert_eq!(
            document["resources"]["comments"]["methods"]["analyze"]["path"],
            "v1alpha1/comments:analyze"
        );
    }

    #[test]
    fn attributes_are_read_in_the_languages_of_their_checks() {
        let checks: Vec<String> = ["profanity_svm", "toxblock", "harm"]
            .map(str::to_owned)
            .to_vec();
        let attribute = |name: &str| {
            let (attribute, category) = *ATTRIBUTE_MAP.iter().find(|(a, _)| *a == name).unwrap();
            (attribute, category, None)
        };
        let read = |names: &[&str], language: &str| {
            let attributes: Vec<_> = names.iter().map(|name| attribute(name)).collect();
            read_in(&checks, &attributes, language)
        };
        assert_eq!(read(&["THREAT"], "pt-BR"), Ok("pt".to_owned()));
        assert_eq!(read(&["TOXICITY", "INSULT"], "DE"), Ok("de".to_owned()));
        assert_eq!(read(&["TOXICITY", "PROFANITY"], "en"), Ok("en".to_owned()));
        assert_eq!(read(&["TOXICITY", "PROFANITY"], "de"), Err("PROFANITY"));
        assert_eq!(read(&["SEVERE_TOXICITY"], "fr"), Err("SEVERE_TOXICITY"));
        assert_eq!(read(&["THREAT"], "es"), Err("THREAT"));
        // A workflow without the harm classifier: PROFANITY is read in English only, and
        // INSULT, which nothing of it scores, is no refusal of the language (it is answered
        // 503, as a model that is not loaded).
        let english = vec!["profanity_svm".to_owned(), "toxblock".to_owned()];
        assert_eq!(
            read_in(&english, &[attribute("PROFANITY")], "de"),
            Err("PROFANITY")
        );
        assert_eq!(
            read_in(&english, &[attribute("INSULT")], "de"),
            Ok("de".to_owned())
        );
    }

    #[test]
    fn a_language_refusal_carries_googles_detail() {
        let refused = language_not_supported(
            "THREAT",
            "es",
            vec!["en".to_owned(), "es".to_owned()],
            Vec::new(),
        );
        let response = error_response(&refused);
        assert_eq!(response.status, 400);
        assert_eq!(
            std::str::from_utf8(&response.body).unwrap(),
            r#"{"error":{"code":400,"message":"Attribute THREAT does not support request languages: es","status":"INVALID_ARGUMENT","details":[{"@type":"type.googleapis.com/google.commentanalyzer.v1alpha1.Error","errorType":"LANGUAGE_NOT_SUPPORTED_BY_ATTRIBUTE","languageNotSupportedByAttributeError":{"attribute":"THREAT","requestedLanguages":["en","es"]}}]}}"#
        );
        let detected = language_not_supported("PROFANITY", "de", Vec::new(), vec!["de"]);
        assert_eq!(
            std::str::from_utf8(&error_response(&detected).body).unwrap(),
            r#"{"error":{"code":400,"message":"Attribute PROFANITY does not support request languages: de","status":"INVALID_ARGUMENT","details":[{"@type":"type.googleapis.com/google.commentanalyzer.v1alpha1.Error","errorType":"LANGUAGE_NOT_SUPPORTED_BY_ATTRIBUTE","languageNotSupportedByAttributeError":{"attribute":"PROFANITY","detectedLanguages":["de"]}}]}}"#
        );
    }

    #[test]
    fn only_a_sure_finding_on_enough_letters_refuses() {
        use crate::text::language::Language;
        let short = "Ich habe heute keine Zeit, weil ich den ganzen";
        assert_eq!(short.chars().filter(|c| c.is_alphabetic()).count(), 37);
        let long = "Ich habe heute keine Zeit, weil ich den ganzen Tag arbeiten muss.";
        assert!(sure_finding(long, &Language::fast("de", 0.995)));
        assert!(
            !sure_finding(short, &Language::fast("de", 0.995)),
            "37 letters"
        );
        assert!(
            !sure_finding(long, &Language::fast("de", 0.95)),
            "not sure enough"
        );
        // Letters past the detector's sample do not count: it did not read them.
        let padded = format!("{}{long}", "1 ".repeat(60));
        assert!(!sure_finding(&padded, &Language::fast("de", 0.995)));
    }

    proptest! {
        #[test]
        fn any_bytes_are_read_or_refused(body in proptest::collection::vec(any::<u8>(), 0..256)) {
            let _ = request(&body);
        }

        #[test]
        fn sentences_tile_any_text(text in "\\PC{0,200}") {
            let spans = sentences(&text);
            let mut at = 0;
            for (begin, end, sentence) in &spans {
                prop_assert_eq!(*begin, at);
                prop_assert_eq!(end - begin, sentence.chars().count());
                at = *end;
            }
            prop_assert_eq!(at, text.chars().count());
            prop_assert!(spans.len() <= SPANS_MAX);
        }
    }
}
