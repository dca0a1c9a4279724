//! `POST /1.0/text/check-workflow.json` (`docs/interface.md#routes`): a multipart CompatTextForm, answered with
//! CompatAnswer or CompatErrorEnvelope.
//!
//! Order: the upload cap (503), the content type (400: the compatible text route's statuses have no 415), the form within
//! 10 s (408; fields over 64 KiB: 413), then the key from `api_secret` or the headers (401 if
//! they differ), then `text` (400 missing, 413 over the plan) and the workflow, then the checks.

use futures_lite::{AsyncRead, AsyncWrite};

use crate::api::buffers::PooledBuffer;
use crate::api::context::Context;
use crate::api::form::{read_form_and_admit, Form, FormSpec};
use crate::api::request::RequestNotes;
use crate::api::text::{check_text, TextCheck, DEFAULT_WORKFLOW};
use crate::auth::Caller;
use crate::content::ContentKind;
use crate::error::{ApiError, ApiResult, ErrorKind};
use crate::http::conn::Exchange;
use crate::http::response::Response;

pub async fn check<S: AsyncRead + AsyncWrite + Unpin>(
    cx: &Context,
    exchange: &mut Exchange<'_, S>,
    notes: &mut RequestNotes,
) -> ApiResult<Response> {
    let (form, caller, payload) = read_text_form(cx, exchange, notes).await?;
    let text = form_text(&form, &payload)?;
    check_text(
        cx,
        &caller,
        notes,
        TextCheck {
            workflow: form.workflow.as_deref().unwrap_or(DEFAULT_WORKFLOW),
            text,
            context: None,
            request_id: exchange.request_id.as_str(),
        },
    )
    .await
}

/// The form of a compatible text route (its `text` into one of the shard's text buffers), and
/// its caller admitted.
pub async fn read_text_form<'c, S: AsyncRead + AsyncWrite + Unpin>(
    cx: &'c Context,
    exchange: &mut Exchange<'_, S>,
    notes: &mut RequestNotes,
) -> ApiResult<(Form, Caller, PooledBuffer<'c>)> {
    let limits = &cx.request_limits;
    let spec = FormSpec {
        payload_field: "text",
        payload_bytes_max: limits.text_form_bytes_max,
        body_bytes_max: limits.text_form_bytes_max,
        not_multipart: ErrorKind::BadRequest,
    };
    let mut payload = cx.text_buffers.take();
    let (form, caller) =
        read_form_and_admit(cx, exchange, notes, &spec, &mut payload, ContentKind::Text).await?;
    Ok((form, caller, payload))
}

/// The form's `text`: 400 if it has none or it is not UTF-8.
pub fn form_text<'p>(form: &Form, payload: &'p [u8]) -> ApiResult<&'p str> {
    if !form.payload_present {
        return Err(ApiError::bad_request("the form has no `text` field"));
    }
    std::str::from_utf8(payload).map_err(|_| ApiError::bad_request("the `text` field is not UTF-8"))
}
