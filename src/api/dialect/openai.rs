//! `POST /v1/moderations`: OpenAI's moderation endpoint, so that its official SDKs (PyPI and
//! npm `openai`) work against modgate with only the address (or DNS) changed.
//!
//! - `input`: a string (one result), an array of strings (one result each, at most
//!   [`INPUTS_MAX`]), or an array of parts `{type: "text", text}` and
//!   `{type: "image_url", image_url: {url}}` (one result for them all; at most one image, as
//!   OpenAI allows). An image is a `data:` URL or an `http(s)` address fetched under the
//!   download rules of the native routes. All the texts of a request count together against
//!   the plan's characters per check, and the request is one check of the quota.
//! - `model`: OpenAI's model names run the shipped `moderation` workflow; any other name is
//!   the name of one of the organization's workflows; neither: 404 `model_not_found`.
//! - Each result carries OpenAI's thirteen categories. Those a model here measures (the
//!   [`CATEGORY_MAP`]) are scored from the workflow's checks and flagged at the workflow's
//!   reject threshold; the others (illicit, illicit/violent, self-harm/instructions,
//!   sexual/minors, violence/graphic: no labelled data to train them on) have `false`, a
//!   `null` score and no applied input type: never a made-up zero.
//! - The key comes as `Authorization: Bearer`; errors are in OpenAI's
//!   `{error: {message, type, param, code}}` shape ([`error_response`]).
//!
//! Order: the key and its `text` scope and the plan's limits; the content type (415); the
//! body (413); its JSON (400); the model (404); the inputs (400, 413, and 403 for an image
//! without the `image` scope); then the checks.

use std::borrow::Cow;

use futures_lite::{AsyncRead, AsyncWrite};
use serde::ser::{SerializeMap, Serializer};
use serde::{Deserialize, Serialize};

use crate::api::buffers::JsonBuffers;
use crate::api::context::Context;
use crate::api::envelope::json_response;
use crate::api::image::score_image;
use crate::api::request::truncated;
use crate::api::request::{CheckSummary, RequestNotes};
use crate::api::text::{parse_object, read_json_body};
use crate::auth::Caller;
use crate::bounds::IMAGE_BYTES_MAX;
use crate::checks::board::ScoreBoard;
use crate::config::LimitsConfig;
use crate::content::ContentKind;
use crate::decision::{decide, Action, Decision};
use crate::error::{ApiError, ApiResult, ErrorKind};
use crate::http::conn::Exchange;
use crate::http::response::Response;
use crate::store::records::WorkflowRecord;

/// Strings of one request, at most.
pub const INPUTS_MAX: usize = 32;
/// JSON values of a request body, at most (room for [`INPUTS_MAX`] parts of two fields each,
/// an image and `model`), checked before parsing.
pub const VALUES_MAX: usize = 4 * INPUTS_MAX + 16;
/// The workflow OpenAI's model names run.
pub const MODERATION_WORKFLOW: &str = "moderation";
/// OpenAI's model names, all answered by [`MODERATION_WORKFLOW`].
pub const OPENAI_MODELS: &[&str] = &[
    "omni-moderation-latest",
    "omni-moderation-2024-09-26",
    "text-moderation-latest",
    "text-moderation-stable",
    "text-moderation-007",
];
/// `model` when the request names none.
pub const DEFAULT_MODEL: &str = "omni-moderation-latest";

/// How an OpenAI category is read from modgate's categories.
#[derive(Clone, Copy, Debug)]
pub enum Reading {
    /// No model here measures it: `false` and a `null` score.
    None,
    /// The highest of these categories a decision scored (a text's and an image's can differ:
    /// `sexual` is `sexual` for a text, `nudity` for an image); flagged when one of them is a
    /// reason to reject.
    Any(&'static [&'static str]),
    /// Both at once: the lower of the two scores; flagged when both are reasons to reject
    /// (OpenAI's `hate/threatening` is hate that also threatens violence).
    Both(&'static str, &'static str),
}

/// OpenAI's categories in its order, and how each is read: from the `harm` check's categories
/// (the `moderation` workflow) for texts and the nudity models' for images. `self-harm/intent`
/// is read as `self_harm` because the data it was trained on labels suicidal intent.
pub const CATEGORY_MAP: &[(&str, Reading)] = &[
    ("harassment", Reading::Any(&["harassment", "insult"])),
    (
        "harassment/threatening",
        Reading::Any(&["violence", "threat"]),
    ),
    ("hate", Reading::Any(&["hate", "identity_hate"])),
    ("hate/threatening", Reading::Both("hate", "violence")),
    ("illicit", Reading::None),
    ("illicit/violent", Reading::None),
    ("self-harm", Reading::Any(&["self_harm"])),
    ("self-harm/intent", Reading::Any(&["self_harm"])),
    ("self-harm/instructions", Reading::None),
    ("sexual", Reading::Any(&["sexual", "nudity"])),
    ("sexual/minors", Reading::None),
    ("violence", Reading::Any(&["violence", "threat"])),
    ("violence/graphic", Reading::None),
];

/// The route's body limit: a data URL of the largest image in base64, and room for texts.
pub fn body_bytes_max(limits: &LimitsConfig) -> usize {
    IMAGE_BYTES_MAX.div_ceil(3) * 4 + limits.text_body_bytes_max
}

#[derive(Deserialize)]
struct ModerationRequest<'a> {
    #[serde(borrow)]
    input: Option<Input<'a>>,
    #[serde(borrow, default)]
    model: Option<Cow<'a, str>>,
}

#[derive(Deserialize)]
#[serde(untagged)]
enum Input<'a> {
    One(#[serde(borrow)] Cow<'a, str>),
    Many(#[serde(borrow)] Vec<Item<'a>>),
}

#[derive(Deserialize)]
#[serde(untagged)]
enum Item<'a> {
    Text(#[serde(borrow)] Cow<'a, str>),
    Part(#[serde(borrow)] Part<'a>),
}

#[derive(Deserialize)]
struct Part<'a> {
    #[serde(rename = "type", borrow)]
    kind: Cow<'a, str>,
    #[serde(borrow, default)]
    text: Option<Cow<'a, str>>,
    #[serde(borrow, default)]
    image_url: Option<ImageUrl<'a>>,
}

#[derive(Deserialize)]
struct ImageUrl<'a> {
    #[serde(borrow)]
    url: Cow<'a, str>,
}

/// What one result is computed from.
struct Subject<'a> {
    texts: Vec<&'a str>,
    image: Option<&'a str>,
}

pub async fn moderations<S: AsyncRead + AsyncWrite + Unpin>(
    cx: &Context,
    exchange: &mut Exchange<'_, S>,
    notes: &mut RequestNotes,
) -> ApiResult<Response> {
    let caller = notes
        .admit_check(cx, &exchange.head, None, ContentKind::Text)
        .await?;
    let mut body = read_json_body(
        cx,
        exchange,
        &cx.image_buffers,
        body_bytes_max(&cx.request_limits),
    )
    .await?;
    let request = parse(&cx.json_buffers, &mut body)?;
    let model = request.model.as_deref().unwrap_or(DEFAULT_MODEL).to_owned();
    let workflow_name = if OPENAI_MODELS.contains(&model.as_str()) {
        MODERATION_WORKFLOW
    } else {
        model.as_str()
    };
    let workflows = cx.workflows()?;
    if !workflows.contains_key(workflow_name) {
        return Err(ApiError::new(
            ErrorKind::NotFound,
            format!(
                "The model `{}` does not exist: use one of {} or the name of a workflow",
                truncated(&model),
                OPENAI_MODELS.join(", ")
            ),
        ));
    }
    notes.note_workflow(&workflows, workflow_name);
    let subjects = subjects(
        request
            .input
            .as_ref()
            .ok_or_else(|| ApiError::bad_request("`input` is required"))?,
    )?;
    let chars: usize = subjects
        .iter()
        .flat_map(|s| &s.texts)
        .map(|t| t.chars().count())
        .sum();
    let chars_max = caller.org.limits.text_chars_max as usize;
    if chars > chars_max {
        return Err(ApiError::new(
            ErrorKind::TextTooLong,
            format!("the inputs hold {chars} characters, over the {chars_max} of this plan"),
        ));
    }
    let has_image = subjects.iter().any(|s| s.image.is_some());
    if has_image {
        caller.require_scope(ContentKind::Image)?;
    }
    let workflow = caller.authorize(ContentKind::Text, workflow_name, &workflows)?;
    if has_image {
        caller.authorize(ContentKind::Image, workflow_name, &workflows)?;
    }
    // What the workflow cannot check is refused before anything runs, as on the native routes.
    let has_text = subjects.iter().any(|s| !s.texts.is_empty());
    if has_text && workflow.definition.text_checks.is_empty() {
        return Err(ApiError::bad_request(format!(
            "workflow '{}' has no checks for texts",
            workflow.name
        )));
    }
    if has_image && workflow.definition.image_checks.is_empty() {
        return Err(ApiError::bad_request(format!(
            "workflow '{}' has no checks for images",
            workflow.name
        )));
    }
    let mut results = Vec::with_capacity(subjects.len());
    for subject in &subjects {
        results.push(score_subject(cx, &caller, workflow, subject).await?);
    }
    notes.check = Some(summary(workflow, &results));
    let id = format!("modr-{}", exchange.request_id.as_str());
    Ok(json_response(
        200,
        &Answer {
            id: &id,
            model: &model,
            results: &results,
        },
    ))
}

/// The request in `body` (parsed in place; strings without escapes are borrowed from it).
fn parse<'b>(json: &JsonBuffers, body: &'b mut [u8]) -> ApiResult<ModerationRequest<'b>> {
    parse_object(
        json,
        body,
        VALUES_MAX,
        "the body is not a moderation request: `input` is a string, an array of strings, \
             or an array of `text` and `image_url` parts; `model` is a string",
    )
}

/// The subjects of the results: one per string, or one for all the parts.
fn subjects<'a>(input: &'a Input<'_>) -> ApiResult<Vec<Subject<'a>>> {
    let items = match input {
        Input::One(text) => {
            return Ok(vec![Subject {
                texts: vec![text.as_ref()],
                image: None,
            }])
        }
        Input::Many(items) => items,
    };
    if items.is_empty() {
        return Err(ApiError::bad_request("`input` is an empty array"));
    }
    if items.iter().all(|item| matches!(item, Item::Text(_))) {
        if items.len() > INPUTS_MAX {
            return Err(ApiError::bad_request(format!(
                "`input` holds {} strings; at most {INPUTS_MAX} per request",
                items.len()
            )));
        }
        return Ok(items
            .iter()
            .map(|item| Subject {
                texts: match item {
                    Item::Text(text) => vec![text.as_ref()],
                    Item::Part(_) => Vec::new(),
                },
                image: None,
            })
            .collect());
    }
    let mut subject = Subject {
        texts: Vec::new(),
        image: None,
    };
    for item in items {
        let Item::Part(part) = item else {
            return Err(ApiError::bad_request(
                "`input` mixes strings and parts: send strings, or parts only",
            ));
        };
        match (part.kind.as_ref(), &part.text, &part.image_url) {
            ("text", Some(text), None) => subject.texts.push(text),
            ("image_url", None, Some(image)) => {
                if subject.image.replace(&image.url).is_some() {
                    return Err(ApiError::bad_request(
                        "`input` holds more than one image; one per request",
                    ));
                }
            }
            ("text", ..) => return Err(ApiError::bad_request("a `text` part needs `text`, alone")),
            ("image_url", ..) => {
                return Err(ApiError::bad_request(
                    "an `image_url` part needs `image_url.url`, alone",
                ))
            }
            (other, ..) => {
                return Err(ApiError::bad_request(format!(
                    "unknown part type `{}`: `text` or `image_url`",
                    truncated(other)
                )))
            }
        }
    }
    if subject.texts.len() > INPUTS_MAX {
        return Err(ApiError::bad_request(format!(
            "`input` holds {} text parts; at most {INPUTS_MAX} per request",
            subject.texts.len()
        )));
    }
    Ok(vec![subject])
}

/// One result: the workflow's decision on the subject's texts (joined) and on its image.
struct Scored {
    text: Option<Decision>,
    image: Option<Decision>,
}

async fn score_subject(
    cx: &Context,
    caller: &Caller,
    workflow: &WorkflowRecord,
    subject: &Subject<'_>,
) -> ApiResult<Scored> {
    let definition = &workflow.definition;
    let text = if subject.texts.is_empty() {
        None
    } else {
        let joined = subject.texts.join("\n");
        let lists = cx.lists_of(&caller.org.record.name, &definition.lists);
        let board = cx
            .checks
            .check_text(&definition.text_checks, &lists, &joined, None)
            .await?;
        Some(decide(definition, &board))
    };
    let image = match subject.image {
        Some(url) => {
            let mut bytes = cx.image_buffers.take();
            image_bytes(cx, caller, url, &mut bytes).await?;
            let board: ScoreBoard = score_image(cx, caller, workflow, bytes).await?;
            Some(decide(definition, &board))
        }
        None => None,
    };
    Ok(Scored { text, image })
}

/// The image of an `image_url` part: a `data:` URL's bytes, or a download.
async fn image_bytes(cx: &Context, caller: &Caller, url: &str, out: &mut Vec<u8>) -> ApiResult<()> {
    if url.starts_with("data:") {
        let data = data_url::DataUrl::process(url)
            .map_err(|_| ApiError::bad_request("the image's data URL is malformed"))?;
        let (bytes, _) = data
            .decode_to_vec()
            .map_err(|_| ApiError::bad_request("the image's data URL is not valid base64"))?;
        if bytes.len() > IMAGE_BYTES_MAX {
            return Err(ApiError::new(
                ErrorKind::BodyTooLarge,
                format!("the image is over {IMAGE_BYTES_MAX} bytes"),
            ));
        }
        out.extend_from_slice(&bytes);
        return Ok(());
    }
    cx.download(caller, url, out).await
}

/// The journal's view of the request: the worst action of its results and, per category,
/// the highest score.
fn summary(workflow: &WorkflowRecord, results: &[Scored]) -> CheckSummary {
    let decisions = || {
        results
            .iter()
            .flat_map(|r| r.text.iter().chain(r.image.iter()))
    };
    let action = decisions()
        .map(|d| d.action)
        .max_by_key(|action| match action {
            Action::Accept => 0,
            Action::Review => 1,
            Action::Reject => 2,
        })
        .unwrap_or(Action::Accept);
    let mut scores: Vec<(&'static str, f64)> = Vec::new();
    let mut unchecked: Vec<&'static str> = Vec::new();
    for decision in decisions() {
        for &(category, score) in &decision.scores {
            match scores.iter_mut().find(|(c, _)| *c == category) {
                Some(kept) => kept.1 = kept.1.max(score),
                None => scores.push((category, score)),
            }
        }
        unchecked.extend(&decision.unchecked);
    }
    scores.sort_by(|a, b| a.0.cmp(b.0));
    unchecked.sort_unstable();
    unchecked.dedup();
    unchecked.retain(|category| !scores.iter().any(|(c, _)| c == category));
    CheckSummary {
        workflow: workflow.name.clone(),
        version: workflow.version,
        action: action.as_str(),
        scores,
        unchecked,
    }
}

#[derive(Serialize)]
struct Answer<'a> {
    id: &'a str,
    model: &'a str,
    results: &'a [Scored],
}

/// One OpenAI category of a result: its score (the highest over the input types that
/// measured it), whether it is flagged, and those input types.
struct Category {
    score: Option<f64>,
    flagged: bool,
    applied: Vec<&'static str>,
}

impl Scored {
    fn category(&self, reading: Reading) -> Category {
        let mut category = Category {
            score: None,
            flagged: false,
            applied: Vec::new(),
        };
        for (decision, input_type) in [(&self.text, "text"), (&self.image, "image")] {
            let Some(decision) = decision else { continue };
            let score_of = |ours: &str| {
                decision
                    .scores
                    .iter()
                    .find(|(c, _)| *c == ours)
                    .map(|&(_, score)| score)
            };
            let rejects = |ours: &str| decision.reject_reason.iter().any(|r| r.id == ours);
            let (score, flagged) = match reading {
                Reading::None => continue,
                Reading::Any(ours) => {
                    let Some(score) = ours.iter().filter_map(|c| score_of(c)).reduce(f64::max)
                    else {
                        continue;
                    };
                    (score, ours.iter().any(|c| rejects(c)))
                }
                Reading::Both(first, second) => {
                    let (Some(a), Some(b)) = (score_of(first), score_of(second)) else {
                        continue;
                    };
                    (a.min(b), rejects(first) && rejects(second))
                }
            };
            category.score = Some(category.score.map_or(score, |s: f64| s.max(score)));
            category.flagged |= flagged;
            category.applied.push(input_type);
        }
        category
    }
}

/// A JSON object of OpenAI's categories, in their order.
struct ByCategory<T>(Vec<(&'static str, T)>);

impl<T: Serialize> Serialize for ByCategory<T> {
    fn serialize<S: Serializer>(&self, serializer: S) -> Result<S::Ok, S::Error> {
        let mut map = serializer.serialize_map(Some(self.0.len()))?;
        for (name, value) in &self.0 {
            map.serialize_entry(name, value)?;
        }
        map.end()
    }
}

impl Serialize for Scored {
    fn serialize<S: Serializer>(&self, serializer: S) -> Result<S::Ok, S::Error> {
        let categories: Vec<(&'static str, Category)> = CATEGORY_MAP
            .iter()
            .map(|&(name, reading)| (name, self.category(reading)))
            .collect();
        let flags = categories.iter().map(|(name, c)| (*name, c.flagged));
        let scores = categories.iter().map(|(name, c)| (*name, c.score));
        let applied = categories.iter().map(|(name, c)| (*name, &c.applied));
        let mut map = serializer.serialize_map(Some(4))?;
        map.serialize_entry("flagged", &categories.iter().any(|(_, c)| c.flagged))?;
        map.serialize_entry("categories", &ByCategory(flags.collect()))?;
        map.serialize_entry("category_scores", &ByCategory(scores.collect()))?;
        map.serialize_entry(
            "category_applied_input_types",
            &ByCategory(applied.collect()),
        )?;
        map.end()
    }
}

#[derive(Serialize)]
struct ErrorEnvelope<'a> {
    error: ErrorObject<'a>,
}

#[derive(Serialize)]
struct ErrorObject<'a> {
    message: &'a str,
    #[serde(rename = "type")]
    kind: &'static str,
    param: Option<&'static str>,
    code: &'static str,
}

/// OpenAI's error envelope for `error`, with `type` and `code` as OpenAI's SDKs read them.
pub fn error_response(error: &ApiError) -> Response {
    let status = error.kind.status();
    let (kind, code) = match error.kind {
        ErrorKind::Unauthorized => ("invalid_request_error", "invalid_api_key"),
        ErrorKind::NotFound => ("invalid_request_error", "model_not_found"),
        ErrorKind::QuotaExceeded => ("insufficient_quota", "insufficient_quota"),
        ErrorKind::RateLimited | ErrorKind::TooManyConcurrent => {
            ("requests", "rate_limit_exceeded")
        }
        _ if status >= 500 => ("server_error", error.kind.wire_type()),
        _ => ("invalid_request_error", error.kind.wire_type()),
    };
    json_response(
        status,
        &ErrorEnvelope {
            error: ErrorObject {
                message: &error.message,
                kind,
                param: None,
                code,
            },
        },
    )
}

#[cfg(test)]
mod tests {
    use super::*;
    use proptest::prelude::*;

    /// A subject as (texts, image).
    type Shape = (Vec<String>, Option<String>);

    /// Subjects of `body`, or the error's message.
    fn shape(body: &[u8]) -> Result<Vec<Shape>, String> {
        let mut body = body.to_vec();
        let request = parse(&JsonBuffers::default(), &mut body).map_err(|e| e.message)?;
        let input = request.input.as_ref().ok_or("no input")?;
        let subjects = subjects(input).map_err(|e| e.message)?;
        Ok(subjects
            .iter()
            .map(|s| {
                (
                    s.texts.iter().map(|t| t.to_string()).collect(),
                    s.image.map(str::to_owned),
                )
            })
            .collect())
    }

    #[test]
    fn inputs_of_every_shape() {
        assert_eq!(
            shape(br#"{"input":"hi","model":"omni-moderation-latest"}"#).unwrap(),
            [(vec!["hi".to_owned()], None)]
        );
        assert_eq!(shape(br#"{"input":["a","b\u00e9"]}"#).unwrap().len(), 2);
        assert_eq!(
            shape(br#"{"input":[{"type":"text","text":"a"},{"type":"image_url","image_url":{"url":"data:,x"}},{"type":"text","text":"b"}]}"#)
                .unwrap(),
            [(vec!["a".to_owned(), "b".to_owned()], Some("data:,x".to_owned()))]
        );
        let refused = |body: &[u8], says: &str| {
            let message = shape(body).unwrap_err();
            assert!(message.contains(says), "{message}");
        };
        refused(br#"["hi"]"#, "JSON object");
        refused(br#"{"input":1}"#, "not a moderation request");
        refused(br#"{"input":"a","model":5}"#, "not a moderation request");
        refused(br#"{"input":[]}"#, "empty");
        refused(br#"{"input":["a",{"type":"text","text":"b"}]}"#, "mixes");
        refused(
            br#"{"input":[{"type":"image_url","image_url":{"url":"a"}},{"type":"image_url","image_url":{"url":"b"}}]}"#,
            "more than one image",
        );
        refused(br#"{"input":[{"type":"audio"}]}"#, "unknown part type");
        refused(br#"{"input":[{"type":"text"}]}"#, "needs `text`");
        refused(
            br#"{"input":[{"type":"text","text":"a","image_url":{"url":"b"}}]}"#,
            "alone",
        );
        let many = format!(
            r#"{{"input":[{}]}}"#,
            vec![r#""x""#; INPUTS_MAX + 1].join(",")
        );
        refused(many.as_bytes(), "at most 32");
        let deep = format!(r#"{{"input":{}"x"{}}}"#, "[".repeat(40), "]".repeat(40));
        refused(deep.as_bytes(), "nests deeper");
        refused(b"{\"input\":\"\xff\"}", "not a moderation request");
    }

    #[test]
    fn errors_are_in_openais_shape() {
        let body = |error: ApiError| {
            let response = error_response(&error);
            (
                response.status,
                serde_json::from_slice::<serde_json::Value>(&response.body).unwrap(),
            )
        };
        let (status, json) = body(ApiError::new(ErrorKind::Unauthorized, "no key"));
        assert_eq!(status, 401);
        assert_eq!(
            json,
            serde_json::json!({"error": {"message": "no key", "type": "invalid_request_error", "param": null, "code": "invalid_api_key"}})
        );
        let (status, json) = body(ApiError::new(ErrorKind::RateLimited, "slow down"));
        assert_eq!(status, 429);
        assert_eq!(json["error"]["code"], "rate_limit_exceeded");
        let (status, json) = body(ApiError::new(ErrorKind::Busy, "full"));
        assert_eq!(status, 503);
        assert_eq!(json["error"]["type"], "server_error");
    }

    proptest! {
        #[test]
        fn any_bytes_are_parsed_or_refused(body in proptest::collection::vec(any::<u8>(), 0..256)) {
            let _ = shape(&body);
        }

        #[test]
        fn any_json_of_strings_and_parts_is_parsed_or_refused(
            items in proptest::collection::vec(
                prop_oneof![
                    "\\PC{0,8}".prop_map(|t| serde_json::json!(t)),
                    "\\PC{0,8}".prop_map(|t| serde_json::json!({"type": "text", "text": t})),
                    "\\PC{0,8}".prop_map(|u| serde_json::json!({"type": "image_url", "image_url": {"url": u}})),
                    "\\PC{0,8}".prop_map(|k| serde_json::json!({"type": k})),
                ],
                0..40,
            )
        ) {
            let body = serde_json::json!({"input": items}).to_string();
            let _ = shape(body.as_bytes());
        }
    }
}
