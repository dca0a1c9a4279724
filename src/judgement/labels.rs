//! Feedback from a review tool: a CSV of `request_id,label,value` rows (`modgate feedback
//! import`). `label` is a category id, with `value` `true` or `false` (or `1`, `0`), or
//! `action`, with `value` `accept`, `review` or `reject`. A first row `request_id,...` is a
//! header. Rows of one request id are merged in file order (the last word wins, as through
//! the route). A file with a malformed row is refused whole, naming the line, so that an
//! import is all or nothing.

use std::collections::BTreeMap;

use crate::request_id::is_written_id;
use crate::store::feedback::{validate_category, Feedback};

/// Rows one import reads at most.
pub const ROWS_MAX: usize = 1_000_000;

/// The feedback of a file, by request id.
pub fn parse(text: &str) -> Result<BTreeMap<String, Feedback>, String> {
    let mut out: BTreeMap<String, Feedback> = BTreeMap::new();
    let mut rows = 0;
    for (index, line) in text.lines().enumerate() {
        let number = index + 1;
        let line = line.trim_end_matches('\r');
        if line.trim().is_empty() || (index == 0 && line.starts_with("request_id,")) {
            continue;
        }
        rows += 1;
        if rows > ROWS_MAX {
            return Err(format!("more than {ROWS_MAX} rows"));
        }
        let fields: Vec<&str> = line.split(',').map(str::trim).collect();
        let [request_id, label, value] = fields.as_slice() else {
            return Err(format!(
                "line {number}: expected request_id,label,value ({} fields)",
                fields.len()
            ));
        };
        if !is_written_id(request_id) {
            return Err(format!("line {number}: '{request_id}' is not a request id"));
        }
        let feedback = out.entry((*request_id).to_owned()).or_default();
        if *label == "action" {
            if !matches!(*value, "accept" | "review" | "reject") {
                return Err(format!(
                    "line {number}: action '{value}': expected accept, review or reject"
                ));
            }
            feedback.action = Some((*value).to_owned());
            continue;
        }
        validate_category(label).map_err(|error| format!("line {number}: {error}"))?;
        let label_value = match *value {
            "true" | "1" => true,
            "false" | "0" => false,
            other => {
                return Err(format!(
                    "line {number}: value '{other}': expected true or false"
                ))
            }
        };
        feedback.labels.insert((*label).to_owned(), label_value);
    }
    for (request_id, feedback) in &out {
        feedback
            .validate()
            .map_err(|error| format!("request {request_id}: {error}"))?;
    }
    Ok(out)
}

#[cfg(test)]
mod tests {
    use proptest::prelude::*;

    use super::*;

    const ID: &str = "01KC0000000000000000000000";
    const OTHER: &str = "01KC0000000000000000000001";

    #[test]
    fn rows_merge_by_request() {
        let text = format!(
            "request_id,label,value\r\n{ID},hate,true\n{ID},action,reject\n\n{OTHER},spam,0\n{ID},hate,false\n"
        );
        let parsed = parse(&text).expect("parses");
        assert_eq!(parsed.len(), 2);
        assert!(!parsed[ID].labels["hate"]);
        assert_eq!(parsed[ID].action.as_deref(), Some("reject"));
        assert!(!parsed[OTHER].labels["spam"]);
    }

    #[test]
    fn a_bad_row_refuses_the_file_and_names_its_line() {
        for (text, says) in [
            (format!("{ID},hate\n"), "line 1"),
            (format!("{ID},hate,true\n{ID},hate,maybe\n"), "line 2"),
            (format!("{ID},Hate,true\n"), "line 1"),
            (format!("{ID},action,delete\n"), "line 1"),
            (
                "01kc0000000000000000000000,hate,true\n".to_owned(),
                "line 1",
            ),
            ("not-an-id,hate,true\n".to_owned(), "line 1"),
            (format!("{ID},hate,true,extra\n"), "line 1"),
        ] {
            let error = parse(&text).expect_err(&text);
            assert!(error.starts_with(says), "{text:?}: {error}");
        }
        assert!(is_written_id(ID));
        assert!(!is_written_id("01KC000000000000000000000I"));
    }

    proptest! {
        #[test]
        fn any_text_parses_or_is_refused_without_panicking(text in "\\PC{0,200}") {
            let _ = parse(&text);
        }

        #[test]
        fn written_rows_read_back(
            rows in proptest::collection::vec(
                ("[0-9A-HJKMNP-TV-Z]{26}", "[a-z0-9_]{1,20}", any::<bool>()),
                1..40,
            )
        ) {
            prop_assume!(rows.iter().all(|(_, label, _)| label != "action"));
            let text: String = rows
                .iter()
                .map(|(id, label, value)| format!("{id},{label},{value}\n"))
                .collect();
            let parsed = parse(&text).expect("well-formed rows parse");
            // The last word on each (request, label) is what is read.
            let mut expected: BTreeMap<(String, String), bool> = BTreeMap::new();
            for (id, label, value) in &rows {
                expected.insert((id.clone(), label.clone()), *value);
            }
            for ((id, label), value) in expected {
                prop_assert_eq!(parsed[&id].labels.get(&label), Some(&value));
            }
        }
    }
}
