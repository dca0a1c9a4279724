//! `POST /v1/image` (`docs/interface.md#routes`), and the image check every image route ends in.
//!
//! Order: the key (headers), its `image` scope, the plan's limits; then the query (`ref`,
//! `workflow`, `url`: unknown workflow 400, not allowed 403); then, before reading any body,
//! 503 `busy` if the shard's model queue is full; then the image, from the body (streamed
//! once into a pooled buffer, at most 15 MB, 413 from `Content-Length` before reading) or
//! from `url` (with an empty body; both: 400); then the header probe (415 not an image, 400
//! corrupt header, 413 over 16,384 px a side or over the plan's pixels), and only then the
//! decode and the models, on the shard's model worker.

use futures_lite::{AsyncRead, AsyncWrite};

use super::buffers::PooledBuffer;
use super::context::Context;
use super::finish::finish_check;
use super::request::RequestNotes;
use super::text::{validate_ref, DEFAULT_WORKFLOW};
use crate::auth::Caller;
use crate::bounds::{IMAGE_BYTES_MAX, IMAGE_SIDE_PX_MAX};
use crate::checks::board::ScoreBoard;
use crate::checks::image_error;
use crate::content::ContentKind;
use crate::error::{ApiError, ApiResult, ErrorKind};
use crate::http::conn::Exchange;
use crate::http::query;
use crate::http::response::Response;
use crate::image::probe::probe;
use crate::store::records::WorkflowRecord;

/// The query parameters of the image routes; a repeated one is refused.
#[derive(Debug, Default)]
pub struct ImageQuery {
    pub workflow: Option<String>,
    pub reference: Option<String>,
    pub url: Option<String>,
    pub api_secret: Option<String>,
    /// Sightengine's `models` (on `/1.0/check.json`).
    pub models: Option<String>,
    /// `/1.0/check.json`'s list fields.
    pub list_fields: super::form::ListFields,
    /// `media` given in a query (the GET compatible route refuses it).
    pub media: bool,
}

impl ImageQuery {
    pub fn parse(raw: &str) -> ApiResult<ImageQuery> {
        let mut parsed = ImageQuery::default();
        query::fill(raw, &mut parsed, |parsed, name| match name {
            "workflow" => Some(&mut parsed.workflow),
            "ref" => Some(&mut parsed.reference),
            "url" => Some(&mut parsed.url),
            "api_secret" => Some(&mut parsed.api_secret),
            "models" => Some(&mut parsed.models),
            "lists" => Some(&mut parsed.list_fields.lists),
            "add_to_list" => Some(&mut parsed.list_fields.add_to_list),
            "custom_id" => Some(&mut parsed.list_fields.custom_id),
            "media" => {
                parsed.media = true;
                None
            }
            _ => None, // api_user and others: accepted and ignored
        })
        .map_err(ApiError::bad_request)?;
        Ok(parsed)
    }
}

pub async fn check<S: AsyncRead + AsyncWrite + Unpin>(
    cx: &Context,
    exchange: &mut Exchange<'_, S>,
    notes: &mut RequestNotes,
) -> ApiResult<Response> {
    let caller = notes
        .admit_check(cx, &exchange.head, None, ContentKind::Image)
        .await?;
    let query = ImageQuery::parse(exchange.head.query())?;
    if let Some(reference) = &query.reference {
        validate_ref(reference)?;
        notes.reference = Some(reference.clone());
    }
    let workflows = cx.workflows()?;
    let workflow = authorize_image(notes, &caller, query.workflow.as_deref(), &workflows)?;
    let bytes = read_image(cx, exchange, &caller, query.url.as_deref()).await?;
    check_image(
        cx,
        &caller,
        notes,
        workflow,
        bytes,
        exchange.request_id.as_str(),
    )
    .await
}

/// An image from the body, or by `url` with an empty body (both: 400) for `caller`, into a
/// pooled buffer; 503 `busy` first if the shard's model queue is full. Empty when neither was
/// sent.
pub async fn read_image<'c, S: AsyncRead + AsyncWrite + Unpin>(
    cx: &'c Context,
    exchange: &mut Exchange<'_, S>,
    caller: &Caller,
    url: Option<&str>,
) -> ApiResult<PooledBuffer<'c>> {
    cx.refuse_if_busy()?;
    let mut bytes = cx.image_buffers.take();
    exchange
        .read_body(&mut bytes, IMAGE_BYTES_MAX, cx.body_deadline())
        .await?;
    match (url, bytes.is_empty()) {
        (Some(_), false) => {
            return Err(ApiError::bad_request(
                "send either a body or a `url`, not both",
            ))
        }
        (Some(url), true) => cx.download(caller, url, &mut bytes).await?,
        (None, _) => {}
    }
    Ok(bytes)
}

/// The workflow an image check runs: it exists, the key may use it, it has image checks.
/// Noted in `notes` once it is known to exist, so that a refusal names it in the journal.
pub fn authorize_image<'w>(
    notes: &mut RequestNotes,
    caller: &Caller,
    name: Option<&str>,
    workflows: &'w crate::store::view::Workflows,
) -> ApiResult<&'w std::rc::Rc<WorkflowRecord>> {
    let name = name.unwrap_or(DEFAULT_WORKFLOW);
    notes.note_workflow(workflows, name);
    let workflow = caller.authorize(ContentKind::Image, name, workflows)?;
    if workflow.definition.image_checks.is_empty() {
        return Err(ApiError::bad_request(format!(
            "workflow '{}' has no checks for images",
            workflow.name
        )));
    }
    Ok(workflow)
}

/// Probe, pixel limits, models, decision, answer. `bytes` goes back to its pool when dropped.
pub async fn check_image(
    cx: &Context,
    caller: &Caller,
    notes: &mut RequestNotes,
    workflow: &WorkflowRecord,
    bytes: PooledBuffer<'_>,
    request_id: &str,
) -> ApiResult<Response> {
    let board = score_image(cx, caller, workflow, bytes).await?;
    Ok(finish_check(cx, notes, workflow, &board, request_id))
}

/// Probe, pixel limits and the workflow's image checks: the scores.
pub async fn score_image(
    cx: &Context,
    caller: &Caller,
    workflow: &WorkflowRecord,
    bytes: PooledBuffer<'_>,
) -> ApiResult<ScoreBoard> {
    let definition = &workflow.definition;
    score_image_with(
        cx,
        caller,
        &definition.image_checks,
        &definition.lists,
        bytes,
    )
    .await
}

/// Probe, pixel limits and the image checks named `checks` (with the caller's lists named
/// `lists`): the scores.
pub async fn score_image_with(
    cx: &Context,
    caller: &Caller,
    checks: &[String],
    lists: &[String],
    mut bytes: PooledBuffer<'_>,
) -> ApiResult<ScoreBoard> {
    let probed = probe(&bytes).map_err(image_error)?;
    let pixels = u64::from(probed.width) * u64::from(probed.height);
    let pixels_max = caller.org.limits.image_pixels_max;
    if probed.width > IMAGE_SIDE_PX_MAX || probed.height > IMAGE_SIDE_PX_MAX || pixels > pixels_max
    {
        return Err(ApiError::new(
            ErrorKind::ImageTooLarge,
            format!(
                "the image is {} x {} px; the limits are {IMAGE_SIDE_PX_MAX} px a side and {pixels_max} pixels on this plan",
                probed.width, probed.height
            ),
        ));
    }
    let lists = cx.lists_of(&caller.org.record.name, lists);
    // The bytes go to the model worker's thread (unless a result is kept for them) and come
    // back for reuse.
    let (returned, scored) = cx
        .checks
        .check_image(checks, &lists, std::mem::take(&mut *bytes), probed)
        .await;
    *bytes = returned;
    scored
}
