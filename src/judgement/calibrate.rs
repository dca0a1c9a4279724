//! `modgate calibrate`: how well a workflow's thresholds fit the organization's own labels.
//!
//! For each category of the workflow, the labelled checks are those whose feedback labels the
//! category (or says the check should have been accepted: [`super::label_of`]) and whose
//! journaled scores hold it. From their (score, label) pairs:
//!
//! - precision and recall at the review and reject thresholds in force (a score at or above a
//!   threshold is flagged, as the decision rule has it);
//! - AUPRC, as average precision: the mean, over the positives, of the precision at the
//!   lowest threshold that flags each (checks of equal score are flagged together);
//! - the suggested thresholds: among the scores seen (a threshold between two of them flags
//!   what the higher one does), those whose precision reaches the asked one; of them, one
//!   with the most recall, and of those the highest (the same recall, fewer flagged). Review is asked `precision`, reject `reject_precision`; a
//!   reject below its review is raised to it. A category with fewer than [`LABELS_MIN`] labels
//!   or [`POSITIVES_MIN`] positives, or where no threshold reaches the precision, keeps the
//!   threshold in force, and says why.

use std::collections::BTreeMap;

use serde::Serialize;

use crate::workflow::{Thresholds, WorkflowDef};

/// Points of a category's precision-recall curve a report keeps at most (evenly spaced over
/// the labelled checks).
pub const CURVE_POINTS_MAX: usize = 200;
/// Bins of a category's score histogram (each 0.05 wide).
pub const HISTOGRAM_BINS: usize = 20;

/// Labels a category needs before a threshold is suggested for it.
pub const LABELS_MIN: usize = 10;
/// Positive labels a category needs before a threshold is suggested for it.
pub const POSITIVES_MIN: usize = 3;

/// Precision and recall of flagging at a threshold, over a category's labelled checks.
#[derive(Clone, Copy, Debug, PartialEq, Serialize)]
pub struct AtThreshold {
    pub threshold: f64,
    pub flagged: usize,
    /// `None` when nothing is flagged.
    pub precision: Option<f64>,
    /// `None` without positives.
    pub recall: Option<f64>,
}

/// A suggested threshold, or the one in force kept and why.
#[derive(Clone, Debug, PartialEq, Serialize)]
pub struct Suggestion {
    pub threshold: f64,
    /// `None` when a threshold was suggested; else why the one in force is kept.
    pub kept_because: Option<String>,
    pub at: Option<AtThreshold>,
}

/// A point of the precision-recall curve: flagging at `threshold`.
#[derive(Clone, Copy, Debug, PartialEq, Serialize)]
pub struct CurvePoint {
    pub threshold: f64,
    pub precision: f64,
    pub recall: f64,
}

/// Labelled checks by score: bin `i` holds scores from `i / HISTOGRAM_BINS` up to the next
/// bin (the last holds 1).
#[derive(Clone, Debug, Default, PartialEq, Serialize)]
pub struct Histogram {
    pub positives: Vec<usize>,
    pub negatives: Vec<usize>,
}

#[derive(Clone, Debug, PartialEq, Serialize)]
pub struct CategoryReport {
    pub category: String,
    pub labelled: usize,
    pub positives: usize,
    pub review: AtThreshold,
    pub reject: AtThreshold,
    /// `None` without positives and negatives both.
    pub auprc: Option<f64>,
    pub suggested_review: Suggestion,
    pub suggested_reject: Suggestion,
    /// The precision-recall curve, highest threshold first (empty without positives).
    pub curve: Vec<CurvePoint>,
    pub histogram: Histogram,
}

#[derive(Clone, Debug, PartialEq, Serialize)]
pub struct Report {
    pub workflow: String,
    pub version: u64,
    /// Checks of the workflow in the journal (in the time asked), and those with feedback.
    pub checks: usize,
    pub with_feedback: usize,
    pub precision: f64,
    pub reject_precision: f64,
    pub categories: Vec<CategoryReport>,
}

/// A category's labelled scores, sorted by score, highest first.
#[derive(Clone, Debug, Default)]
pub struct Labelled {
    pairs: Vec<(f64, bool)>,
}

impl Labelled {
    pub fn push(&mut self, score: f64, label: bool) {
        self.pairs.push((score, label));
    }

    pub fn sort(&mut self) {
        self.pairs.sort_by(|a, b| b.0.total_cmp(&a.0));
    }

    fn positives(&self) -> usize {
        self.pairs.iter().filter(|(_, label)| *label).count()
    }

    /// Flagging at `threshold` (the pairs sorted).
    pub fn at(&self, threshold: f64) -> AtThreshold {
        let positives = self.positives();
        let (mut flagged, mut hits) = (0, 0);
        for &(score, label) in &self.pairs {
            if score < threshold {
                break;
            }
            flagged += 1;
            hits += usize::from(label);
        }
        AtThreshold {
            threshold,
            flagged,
            precision: (flagged > 0).then(|| hits as f64 / flagged as f64),
            recall: (positives > 0).then(|| hits as f64 / positives as f64),
        }
    }

    /// Each distinct score, highest first, with the flagged count and hits at it as a
    /// threshold (the pairs sorted).
    fn steps(&self) -> Vec<(f64, usize, usize)> {
        let mut steps: Vec<(f64, usize, usize)> = Vec::new();
        let (mut flagged, mut hits) = (0, 0);
        for &(score, label) in &self.pairs {
            flagged += 1;
            hits += usize::from(label);
            match steps.last_mut() {
                Some(last) if last.0 == score => *last = (score, flagged, hits),
                _ => steps.push((score, flagged, hits)),
            }
        }
        steps
    }

    /// The precision-recall curve (the pairs sorted), at most [`CURVE_POINTS_MAX`] points:
    /// every distinct score's, thinned evenly, the last (all flagged) always kept.
    pub fn curve(&self) -> Vec<CurvePoint> {
        let positives = self.positives();
        if positives == 0 {
            return Vec::new();
        }
        let steps = self.steps();
        let every = (steps.len() - 1).div_ceil(CURVE_POINTS_MAX - 1).max(1);
        let last = steps.len() - 1;
        steps
            .iter()
            .enumerate()
            .filter(|(at, _)| at % every == 0 || *at == last)
            .map(|(_, &(threshold, flagged, hits))| CurvePoint {
                threshold,
                precision: hits as f64 / flagged as f64,
                recall: hits as f64 / positives as f64,
            })
            .collect()
    }

    pub fn histogram(&self) -> Histogram {
        let mut histogram = Histogram {
            positives: vec![0; HISTOGRAM_BINS],
            negatives: vec![0; HISTOGRAM_BINS],
        };
        for &(score, label) in &self.pairs {
            let bin =
                ((score.clamp(0.0, 1.0) * HISTOGRAM_BINS as f64) as usize).min(HISTOGRAM_BINS - 1);
            if label {
                histogram.positives[bin] += 1;
            } else {
                histogram.negatives[bin] += 1;
            }
        }
        histogram
    }

    /// Average precision (the pairs sorted); `None` without positives or without negatives.
    pub fn auprc(&self) -> Option<f64> {
        let positives = self.positives();
        if positives == 0 || positives == self.pairs.len() {
            return None;
        }
        let mut sum = 0.0;
        let mut hits_before = 0;
        for (_, flagged, hits) in self.steps() {
            let new_hits = hits - hits_before;
            sum += new_hits as f64 * hits as f64 / flagged as f64;
            hits_before = hits;
        }
        Some(sum / positives as f64)
    }

    /// The threshold that reaches `precision` with the most recall (the pairs sorted): among
    /// the scores whose precision as a threshold reaches it, one that flags the most
    /// positives, the highest of those (as much recall, fewer flagged).
    pub fn best_reaching(&self, precision: f64) -> Option<f64> {
        let reaching: Vec<(f64, usize)> = self
            .steps()
            .into_iter()
            .filter(|&(_, flagged, hits)| hits as f64 >= precision * flagged as f64)
            .map(|(score, _, hits)| (score, hits))
            .collect();
        let most = reaching.iter().map(|&(_, hits)| hits).max()?;
        // Highest first: the first with the most hits.
        reaching
            .into_iter()
            .find(|&(_, hits)| hits == most)
            .map(|(score, _)| score)
    }
}

/// Suggests a threshold for `labelled` at `precision`, or keeps `current`.
fn suggest(labelled: &Labelled, current: f64, precision: f64) -> Suggestion {
    let positives = labelled.positives();
    let kept = |why: String| Suggestion {
        threshold: current,
        kept_because: Some(why),
        at: None,
    };
    if labelled.pairs.len() < LABELS_MIN {
        return kept(format!(
            "{} labels; a suggestion needs {LABELS_MIN}",
            labelled.pairs.len()
        ));
    }
    if positives < POSITIVES_MIN {
        return kept(format!(
            "{positives} positive labels; a suggestion needs {POSITIVES_MIN}"
        ));
    }
    match labelled.best_reaching(precision) {
        Some(threshold) => Suggestion {
            threshold,
            kept_because: None,
            at: Some(labelled.at(threshold)),
        },
        None => kept(format!("no threshold reaches a precision of {precision}")),
    }
}

/// The precisions asked of the suggested thresholds.
#[derive(Clone, Copy, Debug, PartialEq)]
pub struct Asked {
    pub precision: f64,
    pub reject_precision: f64,
}

/// The checks read: of the workflow, and those with feedback.
#[derive(Clone, Copy, Debug, Default, PartialEq)]
pub struct Read {
    pub checks: usize,
    pub with_feedback: usize,
}

/// The report for `workflow` (version `version`, in force) from each category's labelled
/// scores.
pub fn report(
    name: &str,
    version: u64,
    workflow: &WorkflowDef,
    mut labelled: BTreeMap<String, Labelled>,
    read: Read,
    asked: Asked,
) -> Report {
    let Asked {
        precision,
        reject_precision,
    } = asked;
    let mut categories = Vec::new();
    for (category, thresholds) in &workflow.categories {
        let mut pairs = labelled.remove(category).unwrap_or_default();
        pairs.sort();
        let suggested_review = suggest(&pairs, thresholds.review, precision);
        let mut suggested_reject = suggest(&pairs, thresholds.reject, reject_precision);
        if suggested_reject.threshold < suggested_review.threshold {
            suggested_reject = Suggestion {
                threshold: suggested_review.threshold,
                kept_because: Some("raised to the review threshold".into()),
                at: Some(pairs.at(suggested_review.threshold)),
            };
        }
        categories.push(CategoryReport {
            category: category.clone(),
            labelled: pairs.pairs.len(),
            positives: pairs.positives(),
            review: pairs.at(thresholds.review),
            reject: pairs.at(thresholds.reject),
            auprc: pairs.auprc(),
            suggested_review,
            suggested_reject,
            curve: pairs.curve(),
            histogram: pairs.histogram(),
        });
    }
    Report {
        workflow: name.to_owned(),
        version,
        checks: read.checks,
        with_feedback: read.with_feedback,
        precision,
        reject_precision,
        categories,
    }
}

impl Report {
    /// The workflow with the suggested thresholds.
    pub fn suggested(&self, workflow: &WorkflowDef) -> WorkflowDef {
        let mut out = workflow.clone();
        for category in &self.categories {
            out.categories.insert(
                category.category.clone(),
                Thresholds {
                    review: category.suggested_review.threshold,
                    reject: category.suggested_reject.threshold,
                },
            );
        }
        out
    }

    /// The report as a table for people.
    pub fn render_text(&self) -> String {
        use std::fmt::Write as _;
        let mut out = String::new();
        let _ = writeln!(
            out,
            "workflow {} version {}: {} checks, {} with feedback; review suggested at precision {}, reject at {}",
            self.workflow, self.version, self.checks, self.with_feedback, self.precision, self.reject_precision
        );
        let _ = writeln!(
            out,
            "category\tlabelled\tpositive\tauprc\treview (P/R)\treject (P/R)\tsuggested review\tsuggested reject"
        );
        let ratio = |value: Option<f64>| value.map_or("-".to_owned(), |v| format!("{v:.3}"));
        let at = |at: &AtThreshold| {
            format!(
                "{} ({}/{})",
                at.threshold,
                ratio(at.precision),
                ratio(at.recall)
            )
        };
        let suggestion = |s: &Suggestion| match (&s.kept_because, &s.at) {
            (None, Some(a)) => at(a),
            (Some(why), _) => format!("{} kept: {why}", s.threshold),
            (None, None) => s.threshold.to_string(),
        };
        for c in &self.categories {
            let _ = writeln!(
                out,
                "{}\t{}\t{}\t{}\t{}\t{}\t{}\t{}",
                c.category,
                c.labelled,
                c.positives,
                ratio(c.auprc),
                at(&c.review),
                at(&c.reject),
                suggestion(&c.suggested_review),
                suggestion(&c.suggested_reject)
            );
        }
        out
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn labelled(pairs: &[(f64, bool)]) -> Labelled {
        let mut out = Labelled::default();
        for &(score, label) in pairs {
            out.push(score, label);
        }
        out.sort();
        out
    }

    #[test]
    fn precision_and_recall_at_a_threshold() {
        let l = labelled(&[
            (0.9, true),
            (0.8, false),
            (0.7, true),
            (0.2, false),
            (0.1, true),
        ]);
        let at = l.at(0.7);
        assert_eq!(at.flagged, 3);
        assert_eq!(at.precision, Some(2.0 / 3.0));
        assert_eq!(at.recall, Some(2.0 / 3.0));
        let none = l.at(0.95);
        assert_eq!(
            (none.flagged, none.precision, none.recall),
            (0, None, Some(0.0))
        );
    }

    #[test]
    fn the_curve_and_the_histogram() {
        let l = labelled(&[
            (0.9, true),
            (0.8, false),
            (0.7, true),
            (0.2, false),
            (1.0, true),
        ]);
        let curve = l.curve();
        assert_eq!(curve.len(), 5);
        assert_eq!(curve[0].threshold, 1.0);
        assert_eq!((curve[0].precision, curve[0].recall), (1.0, 1.0 / 3.0));
        assert_eq!(curve[4].threshold, 0.2);
        assert_eq!((curve[4].precision, curve[4].recall), (0.6, 1.0));
        let histogram = l.histogram();
        assert_eq!(histogram.positives.iter().sum::<usize>(), 3);
        assert_eq!(histogram.positives[HISTOGRAM_BINS - 1], 1);
        assert_eq!(histogram.negatives[4], 1);
        // Thinned to at most CURVE_POINTS_MAX, the last point kept.
        let mut many = Labelled::default();
        for i in 0..1000 {
            many.push(f64::from(i) / 1000.0, i % 3 == 0);
        }
        many.sort();
        let curve = many.curve();
        assert!(curve.len() <= CURVE_POINTS_MAX);
        assert_eq!(curve.last().map(|point| point.recall), Some(1.0));
    }

    #[test]
    fn average_precision_by_hand() {
        // Ranked: + - + - +: precisions at the positives 1, 2/3, 3/5.
        let l = labelled(&[
            (0.9, true),
            (0.8, false),
            (0.7, true),
            (0.2, false),
            (0.1, true),
        ]);
        let expected = (1.0 + 2.0 / 3.0 + 3.0 / 5.0) / 3.0;
        assert!((l.auprc().expect("auprc") - expected).abs() < 1e-12);
        // A perfect ranking is 1; ties are flagged together.
        assert_eq!(labelled(&[(0.9, true), (0.1, false)]).auprc(), Some(1.0));
        assert_eq!(labelled(&[(0.5, true), (0.5, false)]).auprc(), Some(0.5));
        assert_eq!(labelled(&[(0.5, true)]).auprc(), None);
    }

    #[test]
    fn the_threshold_with_the_most_recall_at_the_precision() {
        let l = labelled(&[
            (0.95, true),
            (0.9, true),
            (0.85, false),
            (0.8, true),
            (0.6, true),
            (0.5, false),
            (0.4, false),
            (0.3, true),
        ]);
        // At 0.6: 4 of 5 flagged are positive (0.8); at 0.3, 5 of 8.
        assert_eq!(l.best_reaching(0.8), Some(0.6));
        assert_eq!(l.best_reaching(0.6), Some(0.3));
        assert_eq!(l.best_reaching(1.0), Some(0.9));
        assert_eq!(labelled(&[(0.5, false)]).best_reaching(0.5), None);
        // 0.8, 0.2 and 0.1 reach 0.5 with every positive; 0.8 flags the fewest.
        let tail = labelled(&[(0.9, true), (0.8, true), (0.2, false), (0.1, false)]);
        assert_eq!(tail.best_reaching(0.5), Some(0.8));
        let after = labelled(&[
            (0.9, true),
            (0.5, true),
            (0.4, false),
            (0.3, true),
            (0.2, false),
        ]);
        assert_eq!(after.best_reaching(0.7), Some(0.3));
    }

    #[test]
    fn few_labels_keep_the_threshold_in_force() {
        let workflow: WorkflowDef = toml::from_str(
            "description = 'x'\n[categories]\nhate = { review = 0.5, reject = 0.9 }\nspam = { review = 0.5, reject = 0.9 }\n",
        )
        .expect("workflow");
        let mut by_category = BTreeMap::new();
        let mut hate = Labelled::default();
        for i in 0..20 {
            // Positives score 0.6 and up, negatives below: every threshold from 0.6 is exact.
            let score = f64::from(i) / 20.0;
            hate.push(score, score >= 0.6);
        }
        by_category.insert("hate".to_owned(), hate);
        let mut spam = Labelled::default();
        spam.push(0.9, true);
        by_category.insert("spam".to_owned(), spam);
        let read = Read {
            checks: 40,
            with_feedback: 21,
        };
        let asked = Asked {
            precision: 0.9,
            reject_precision: 0.99,
        };
        let report = report("w", 3, &workflow, by_category, read, asked);
        let hate = &report.categories[0];
        assert_eq!(hate.category, "hate");
        assert_eq!(hate.suggested_review.threshold, 0.6);
        assert_eq!(hate.suggested_reject.threshold, 0.6);
        assert_eq!(hate.auprc, Some(1.0));
        let spam = &report.categories[1];
        assert_eq!(spam.suggested_review.threshold, 0.5);
        assert!(spam.suggested_review.kept_because.is_some());
        let suggested = report.suggested(&workflow);
        assert_eq!(suggested.categories["hate"].review, 0.6);
        assert_eq!(suggested.categories["spam"].reject, 0.9);
    }
}
