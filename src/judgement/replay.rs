//! `modgate replay`: the decisions a workflow's journaled checks would have got under other
//! thresholds, and which flip.
//!
//! Each check's scores go through the decision rule ([`crate::decision`]) with the candidate
//! thresholds: a category at or over its reject threshold rejects, one at or over its review
//! threshold sends to review. The action before is the one the check was answered with, so a
//! flip is a change a platform would have seen. A category flips in a check when its part in
//! the decision changes (none, review, reject) between the thresholds of the version the
//! check was decided under and the candidate's. The journal keeps scores, not list matches:
//! an image an allow list exempted is replayed as its scores decide.

use std::collections::BTreeMap;

use serde::Serialize;

use crate::workflow::WorkflowDef;

/// Request ids of each kind of flip a report names at most.
pub const SAMPLES_MAX: usize = 5;

const ACTIONS: [&str; 3] = ["accept", "review", "reject"];

/// What a category does in a decision under some thresholds.
#[derive(Clone, Copy, Debug, PartialEq, Eq, PartialOrd, Ord)]
pub enum Part {
    None,
    Review,
    Reject,
}

impl Part {
    /// The action this part alone gives.
    pub fn as_str(self) -> &'static str {
        ACTIONS[self as usize]
    }
}

/// The part of `category`'s `score` under `workflow`'s thresholds (none for a category the
/// workflow does not name).
pub fn part(workflow: &WorkflowDef, category: &str, score: f64) -> Part {
    match workflow.categories.get(category) {
        Some(t) if score >= t.reject => Part::Reject,
        Some(t) if score >= t.review => Part::Review,
        _ => Part::None,
    }
}

/// The action `scores` get under `workflow`'s thresholds.
pub fn action(workflow: &WorkflowDef, scores: &[(String, f64)]) -> &'static str {
    let most = scores
        .iter()
        .map(|(category, score)| part(workflow, category, *score))
        .max()
        .unwrap_or(Part::None);
    most.as_str()
}

/// One kind of flip: from an action to another.
#[derive(Clone, Debug, Default, PartialEq, Serialize)]
pub struct Flips {
    pub count: usize,
    pub samples: Vec<String>,
}

#[derive(Clone, Debug, Default, PartialEq, Serialize)]
pub struct CategoryFlips {
    /// Checks where the category's part grew (none to review, review to reject, ...).
    pub up: usize,
    /// Checks where it shrank.
    pub down: usize,
}

#[derive(Clone, Debug, Default, PartialEq, Serialize)]
pub struct Report {
    pub workflow: String,
    pub checks: usize,
    pub flipped: usize,
    /// `from -> to` for every pair of actions that flipped, with samples.
    pub flips: BTreeMap<String, Flips>,
    /// Actions before and after, by action.
    pub before: BTreeMap<String, usize>,
    pub after: BTreeMap<String, usize>,
    /// Checks by action before, then after (the flips off the diagonal).
    pub matrix: BTreeMap<String, BTreeMap<String, usize>>,
    pub categories: BTreeMap<String, CategoryFlips>,
}

/// Replays checks one at a time against `candidate`; `decided_under` gives the thresholds
/// of the version a check was decided under.
pub struct Replay<'a> {
    candidate: &'a WorkflowDef,
    report: Report,
}

impl<'a> Replay<'a> {
    pub fn new(name: &str, candidate: &'a WorkflowDef) -> Replay<'a> {
        let mut report = Report {
            workflow: name.to_owned(),
            ..Report::default()
        };
        for action in ACTIONS {
            report.before.insert(action.to_owned(), 0);
            report.after.insert(action.to_owned(), 0);
        }
        Replay { candidate, report }
    }

    /// Adds a check answered `answered` with `scores`, decided under `decided_under`.
    pub fn add(
        &mut self,
        request_id: &str,
        answered: &str,
        scores: &[(String, f64)],
        decided_under: &WorkflowDef,
    ) {
        let report = &mut self.report;
        report.checks += 1;
        let now = action(self.candidate, scores);
        *report.before.entry(answered.to_owned()).or_default() += 1;
        *report.after.entry(now.to_owned()).or_default() += 1;
        *report
            .matrix
            .entry(answered.to_owned())
            .or_default()
            .entry(now.to_owned())
            .or_default() += 1;
        if now != answered {
            report.flipped += 1;
            let flips = report
                .flips
                .entry(format!("{answered} -> {now}"))
                .or_default();
            flips.count += 1;
            if flips.samples.len() < SAMPLES_MAX {
                flips.samples.push(request_id.to_owned());
            }
        }
        for (category, score) in scores {
            let before = part(decided_under, category, *score);
            let after = part(self.candidate, category, *score);
            if before == after {
                continue;
            }
            let flips = report.categories.entry(category.clone()).or_default();
            if after > before {
                flips.up += 1;
            } else {
                flips.down += 1;
            }
        }
    }

    pub fn finish(self) -> Report {
        self.report
    }
}

impl Report {
    pub fn render_text(&self) -> String {
        use std::fmt::Write as _;
        let mut out = String::new();
        let _ = writeln!(
            out,
            "workflow {}: {} checks replayed, {} flip",
            self.workflow, self.checks, self.flipped
        );
        let _ = writeln!(out, "action\tbefore\tafter");
        for action in ACTIONS {
            let _ = writeln!(
                out,
                "{action}\t{}\t{}",
                self.before.get(action).unwrap_or(&0),
                self.after.get(action).unwrap_or(&0)
            );
        }
        for (kind, flips) in &self.flips {
            let _ = writeln!(
                out,
                "{kind}\t{}\te.g. {}",
                flips.count,
                flips.samples.join(" ")
            );
        }
        for (category, flips) in &self.categories {
            let _ = writeln!(out, "{category}\tup {}\tdown {}", flips.up, flips.down);
        }
        out
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn workflow(review: f64, reject: f64) -> WorkflowDef {
        toml::from_str(&format!(
            "description = 'x'\n[categories]\nhate = {{ review = {review}, reject = {reject} }}\nspam = {{ review = 0.5, reject = 0.9 }}\n"
        ))
        .expect("workflow")
    }

    fn scores(items: &[(&str, f64)]) -> Vec<(String, f64)> {
        items.iter().map(|(c, s)| ((*c).to_owned(), *s)).collect()
    }

    #[test]
    fn the_rule_on_scores() {
        let w = workflow(0.5, 0.8);
        assert_eq!(
            action(&w, &scores(&[("hate", 0.49), ("spam", 0.1)])),
            "accept"
        );
        assert_eq!(action(&w, &scores(&[("hate", 0.5)])), "review");
        assert_eq!(
            action(&w, &scores(&[("hate", 0.5), ("spam", 0.95)])),
            "reject"
        );
        // A category the workflow does not name decides nothing.
        assert_eq!(action(&w, &scores(&[("sexual", 1.0)])), "accept");
        assert_eq!(action(&w, &[]), "accept");
    }

    #[test]
    fn flips_by_direction_and_category() {
        let old = workflow(0.5, 0.8);
        let new = workflow(0.3, 0.6);
        let mut replay = Replay::new("w", &new);
        replay.add("a", "accept", &scores(&[("hate", 0.4)]), &old);
        replay.add("b", "review", &scores(&[("hate", 0.7)]), &old);
        replay.add("c", "accept", &scores(&[("hate", 0.1)]), &old);
        replay.add("d", "reject", &scores(&[("spam", 0.95)]), &old);
        let report = replay.finish();
        assert_eq!((report.checks, report.flipped), (4, 2));
        assert_eq!(report.flips["accept -> review"].samples, ["a"]);
        assert_eq!(report.flips["review -> reject"].count, 1);
        assert_eq!(report.categories["hate"].up, 2);
        assert!(!report.categories.contains_key("spam"));
        assert_eq!(report.after["reject"], 2);
        assert_eq!(report.before["accept"], 2);
        assert_eq!(report.matrix["accept"]["review"], 1);
        assert_eq!(report.matrix["accept"]["accept"], 1);
        assert_eq!(report.matrix["reject"]["reject"], 1);
    }
}
