//! `GET /v1/workflows` (SPEC 4.3): the workflows the key may use, with their current versions.
//! A workflow is listed when the key's allow-list names it (or allows all) and the
//! organization's plan admits it (paid-only workflows need a paid plan).

use serde::Serialize;

use super::envelope::json_response;
use super::RequestCtx;
use crate::error::ApiResult;
use crate::http::head::RequestHead;
use crate::http::response::Response;
use crate::server::shard::Shard;

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
pub fn list(shard: &Shard, head: &RequestHead, ctx: &mut RequestCtx) -> ApiResult<Response> {
    let caller = ctx.authenticate(shard, head, None)?;
    shard.limits.take_rate(&caller, shard.now_ms())?;
    let workflows = shard.workflows()?;
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
