//! `POST /1.0/text/check-workflow.json` (SPEC 4.6): a multipart CompatTextForm, answered with
//! CompatAnswer or CompatErrorEnvelope.
//!
//! Order: the upload cap (503), the content type (400: SPEC 4.6 has no 415), the form within
//! 10 s (408; fields over 64 KiB: 413), then the key from `api_secret` or the headers (401 if
//! they differ), then `text` (400 missing, 413 over the plan) and the workflow, then the checks.

use futures_lite::{AsyncRead, AsyncWrite};

use super::answer::Shape;
use super::form::{read_form, FormSpec, UploadSlot};
use super::text::{check_text, TextCheck, DEFAULT_WORKFLOW};
use super::RequestCtx;
use crate::auth::ContentKind;
use crate::error::{ApiError, ApiResult, ErrorKind};
use crate::http::conn::Exchange;
use crate::http::response::Response;
use crate::server::shard::Shard;

pub async fn check<S: AsyncRead + AsyncWrite + Unpin>(
    shard: &Shard,
    exchange: &mut Exchange<'_, S>,
    ctx: &mut RequestCtx,
) -> ApiResult<Response> {
    let _slot = UploadSlot::acquire(shard)?;
    let limits = &shard.config.limits;
    let spec = FormSpec {
        payload_field: "text",
        payload_bytes_max: limits.text_form_bytes_max,
        body_bytes_max: limits.text_form_bytes_max,
        not_multipart: ErrorKind::BadRequest,
    };
    let mut payload = shard.buffers.take();
    let result = async {
        let form = read_form(shard, exchange, &spec, &mut payload).await?;
        let caller = ctx
            .admit_check(
                shard,
                &exchange.head,
                form.api_secret.as_deref(),
                ContentKind::Text,
            )
            .await?;
        if !form.payload_present {
            return Err(ApiError::bad_request("the form has no `text` field"));
        }
        let text = std::str::from_utf8(&payload)
            .map_err(|_| ApiError::bad_request("the `text` field is not UTF-8"))?;
        check_text(
            shard,
            &caller,
            ctx,
            TextCheck {
                workflow: form.workflow.as_deref().unwrap_or(DEFAULT_WORKFLOW),
                text,
                context: None,
                reference: None,
                shape: Shape::Compat { unix_ms: 0 },
                request_id: exchange.request_id.as_str(),
            },
        )
        .await
    }
    .await;
    shard.buffers.give(payload);
    result
}
