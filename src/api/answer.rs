//! The answer of a check: Answer on the native routes, CompatAnswer on the
//! compatible ones. Both come from one [`Decision`]; only `workflow` and `request` differ.

use serde::ser::{SerializeMap, Serializer};
use serde::Serialize;

use super::envelope::{json_response, CompatRequest};
use crate::decision::{Decision, Reason};
use crate::http::response::Response;
use crate::image::faces::FoundFace;
use crate::image::hashes::ImageHashes;
use crate::image::ocr::FoundLine;
use crate::image::properties::Properties;
use crate::image::qr::QrCode;
use crate::lists::{ListKind, ListMatch};
use crate::store::records::WorkflowRecord;
use crate::text::language::Language;

/// Which shape to answer in.
#[derive(Clone, Copy)]
pub enum Shape {
    Native,
    /// With the gateway clock in Unix milliseconds, for `request.timestamp`.
    Compat {
        unix_ms: i64,
    },
}

pub struct CheckAnswer<'a> {
    pub workflow: &'a WorkflowRecord,
    pub decision: &'a Decision,
    pub request_id: &'a str,
    pub reference: Option<&'a str>,
    pub time_ms: u64,
    pub shape: Shape,
    /// The image's properties, when a `properties` check measured them.
    pub properties: Option<&'a Properties>,
    /// The image's QR codes, when a `qr` check read them.
    pub qr_codes: Option<&'a [QrCode]>,
    /// The image's faces, when a `faces` check looked for them.
    pub faces: Option<&'a [FoundFace]>,
    /// The image's lines of text, when an `ocr` check read them.
    pub text_lines: Option<&'a [FoundLine]>,
    /// A text's language (see [`crate::checks::board::ScoreBoard::language`]); `Some(None)`
    /// (null) for a text without one.
    pub language: Option<Option<&'a Language>>,
    /// What the organization's lists matched, when the workflow names the `hashlist` or
    /// `termlist` check.
    pub list_matches: Option<&'a [ListMatch]>,
    /// The image's hashes, when the workflow names the `hashlist` check (so that a platform
    /// can keep them and list the image later without sending it again).
    pub image_hashes: Option<&'a ImageHashes>,
}

/// An image's hashes as answers show them.
pub struct HashesView<'a>(pub &'a ImageHashes);

impl Serialize for HashesView<'_> {
    fn serialize<S: Serializer>(&self, serializer: S) -> Result<S::Ok, S::Error> {
        use crate::image::hashes::hex;
        let hashes = self.0;
        let mut map = serializer.serialize_map(None)?;
        if let Some((pdq, quality)) = hashes.pdq {
            map.serialize_entry("pdq", &pdq.to_hex())?;
            map.serialize_entry("pdq_quality", &quality)?;
        }
        map.serialize_entry("md5", &hex(&hashes.md5))?;
        map.serialize_entry("sha256", &hex(&hashes.sha256))?;
        map.end()
    }
}

/// A list match as answers show it.
pub struct MatchView<'a>(pub &'a ListMatch);

impl Serialize for MatchView<'_> {
    fn serialize<S: Serializer>(&self, serializer: S) -> Result<S::Ok, S::Error> {
        let found = self.0;
        let mut map = serializer.serialize_map(None)?;
        map.serialize_entry("list", &*found.list)?;
        map.serialize_entry("kind", found.kind.as_str())?;
        map.serialize_entry("entry_id", &found.entry_id)?;
        map.serialize_entry("hash_type", found.hash_type)?;
        map.serialize_entry("distance", &found.distance)?;
        map.serialize_entry("label", &found.label)?;
        map.serialize_entry("id", &found.caller_id)?;
        if let Some(term) = &found.term {
            map.serialize_entry("term", term)?;
        }
        map.end()
    }
}

/// Reasons, the `known_image` and `listed_term` ones with the block list's match that made
/// them.
struct Reasons<'a> {
    reasons: &'a [Reason],
    matches: &'a [ListMatch],
}

impl Serialize for Reasons<'_> {
    fn serialize<S: Serializer>(&self, serializer: S) -> Result<S::Ok, S::Error> {
        use crate::checks::categories::{KNOWN_IMAGE, LISTED_TERM};
        use serde::ser::SerializeSeq;
        let mut seq = serializer.serialize_seq(Some(self.reasons.len()))?;
        for reason in self.reasons {
            let made_by = self.matches.iter().find(|found| {
                found.kind == ListKind::Block
                    && match reason.id {
                        KNOWN_IMAGE => found.term.is_none(),
                        LISTED_TERM => found.term.is_some(),
                        _ => false,
                    }
            });
            match made_by {
                Some(found) => seq.serialize_element(&MatchedReason { reason, found })?,
                None => seq.serialize_element(reason)?,
            }
        }
        seq.end()
    }
}

struct MatchedReason<'a> {
    reason: &'a Reason,
    found: &'a ListMatch,
}

impl Serialize for MatchedReason<'_> {
    fn serialize<S: Serializer>(&self, serializer: S) -> Result<S::Ok, S::Error> {
        let mut map = serializer.serialize_map(Some(7))?;
        reason_fields(self.reason, &mut map)?;
        map.serialize_entry("match", &MatchView(self.found))?;
        map.end()
    }
}

/// Lists' matches, serialized as `list_matches` (also on `/1.0/check.json`).
pub(super) struct Matches<'a>(pub(super) &'a [ListMatch]);

impl Serialize for Matches<'_> {
    fn serialize<S: Serializer>(&self, serializer: S) -> Result<S::Ok, S::Error> {
        serializer.collect_seq(self.0.iter().map(MatchView))
    }
}

#[derive(Serialize)]
#[serde(untagged)]
enum WorkflowField<'a> {
    Name(&'a str),
    Compat { id: &'a str },
}

#[derive(Serialize)]
struct Summary<'a> {
    action: &'static str,
    reject_prob: f64,
    reject_reason: Reasons<'a>,
    review_reason: Reasons<'a>,
}

impl Serialize for Reason {
    fn serialize<S: Serializer>(&self, serializer: S) -> Result<S::Ok, S::Error> {
        let mut map = serializer.serialize_map(Some(6))?;
        reason_fields(self, &mut map)?;
        map.end()
    }
}

fn reason_fields<M: SerializeMap>(reason: &Reason, map: &mut M) -> Result<(), M::Error> {
    map.serialize_entry("id", reason.id)?;
    map.serialize_entry("text", reason.text)?;
    map.serialize_entry("message", reason.message)?;
    map.serialize_entry("score", &reason.score)?;
    map.serialize_entry("threshold", &reason.threshold)?;
    map.serialize_entry("source", reason.source)
}

struct Scores<'a>(&'a [(&'static str, f64)]);

impl Serialize for Scores<'_> {
    fn serialize<S: Serializer>(&self, serializer: S) -> Result<S::Ok, S::Error> {
        let mut map = serializer.serialize_map(Some(self.0.len()))?;
        for (category, score) in self.0 {
            map.serialize_entry(category, score)?;
        }
        map.end()
    }
}

#[derive(Serialize)]
struct Answer<'a> {
    status: &'static str,
    workflow: WorkflowField<'a>,
    summary: Summary<'a>,
    scores: Scores<'a>,
    time_ms: u64,
    request_id: &'a str,
    workflow_version: u64,
    #[serde(rename = "ref")]
    reference: Option<&'a str>,
    /// Absent when every category was checked: never `[]`, never null.
    #[serde(skip_serializing_if = "Option::is_none")]
    unchecked: Option<&'a [&'static str]>,
    #[serde(skip_serializing_if = "Option::is_none")]
    request: Option<CompatRequest<'a>>,
    #[serde(skip_serializing_if = "Option::is_none")]
    properties: Option<&'a Properties>,
    #[serde(skip_serializing_if = "Option::is_none")]
    qr_codes: Option<&'a [QrCode]>,
    #[serde(skip_serializing_if = "Option::is_none")]
    face_count: Option<usize>,
    #[serde(skip_serializing_if = "Option::is_none")]
    faces: Option<&'a [FoundFace]>,
    #[serde(skip_serializing_if = "Option::is_none")]
    text_lines: Option<&'a [FoundLine]>,
    #[serde(skip_serializing_if = "Option::is_none")]
    language: Option<Option<&'a Language>>,
    #[serde(skip_serializing_if = "Option::is_none")]
    list_matches: Option<Matches<'a>>,
    #[serde(skip_serializing_if = "Option::is_none")]
    image_hashes: Option<HashesView<'a>>,
}

pub fn check_answer(answer: &CheckAnswer<'_>) -> Response {
    let decision = answer.decision;
    let matches = answer.list_matches.unwrap_or_default();
    let (workflow, request) = match answer.shape {
        Shape::Native => (WorkflowField::Name(&answer.workflow.name), None),
        Shape::Compat { unix_ms } => (
            WorkflowField::Compat {
                id: &answer.workflow.name,
            },
            Some(CompatRequest {
                id: answer.request_id,
                timestamp: unix_ms as f64 / 1000.0,
                operations: 1,
            }),
        ),
    };
    json_response(
        200,
        &Answer {
            status: "success",
            workflow,
            summary: Summary {
                action: decision.action.as_str(),
                reject_prob: decision.reject_prob,
                reject_reason: Reasons {
                    reasons: &decision.reject_reason,
                    matches,
                },
                review_reason: Reasons {
                    reasons: &decision.review_reason,
                    matches,
                },
            },
            scores: Scores(&decision.scores),
            time_ms: answer.time_ms,
            request_id: answer.request_id,
            workflow_version: answer.workflow.version,
            reference: answer.reference,
            unchecked: (!decision.unchecked.is_empty()).then_some(decision.unchecked.as_slice()),
            request,
            properties: answer.properties,
            qr_codes: answer.qr_codes,
            face_count: answer.faces.map(<[FoundFace]>::len),
            faces: answer.faces,
            text_lines: answer.text_lines,
            language: answer.language,
            list_matches: answer.list_matches.map(Matches),
            image_hashes: answer.image_hashes.map(HashesView),
        },
    )
}
