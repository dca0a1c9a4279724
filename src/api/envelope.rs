//! The JSON shapes every route shares: error envelopes and `CompatRequest` (`docs/interface.md#decisions`).
//!
//! Native routes answer errors with `{status, error}`; the compatible `/1.0/` routes add
//! `request {id, timestamp, operations}`. Which one a path gets is [`is_compat_path`]'s call,
//! so that errors raised before routing (a bad head, a timeout) still use the right envelope.

use serde::Serialize;

use crate::error::ApiError;
use crate::http::response::{HeaderValue, Response};
use crate::request_id::RequestId;

/// Whether `path` is one of the compatible routes (any other path, `/1.0/...` included, gets
/// the native envelope, as the OpenAPI document says of 404s).
pub fn is_compat_path(path: &str) -> bool {
    crate::route::Route::find(path).is_some_and(crate::route::Route::is_compat)
}

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

/// The answer for `error`, in the envelope of `path` (OpenAI's on its moderation route).
/// The challenges of a 401: a bearer token, or the key in `X-Api-Key` (on the compatible
/// routes also `api_secret`).
pub const WWW_AUTHENTICATE: &str =
    r#"Bearer realm="modgate", ApiKey realm="modgate", header="X-Api-Key""#;

pub fn error_response(
    error: &ApiError,
    path: &str,
    request_id: &RequestId,
    unix_ms: i64,
) -> Response {
    use crate::route::Route;
    let (status, mut kind) = error.kind.wire();
    if path == Route::SightengineCheck.path() || path == Route::SightengineText.path() {
        kind = error.kind.sightengine_type();
    }
    let request = is_compat_path(path).then(|| CompatRequest {
        id: request_id.as_str(),
        timestamp: unix_ms as f64 / 1000.0,
        operations: 0,
    });
    let mut response = if path == Route::Moderations.path() {
        super::openai::error_response(error)
    } else if path == Route::Perspective.path() || path == Route::Discovery.path() {
        super::perspective::error_response(error)
    } else {
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
    };
    if let Some(seconds) = error.retry_after_s {
        response
            .headers
            .push(("retry-after", HeaderValue::Int(u64::from(seconds))));
    }
    if response.status == 401 {
        // Every 401 names the ways a key can be sent (RFC 9110 11.6.1).
        response
            .headers
            .push(("www-authenticate", HeaderValue::Static(WWW_AUTHENTICATE)));
    }
    if let Some(allow) = error.allow {
        response.headers.push(("allow", HeaderValue::Static(allow)));
    }
    response
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::error::ErrorKind;

    #[test]
    fn envelopes() {
        let id = RequestId::from_bits(1);
        let error = ApiError::new(ErrorKind::Busy, "full").with_retry_after(2);
        let native = error_response(&error, "/v1/text", &id, 1500);
        assert_eq!(native.status, 503);
        assert_eq!(
            std::str::from_utf8(&native.body).unwrap(),
            r#"{"status":"failure","error":{"type":"busy","code":503,"message":"full"}}"#
        );
        assert!(native
            .headers
            .contains(&("retry-after", HeaderValue::Int(2))));
        let compat = error_response(&error, "/1.0/check-workflow.json", &id, 1500);
        let text = std::str::from_utf8(&compat.body).unwrap();
        assert!(
            text.ends_with(&format!(
                r#""request":{{"id":"{}","timestamp":1.5,"operations":0}}}}"#,
                id.as_str()
            )),
            "{text}"
        );
        assert!(text.contains(r#""type":"busy""#), "{text}");
        // Sightengine's own routes answer its error types; check-workflow keeps modgate's.
        for path in ["/1.0/check.json", "/1.0/text/check.json"] {
            let answer = error_response(&error, path, &id, 1500);
            assert_eq!(answer.status, 503);
            let text = std::str::from_utf8(&answer.body).unwrap();
            assert!(text.contains(r#""type":"api_error","code":503"#), "{text}");
        }
        let quota = ApiError::new(ErrorKind::QuotaExceeded, "spent");
        let answer = error_response(&quota, "/1.0/check.json", &id, 1500);
        assert!(std::str::from_utf8(&answer.body)
            .unwrap()
            .contains(r#""type":"usage_limit""#));
    }

    #[test]
    fn every_kind_has_one_of_sightengines_documented_types() {
        const DOCUMENTED: [&str; 9] = [
            "api_error",
            "argument_error",
            "callback_error",
            "credentials_error",
            "media_error",
            "plan_error",
            "request_error",
            "unknown_error",
            "usage_limit",
        ];
        for kind in ErrorKind::ALL {
            assert!(DOCUMENTED.contains(&kind.sightengine_type()), "{kind:?}");
        }
    }
}
