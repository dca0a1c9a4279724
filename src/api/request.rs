//! What a route learns about its request ([`RequestNotes`]: the key, the admission, the
//! workflow, the check's summary for the journal), and the small helpers every route shares.

use std::rc::Rc;
use std::time::Instant;

use super::context::Context;
use crate::auth::{self, Caller};
use crate::content::ContentKind;
use crate::decision::Decision;
use crate::error::{ApiError, ApiResult, ErrorKind};
use crate::http::head::RequestHead;
use crate::limits::Admission;
use crate::route::Route;
use crate::store::keys;
use crate::store::records::WorkflowRecord;
use crate::store::view::Workflows;

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

/// At most the first 64 characters of `text` (for messages that quote the caller).
pub fn truncated(text: &str) -> &str {
    crate::text::first_chars(text, 64)
}
