//! Workflow definitions: the TOML file operators edit, its validation, and its versioning.
//!
//! A workflow names the checks to run per kind of content and gives each category a review and
//! a reject threshold. Definitions are imported into the store (`modgate workflow import`); the
//! store keeps a version per workflow that goes up whenever the definition's canonical
//! encoding changes, so answers and the journal can say which definition decided.
//!
//! The file shipped with modgate is embedded in the binary ([`SHIPPED_WORKFLOWS`]) and imported
//! into a fresh store.

use std::collections::BTreeMap;

use serde::{Deserialize, Serialize};

use crate::checks::registry;
use crate::content::ContentKind;

/// `src/defaults/workflows.toml`, the workflows shipped with this version.
pub const SHIPPED_WORKFLOWS: &str = include_str!("defaults/workflows.toml");

/// Workflow names: what callers send as `workflow`.
pub const WORKFLOW_NAME_BYTES_MAX: usize = 64;

#[derive(Clone, Debug, PartialEq, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct Thresholds {
    /// A score at or above this sends the content to review.
    pub review: f64,
    /// A score at or above this rejects the content.
    pub reject: f64,
}

#[derive(Clone, Debug, PartialEq, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct WorkflowDef {
    /// One sentence for operators and for `GET /v1/workflows` readers.
    pub description: String,
    /// Only plans with `paid = true` may use it.
    #[serde(default)]
    pub paid_only: bool,
    /// Checks run on texts, by source name.
    #[serde(default)]
    pub text_checks: Vec<String>,
    /// Checks run on images, by source name.
    #[serde(default)]
    pub image_checks: Vec<String>,
    /// Thresholds per category id.
    #[serde(default)]
    pub categories: BTreeMap<String, Thresholds>,
    /// The calling organization's lists the `hashlist` (image lists) and `termlist` (text
    /// lists) checks consult, by name (an organization without a list of that name has
    /// nothing in it).
    #[serde(default)]
    pub lists: Vec<String>,
}

/// A workflow definition as the first version of the store kept it, before `lists`: records
/// written then are read through it ([`crate::store::records::WorkflowCodec`]).
#[derive(Clone, Debug, PartialEq, Serialize, Deserialize)]
pub struct WorkflowDefV1 {
    pub description: String,
    pub paid_only: bool,
    pub text_checks: Vec<String>,
    pub image_checks: Vec<String>,
    pub categories: BTreeMap<String, Thresholds>,
}

/// A definition in [`WorkflowDefV1`]'s layout, borrowed: what a definition without lists is
/// stored and digested as.
#[derive(Serialize)]
pub struct WorkflowDefV1Ref<'a> {
    pub description: &'a str,
    pub paid_only: bool,
    pub text_checks: &'a [String],
    pub image_checks: &'a [String],
    pub categories: &'a BTreeMap<String, Thresholds>,
}

impl WorkflowDef {
    /// Everything but `lists`, in the first version's layout.
    pub fn first_version(&self) -> WorkflowDefV1Ref<'_> {
        WorkflowDefV1Ref {
            description: &self.description,
            paid_only: self.paid_only,
            text_checks: &self.text_checks,
            image_checks: &self.image_checks,
            categories: &self.categories,
        }
    }
}

impl From<WorkflowDefV1> for WorkflowDef {
    fn from(old: WorkflowDefV1) -> WorkflowDef {
        WorkflowDef {
            description: old.description,
            paid_only: old.paid_only,
            text_checks: old.text_checks,
            image_checks: old.image_checks,
            categories: old.categories,
            lists: Vec::new(),
        }
    }
}

/// The file format: `[workflows.NAME]` tables.
#[derive(Debug, Deserialize)]
#[serde(deny_unknown_fields)]
struct WorkflowFile {
    workflows: BTreeMap<String, WorkflowDef>,
}

/// Parses and validates a workflow file against the checks of this build.
pub fn parse_workflows(text: &str) -> Result<BTreeMap<String, WorkflowDef>, String> {
    let file: WorkflowFile = toml::from_str(text).map_err(|error| error.to_string())?;
    if file.workflows.is_empty() {
        return Err("the file defines no workflow".into());
    }
    for (name, def) in &file.workflows {
        validate(name, def).map_err(|error| format!("workflow '{name}': {error}"))?;
    }
    Ok(file.workflows)
}

pub fn validate_name(name: &str) -> Result<(), String> {
    if crate::bounds::is_plain_name(name, WORKFLOW_NAME_BYTES_MAX) {
        Ok(())
    } else {
        Err(format!(
            "invalid workflow name '{name}': 1 to {WORKFLOW_NAME_BYTES_MAX} of [a-z0-9_-]"
        ))
    }
}

fn validate(name: &str, def: &WorkflowDef) -> Result<(), String> {
    validate_name(name)?;
    let known = || {
        registry::all()
            .map(|check| check.name)
            .collect::<Vec<_>>()
            .join(", ")
    };
    let mut scored: Vec<&str> = Vec::new();
    for (checks, kind) in [
        (&def.text_checks, ContentKind::Text),
        (&def.image_checks, ContentKind::Image),
    ] {
        for check in checks {
            let info = registry::find(check)
                .ok_or_else(|| format!("unknown check '{check}' (this build has: {})", known()))?;
            if info.kind != kind {
                return Err(format!(
                    "check '{check}' does not read {}",
                    match kind {
                        ContentKind::Text => "texts",
                        ContentKind::Image => "images",
                    }
                ));
            }
            scored.extend_from_slice(info.categories);
        }
    }
    let consults = def
        .image_checks
        .iter()
        .chain(&def.text_checks)
        .find(|check| *check == registry::HASHLIST.name || *check == registry::TERMLIST.name);
    match (consults, def.lists.is_empty()) {
        (Some(check), true) => {
            return Err(format!(
                "the {check} check needs `lists`, the lists it consults"
            ))
        }
        (None, false) => {
            return Err(
                "`lists` is set but neither the hashlist nor the termlist check is named".into(),
            )
        }
        _ => {}
    }
    for list in &def.lists {
        crate::lists::validate_name(list)?;
    }
    for (category, thresholds) in &def.categories {
        if !scored.contains(&category.as_str()) {
            return Err(format!(
                "category '{category}' is not scored by any of its checks"
            ));
        }
        let in_range = |x: f64| (0.0..=1.0).contains(&x);
        if !in_range(thresholds.review) || !in_range(thresholds.reject) {
            return Err(format!(
                "category '{category}': thresholds must be in [0, 1]"
            ));
        }
        if thresholds.review > thresholds.reject {
            return Err(format!(
                "category '{category}': review threshold above the reject threshold"
            ));
        }
    }
    Ok(())
}

/// SHA-256 of the canonical (bincode) encoding: equal definitions, equal digests. A
/// definition without lists has the digest it had before lists existed, so importing an
/// unchanged file does not make a new version.
pub fn digest(def: &WorkflowDef) -> [u8; 32] {
    let mut bytes = bincode_encode(&def.first_version());
    if !def.lists.is_empty() {
        bytes.extend(bincode_encode(&def.lists));
    }
    let digest = ring::digest::digest(&ring::digest::SHA256, &bytes);
    let mut out = [0u8; 32];
    out.copy_from_slice(digest.as_ref());
    out
}

fn bincode_encode<T: Serialize>(value: &T) -> Vec<u8> {
    use heed::BytesEncode;
    heed::types::SerdeBincode::<T>::bytes_encode(value)
        .map(|bytes| bytes.into_owned())
        .unwrap_or_default()
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn shipped_file_parses() {
        let workflows = parse_workflows(SHIPPED_WORKFLOWS).unwrap();
        assert!(workflows.contains_key("default"));
        assert!(workflows.contains_key("advanced"));
    }

    #[test]
    fn refusals() {
        let bad = [
            "[workflows.Bad]\ndescription = 'x'\n",
            "[workflows.a]\ndescription = 'x'\ntext_checks = ['nope']\n",
            "[workflows.a]\ndescription = 'x'\nimage_checks = ['pii']\n",
            "[workflows.a]\ndescription = 'x'\ntext_checks = ['pii']\n[workflows.a.categories.profanity]\nreview = 0.5\nreject = 0.9\n",
            "[workflows.a]\ndescription = 'x'\ntext_checks = ['wordlist']\n[workflows.a.categories.profanity]\nreview = 0.9\nreject = 0.5\n",
            "[workflows.a]\ndescription = 'x'\ntext_checks = ['wordlist']\n[workflows.a.categories.profanity]\nreview = 0.5\nreject = 1.5\n",
            "[workflows.a]\ndescription = 'x'\nsurprise = 1\n",
            "",
        ];
        for text in bad {
            assert!(parse_workflows(text).is_err(), "{text}");
        }
    }

    #[test]
    fn digest_follows_content() {
        let text = "[workflows.a]\ndescription = 'x'\ntext_checks = ['wordlist']\n[workflows.a.categories.profanity]\nreview = 0.5\nreject = 0.9\n";
        let a = parse_workflows(text).unwrap();
        let b = parse_workflows(&text.replace("0.9", "0.8")).unwrap();
        assert_eq!(
            digest(&a["a"]),
            digest(&parse_workflows(text).unwrap()["a"])
        );
        assert_ne!(digest(&a["a"]), digest(&b["a"]));
    }
}
