//! `POST /v1/image` (SPEC 4.1), and the image check every image route ends in.
//!
//! Order: the key (headers), its `image` scope, the plan's limits; then the query (`ref`,
//! `workflow`, `url`: unknown workflow 400, not allowed 403); then, before reading any body,
//! 503 `busy` if the shard's model queue is full; then the image, from the body (streamed
//! once into a pooled buffer, at most 15 MB, 413 from `Content-Length` before reading) or
//! from `url` (with an empty body; both: 400); then the header probe (415 not an image, 400
//! corrupt header, 413 over 16,384 px a side or over the plan's pixels), and only then the
//! decode and the models, on the shard's model worker.

use std::time::{Duration, Instant};

use futures_lite::{AsyncRead, AsyncWrite};

use super::answer::{check_answer, CheckAnswer, Shape};
use super::text::{validate_ref, DEFAULT_WORKFLOW};
use super::{CheckSummary, RequestCtx};
use crate::auth::{Caller, ContentKind};
use crate::checks::image_error;
use crate::decision::decide;
use crate::error::{ApiError, ApiResult, ErrorKind};
use crate::http::conn::Exchange;
use crate::http::query;
use crate::http::response::Response;
use crate::image::probe::probe;
use crate::image::{IMAGE_BYTES_MAX, IMAGE_SIDE_MAX};
use crate::metrics::Model;
use crate::server::shard::Shard;
use crate::store::records::WorkflowRecord;

/// The query parameters of the image routes; a repeated one is refused.
#[derive(Debug, Default)]
pub struct ImageQuery {
    pub workflow: Option<String>,
    pub reference: Option<String>,
    pub url: Option<String>,
    pub api_secret: Option<String>,
    /// `media` given in a query (the GET compatible route refuses it).
    pub media: bool,
}

impl ImageQuery {
    pub fn parse(raw: &str) -> ApiResult<ImageQuery> {
        let mut parsed = ImageQuery::default();
        for pair in query::pairs(raw) {
            let (name, value) = pair.map_err(ApiError::bad_request)?;
            let slot = match name.as_ref() {
                "workflow" => &mut parsed.workflow,
                "ref" => &mut parsed.reference,
                "url" => &mut parsed.url,
                "api_secret" => &mut parsed.api_secret,
                "media" => {
                    parsed.media = true;
                    continue;
                }
                _ => continue, // api_user and others: accepted and ignored
            };
            if slot.is_some() {
                return Err(ApiError::bad_request(format!(
                    "query parameter `{name}` given twice"
                )));
            }
            *slot = Some(value.into_owned());
        }
        Ok(parsed)
    }
}

pub async fn check<S: AsyncRead + AsyncWrite + Unpin>(
    shard: &Shard,
    exchange: &mut Exchange<'_, S>,
    ctx: &mut RequestCtx,
) -> ApiResult<Response> {
    let caller = ctx
        .admit_check(shard, &exchange.head, None, ContentKind::Image)
        .await?;
    let query = ImageQuery::parse(&exchange.head.query)?;
    if let Some(reference) = &query.reference {
        validate_ref(reference)?;
        ctx.reference = Some(reference.clone());
    }
    let workflows = shard.workflows()?;
    let workflow = authorize_image(ctx, &caller, query.workflow.as_deref(), &workflows)?;
    shard.refuse_if_busy()?;
    let mut bytes = shard.image_buffers.take();
    let deadline = Instant::now() + Duration::from_millis(shard.config.limits.body_read_timeout_ms);
    let result = async {
        exchange
            .read_body(&mut bytes, IMAGE_BYTES_MAX, deadline)
            .await?;
        match (&query.url, bytes.is_empty()) {
            (Some(_), false) => Err(ApiError::bad_request(
                "send either a body or a `url`, not both",
            )),
            (Some(url), true) => shard.download(url, &mut bytes).await,
            (None, _) => Ok(()),
        }
    }
    .await;
    if let Err(error) = result {
        shard.image_buffers.give(bytes);
        return Err(error);
    }
    check_image(
        shard,
        &caller,
        ctx,
        workflow,
        bytes,
        exchange.request_id.as_str(),
        Shape::Native,
    )
    .await
}

/// The workflow an image check runs: it exists, the key may use it, it has image checks.
/// Noted in `ctx` once it is known to exist, so that a refusal names it in the journal.
pub fn authorize_image<'w>(
    ctx: &mut RequestCtx,
    caller: &Caller,
    name: Option<&str>,
    workflows: &'w crate::store::view::Workflows,
) -> ApiResult<&'w std::rc::Rc<WorkflowRecord>> {
    let name = name.unwrap_or(DEFAULT_WORKFLOW);
    ctx.note_workflow(workflows, name);
    let workflow = caller.authorize(ContentKind::Image, name, workflows)?;
    if workflow.definition.image_checks.is_empty() {
        return Err(ApiError::bad_request(format!(
            "workflow '{}' has no checks for images",
            workflow.name
        )));
    }
    Ok(workflow)
}

/// Probe, pixel limits, models, decision, answer. `bytes` goes back to the shard's pool.
pub async fn check_image(
    shard: &Shard,
    caller: &Caller,
    ctx: &mut RequestCtx,
    workflow: &WorkflowRecord,
    bytes: Vec<u8>,
    request_id: &str,
    shape: Shape,
) -> ApiResult<Response> {
    let probed = match probe(&bytes) {
        Ok(probed) => probed,
        Err(error) => {
            shard.image_buffers.give(bytes);
            return Err(image_error(error));
        }
    };
    let pixels = u64::from(probed.width) * u64::from(probed.height);
    let pixels_max = caller.org.limits.image_pixels_max;
    if probed.width > IMAGE_SIDE_MAX || probed.height > IMAGE_SIDE_MAX || pixels > pixels_max {
        shard.image_buffers.give(bytes);
        return Err(ApiError::new(
            ErrorKind::ImageTooLarge,
            format!(
                "the image is {} x {} px; the limits are {IMAGE_SIDE_MAX} px a side and {pixels_max} pixels on this plan",
                probed.width, probed.height
            ),
        ));
    }
    let (bytes, scored) = shard
        .engine
        .check_image(&workflow.definition.image_checks, bytes, probed)
        .await;
    shard.image_buffers.give(bytes);
    let (board, stages) = scored?;
    if let Some(format) = stages.format {
        shard
            .metrics
            .image_stages(format, stages.decode_us, stages.resize_us);
    }
    for (model, us) in [Model::OpenNsfw, Model::Nsfwjs]
        .into_iter()
        .zip(stages.model_us)
    {
        if let Some(us) = us {
            shard.metrics.model_run(model, us);
        }
    }
    let decision = decide(&workflow.definition, &board);
    ctx.check = Some(CheckSummary {
        workflow: workflow.name.clone(),
        version: workflow.version,
        action: decision.action.as_str(),
        scores: decision.scores.clone(),
        unchecked: decision.unchecked.clone(),
    });
    let shape = match shape {
        Shape::Native => Shape::Native,
        Shape::Compat { .. } => Shape::Compat {
            unix_ms: shard.now_ms(),
        },
    };
    Ok(check_answer(&CheckAnswer {
        workflow,
        decision: &decision,
        request_id,
        reference: ctx.reference.as_deref(),
        time_ms: ctx.started.elapsed().as_millis() as u64,
        shape,
    }))
}
