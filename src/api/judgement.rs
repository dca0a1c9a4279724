//! `POST /v1/feedback` and `GET /v1/checks/{request_id}` (`docs/judgement.md`), for keys with
//! the `feedback` scope, on the checks of the key's own organization (another's, or an id no
//! check has, is 404: whether a check exists is not told across organizations).
//!
//! Feedback is merged into what the check has ([`crate::store::feedback`]) in a durable store
//! commit on the shard's blocking threads, shared by the feedback given meanwhile
//! ([`super::feedback_writes`]). Explaining a check reads its journal record (from
//! any shard's journal: [`crate::journal::shelf`]), the thresholds of the workflow version it
//! was decided under, and its feedback; no content is kept, so none is shown. Each request
//! takes one rate token of the key; neither is a check (no quota, no journal record).

use std::collections::BTreeMap;

use futures_lite::{AsyncRead, AsyncWrite};
use serde::{Deserialize, Serialize};

use super::context::Context;
use super::envelope::json_response;
use super::request::RequestNotes;
use super::text::{parse_object, require_json};
use crate::auth::Caller;
use crate::clock::rfc3339;
use crate::error::{ApiError, ApiResult, ErrorKind};
use crate::http::conn::Exchange;
use crate::http::head::RequestHead;
use crate::http::response::Response;
use crate::journal::JournalRecord;
use crate::judgement::replay;
use crate::store::feedback::{Feedback, FeedbackRecord, Given, LABELS_MAX};

/// A feedback body: a request id, an action, up to [`LABELS_MAX`] labels and a note of a
/// thousand characters fit in well under this.
pub const FEEDBACK_BODY_BYTES_MAX: usize = 16 * 1024;
/// How long a route waits, at most, for a record still staged to reach the disk journal.
pub const STAGED_WAIT_MAX: std::time::Duration = std::time::Duration::from_secs(2);

const NO_SUCH_CHECK: &str = "no check of this organization has that request id";

#[derive(Deserialize)]
#[serde(deny_unknown_fields)]
struct FeedbackRequest {
    request_id: String,
    action: Option<String>,
    labels: Option<BTreeMap<String, bool>>,
    note: Option<String>,
}

/// Feedback as the routes show it.
#[derive(Serialize)]
struct FeedbackView<'a> {
    action: Option<&'a str>,
    labels: &'a BTreeMap<String, bool>,
    note: Option<&'a str>,
    given_by: &'a str,
    first_given: String,
    last_given: String,
}

impl<'a> FeedbackView<'a> {
    fn of(record: &'a FeedbackRecord) -> FeedbackView<'a> {
        FeedbackView {
            action: record.action.as_deref(),
            labels: &record.labels,
            note: record.note.as_deref(),
            given_by: &record.given_by,
            first_given: rfc3339(record.first_ms),
            last_given: rfc3339(record.updated_ms),
        }
    }
}

#[derive(Serialize)]
struct FeedbackAnswer<'a> {
    status: &'static str,
    request_id: &'a str,
    feedback: FeedbackView<'a>,
}

fn require_feedback_scope(caller: &Caller) -> ApiResult<()> {
    if caller.key.scopes.feedback {
        Ok(())
    } else {
        Err(ApiError::forbidden(
            "this key has no `feedback` scope (create one with --scopes feedback)",
        ))
    }
}

/// The journal record of check `request_id` of the caller's organization.
async fn check_of(
    cx: &Context,
    caller: &Caller,
    request_id: &str,
) -> ApiResult<JournalRecord<'static>> {
    if !crate::request_id::is_written_id(request_id) {
        return Err(ApiError::new(ErrorKind::NotFound, NO_SUCH_CHECK));
    }
    let mut record = find(cx, request_id)?;
    // Answered within the last sync interval, the record may still be staged.
    if record.is_none() {
        if let Some(every) = cx.journal.staging_interval() {
            glommio::timer::sleep(every.saturating_mul(2).min(STAGED_WAIT_MAX)).await;
            record = find(cx, request_id)?;
        }
    }
    record
        .filter(|record| record.org.as_deref() == Some(caller.org.record.name.as_str()))
        .ok_or_else(|| ApiError::new(ErrorKind::NotFound, NO_SUCH_CHECK))
}

fn find(cx: &Context, request_id: &str) -> ApiResult<Option<JournalRecord<'static>>> {
    cx.journals.find(request_id).map_err(|error| {
        tracing::error!(error = format!("{error:#}"), "reading the journal failed");
        ApiError::internal("the journal could not be read")
    })
}

/// `POST /v1/feedback`.
pub async fn feedback<S: AsyncRead + AsyncWrite + Unpin>(
    cx: &Context,
    exchange: &mut Exchange<'_, S>,
    notes: &mut RequestNotes,
) -> ApiResult<Response> {
    let caller = notes.authenticate(cx, &exchange.head, None)?;
    require_feedback_scope(&caller)?;
    cx.limits.take_rate(&caller, notes.at_ms).await?;
    require_json(exchange.head.content_type())?;
    let mut body = Vec::new();
    exchange
        .read_body(&mut body, FEEDBACK_BODY_BYTES_MAX, cx.body_deadline())
        .await?;
    let request: FeedbackRequest = parse_object(
        &cx.json_buffers,
        &mut body,
        LABELS_MAX + 8,
        "the body is {\"request_id\": string, \"action\": \"accept\", \"review\" or \"reject\" (optional), \"labels\": {category: boolean} (optional), \"note\": string (optional)}",
    )?;
    let given = Feedback {
        action: request.action,
        labels: request.labels.unwrap_or_default(),
        note: request.note,
    };
    given.validate().map_err(ApiError::bad_request)?;
    let record = check_of(cx, &caller, &request.request_id).await?;
    if record.action.is_none() {
        return Err(ApiError::bad_request(
            "that request was refused before its checks ran: there is no decision to give feedback on",
        ));
    }
    let request_id = request.request_id;
    let given = Given {
        request_id: request_id.clone(),
        org: caller.org.record.name.clone(),
        feedback: given,
        given_by: caller.key.id.clone(),
        now_ms: cx.now_ms(),
    };
    let kept = cx
        .feedback_writes
        .give(cx.store(), given)
        .await
        .map_err(|error| {
            tracing::error!(error, "storing feedback failed");
            ApiError::internal("the feedback could not be stored")
        })?;
    Ok(json_response(
        200,
        &FeedbackAnswer {
            status: "success",
            request_id: &request_id,
            feedback: FeedbackView::of(&kept),
        },
    ))
}

#[derive(Serialize)]
struct WorkflowRef<'a> {
    name: &'a str,
    version: u64,
}

#[derive(Serialize)]
struct CategoryView<'a> {
    category: &'a str,
    score: f64,
    /// The thresholds of the version the check was decided under, when that version is kept.
    review: Option<f64>,
    reject: Option<f64>,
    /// `reject`, `review` or `accept`: what this category alone decided.
    decides: Option<&'static str>,
}

#[derive(Serialize)]
struct Explained<'a> {
    status: &'static str,
    request_id: &'a str,
    time: String,
    route: &'a str,
    http_status: u16,
    workflow: Option<WorkflowRef<'a>>,
    /// The action answered; `None` for a request refused before its checks ran.
    action: Option<&'a str>,
    /// The refusal's `error.type`, for such a request.
    error_type: Option<&'a str>,
    /// The categories whose scores reached the threshold of the action answered.
    decided_by: Vec<&'a str>,
    categories: Vec<CategoryView<'a>>,
    unchecked: &'a [std::borrow::Cow<'a, str>],
    /// Whether the workflow version's thresholds were found (every version imported since
    /// versions are kept, and the version in force).
    thresholds_kept: bool,
    /// Whether the thresholds give the action answered; `false` when something other than
    /// scores decided (an allow list's match exempts an image).
    thresholds_give_action: Option<bool>,
    feedback: Option<FeedbackView<'a>>,
}

/// `GET /v1/checks/{request_id}`.
pub async fn explain(
    cx: &Context,
    head: &RequestHead,
    notes: &mut RequestNotes,
) -> ApiResult<Response> {
    let caller = notes.authenticate(cx, head, None)?;
    require_feedback_scope(&caller)?;
    cx.limits.take_rate(&caller, notes.at_ms).await?;
    let request_id = head
        .path()
        .strip_prefix("/v1/checks/")
        .unwrap_or_default()
        .to_owned();
    let record = check_of(cx, &caller, &request_id).await?;
    let store = cx.store();
    let internal = |error: anyhow::Error| {
        tracing::error!(error = format!("{error:#}"), "reading the store failed");
        ApiError::internal("the store could not be read")
    };
    // The version in force is in the shard's cache; an older one is read from the store.
    let workflows = cx.workflows()?;
    let version = match (&record.workflow, record.workflow_version) {
        (Some(name), Some(version)) => match workflows.get(name.as_ref()) {
            Some(current) if current.version == version => Some(current.clone()),
            _ => store
                .workflow_version(name, version)
                .map_err(internal)?
                .map(std::rc::Rc::new),
        },
        _ => None,
    };
    let feedback = store.feedback_on(&request_id).map_err(internal)?;
    let definition = version.as_ref().map(|record| &record.definition);
    let mut categories = Vec::with_capacity(record.scores.len());
    let mut decided_by = Vec::new();
    // The strongest part a category takes is the action the thresholds give.
    let mut strongest = replay::Part::None;
    for (category, score) in &record.scores {
        let thresholds = definition.and_then(|def| def.categories.get(category.as_ref()));
        let decides = definition.map(|def| {
            let part = replay::part(def, category, *score);
            strongest = strongest.max(part);
            part.as_str()
        });
        if decides.is_some() && decides == record.action.as_deref() && decides != Some("accept") {
            decided_by.push(category.as_ref());
        }
        categories.push(CategoryView {
            category,
            score: *score,
            review: thresholds.map(|t| t.review),
            reject: thresholds.map(|t| t.reject),
            decides,
        });
    }
    let thresholds_give_action = match (definition, record.action.as_deref()) {
        (Some(_), Some(action)) => Some(strongest.as_str() == action),
        _ => None,
    };
    Ok(json_response(
        200,
        &Explained {
            status: "success",
            request_id: &request_id,
            time: rfc3339(record.unix_ms),
            route: &record.route,
            http_status: record.status,
            workflow: record
                .workflow
                .as_deref()
                .zip(record.workflow_version)
                .map(|(name, version)| WorkflowRef { name, version }),
            action: record.action.as_deref(),
            error_type: record.error_type.as_deref(),
            decided_by,
            categories,
            unchecked: &record.unchecked,
            thresholds_kept: version.is_some(),
            thresholds_give_action,
            feedback: feedback.as_ref().map(FeedbackView::of),
        },
    ))
}
