//! `POST` and `GET /1.0/check-workflow.json` (`docs/interface.md#routes`): the compatible image routes,
//! answered with CompatAnswer or CompatErrorEnvelope. Sightengine's `/1.0/check.json` receives
//! its image the same way ([`receive`]).
//!
//! POST: the upload cap (503), a multipart form (415 if not one) within 10 s (408), `media`
//! streamed into the shard's image buffer (15 MB), other fields 64 KiB (413); then the key
//! (`api_secret` or the headers, 401 if they differ), its scope and the plan's limits; then
//! `media` or `url` (exactly one: 400; an empty `media`: 415), then the image check.
//!
//! GET: the key from `api_secret` in the query (or the headers), then `url`, which is
//! required: a query cannot carry an image, so `media` in it counts as a missing image (400).

use std::rc::Rc;

use futures_lite::{AsyncRead, AsyncWrite};

use crate::api::buffers::PooledBuffer;
use crate::api::context::Context;
use crate::api::form::{read_form_and_admit, FormSpec};
use crate::api::image::{authorize_image, check_image, ImageQuery};
use crate::api::request::RequestNotes;
use crate::auth::Caller;
use crate::bounds::IMAGE_BYTES_MAX;
use crate::content::ContentKind;
use crate::error::{ApiError, ApiResult, ErrorKind};
use crate::http::conn::Exchange;
use crate::http::head::Method;
use crate::http::response::Response;
use crate::store::records::WorkflowRecord;

/// Room in a compatible image form for the fields around `media`.
pub const FORM_OVERHEAD_BYTES_MAX: usize = 1 << 20;

/// A compatible image request, received: its caller, the image, and its small fields.
pub struct Received<'c> {
    pub caller: Caller,
    pub bytes: PooledBuffer<'c>,
    /// The workflow named (or `default`), which the key may use for images.
    pub workflow: Rc<WorkflowRecord>,
    pub models: Option<String>,
    /// `/1.0/check.json`'s list fields (ignored by `check-workflow`, like `models`).
    pub list_fields: crate::api::form::ListFields,
    /// The `url` the image came from, or the uploaded file's name.
    pub uri: Option<String>,
}

pub async fn check<S: AsyncRead + AsyncWrite + Unpin>(
    cx: &Context,
    exchange: &mut Exchange<'_, S>,
    notes: &mut RequestNotes,
) -> ApiResult<Response> {
    let received = receive(cx, exchange, notes).await?;
    check_image(
        cx,
        &received.caller,
        notes,
        &received.workflow,
        received.bytes,
        exchange.request_id.as_str(),
    )
    .await
}

/// The caller and the image of a compatible image request: a POST form's `media` or `url`, or
/// a GET query's `url`, in the order the module doc gives.
pub async fn receive<'c, S: AsyncRead + AsyncWrite + Unpin>(
    cx: &'c Context,
    exchange: &mut Exchange<'_, S>,
    notes: &mut RequestNotes,
) -> ApiResult<Received<'c>> {
    if exchange.head.method == Method::Post {
        receive_form(cx, exchange, notes).await
    } else {
        receive_query(cx, exchange, notes).await
    }
}

async fn receive_form<'c, S: AsyncRead + AsyncWrite + Unpin>(
    cx: &'c Context,
    exchange: &mut Exchange<'_, S>,
    notes: &mut RequestNotes,
) -> ApiResult<Received<'c>> {
    cx.refuse_if_busy()?;
    let spec = FormSpec {
        payload_field: "media",
        payload_bytes_max: IMAGE_BYTES_MAX,
        body_bytes_max: IMAGE_BYTES_MAX + FORM_OVERHEAD_BYTES_MAX,
        not_multipart: ErrorKind::UnsupportedMedia,
    };
    let mut bytes = cx.image_buffers.take();
    let (form, caller) =
        read_form_and_admit(cx, exchange, notes, &spec, &mut bytes, ContentKind::Image).await?;
    let workflows = cx.workflows()?;
    let workflow = authorize_image(notes, &caller, form.workflow.as_deref(), &workflows)?.clone();
    let uri = match (form.payload_present, &form.url) {
        (true, Some(_)) => {
            return Err(ApiError::bad_request(
                "send either `media` or `url`, not both",
            ))
        }
        (false, None) => {
            return Err(ApiError::bad_request(
                "the form has neither `media` nor `url`",
            ))
        }
        (true, None) if bytes.is_empty() => {
            return Err(ApiError::new(
                ErrorKind::UnsupportedMedia,
                "the `media` field is empty",
            ))
        }
        (true, None) => form
            .payload_info
            .as_ref()
            .and_then(|part| part.filename.clone()),
        (false, Some(url)) => {
            cx.download(&caller, url, &mut bytes).await?;
            Some(url.clone())
        }
    };
    Ok(Received {
        caller,
        bytes,
        workflow,
        models: form.models,
        list_fields: form.list_fields,
        uri,
    })
}

async fn receive_query<'c, S: AsyncRead + AsyncWrite + Unpin>(
    cx: &'c Context,
    exchange: &mut Exchange<'_, S>,
    notes: &mut RequestNotes,
) -> ApiResult<Received<'c>> {
    let query = ImageQuery::parse(exchange.head.query())?;
    let caller = notes
        .admit_check(
            cx,
            &exchange.head,
            query.api_secret.as_deref(),
            ContentKind::Image,
        )
        .await?;
    let workflows = cx.workflows()?;
    let workflow = authorize_image(notes, &caller, query.workflow.as_deref(), &workflows)?.clone();
    if query.media {
        return Err(ApiError::bad_request(
            "a query cannot carry an image: `media` counts as a missing image; send `url`",
        ));
    }
    let url = query
        .url
        .ok_or_else(|| ApiError::bad_request("`url` is required on this route"))?;
    cx.refuse_if_busy()?;
    let mut bytes = cx.image_buffers.take();
    cx.download(&caller, &url, &mut bytes).await?;
    Ok(Received {
        caller,
        bytes,
        workflow,
        models: query.models,
        list_fields: query.list_fields,
        uri: Some(url),
    })
}
