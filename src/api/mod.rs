//! The routes of SPEC section 4: which path is which route, and the order of refusals that
//! every route shares (DESIGN.md, "Decisions"): `Origin` first, then the method, then the
//! request's own size limits, then the key, then parameters and content.
//!
//! Each route has its own module; this one routes and turns their errors into answers.

pub mod answer;
pub mod compat_text;
pub mod envelope;
pub mod form;
pub mod health;
pub mod openapi;
pub mod text;
pub mod workflows;

use std::time::Instant;

use futures_lite::{AsyncRead, AsyncWrite};

use crate::config::LimitsConfig;

use crate::error::{ApiError, ApiResult, ErrorKind};
use crate::http::conn::Exchange;
use crate::http::head::{Framing, Method};
use crate::http::response::Response;
use crate::server::shard::Shard;

#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash)]
pub enum Route {
    Health,
    OpenApi,
    Workflows,
    Text,
    CompatText,
}

impl Route {
    pub const ALL: [Route; 5] = [
        Route::Health,
        Route::OpenApi,
        Route::Workflows,
        Route::Text,
        Route::CompatText,
    ];

    pub fn find(path: &str) -> Option<Route> {
        Route::ALL.into_iter().find(|route| route.path() == path)
    }

    pub fn path(self) -> &'static str {
        match self {
            Route::Health => "/health",
            Route::OpenApi => "/openapi.json",
            Route::Workflows => "/v1/workflows",
            Route::Text => "/v1/text",
            Route::CompatText => "/1.0/text/check-workflow.json",
        }
    }

    /// The `Allow` header of the route (GET routes answer HEAD too).
    pub fn allow(self) -> &'static str {
        match self {
            Route::Health | Route::OpenApi | Route::Workflows => "GET, HEAD",
            Route::Text | Route::CompatText => "POST",
        }
    }

    fn accepts(self, method: Method) -> bool {
        match self {
            Route::Health | Route::OpenApi | Route::Workflows => {
                matches!(method, Method::Get | Method::Head)
            }
            Route::Text | Route::CompatText => method == Method::Post,
        }
    }

    /// Bytes of body the route takes.
    fn body_bytes_max(self, limits: &LimitsConfig) -> u64 {
        match self {
            Route::Health | Route::OpenApi | Route::Workflows => 0,
            Route::Text => limits.text_body_bytes_max as u64,
            Route::CompatText => limits.text_form_bytes_max as u64,
        }
    }
}

/// Answers one request.
pub async fn handle<S: AsyncRead + AsyncWrite + Unpin>(
    shard: &Shard,
    exchange: &mut Exchange<'_, S>,
) -> Response {
    match dispatch(shard, exchange).await {
        Ok(response) => response,
        Err(error) => shard.error_answer(&error, &exchange.head.path, &exchange.request_id),
    }
}

async fn dispatch<S: AsyncRead + AsyncWrite + Unpin>(
    shard: &Shard,
    exchange: &mut Exchange<'_, S>,
) -> ApiResult<Response> {
    let started = Instant::now();
    let head = &exchange.head;
    if head.has_origin {
        return Err(ApiError::forbidden(
            "requests from browsers (with an Origin header) are refused; call from your servers",
        ));
    }
    let route = Route::find(&head.path).ok_or_else(|| {
        ApiError::new(
            ErrorKind::NotFound,
            format!("no route for path '{}'", truncated(&head.path)),
        )
    })?;
    if !route.accepts(head.method) {
        return Err(ApiError::method_not_allowed(route.allow()));
    }
    let body_max = route.body_bytes_max(&shard.config.limits);
    let over = match head.framing {
        Framing::Empty => false,
        Framing::Length(n) => n > body_max,
        Framing::Chunked => body_max == 0,
    };
    if over {
        return Err(ApiError::new(
            ErrorKind::BodyTooLarge,
            if body_max == 0 {
                "this route takes no request body".to_owned()
            } else {
                format!("request body over the limit of {body_max} bytes for this route")
            },
        ));
    }
    match route {
        Route::Health => Ok(health::answer(shard)),
        Route::OpenApi => Ok(openapi::answer()),
        Route::Workflows => workflows::list(shard, head),
        Route::Text => text::check(shard, exchange, started).await,
        Route::CompatText => compat_text::check(shard, exchange, started).await,
    }
}

fn truncated(text: &str) -> &str {
    match text.char_indices().nth(64) {
        Some((at, _)) => &text[..at],
        None => text,
    }
}
