//! The request path's entry point: routing, and after the route has answered what every
//! answer needs (limit headers, the end of the admission, the journal record); and the error
//! answer in the shape of each route's API ([`error_answer`]).

use std::borrow::Cow;
use std::time::Instant;

use futures_lite::{AsyncRead, AsyncWrite};

use crate::bounds::IMAGE_BYTES_MAX;
use crate::config::LimitsConfig;
use crate::content::ContentKind;
use crate::error::{ApiError, ApiResult, ErrorKind};
use crate::http::conn::{Exchange, Handler};
use crate::http::head::{Framing, Method};
use crate::http::response::Response;
use crate::journal::JournalRecord;
use crate::limits::Admission;
use crate::request_id::RequestId;
use crate::route::Route;

use super::context::Context;
use super::dialect::sightengine::{self, workflow_image, workflow_text};
use super::dialect::{openai, perspective};
use super::envelope::CompatRequest;
use super::request::{truncated, RequestNotes};
use super::{envelope, health, image, judgement, lists, openapi, text, workflows};

/// Whether `route` is answered for `method`.
fn accepts(route: Route, method: Method) -> bool {
    match route {
        Route::Health | Route::OpenApi | Route::Workflows | Route::Discovery | Route::Checks => {
            matches!(method, Method::Get | Method::Head)
        }
        Route::Text
        | Route::CompatText
        | Route::Image
        | Route::Moderations
        | Route::Perspective
        | Route::SightengineText
        | Route::Feedback => method == Method::Post,
        Route::CompatImage | Route::SightengineCheck => {
            matches!(method, Method::Get | Method::Post)
        }
        Route::Lists => method != Method::Other,
    }
}

/// Bytes of body `route` takes with `method`.
fn body_bytes_max(route: Route, method: Method, limits: &LimitsConfig) -> u64 {
    match (route, method) {
        (
            Route::Health | Route::OpenApi | Route::Workflows | Route::Discovery | Route::Checks,
            _,
        ) => 0,
        (Route::Feedback, _) => judgement::FEEDBACK_BODY_BYTES_MAX as u64,
        (Route::Text | Route::Perspective, _) => limits.text_body_bytes_max as u64,
        (Route::CompatText | Route::SightengineText, _) => limits.text_form_bytes_max as u64,
        (Route::Image, _) => IMAGE_BYTES_MAX as u64,
        (Route::CompatImage | Route::SightengineCheck, Method::Post) => {
            (IMAGE_BYTES_MAX + workflow_image::FORM_OVERHEAD_BYTES_MAX) as u64
        }
        (Route::CompatImage | Route::SightengineCheck, _) => 0,
        (Route::Moderations, _) => openai::body_bytes_max(limits) as u64,
        (Route::Lists, Method::Post) => lists::BODY_BYTES_MAX as u64,
        (Route::Lists, _) => 0,
    }
}

/// The request path's one entry point: a connection hands it each request ([`handle`]), each
/// head it refused before routing ([`refuse_head`]) and each request whose handler panicked
/// ([`answer_panic`]).
impl Handler for Context {
    fn refuse_head(
        &self,
        error: &ApiError,
        path: &str,
        request_id: &RequestId,
    ) -> impl std::future::Future<Output = Response> {
        refuse_head(self, error, path, request_id)
    }

    fn answer_panic(&self, path: &str, request_id: &RequestId) -> Response {
        answer_panic(self, path, request_id)
    }

    fn handle<S: AsyncRead + AsyncWrite + Unpin>(
        &self,
        exchange: &mut Exchange<'_, S>,
    ) -> impl std::future::Future<Output = Response> {
        handle(self, exchange)
    }
}

/// Refusals before routing (a malformed, oversized or slow head): counted, logged and, on a
/// check route, journaled, since they never reach [`handle`].
pub async fn refuse_head(
    cx: &Context,
    error: &ApiError,
    path: &str,
    request_id: &RequestId,
) -> Response {
    let status = error.kind.status();
    cx.metrics.request(None, status, Some(error.kind), 0);
    tracing::info!(
        request_id = request_id.as_str(),
        shard = cx.shard,
        route = "none",
        status,
        error_type = error.kind.wire_type(),
        time_us = 0,
        "refused before routing"
    );
    journal_head_refusal(cx, error, path, request_id).await;
    error_answer(cx, error, path, request_id)
}

/// The answer to a request whose handler panicked: 500, counted and logged (the panic itself
/// was logged by the panic hook, without its message).
pub fn answer_panic(cx: &Context, path: &str, request_id: &RequestId) -> Response {
    cx.metrics.panic_caught();
    let error = ApiError::internal("the server failed while answering this request");
    cx.metrics.request(None, 500, Some(error.kind), 0);
    tracing::error!(
        request_id = request_id.as_str(),
        shard = cx.shard,
        "a request's handler panicked: answered 500 and closed its connection"
    );
    error_answer(cx, &error, path, request_id)
}

/// `Retry-After` of a check refused because the journal cannot commit.
pub const JOURNAL_RETRY_AFTER_S: u32 = 5;

/// Answers one request.
pub async fn handle<S: AsyncRead + AsyncWrite + Unpin>(
    cx: &Context,
    exchange: &mut Exchange<'_, S>,
) -> Response {
    let mut notes = RequestNotes {
        route: Route::find(exchange.head.path()),
        started: Instant::now(),
        at_ms: exchange.request_id.unix_ms(),
        key_id: None,
        caller: None,
        admission: None,
        reference: None,
        workflow: None,
        check: None,
    };
    if cx.panic_path.as_deref() == Some(exchange.head.path()) {
        // Formatted on purpose: the panic hook must withhold it (it quotes the query).
        panic!(
            "testing.panic_path was asked for, query {}",
            exchange.head.query()
        );
    }
    // While the model worker has jobs, a shard that took more than its share of the core
    // pauses here (counted in the request's time).
    cx.checks.pace_request().await;
    let result = dispatch(cx, exchange, &mut notes).await;
    let (mut response, mut refused) = match result {
        Ok(response) => (response, None),
        Err(error) => (
            error_answer(cx, &error, exchange.head.path(), &exchange.request_id),
            Some(error.kind),
        ),
    };
    let now_ms = cx.now_ms();
    // An admitted check is recorded at its admission, the time whose month its quota unit
    // was reserved in; anything else when it is answered.
    let recorded_ms = notes
        .admission
        .as_ref()
        .map_or(now_ms, Admission::admitted_ms);
    let mut recorded = true;
    if let Some(kind) = notes.route.and_then(Route::check_kind) {
        let record = journal_record(
            &notes,
            exchange,
            kind,
            response.status,
            refused,
            recorded_ms,
        );
        if cx.journal.append(&record).await.is_err() {
            recorded = false;
            // Disk or map full, an I/O error: the server's trouble, and passing (the journal
            // probes and recovers by itself), so 503 with Retry-After rather than 500.
            refused = Some(ErrorKind::Busy);
            let error = ApiError::new(
                ErrorKind::Busy,
                "the check could not be recorded (the journal cannot commit now); it was not answered: retry shortly",
            )
            .with_retry_after(JOURNAL_RETRY_AFTER_S);
            response = error_answer(cx, &error, exchange.head.path(), &exchange.request_id);
        }
    }
    // A check counts toward the quota once it ran and was recorded; the permit is held until
    // then.
    if let Some(admission) = notes.admission.take() {
        let ran = refused.is_none() && notes.check.is_some() && recorded;
        cx.limits.finish(admission, ran, now_ms);
    }
    if let Some(caller) = &notes.caller {
        cx.limits.headers(caller, now_ms).apply(&mut response);
    }
    let elapsed_us = notes.started.elapsed().as_micros() as u64;
    cx.metrics
        .request(notes.route, response.status, refused, elapsed_us);
    if let (Some(check), Some(kind), None) = (
        &notes.check,
        notes.route.and_then(Route::check_kind),
        refused,
    ) {
        cx.metrics.check(&check.workflow, kind, check.action);
    }
    log_answer(cx, &notes, exchange, response.status, refused, elapsed_us);
    response
}

/// The request's log line: at debug for every answer, at info for refusals. Ids, route,
/// status and times only: never a key, a secret, a `ref` or a text.
fn log_answer<S>(
    cx: &Context,
    notes: &RequestNotes,
    exchange: &Exchange<'_, S>,
    status: u16,
    refused: Option<ErrorKind>,
    elapsed_us: u64,
) {
    let route = notes.route.map_or("none", Route::path);
    let request_id = exchange.request_id.as_str();
    let key_id = notes.key_id.as_deref().unwrap_or("");
    let method = exchange.head.method.as_str();
    match refused {
        None => tracing::debug!(
            request_id,
            shard = cx.shard,
            route,
            method,
            status,
            key_id,
            workflow = notes.check.as_ref().map_or("", |c| c.workflow.as_str()),
            action = notes.check.as_ref().map_or("", |c| c.action),
            time_us = elapsed_us,
            "answered"
        ),
        // A failure of the server's own (5xx) is an error of ours; 503 `busy` is load.
        Some(kind) if status >= 500 && kind != ErrorKind::Busy => tracing::warn!(
            request_id,
            shard = cx.shard,
            route,
            method,
            status,
            error_type = kind.wire_type(),
            key_id,
            time_us = elapsed_us,
            "failed"
        ),
        Some(kind) => tracing::info!(
            request_id,
            shard = cx.shard,
            route,
            method,
            status,
            error_type = kind.wire_type(),
            key_id,
            time_us = elapsed_us,
            "refused"
        ),
    }
}

/// Journals a request to a check route that was refused before routing (its head was
/// malformed, too large or too slow): no key, no workflow, the status and error type. A
/// journal that cannot take the record is logged; the refusal is answered regardless.
pub async fn journal_head_refusal(
    cx: &Context,
    error: &ApiError,
    path: &str,
    request_id: &RequestId,
) {
    let Some(route) = Route::find(path) else {
        return;
    };
    let Some(kind) = route.check_kind() else {
        return;
    };
    let record = JournalRecord {
        request_id: Cow::Borrowed(request_id.as_str()),
        unix_ms: cx.now_ms(),
        route: Cow::Borrowed(route.path()),
        kind: Cow::Borrowed(kind.as_str()),
        key_id: None,
        org: None,
        reference: None,
        workflow: None,
        workflow_version: None,
        status: error.kind.status(),
        error_type: Some(Cow::Borrowed(error.kind.wire_type())),
        action: None,
        scores: Vec::new(),
        unchecked: Vec::new(),
        time_ms: 0,
        units: 1,
    };
    if cx.journal.append(&record).await.is_err() {
        tracing::error!(
            request_id = request_id.as_str(),
            "a refused check request could not be journaled"
        );
    }
}

fn journal_record<'a, S>(
    notes: &'a RequestNotes,
    exchange: &'a Exchange<'_, S>,
    kind: ContentKind,
    status: u16,
    refused: Option<ErrorKind>,
    recorded_ms: i64,
) -> JournalRecord<'a> {
    let check = notes.check.as_ref().filter(|_| refused.is_none());
    JournalRecord {
        request_id: Cow::Borrowed(exchange.request_id.as_str()),
        unix_ms: recorded_ms,
        route: Cow::Borrowed(notes.route.map_or("", Route::path)),
        kind: Cow::Borrowed(kind.as_str()),
        key_id: notes.key_id.as_deref().map(Cow::Borrowed),
        org: notes
            .caller
            .as_ref()
            .map(|caller| Cow::Borrowed(caller.org.record.name.as_str())),
        reference: notes.reference.as_deref().map(Cow::Borrowed),
        workflow: check
            .map(|c| c.workflow.as_str())
            .or_else(|| notes.workflow.as_ref().map(|w| w.name.as_str()))
            .map(Cow::Borrowed),
        workflow_version: check
            .map(|c| c.version)
            .or_else(|| notes.workflow.as_ref().map(|w| w.version)),
        status,
        error_type: refused.map(|kind| Cow::Borrowed(kind.wire_type())),
        action: check.map(|c| Cow::Borrowed(c.action)),
        scores: check.map_or_else(Vec::new, |c| {
            c.scores
                .iter()
                .map(|&(id, s)| (Cow::Borrowed(id), s))
                .collect()
        }),
        unchecked: check.map_or_else(Vec::new, |c| {
            c.unchecked.iter().map(|&id| Cow::Borrowed(id)).collect()
        }),
        time_ms: notes.started.elapsed().as_millis() as u64,
        // A check that ran is charged what was reserved; a refusal says what it would cost.
        units: notes
            .admission
            .as_ref()
            .map_or(1, |admission| match refused {
                None => admission.units(),
                Some(_) => admission.cost(),
            }),
    }
}

async fn dispatch<S: AsyncRead + AsyncWrite + Unpin>(
    cx: &Context,
    exchange: &mut Exchange<'_, S>,
    notes: &mut RequestNotes,
) -> ApiResult<Response> {
    let head = &exchange.head;
    if head.has_origin {
        return Err(ApiError::forbidden(
            "requests from browsers (with an Origin or Sec-Fetch-* header) are refused; call from your servers",
        ));
    }
    let route = notes.route.ok_or_else(|| {
        ApiError::new(
            ErrorKind::NotFound,
            format!("no route for path '{}'", truncated(head.path())),
        )
    })?;
    if !accepts(route, head.method) {
        return Err(ApiError::method_not_allowed(route.allow()));
    }
    let body_max = body_bytes_max(route, head.method, &cx.request_limits);
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
        Route::Health => Ok(health::answer(cx)),
        Route::OpenApi => Ok(openapi::answer()),
        Route::Workflows => workflows::list(cx, head, notes).await,
        Route::Text => text::check(cx, exchange, notes).await,
        Route::CompatText => workflow_text::check(cx, exchange, notes).await,
        Route::Image => image::check(cx, exchange, notes).await,
        Route::CompatImage => workflow_image::check(cx, exchange, notes).await,
        Route::Moderations => openai::moderations(cx, exchange, notes).await,
        Route::Perspective => perspective::analyze(cx, exchange, notes).await,
        Route::Discovery => perspective::discovery(cx, head.host(), head.query()),
        Route::SightengineCheck => sightengine::check(cx, exchange, notes).await,
        Route::SightengineText => sightengine::text::check(cx, exchange, notes).await,
        Route::Lists => lists::handle(cx, exchange, notes).await,
        Route::Feedback => judgement::feedback(cx, exchange, notes).await,
        Route::Checks => judgement::explain(cx, head, notes).await,
    }
}

/// The answer for `error` to a request for `path`, in the shape of the route's API
/// (`error_response`).
pub fn error_answer(
    cx: &Context,
    error: &ApiError,
    path: &str,
    request_id: &RequestId,
) -> Response {
    error_response(Route::find(path), error, request_id, cx.now_ms())
}

/// The answer for `error` in the shape of `route`'s API: OpenAI's on its moderation route,
/// Google's on Perspective's, the compatible envelope with Sightengine's error types on
/// Sightengine's own routes and with modgate's on the `/1.0/` workflow routes, the native
/// envelope elsewhere (a path with no route included); with the headers every error carries.
pub fn error_response(
    route: Option<Route>,
    error: &ApiError,
    request_id: &RequestId,
    unix_ms: i64,
) -> Response {
    let compat = || {
        Some(CompatRequest {
            id: request_id.as_str(),
            timestamp: unix_ms as f64 / 1000.0,
            operations: 0,
        })
    };
    let response = match route {
        Some(Route::Moderations) => openai::error_response(error),
        Some(Route::Perspective | Route::Discovery) => perspective::error_response(error),
        Some(Route::SightengineCheck | Route::SightengineText) => {
            envelope::error_envelope(error, sightengine::error_type(error.kind), compat())
        }
        Some(Route::CompatText | Route::CompatImage) => {
            envelope::error_envelope(error, error.kind.wire_type(), compat())
        }
        _ => envelope::error_envelope(error, error.kind.wire_type(), None),
    };
    envelope::with_headers(response, error)
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::error::ErrorKind;
    use crate::http::response::HeaderValue;

    #[test]
    fn envelopes() {
        let id = RequestId::from_bits(1);
        let error = ApiError::new(ErrorKind::Busy, "full").with_retry_after(2);
        let native = error_response(Some(Route::Text), &error, &id, 1500);
        assert_eq!(native.status, 503);
        assert_eq!(
            std::str::from_utf8(&native.body).unwrap(),
            r#"{"status":"failure","error":{"type":"busy","code":503,"message":"full"}}"#
        );
        assert!(native
            .headers
            .contains(&("retry-after", HeaderValue::Int(2))));
        let compat = error_response(Some(Route::CompatImage), &error, &id, 1500);
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
        for route in [Route::SightengineCheck, Route::SightengineText] {
            let answer = error_response(Some(route), &error, &id, 1500);
            assert_eq!(answer.status, 503);
            let text = std::str::from_utf8(&answer.body).unwrap();
            assert!(text.contains(r#""type":"api_error","code":503"#), "{text}");
        }
        let quota = ApiError::new(ErrorKind::QuotaExceeded, "spent");
        let answer = error_response(Some(Route::SightengineCheck), &quota, &id, 1500);
        assert!(std::str::from_utf8(&answer.body)
            .unwrap()
            .contains(r#""type":"usage_limit""#));
    }
}
