//! `GET /health` (`docs/interface.md#routes`): 200 `ok` once the store is open and every shard has loaded what
//! the workflows need; 503 `unavailable` before that and from the moment a stop begins.

use super::context::Context;
use crate::http::response::{HeaderValue, Response};

pub fn answer(cx: &Context) -> Response {
    if cx.is_ready() {
        Response::static_json(200, br#"{"status":"ok"}"#)
    } else {
        Response::static_json(503, br#"{"status":"unavailable"}"#)
            .header("retry-after", HeaderValue::Int(1))
    }
}
