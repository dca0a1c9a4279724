//! Sightengine's `GET|POST /1.0/check.json`, so that its SDKs (PyPI and npm `sightengine`)
//! work against modgate with only DNS changed.
//!
//! The image comes as on `/1.0/check-workflow.json` (`media` in a form, or `url`; the key as
//! `api_secret`, [`super::compat_image::receive`]) and is checked by the `default` workflow's
//! image checks (or the `workflow` field's). `models` names what to answer, and only what the
//! nudity models here can honestly score is accepted ([`SUPPORTED_MODELS`]); any other model is
//! refused with the compatible error envelope, naming it and the supported ones:
//!
//! - `nudity`: `raw` is modgate's `nudity` (open-NSFW and nsfwjs), `partial` its `suggestive`
//!   (nsfwjs), `safe` is 1 minus the larger of the two.
//! - `nudity-2.0`, `nudity-2.1`: `sexual_display` is `nudity`, `suggestive` is `suggestive`,
//!   `none` is 1 minus the larger. The other classes of those versions (`sexual_activity`,
//!   `erotica`, `very_suggestive`, `mildly_suggestive`, the suggestive and context classes)
//!   have no model here and are absent, never a made-up score.
//!
//! `models` is read once the image is received (a refusal of it comes after the upload or the
//! download). `request.operations` counts the models answered; the quota counts the request
//! as one check.

use serde::Serialize;

use super::compat_image::receive;
use super::context::Context;
use super::envelope::{json_response, CompatRequest};
use super::image::score_image;
use super::{scored, CheckSummary, RequestNotes};
use crate::decision::decide;
use crate::error::{ApiError, ApiResult};
use crate::http::conn::Exchange;
use crate::http::response::Response;
use futures_lite::{AsyncRead, AsyncWrite};

/// The models this route answers.
pub const SUPPORTED_MODELS: &[&str] = &["nudity", "nudity-2.0", "nudity-2.1"];

/// The version of `nudity` asked for.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
enum Nudity {
    V1,
    V2,
}

#[derive(Serialize)]
#[serde(untagged)]
enum NudityAnswer {
    V1 {
        raw: f64,
        safe: f64,
        partial: f64,
    },
    V2 {
        sexual_display: f64,
        suggestive: f64,
        none: f64,
    },
}

#[derive(Serialize)]
struct Answer<'a> {
    status: &'static str,
    request: CompatRequest<'a>,
    nudity: NudityAnswer,
    media: Media<'a>,
}

#[derive(Serialize)]
struct Media<'a> {
    id: &'a str,
    uri: Option<&'a str>,
}

pub async fn check<S: AsyncRead + AsyncWrite + Unpin>(
    cx: &Context,
    exchange: &mut Exchange<'_, S>,
    notes: &mut RequestNotes,
) -> ApiResult<Response> {
    let received = receive(cx, exchange, notes).await?;
    let (version, operations) = parse_models(received.models.as_deref())?;
    let workflow = received.workflow.clone();
    let board = score_image(cx, &received.caller, &workflow, received.bytes).await?;
    let decision = decide(&workflow.definition, &board);
    notes.check = Some(CheckSummary::of(&workflow, &decision));
    let nudity = scored(&board, "nudity")?;
    let suggestive = scored(&board, "suggestive")?;
    let clean = 1.0 - nudity.max(suggestive);
    let request_id = exchange.request_id.as_str();
    let media_id = format!("med_{request_id}");
    Ok(json_response(
        200,
        &Answer {
            status: "success",
            request: CompatRequest {
                id: request_id,
                timestamp: cx.now_ms() as f64 / 1000.0,
                operations,
            },
            nudity: match version {
                Nudity::V1 => NudityAnswer::V1 {
                    raw: nudity,
                    safe: clean,
                    partial: suggestive,
                },
                Nudity::V2 => NudityAnswer::V2 {
                    sexual_display: nudity,
                    suggestive,
                    none: clean,
                },
            },
            media: Media {
                id: &media_id,
                uri: received.uri.as_deref(),
            },
        },
    ))
}

/// The `models` asked for: which version of `nudity`, and how many operations that is.
fn parse_models(models: Option<&str>) -> ApiResult<(Nudity, u32)> {
    let models = models.ok_or_else(|| {
        ApiError::bad_request(format!(
            "`models` is required: this server answers {}",
            SUPPORTED_MODELS.join(", ")
        ))
    })?;
    let mut version = None;
    for model in models.split(',').map(str::trim) {
        let asked = match model {
            "nudity" => Nudity::V1,
            "nudity-2.0" | "nudity-2.1" => Nudity::V2,
            other => {
                let shown: String = other.chars().take(40).collect();
                return Err(ApiError::bad_request(format!(
                    "model `{shown}` is not available on this server: it answers {}",
                    SUPPORTED_MODELS.join(", ")
                )));
            }
        };
        if version.is_some_and(|known| known != asked) {
            return Err(ApiError::bad_request(
                "ask for one version of `nudity`: both answer in the same `nudity` object",
            ));
        }
        version = Some(asked);
    }
    // Every entry was a nudity model and the list is not empty, so `version` is set.
    version
        .map(|v| (v, 1))
        .ok_or_else(|| ApiError::bad_request("`models` names no model"))
}

#[cfg(test)]
mod tests {
    use super::*;
    use proptest::prelude::*;

    #[test]
    fn models_are_read_or_refused() {
        assert_eq!(parse_models(Some("nudity")).unwrap(), (Nudity::V1, 1));
        assert_eq!(
            parse_models(Some("nudity-2.1, nudity-2.0")).unwrap(),
            (Nudity::V2, 1)
        );
        let refused = |models: Option<&str>, says: &str| {
            let message = parse_models(models).unwrap_err().message;
            assert!(message.contains(says), "{message}");
        };
        refused(None, "is required");
        refused(
            Some("nudity,properties"),
            "model `properties` is not available",
        );
        refused(Some("nudity,nudity-2.1"), "one version");
        refused(Some(""), "model `` is not available");
        refused(Some(&"é".repeat(100)), "is not available");
    }

    proptest! {
        #[test]
        fn any_models_are_read_or_refused(models in "\\PC{0,64}") {
            let _ = parse_models(Some(&models));
        }
    }
}
