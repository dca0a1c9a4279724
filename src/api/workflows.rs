//! `GET /v1/workflows` (`docs/interface.md#routes`): the workflows the key may use, with their current versions.
//! A workflow is listed when the key's allow-list names it (or allows all) and the
//! organization's plan admits it (paid-only workflows need a paid plan).

use serde::Serialize;

use super::context::Context;
use super::envelope::json_response;
use super::RequestNotes;
use crate::error::ApiResult;
use crate::http::head::RequestHead;
use crate::http::response::Response;

#[derive(Serialize)]
struct WorkflowList<'a> {
    status: &'static str,
    workflows: Vec<WorkflowVersion<'a>>,
}

#[derive(Serialize)]
struct WorkflowVersion<'a> {
    name: &'a str,
    version: u64,
}

/// Listing takes one rate token of the key (it is not a check: no quota, no permit).
pub async fn list(
    cx: &Context,
    head: &RequestHead,
    notes: &mut RequestNotes,
) -> ApiResult<Response> {
    let caller = notes.authenticate(cx, head, None)?;
    cx.limits.take_rate(&caller, notes.at_ms).await?;
    let workflows = cx.workflows()?;
    let listed = workflows
        .values()
        .filter(|workflow| caller.may_use(workflow))
        .map(|workflow| WorkflowVersion {
            name: &workflow.name,
            version: workflow.version,
        })
        .collect();
    Ok(json_response(
        200,
        &WorkflowList {
            status: "success",
            workflows: listed,
        },
    ))
}
