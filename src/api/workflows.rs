//! `GET /v1/workflows` (`docs/interface.md#routes`): the workflows the key may use, with their current versions.
//! A workflow is listed when the key's allow-list names it (or allows all) and the
//! organization's plan admits it (paid-only workflows need a paid plan).
//!
//! A shard keeps the listings it wrote ([`super::listings::Listings`]) until the workflows
//! change: serialising six workflows took about 6 % of a saturated shard's CPU on this route.

use super::context::Context;
use super::request::RequestNotes;
use crate::error::ApiResult;
use crate::http::head::RequestHead;
use crate::http::response::Response;

/// Listing takes one rate token of the key (it is not a check: no quota, no permit).
pub async fn list(
    cx: &Context,
    head: &RequestHead,
    notes: &mut RequestNotes,
) -> ApiResult<Response> {
    let caller = notes.authenticate(cx, head, None)?;
    cx.limits.take_rate(&caller, notes.at_ms).await?;
    let workflows = cx.workflows()?;
    Ok(cx
        .listings
        .answer(&workflows, |workflow| caller.may_use(workflow)))
}
