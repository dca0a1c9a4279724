//! The platform's own judgement of its checks (`docs/judgement.md`): the journaled scores of
//! a workflow's checks joined with the feedback the organization gave on them
//! ([`crate::store::feedback`]), and what that tells about the workflow's thresholds.
//!
//! - [`calibrate`]: per category, precision and recall at the thresholds in force, the
//!   precision-recall curve's area, and the thresholds that reach an asked precision with the
//!   most recall (`modgate calibrate`).
//! - [`replay`]: the decisions the journaled scores get under other thresholds, and which flip
//!   (`modgate replay`).
//! - [`labels`]: feedback from a review tool's CSV (`modgate feedback import`).
//! - [`html`]: either report as one self-contained page (`--html FILE`).
//!
//! Everything here reads what the node keeps, the journal and the store, while the server
//! runs; no content is kept, so the scores are all there is to judge by.

pub mod calibrate;
pub mod html;
pub mod labels;
pub mod replay;

use std::collections::BTreeMap;
use std::path::Path;

use crate::journal::query::{self, Filter};
use crate::store::feedback::FeedbackRecord;

/// A journaled check of the workflow: its id, the workflow version it was decided under, the
/// action it got and its scores.
#[derive(Clone, Debug, PartialEq)]
pub struct Decided {
    pub request_id: String,
    pub version: u64,
    pub action: String,
    pub scores: Vec<(String, f64)>,
}

/// What the node's journal holds of workflow `workflow`'s checks that ran (refusals have no
/// scores), oldest first: handed to `each` one at a time, so a month of checks is never held.
pub fn each_decided(
    data_dir: &Path,
    map_bytes: usize,
    workflow: &str,
    filter: &Filter,
    mut each: impl FnMut(Decided),
) -> anyhow::Result<()> {
    query::for_each(data_dir, map_bytes, filter, |record| {
        if record.workflow.as_deref() != Some(workflow) {
            return Ok(());
        }
        let (Some(action), Some(version)) = (&record.action, record.workflow_version) else {
            return Ok(());
        };
        each(Decided {
            request_id: record.request_id.to_string(),
            version,
            action: action.to_string(),
            scores: record
                .scores
                .iter()
                .map(|(category, score)| (category.to_string(), *score))
                .collect(),
        });
        Ok(())
    })?;
    Ok(())
}

/// The label of `category` the feedback gives: the category's own, else `false` when the
/// feedback says the check should have been accepted (nothing in it was harm); `None` when it
/// says nothing of the category.
pub fn label_of(feedback: &FeedbackRecord, category: &str) -> Option<bool> {
    feedback
        .labels
        .get(category)
        .copied()
        .or_else(|| (feedback.action.as_deref() == Some("accept")).then_some(false))
}

/// Feedback by request id.
pub type FeedbackById = BTreeMap<String, FeedbackRecord>;
