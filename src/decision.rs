//! The decision rule (`docs/interface.md#the-decision`): from the scores of a check and the workflow's thresholds to
//! `accept`, `review` or `reject` with reasons.
//!
//! - A category whose score reaches its reject threshold is a reject reason; one that reaches
//!   only its review threshold is a review reason.
//! - `action` is `reject` if there is a reject reason, else `review` if there is a review
//!   reason, else `accept`.
//! - `reject_prob` is the highest score among the reject reasons, 0 without any.
//! - Reasons are sorted by score, highest first (ties by category id, so answers are stable).
//! - `scores` holds every category of the workflow that was checked (0 where nothing was
//!   found); `unchecked` the workflow's categories that no available check could score.
//! - An image that matches one of the organization's allow lists (the `hashlist` check) is
//!   exempt: no category is a reason, save `known_image` (a block list's match wins over an
//!   allow list's). Its scores are still reported.

use crate::checks::board::ScoreBoard;
use crate::checks::categories;
use crate::workflow::WorkflowDef;

#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Action {
    Accept,
    Review,
    Reject,
}

impl Action {
    pub fn as_str(self) -> &'static str {
        match self {
            Action::Accept => "accept",
            Action::Review => "review",
            Action::Reject => "reject",
        }
    }
}

#[derive(Clone, Debug, PartialEq)]
pub struct Reason {
    pub id: &'static str,
    pub text: &'static str,
    pub message: &'static str,
    pub score: f64,
    pub threshold: f64,
    pub source: &'static str,
}

#[derive(Clone, Debug, PartialEq)]
pub struct Decision {
    pub action: Action,
    pub reject_prob: f64,
    pub reject_reason: Vec<Reason>,
    pub review_reason: Vec<Reason>,
    /// `(category, score)` for every checked category of the workflow, by category id.
    pub scores: Vec<(&'static str, f64)>,
    /// Categories of the workflow nobody could score; empty when all were checked.
    pub unchecked: Vec<&'static str>,
}

pub fn decide(workflow: &WorkflowDef, board: &ScoreBoard) -> Decision {
    let mut reject_reason = Vec::new();
    let mut review_reason = Vec::new();
    let mut scores = Vec::with_capacity(workflow.categories.len());
    let mut unchecked = Vec::new();
    let allowed = board.allowed();
    for (category, thresholds) in &workflow.categories {
        match board.get(category) {
            Some(scored) => {
                scores.push((scored.category, scored.score));
                if allowed && scored.category != categories::KNOWN_IMAGE {
                    continue;
                }
                let (text, message) = categories::describe(scored.category);
                let reason = |threshold: f64| Reason {
                    id: scored.category,
                    text,
                    message,
                    score: scored.score,
                    threshold,
                    source: scored.source,
                };
                if scored.score >= thresholds.reject {
                    reject_reason.push(reason(thresholds.reject));
                } else if scored.score >= thresholds.review {
                    review_reason.push(reason(thresholds.review));
                }
            }
            None => {
                if let Some(id) = board.is_unavailable(category) {
                    unchecked.push(id);
                }
            }
        }
    }
    let by_score = |a: &Reason, b: &Reason| b.score.total_cmp(&a.score).then(a.id.cmp(b.id));
    reject_reason.sort_by(by_score);
    review_reason.sort_by(by_score);
    let action = if !reject_reason.is_empty() {
        Action::Reject
    } else if !review_reason.is_empty() {
        Action::Review
    } else {
        Action::Accept
    };
    Decision {
        action,
        reject_prob: reject_reason.first().map_or(0.0, |reason| reason.score),
        reject_reason,
        review_reason,
        scores,
        unchecked,
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::workflow::Thresholds;

    fn workflow() -> WorkflowDef {
        WorkflowDef {
            description: "t".into(),
            paid_only: false,
            text_checks: vec![],
            image_checks: vec![],
            categories: [
                ("profanity", 0.5, 0.9),
                ("pii_email", 0.7, 1.0),
                ("toxic", 0.5, 0.8),
                ("nudity", 0.5, 0.8),
            ]
            .into_iter()
            .map(|(c, review, reject)| (c.to_owned(), Thresholds { review, reject }))
            .collect(),
            lists: Vec::new(),
        }
    }

    #[test]
    fn an_allow_list_match_exempts_all_but_a_block_match() {
        use crate::lists::{ListKind, ListMatch};
        let mut def = workflow();
        def.categories.insert(
            "known_image".into(),
            Thresholds {
                review: 0.5,
                reject: 0.9,
            },
        );
        let mut board = ScoreBoard::default();
        board.add("nudity", 0.95, "open_nsfw");
        assert_eq!(decide(&def, &board).action, Action::Reject);
        let allowed = ListMatch {
            list: "safe".into(),
            kind: ListKind::Allow,
            entry_id: 1,
            label: None,
            caller_id: None,
            hash_type: "pdq",
            distance: 3,
            term: None,
        };
        board.list_matches.push(allowed.clone());
        let decision = decide(&def, &board);
        assert_eq!(decision.action, Action::Accept);
        assert!(decision.scores.contains(&("nudity", 0.95)));
        board.add("known_image", 1.0, "hashlist");
        board.list_matches.push(ListMatch {
            kind: ListKind::Block,
            ..allowed
        });
        let decision = decide(&def, &board);
        assert_eq!(decision.action, Action::Reject);
        assert_eq!(decision.reject_reason.len(), 1);
        assert_eq!(decision.reject_reason[0].id, "known_image");
    }

    #[test]
    fn accept_review_reject() {
        let mut board = ScoreBoard::default();
        board.add("profanity", 0.1, "a");
        board.add("pii_email", 0.0, "pii");
        let decision = decide(&workflow(), &board);
        assert_eq!(decision.action, Action::Accept);
        assert_eq!(decision.reject_prob, 0.0);
        assert_eq!(
            decision.scores,
            vec![("pii_email", 0.0), ("profanity", 0.1)]
        );
        assert!(decision.unchecked.is_empty());

        board.add("pii_email", 0.95, "pii");
        let decision = decide(&workflow(), &board);
        assert_eq!(decision.action, Action::Review);
        assert_eq!(decision.review_reason[0].threshold, 0.7);

        board.add("profanity", 0.95, "b");
        board.add("profanity", 0.5, "a"); // lower: the best stays
        let decision = decide(&workflow(), &board);
        assert_eq!(decision.action, Action::Reject);
        assert_eq!(decision.reject_prob, 0.95);
        assert_eq!(decision.reject_reason[0].source, "b");
        assert_eq!(decision.reject_reason[0].threshold, 0.9);
        assert_eq!(decision.review_reason.len(), 1);
    }

    #[test]
    fn reasons_are_sorted_and_unchecked_listed() {
        let mut board = ScoreBoard::default();
        board.add("profanity", 0.92, "a");
        board.add("toxic", 0.99, "t");
        board.unavailable(&["nudity", "other"]);
        let decision = decide(&workflow(), &board);
        let ids: Vec<_> = decision.reject_reason.iter().map(|r| r.id).collect();
        assert_eq!(ids, ["toxic", "profanity"]);
        assert_eq!(decision.reject_prob, 0.99);
        // Only the workflow's own categories: `other` is not one.
        assert_eq!(decision.unchecked, vec!["nudity"]);
        // A category that is neither scored nor unavailable (an image category on a text) is
        // simply not part of this check.
        assert!(!decision.scores.iter().any(|(c, _)| *c == "pii_email"));
    }

    #[test]
    fn scores_are_clamped() {
        let mut board = ScoreBoard::default();
        board.add("toxic", 1.3, "t");
        board.add("profanity", f64::NAN, "a");
        assert_eq!(board.get("toxic").unwrap().score, 1.0);
        assert_eq!(board.get("profanity").unwrap().score, 0.0);
    }
}
