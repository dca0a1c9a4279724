//! `GET /health` (`docs/interface.md#routes`): 200 `ok` once the store is open and every shard has loaded what
//! the workflows need; 503 `unavailable` before that and from the moment a stop begins.

use super::context::Context;
use crate::http::response::{HeaderValue, Response};

/// 503 also while the shard's journal cannot commit (disk full): a load balancer then sends
/// the checks elsewhere instead of getting 503s; the journal probes and `/health` turns 200
/// again by itself.
pub fn answer(cx: &Context) -> Response {
    if cx.is_ready() && !cx.journal.is_failing() {
        Response::static_json(200, br#"{"status":"ok"}"#)
    } else {
        Response::static_json(503, br#"{"status":"unavailable"}"#)
            .header("retry-after", HeaderValue::Int(1))
    }
}
