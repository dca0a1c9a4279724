//! The JSON shapes the native and Sightengine-shaped routes share: the error envelope and
//! `CompatRequest` (`docs/interface.md#decisions`).
//!
//! Native routes answer errors with `{status, error}`; the Sightengine-shaped `/1.0/` routes
//! add `request {id, timestamp, operations}`. Which shape a route's errors take is chosen by
//! its API ([`super::error_answer`]), so that errors raised before routing (a bad head, a
//! timeout) still use the right one; the headers every error carries are [`with_headers`]'s.

use serde::Serialize;

use crate::error::ApiError;
use crate::http::response::{HeaderValue, Response};

#[derive(Serialize)]
pub struct ErrorBody<'a> {
    #[serde(rename = "type")]
    pub kind: &'static str,
    pub code: u16,
    pub message: &'a str,
}

#[derive(Serialize)]
struct ErrorEnvelope<'a> {
    status: &'static str,
    error: ErrorBody<'a>,
    #[serde(skip_serializing_if = "Option::is_none")]
    request: Option<CompatRequest<'a>>,
}

/// `request` of the compatible answers.
#[derive(Serialize, Clone, Copy)]
pub struct CompatRequest<'a> {
    pub id: &'a str,
    /// Seconds since the epoch, when the gateway answered.
    pub timestamp: f64,
    /// 1 for a check that ran, 0 for a refusal.
    pub operations: u32,
}

/// Serialises `value` as a JSON answer body. Serialising our own structs cannot fail; if it
/// ever did, the client gets a 500 rather than a broken body.
pub fn json_response<T: Serialize>(status: u16, value: &T) -> Response {
    match simd_json::to_vec(value) {
        Ok(body) => Response::json(status, body),
        Err(error) => {
            tracing::error!(%error, "serialising an answer failed");
            Response::static_json(
                500,
                br#"{"status":"failure","error":{"type":"internal","code":500,"message":"the answer could not be serialised"}}"#,
            )
        }
    }
}

/// The challenges of a 401: a bearer token, or the key in `X-Api-Key` (on the compatible
/// routes also `api_secret`).
pub const WWW_AUTHENTICATE: &str =
    r#"Bearer realm="modgate", ApiKey realm="modgate", header="X-Api-Key""#;

/// `{status: "failure", error: {type, code, message}}` for `error`, its `type` being `kind`,
/// with the compatible routes' `request` when there is one.
pub fn error_envelope(
    error: &ApiError,
    kind: &'static str,
    request: Option<CompatRequest<'_>>,
) -> Response {
    let status = error.kind.status();
    json_response(
        status,
        &ErrorEnvelope {
            status: "failure",
            error: ErrorBody {
                kind,
                code: status,
                message: &error.message,
            },
            request,
        },
    )
}

/// The headers every error answer carries, whatever its shape: `Retry-After`, the 401's
/// challenges (RFC 9110 11.6.1), a 405's `Allow`.
pub fn with_headers(mut response: Response, error: &ApiError) -> Response {
    if let Some(seconds) = error.retry_after_s {
        response
            .headers
            .push(("retry-after", HeaderValue::Int(u64::from(seconds))));
    }
    if response.status == 401 {
        response
            .headers
            .push(("www-authenticate", HeaderValue::Static(WWW_AUTHENTICATE)));
    }
    if let Some(allow) = error.allow {
        response.headers.push(("allow", HeaderValue::Static(allow)));
    }
    response
}
