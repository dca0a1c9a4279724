//! The one error type of the request path.
//!
//! Every refusal the server sends is an [`ApiError`]: a [`ErrorKind`] plus an English message.
//! The kind alone decides the HTTP status and the wire `error.type` (`docs/interface.md#errors`), in exactly
//! one function, [`ErrorKind::wire`]. Handlers never pick a status themselves.
//!
//! Errors of the CLI and of start-up use `anyhow` instead; they never reach a client.

use std::borrow::Cow;
use std::fmt;

/// What went wrong, from the client's point of view.
///
/// Several kinds share a wire type (404, 405, 414 and 431 all say `bad_request`): the kind keeps
/// the distinction that the status needs.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash)]
pub enum ErrorKind {
    /// 400: the request is malformed (framing, JSON, parameters).
    BadRequest,
    /// 404: no route has this path.
    NotFound,
    /// 409: the thing to create exists (a list of that name).
    Conflict,
    /// 405: the path exists, the method does not; the answer carries `Allow`.
    MethodNotAllowed,
    /// 408: the head, a body or a form did not arrive in time.
    RequestTimeout,
    /// 413: the body is over the route's limit, or a form field over its limit.
    BodyTooLarge,
    /// 414: the request target is over `uri_bytes_max`.
    UriTooLong,
    /// 415: the content type or the media format is not one we take.
    UnsupportedMedia,
    /// 417: an `Expect` other than `100-continue`.
    ExpectationFailed,
    /// 431: the head is over `head_bytes_max` or has too many fields.
    HeadTooLarge,
    /// 400 `unknown_workflow`.
    UnknownWorkflow,
    /// 400 `corrupt_media`.
    CorruptMedia,
    /// 400 `url_refused`.
    UrlRefused,
    /// 401: key missing, malformed, unknown, revoked or expired.
    Unauthorized,
    /// 403: scope, workflow allow-list, plan, or a browser `Origin`.
    Forbidden,
    /// 403 `organization_suspended`.
    OrganizationSuspended,
    /// 413 `image_too_large`.
    ImageTooLarge,
    /// 413 `text_too_long`.
    TextTooLong,
    /// 429 `rate_limited`.
    RateLimited,
    /// 429 `too_many_concurrent`.
    TooManyConcurrent,
    /// 429 `quota_exceeded`.
    QuotaExceeded,
    /// 503 `workflow_unavailable`: none of the workflow's checks can run here.
    WorkflowUnavailable,
    /// 503 `busy`: a queue, an upload cap or the connection cap is full, or the server is stopping.
    Busy,
    /// 500 `internal`.
    Internal,
}

impl ErrorKind {
    /// Every kind, for tests and for per-kind counters.
    pub const ALL: [ErrorKind; 24] = {
        use ErrorKind::*;
        [
            BadRequest,
            NotFound,
            Conflict,
            MethodNotAllowed,
            RequestTimeout,
            BodyTooLarge,
            UriTooLong,
            UnsupportedMedia,
            ExpectationFailed,
            HeadTooLarge,
            UnknownWorkflow,
            CorruptMedia,
            UrlRefused,
            Unauthorized,
            Forbidden,
            OrganizationSuspended,
            ImageTooLarge,
            TextTooLong,
            RateLimited,
            TooManyConcurrent,
            QuotaExceeded,
            WorkflowUnavailable,
            Busy,
            Internal,
        ]
    };

    /// The HTTP status and the wire `error.type` of this kind: the only mapping there is.
    pub const fn wire(self) -> (u16, &'static str) {
        use ErrorKind::*;
        match self {
            BadRequest => (400, "bad_request"),
            NotFound => (404, "bad_request"),
            Conflict => (409, "bad_request"),
            MethodNotAllowed => (405, "bad_request"),
            RequestTimeout => (408, "request_timeout"),
            BodyTooLarge => (413, "body_too_large"),
            UriTooLong => (414, "bad_request"),
            UnsupportedMedia => (415, "unsupported_media"),
            ExpectationFailed => (417, "bad_request"),
            HeadTooLarge => (431, "bad_request"),
            UnknownWorkflow => (400, "unknown_workflow"),
            CorruptMedia => (400, "corrupt_media"),
            UrlRefused => (400, "url_refused"),
            Unauthorized => (401, "unauthorized"),
            Forbidden => (403, "forbidden"),
            OrganizationSuspended => (403, "organization_suspended"),
            ImageTooLarge => (413, "image_too_large"),
            TextTooLong => (413, "text_too_long"),
            RateLimited => (429, "rate_limited"),
            TooManyConcurrent => (429, "too_many_concurrent"),
            QuotaExceeded => (429, "quota_exceeded"),
            WorkflowUnavailable => (503, "workflow_unavailable"),
            Busy => (503, "busy"),
            Internal => (500, "internal"),
        }
    }

    pub const fn status(self) -> u16 {
        self.wire().0
    }

    pub const fn wire_type(self) -> &'static str {
        self.wire().1
    }
}

/// A refusal on its way to the client.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct ApiError {
    pub kind: ErrorKind,
    /// English, shown to the caller as `error.message`. Never holds a key or a text's content.
    pub message: Cow<'static, str>,
    /// Seconds for `Retry-After` (429 and 503).
    pub retry_after_s: Option<u32>,
    /// The `Allow` header of a 405.
    pub allow: Option<&'static str>,
    /// What a compatible API's envelope says beyond the message, where it has a field for it.
    pub detail: Option<Box<ErrorDetail>>,
}

/// An error's cause in the terms of a compatible API's envelope (Perspective's
/// `error.details[].errorType`, which its clients branch on).
#[derive(Clone, Debug, PartialEq, Eq)]
pub enum ErrorDetail {
    /// `attribute` does not read the comment's language: one of those the request named
    /// (`requested`, all of them), or the one found in the text (`detected`).
    LanguageNotSupported {
        attribute: &'static str,
        requested: Vec<String>,
        detected: Vec<&'static str>,
    },
}

impl ApiError {
    pub fn new(kind: ErrorKind, message: impl Into<Cow<'static, str>>) -> Self {
        ApiError {
            kind,
            message: message.into(),
            retry_after_s: None,
            allow: None,
            detail: None,
        }
    }

    pub fn with_detail(mut self, detail: ErrorDetail) -> Self {
        self.detail = Some(Box::new(detail));
        self
    }

    pub fn with_retry_after(mut self, seconds: u32) -> Self {
        self.retry_after_s = Some(seconds);
        self
    }

    pub fn bad_request(message: impl Into<Cow<'static, str>>) -> Self {
        ApiError::new(ErrorKind::BadRequest, message)
    }

    pub fn unauthorized(message: impl Into<Cow<'static, str>>) -> Self {
        ApiError::new(ErrorKind::Unauthorized, message)
    }

    pub fn forbidden(message: impl Into<Cow<'static, str>>) -> Self {
        ApiError::new(ErrorKind::Forbidden, message)
    }

    pub fn internal(message: impl Into<Cow<'static, str>>) -> Self {
        ApiError::new(ErrorKind::Internal, message)
    }

    pub fn method_not_allowed(allow: &'static str) -> Self {
        ApiError {
            allow: Some(allow),
            ..ApiError::new(
                ErrorKind::MethodNotAllowed,
                format!("method not allowed on this path; allowed: {allow}"),
            )
        }
    }

    pub fn status(&self) -> u16 {
        self.kind.status()
    }
}

impl fmt::Display for ApiError {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(f, "{}: {}", self.kind.wire_type(), self.message)
    }
}

impl std::error::Error for ApiError {}

pub type ApiResult<T> = Result<T, ApiError>;

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn every_wire_type_is_one_of_the_spec() {
        const SPEC_TYPES: &[&str] = &[
            "unauthorized",
            "forbidden",
            "organization_suspended",
            "bad_request",
            "unknown_workflow",
            "unsupported_media",
            "corrupt_media",
            "body_too_large",
            "image_too_large",
            "text_too_long",
            "workflow_unavailable",
            "request_timeout",
            "rate_limited",
            "too_many_concurrent",
            "quota_exceeded",
            "url_refused",
            "busy",
            "internal",
        ];
        for kind in ErrorKind::ALL {
            assert!(SPEC_TYPES.contains(&kind.wire_type()), "{kind:?}");
            assert!(kind.status() >= 400);
        }
    }
}
