//! `GET /openapi.json` (`docs/interface.md#routes`): the OpenAPI 3.1 document of this version, embedded at build
//! time. It is a contract: the integration tests validate real answers against its schemas.

use crate::http::response::Response;

pub const OPENAPI_JSON: &[u8] = include_bytes!("openapi.json");

pub fn answer() -> Response {
    Response::static_json(200, OPENAPI_JSON)
}
