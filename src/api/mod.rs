//! The request path: the routes of `docs/interface.md#routes`, and the order of refusals that
//! every route shares (`docs/interface.md#decisions`): `Origin` first, then the method, then
//! the request's own size limits, then the key, then the plan's limits, then parameters and
//! content.
//!
//! A handler sees a [`Context`] (what a request may touch) and the request's
//! [`RequestNotes`], never the server. The server reaches the request path through one entry
//! point, the [`Handler`] impl of [`Context`].
//!
//! Each route has its own module; this one routes, and after the route has answered it does
//! what every answer needs: the limit headers of an authenticated caller, the end of the
//! check's admission (its concurrency permit back, its quota unit spent or returned), and for
//! the check routes the journal record, committed before the answer leaves.

pub mod answer;
pub mod buffers;
pub mod compat_image;
pub mod compat_text;
pub mod context;
pub mod envelope;
pub mod finish;
pub mod form;
pub mod health;
pub mod image;
pub mod lists;
pub mod openai;
pub mod openapi;
pub mod perspective;
pub mod sightengine;
pub mod sightengine_text;
pub mod text;
pub mod workflows;

pub use context::Context;

#[cfg(test)]
mod tests;

use std::borrow::Cow;
use std::rc::Rc;
use std::time::Instant;

use futures_lite::{AsyncRead, AsyncWrite};

use crate::auth::{self, Caller};
use crate::bounds::IMAGE_BYTES_MAX;
use crate::config::LimitsConfig;
use crate::content::ContentKind;
use crate::decision::Decision;
use crate::error::{ApiError, ApiResult, ErrorKind};
use crate::http::conn::{Exchange, Handler};
use crate::http::head::{Framing, Method, RequestHead};
use crate::http::response::Response;
use crate::journal::JournalRecord;
use crate::limits::Admission;
use crate::request_id::RequestId;
use crate::route::Route;
use crate::store::keys;
use crate::store::records::WorkflowRecord;
use crate::store::view::Workflows;

/// Whether `route` is answered for `method`.
fn accepts(route: Route, method: Method) -> bool {
    match route {
        Route::Health | Route::OpenApi | Route::Workflows | Route::Discovery => {
            matches!(method, Method::Get | Method::Head)
        }
        Route::Text
        | Route::CompatText
        | Route::Image
        | Route::Moderations
        | Route::Perspective
        | Route::SightengineText => method == Method::Post,
        Route::CompatImage | Route::SightengineCheck => {
            matches!(method, Method::Get | Method::Post)
        }
        Route::Lists => method != Method::Other,
    }
}

/// Bytes of body `route` takes with `method`.
fn body_bytes_max(route: Route, method: Method, limits: &LimitsConfig) -> u64 {
    match (route, method) {
        (Route::Health | Route::OpenApi | Route::Workflows | Route::Discovery, _) => 0,
        (Route::Text | Route::Perspective, _) => limits.text_body_bytes_max as u64,
        (Route::CompatText | Route::SightengineText, _) => limits.text_form_bytes_max as u64,
        (Route::Image, _) => IMAGE_BYTES_MAX as u64,
        (Route::CompatImage | Route::SightengineCheck, Method::Post) => {
            (IMAGE_BYTES_MAX + compat_image::FORM_OVERHEAD_BYTES_MAX) as u64
        }
        (Route::CompatImage | Route::SightengineCheck, _) => 0,
        (Route::Moderations, _) => openai::body_bytes_max(limits) as u64,
        (Route::Lists, Method::Post) => lists::BODY_BYTES_MAX as u64,
        (Route::Lists, _) => 0,
    }
}

/// What a check decided, for the journal.
#[derive(Clone, Debug)]
pub struct CheckSummary {
    pub workflow: String,
    pub version: u64,
    pub action: &'static str,
    pub scores: Vec<(&'static str, f64)>,
    pub unchecked: Vec<&'static str>,
}

impl CheckSummary {
    /// The journal's summary of `decision`, made by `workflow`.
    pub fn of(workflow: &WorkflowRecord, decision: &Decision) -> CheckSummary {
        CheckSummary::taking(
            workflow,
            Decision {
                scores: decision.scores.clone(),
                unchecked: decision.unchecked.clone(),
                reject_reason: Vec::new(),
                review_reason: Vec::new(),
                ..*decision
            },
        )
    }

    /// [`CheckSummary::of`], keeping `decision`'s scores instead of copying them.
    pub fn taking(workflow: &WorkflowRecord, decision: Decision) -> CheckSummary {
        CheckSummary {
            workflow: workflow.name.clone(),
            version: workflow.version,
            action: decision.action.as_str(),
            scores: decision.scores,
            unchecked: decision.unchecked,
        }
    }
}

/// The score of `category` on `board`, or 503: a hosted API's field that needs a model which
/// is not loaded cannot be answered (the native routes say `unchecked` instead).
pub fn scored(board: &crate::checks::board::ScoreBoard, category: &str) -> ApiResult<f64> {
    board
        .get(category)
        .map(|scored| scored.score)
        .ok_or_else(|| {
            ApiError::new(
                ErrorKind::WorkflowUnavailable,
                format!("the model that scores `{category}` is not loaded on this server"),
            )
        })
}

/// What a route learns about its request, for what every answer needs afterwards.
pub struct RequestNotes {
    pub route: Option<Route>,
    pub started: Instant,
    /// When the request began (its id's milliseconds, one read of the server's clock): the
    /// time its key, rate and admission are judged at.
    pub at_ms: i64,
    /// The presented key's id when the key was well formed (kept even if it was refused).
    pub key_id: Option<String>,
    pub caller: Option<Caller>,
    pub admission: Option<Admission>,
    pub reference: Option<String>,
    /// The workflow the request names, once it is known to exist: a refusal after that point
    /// (a workflow the key may not use, a text too long) is journaled with it.
    pub workflow: Option<Rc<WorkflowRecord>>,
    pub check: Option<CheckSummary>,
}

impl RequestNotes {
    /// Authenticates the request (headers, and `api_secret` on the compatible routes).
    pub fn authenticate(
        &mut self,
        cx: &Context,
        head: &RequestHead,
        api_secret: Option<&str>,
    ) -> ApiResult<Caller> {
        let compat = self.route.is_some_and(Route::is_compat);
        let key = auth::presented_key(head, api_secret, compat)?;
        self.key_id = keys::parse_id(key).map(str::to_owned);
        let caller = cx.authenticate_key(key, self.at_ms)?;
        self.caller = Some(caller.clone());
        Ok(caller)
    }

    /// Charges an admitted check of `operations` operations as the caller's plan counts
    /// them ([`crate::store::records::QuotaCounts`]): where it counts operations, the quota units beyond the
    /// admission's one are reserved now (429 `quota_exceeded` when they are not there).
    pub async fn charge_operations(&mut self, cx: &Context, operations: u32) -> ApiResult<()> {
        let (Some(caller), Some(admission)) = (&self.caller, &mut self.admission) else {
            return Ok(());
        };
        let limits = &caller.org.limits;
        let units = limits.quota_counts.units(operations);
        cx.limits
            .reserve_more(admission, limits, units, cx.now_ms())
            .await
    }

    /// Notes the workflow named `name` if it exists (see [`RequestNotes::workflow`]).
    pub fn note_workflow(&mut self, workflows: &Workflows, name: &str) {
        self.workflow = workflows.get(name).cloned();
    }

    /// What every check route does first: the key (401/403), its scope for `kind` (403),
    /// then admission under the plan (429s).
    pub async fn admit_check(
        &mut self,
        cx: &Context,
        head: &RequestHead,
        api_secret: Option<&str>,
        kind: ContentKind,
    ) -> ApiResult<Caller> {
        let caller = self.authenticate(cx, head, api_secret)?;
        caller.require_scope(kind)?;
        self.admission = Some(cx.limits.admit(&caller, self.at_ms).await?);
        Ok(caller)
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
    cx.error_answer(error, path, request_id)
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
    cx.error_answer(&error, path, request_id)
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
            cx.error_answer(&error, exchange.head.path(), &exchange.request_id),
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
            response = cx.error_answer(&error, exchange.head.path(), &exchange.request_id);
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
        Route::CompatText => compat_text::check(cx, exchange, notes).await,
        Route::Image => image::check(cx, exchange, notes).await,
        Route::CompatImage => compat_image::check(cx, exchange, notes).await,
        Route::Moderations => openai::moderations(cx, exchange, notes).await,
        Route::Perspective => perspective::analyze(cx, exchange, notes).await,
        Route::Discovery => perspective::discovery(cx, head.host(), head.query()),
        Route::SightengineCheck => sightengine::check(cx, exchange, notes).await,
        Route::SightengineText => sightengine_text::check(cx, exchange, notes).await,
        Route::Lists => lists::handle(cx, exchange, notes).await,
    }
}

/// At most the first 64 characters of `text` (for messages that quote the caller).
pub fn truncated(text: &str) -> &str {
    crate::text::first_chars(text, 64)
}
