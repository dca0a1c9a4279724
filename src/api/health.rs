//! `GET /health` (SPEC 4.7): 200 `ok` once the store is open and every shard has loaded what
//! the workflows need; 503 `unavailable` before that and from the moment a stop begins.

use crate::http::response::{HeaderValue, Response};
use crate::server::shard::Shard;

pub fn answer(shard: &Shard) -> Response {
    if shard.is_ready() {
        Response::static_json(200, br#"{"status":"ok"}"#)
    } else {
        Response::static_json(503, br#"{"status":"unavailable"}"#)
            .header("retry-after", HeaderValue::Int(1))
    }
}
