//! The organizations' feedback on their checks: the action a check should have had and, by
//! category, whether its content was that harm (`docs/judgement.md`). Given through
//! `POST /v1/feedback` or imported from a review tool's CSV (`modgate feedback import`), read
//! by `GET /v1/checks/{id}`, `modgate calibrate` and `modgate replay`.
//!
//! One record per check, keyed by its request id. Later feedback on the same check is merged
//! into it: the last word on each category wins, as does the last action and the last note;
//! a category or an action given once is never dropped by feedback that does not name it.

use std::collections::BTreeMap;

pub use super::records::FeedbackRecord;
use super::Store;

/// Categories one piece of feedback labels at most.
pub const LABELS_MAX: usize = 64;
/// A note's length, in characters.
pub const NOTE_CHARS_MAX: usize = 1000;
/// A category id's length, in bytes (as a workflow's).
pub const CATEGORY_BYTES_MAX: usize = 64;

/// One piece of feedback, before it is merged.
#[derive(Clone, Debug, Default, PartialEq)]
pub struct Feedback {
    pub action: Option<String>,
    pub labels: BTreeMap<String, bool>,
    pub note: Option<String>,
}

impl Feedback {
    /// Checks the feedback's limits and vocabulary; the error says what is wrong.
    pub fn validate(&self) -> Result<(), String> {
        if self.action.is_none() && self.labels.is_empty() && self.note.is_none() {
            return Err("feedback names an action, labels or a note".into());
        }
        if let Some(action) = &self.action {
            if !matches!(action.as_str(), "accept" | "review" | "reject") {
                return Err(format!(
                    "action '{action}': expected accept, review or reject"
                ));
            }
        }
        if self.labels.len() > LABELS_MAX {
            return Err(format!(
                "{} labels: feedback labels at most {LABELS_MAX} categories",
                self.labels.len()
            ));
        }
        for category in self.labels.keys() {
            validate_category(category)?;
        }
        if let Some(note) = &self.note {
            let chars = note.chars().count();
            if chars > NOTE_CHARS_MAX {
                return Err(format!(
                    "the note has {chars} characters; at most {NOTE_CHARS_MAX}"
                ));
            }
        }
        Ok(())
    }
}

/// A category id as workflows name them: 1 to [`CATEGORY_BYTES_MAX`] bytes of lowercase
/// ASCII letters, digits and `_`.
pub fn validate_category(category: &str) -> Result<(), String> {
    let well_formed = !category.is_empty()
        && category.len() <= CATEGORY_BYTES_MAX
        && category
            .bytes()
            .all(|b| b.is_ascii_lowercase() || b.is_ascii_digit() || b == b'_');
    if well_formed {
        Ok(())
    } else {
        Err(format!(
            "label '{}': a category id is 1 to {CATEGORY_BYTES_MAX} lowercase letters, digits and _",
            category.chars().take(80).collect::<String>()
        ))
    }
}

impl FeedbackRecord {
    /// `self` with `feedback` given after it (the last word on each field wins).
    pub fn merged(mut self, feedback: Feedback, given_by: &str, now_ms: i64) -> FeedbackRecord {
        if feedback.action.is_some() {
            self.action = feedback.action;
        }
        self.labels.extend(feedback.labels);
        if feedback.note.is_some() {
            self.note = feedback.note;
        }
        given_by.clone_into(&mut self.given_by);
        self.updated_ms = now_ms;
        self
    }

    /// The first feedback on a check.
    pub fn first(
        request_id: &str,
        org: &str,
        feedback: Feedback,
        given_by: &str,
        now_ms: i64,
    ) -> FeedbackRecord {
        FeedbackRecord {
            request_id: request_id.to_owned(),
            org: org.to_owned(),
            action: feedback.action,
            labels: feedback.labels,
            note: feedback.note,
            given_by: given_by.to_owned(),
            first_ms: now_ms,
            updated_ms: now_ms,
        }
    }
}

/// One piece of feedback to merge into check `request_id` of `org`.
#[derive(Clone, Debug, PartialEq)]
pub struct Given {
    pub request_id: String,
    pub org: String,
    pub feedback: Feedback,
    /// The key id that gives it (`import` for the CLI's imports).
    pub given_by: String,
    pub now_ms: i64,
}

impl Store {
    /// Merges each piece of `given`, in order, in one transaction (one durable commit for
    /// all): each one's record as it now is, or why it was not merged (another
    /// organization's feedback holds the id), in the order given.
    pub fn give_all_feedback(
        &self,
        given: Vec<Given>,
    ) -> anyhow::Result<Vec<Result<FeedbackRecord, String>>> {
        let mut txn = self.feedback_env().write_txn()?;
        let mut out = Vec::with_capacity(given.len());
        for given in given {
            out.push(
                self.merge_feedback(&mut txn, given)?
                    .map(|(record, _)| record),
            );
        }
        txn.commit()?;
        Ok(out)
    }

    /// Merges many pieces of feedback in one transaction (an import). Returns how many checks
    /// had none before; fails, writing nothing, if another organization's feedback holds one
    /// of the ids.
    pub fn import_feedback(&self, given: Vec<Given>) -> anyhow::Result<usize> {
        let mut txn = self.feedback_env().write_txn()?;
        let mut new = 0;
        for given in given {
            let (_, first) = self
                .merge_feedback(&mut txn, given)?
                .map_err(|refused| anyhow::anyhow!(refused))?;
            new += usize::from(first);
        }
        txn.commit()?;
        Ok(new)
    }

    /// Merges one piece in `txn`: the record as it now is and whether it is the check's first
    /// feedback, or why it was not merged.
    fn merge_feedback(
        &self,
        txn: &mut heed::RwTxn<'_>,
        given: Given,
    ) -> heed::Result<Result<(FeedbackRecord, bool), String>> {
        let Given {
            request_id,
            org,
            feedback,
            given_by,
            now_ms,
        } = given;
        let (record, first) = match self.feedback.get(txn, &request_id)? {
            Some(old) if old.org == org => (old.merged(feedback, &given_by, now_ms), false),
            Some(old) => {
                return Ok(Err(format!(
                    "check {request_id} has feedback of the organization '{}', not '{org}'",
                    old.org
                )))
            }
            None => (
                FeedbackRecord::first(&request_id, &org, feedback, &given_by, now_ms),
                true,
            ),
        };
        self.feedback.put(txn, &request_id, &record)?;
        Ok(Ok((record, first)))
    }

    /// The feedback on check `request_id`, if any.
    pub fn feedback_on(&self, request_id: &str) -> anyhow::Result<Option<FeedbackRecord>> {
        let txn = self.feedback_env().read_txn()?;
        Ok(self.feedback.get(&txn, request_id)?)
    }

    /// Every check's feedback, by request id (so by time), of `org` or of all organizations.
    pub fn feedback_all(
        &self,
        org: Option<&str>,
    ) -> anyhow::Result<BTreeMap<String, FeedbackRecord>> {
        let txn = self.feedback_env().read_txn()?;
        let mut out = BTreeMap::new();
        for entry in self.feedback.iter(&txn)? {
            let (id, record) = entry?;
            if org.is_none_or(|org| record.org == org) {
                out.insert(id.to_owned(), record);
            }
        }
        Ok(out)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn labels(items: &[(&str, bool)]) -> BTreeMap<String, bool> {
        items.iter().map(|(c, l)| ((*c).to_owned(), *l)).collect()
    }

    /// One piece of feedback, merged on its own.
    fn give(
        store: &Store,
        request_id: &str,
        org: &str,
        feedback: Feedback,
        given_by: &str,
        now_ms: i64,
    ) -> Result<FeedbackRecord, String> {
        let given = Given {
            request_id: request_id.to_owned(),
            org: org.to_owned(),
            feedback,
            given_by: given_by.to_owned(),
            now_ms,
        };
        let mut merged = store.give_all_feedback(vec![given]).expect("committed");
        merged.pop().expect("one answer")
    }

    #[test]
    fn the_last_word_on_each_field_wins() {
        let (_dir, store) = crate::store::test_store_with_org();
        let control = store.last_txn_id();
        let first = Feedback {
            action: Some("reject".into()),
            labels: labels(&[("hate", true), ("sexual", false)]),
            note: Some("slur".into()),
        };
        give(&store, "01ID", "acme", first, "key1", 10).expect("first");
        let second = Feedback {
            action: None,
            labels: labels(&[("hate", false), ("spam", true)]),
            note: None,
        };
        let record = give(&store, "01ID", "acme", second, "key2", 20).expect("second");
        assert_eq!(record.action.as_deref(), Some("reject"));
        assert_eq!(
            record.labels,
            labels(&[("hate", false), ("sexual", false), ("spam", true)])
        );
        assert_eq!(record.note.as_deref(), Some("slur"));
        assert_eq!((record.first_ms, record.updated_ms), (10, 20));
        assert_eq!(record.given_by, "key2");
        // Feedback is written beside the store: the shards' caches, which watch the store's
        // transaction id, are not emptied by it.
        assert_eq!(store.last_txn_id(), control);
        assert_eq!(store.feedback_on("01ID").expect("read"), Some(record));
        // Another organization's feedback on the same id is refused, not merged.
        let other = Feedback {
            note: Some("x".into()),
            ..Feedback::default()
        };
        assert!(give(&store, "01ID", "other", other, "k", 30).is_err());
        assert_eq!(store.feedback_all(Some("other")).expect("all").len(), 0);
        assert_eq!(store.feedback_all(None).expect("all").len(), 1);
    }

    #[test]
    fn a_group_merges_in_order_and_refuses_only_what_it_must() {
        let (_dir, store) = crate::store::test_store_with_org();
        let given = |id: &str, org: &str, hate: bool, at: i64| Given {
            request_id: id.to_owned(),
            org: org.to_owned(),
            feedback: Feedback {
                labels: labels(&[("hate", hate)]),
                ..Feedback::default()
            },
            given_by: "k".to_owned(),
            now_ms: at,
        };
        let results = store
            .give_all_feedback(vec![
                given("A", "acme", true, 1),
                given("B", "acme", true, 2),
                given("A", "other", true, 3),
                given("A", "acme", false, 4),
            ])
            .expect("committed");
        assert_eq!(results.len(), 4);
        assert!(results[2].is_err());
        let last = results[3].as_ref().expect("merged");
        assert_eq!(
            (last.labels["hate"], last.first_ms, last.updated_ms),
            (false, 1, 4)
        );
        assert_eq!(store.feedback_all(Some("acme")).expect("all").len(), 2);
    }

    #[test]
    fn feedback_is_validated() {
        let ok = Feedback {
            labels: labels(&[("pii_email", true)]),
            ..Feedback::default()
        };
        assert_eq!(ok.validate(), Ok(()));
        assert!(Feedback::default().validate().is_err());
        for bad in ["", "Hate", "hate speech", "é", &"a".repeat(65)] {
            let feedback = Feedback {
                labels: labels(&[(bad, true)]),
                ..Feedback::default()
            };
            assert!(feedback.validate().is_err(), "{bad:?}");
        }
        let action = Feedback {
            action: Some("delete".into()),
            ..Feedback::default()
        };
        assert!(action.validate().is_err());
        let note = Feedback {
            note: Some("é".repeat(NOTE_CHARS_MAX + 1)),
            ..Feedback::default()
        };
        assert!(note.validate().is_err());
        let many: BTreeMap<String, bool> =
            (0..=LABELS_MAX).map(|i| (format!("c{i}"), true)).collect();
        let many = Feedback {
            labels: many,
            ..Feedback::default()
        };
        assert!(many.validate().is_err());
    }
}
