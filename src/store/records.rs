//! The records of the store, as they are kept in LMDB (bincode via serde).
//!
//! Times are Unix milliseconds (`_ms`). A key's state is never stored: it is derived from its
//! timestamps and the clock by [`KeyRecord::state`], so expiry and the end of a rotation grace
//! need no writer.

use heed::types::{Bytes, SerdeBincode, Str};
use heed::Database;
use serde::{Deserialize, Serialize};

use crate::lists::{Entry, ListContent, ListKind};
use crate::workflow::WorkflowDef;

/// What a plan allows an organization. Defaults live in the embedded configuration.
#[derive(Clone, Debug, PartialEq, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct PlanLimits {
    /// Characters (Unicode scalar values) of a `text`.
    pub text_chars_max: u32,
    /// Pixels (width × height) of an image.
    pub image_pixels_max: u64,
    /// Checks per second per key: the refill rate of the key's bucket.
    pub rate_per_s: u32,
    /// Checks a key may send at once: the size of the key's bucket.
    pub rate_burst: u32,
    /// Checks in progress at once per organization.
    pub concurrent_max: u32,
    /// Checks per calendar month (UTC) per organization.
    pub quota_per_month: u64,
    /// Usable keys (active, or in a rotation grace) per organization.
    pub keys_max: u32,
    /// Whether workflows marked `paid_only` (such as `advanced`) may be used.
    pub paid: bool,
    /// In a fleet, while the budget engine cannot be reached: serve on this node's share of
    /// the limits (`open`, the default), or refuse checks with 503 `busy` (`closed`).
    #[serde(default)]
    pub engine_down: EngineDown,
    /// What a unit of `quota_per_month` is: a check (the default), or an operation (each
    /// model a Sightengine `check.json` request names counts one; every other check is one).
    /// The last field: plans that count checks are stored as they were before it
    /// ([`crate::codec`]).
    #[serde(default)]
    pub quota_counts: QuotaCounts,
}

impl crate::codec::Grown for PlanLimits {
    /// A plan of the older layout starts with `text_chars_max` (4 little-endian bytes, at
    /// most 20,000): never 0xff then these.
    const MARKER: [u8; 4] = [0xff, b'P', b'L', 2];
    /// bincode's variant index of [`QuotaCounts::Checks`].
    const OLDER_TAIL: &'static [u8] = &[0, 0, 0, 0];
    fn fits_older(&self) -> bool {
        self.quota_counts == QuotaCounts::Checks
    }
}

/// What a plan's monthly quota counts.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "lowercase")]
pub enum QuotaCounts {
    /// One unit per check, whatever it asked for.
    #[default]
    Checks,
    /// One unit per operation, as Sightengine counts them: a `check.json` request naming
    /// three models is three units (one when it names none: a list request); every other
    /// check is one.
    Operations,
}

impl QuotaCounts {
    /// The units a check of `operations` operations costs.
    pub fn units(self, operations: u32) -> u32 {
        match self {
            QuotaCounts::Checks => 1,
            QuotaCounts::Operations => operations.max(1),
        }
    }

    /// What a unit is called in messages.
    pub fn unit_name(self) -> &'static str {
        match self {
            QuotaCounts::Checks => "checks",
            QuotaCounts::Operations => "operations",
        }
    }
}

/// What a fleet node does for a plan while its budget engine (Redis/Valkey, or PostgreSQL for
/// the quota) cannot be reached.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "lowercase")]
pub enum EngineDown {
    /// Serve within this node's share of the limits (limit / live nodes).
    #[default]
    Open,
    /// Refuse checks with 503 `busy` until the engine is back.
    Closed,
}

/// Per-organization changes to its plan's limits; `None` keeps the plan's value.
#[derive(Clone, Debug, Default, PartialEq, Serialize, Deserialize)]
pub struct PlanOverrides {
    pub text_chars_max: Option<u32>,
    pub image_pixels_max: Option<u64>,
    pub rate_per_s: Option<u32>,
    pub rate_burst: Option<u32>,
    pub concurrent_max: Option<u32>,
    pub quota_per_month: Option<u64>,
    pub keys_max: Option<u32>,
}

impl PlanOverrides {
    pub fn apply(&self, plan: &PlanLimits) -> PlanLimits {
        PlanLimits {
            text_chars_max: self.text_chars_max.unwrap_or(plan.text_chars_max),
            image_pixels_max: self.image_pixels_max.unwrap_or(plan.image_pixels_max),
            rate_per_s: self.rate_per_s.unwrap_or(plan.rate_per_s),
            rate_burst: self.rate_burst.unwrap_or(plan.rate_burst),
            concurrent_max: self.concurrent_max.unwrap_or(plan.concurrent_max),
            quota_per_month: self.quota_per_month.unwrap_or(plan.quota_per_month),
            keys_max: self.keys_max.unwrap_or(plan.keys_max),
            paid: plan.paid,
            engine_down: plan.engine_down,
            quota_counts: plan.quota_counts,
        }
    }
}

#[derive(Clone, Debug, PartialEq, Serialize, Deserialize)]
pub struct OrgRecord {
    pub name: String,
    pub plan: String,
    pub suspended: bool,
    pub overrides: PlanOverrides,
    pub created_ms: i64,
}

/// What a key may do: check images, check texts, manage its organization's lists, give
/// feedback on its organization's checks and read how they were decided.
///
/// Stored as two bytes, as the two booleans of the first version were: the first holds
/// `image` (bit 0), `lists` (bit 1) and `feedback` (bit 2), the second `text`. Keys written
/// before lists existed read as they were, in LMDB and in a fleet's PostgreSQL alike, with no
/// migration.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct Scopes {
    pub image: bool,
    pub text: bool,
    pub lists: bool,
    pub feedback: bool,
}

impl Serialize for Scopes {
    fn serialize<S: serde::Serializer>(&self, serializer: S) -> Result<S::Ok, S::Error> {
        (
            u8::from(self.image) | u8::from(self.lists) << 1 | u8::from(self.feedback) << 2,
            u8::from(self.text),
        )
            .serialize(serializer)
    }
}

impl<'de> Deserialize<'de> for Scopes {
    fn deserialize<D: serde::Deserializer<'de>>(deserializer: D) -> Result<Self, D::Error> {
        let (first, text) = <(u8, u8)>::deserialize(deserializer)?;
        if first > 7 || text > 1 {
            return Err(serde::de::Error::custom("scopes out of range"));
        }
        Ok(Scopes {
            image: first & 1 != 0,
            lists: first & 2 != 0,
            feedback: first & 4 != 0,
            text: text == 1,
        })
    }
}

impl Scopes {
    /// Checks of both kinds: a key's scopes unless it is given others.
    pub const CHECKS: Scopes = Scopes {
        image: true,
        text: true,
        lists: false,
        feedback: false,
    };

    /// Parses a comma-separated set of `image`, `text`, `lists` and `feedback`.
    pub fn parse(text: &str) -> Result<Scopes, String> {
        let mut scopes = Scopes {
            image: false,
            text: false,
            lists: false,
            feedback: false,
        };
        for part in text.split(',').map(str::trim) {
            match part {
                "image" => scopes.image = true,
                "text" => scopes.text = true,
                "lists" => scopes.lists = true,
                "feedback" => scopes.feedback = true,
                other => {
                    return Err(format!(
                        "unknown scope '{other}' (expected image, text, lists, feedback)"
                    ))
                }
            }
        }
        Ok(scopes)
    }
}

impl std::fmt::Display for Scopes {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        let names: Vec<&str> = [
            (self.image, "image"),
            (self.text, "text"),
            (self.lists, "lists"),
            (self.feedback, "feedback"),
        ]
        .into_iter()
        .filter_map(|(on, name)| on.then_some(name))
        .collect();
        if names.is_empty() {
            f.write_str("none")
        } else {
            f.write_str(&names.join(","))
        }
    }
}

/// Which workflows a key may use.
#[derive(Clone, Debug, PartialEq, Eq, Serialize, Deserialize)]
pub enum WorkflowAccess {
    All,
    Only(Vec<String>),
}

impl WorkflowAccess {
    pub fn allows(&self, workflow: &str) -> bool {
        match self {
            WorkflowAccess::All => true,
            WorkflowAccess::Only(names) => names.iter().any(|name| name == workflow),
        }
    }
}

impl std::fmt::Display for WorkflowAccess {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        match self {
            WorkflowAccess::All => f.write_str("all"),
            WorkflowAccess::Only(names) => f.write_str(&names.join(",")),
        }
    }
}

#[derive(Clone, Debug, PartialEq, Serialize, Deserialize)]
pub struct KeyRecord {
    /// The 12-character public id (journal, dashboard, CLI).
    pub id: String,
    pub org: String,
    /// SHA-256 of the whole key string; the key itself is never stored.
    pub key_sha256: [u8; 32],
    pub scopes: Scopes,
    pub workflows: WorkflowAccess,
    pub created_ms: i64,
    pub expires_ms: Option<i64>,
    pub revoked_ms: Option<i64>,
    /// Set by a rotation: this key works until then.
    pub grace_until_ms: Option<i64>,
    /// The key that replaced this one.
    pub rotated_to: Option<String>,
    /// The key this one replaced.
    pub rotated_from: Option<String>,
}

/// A key's lifecycle state (`docs/interface.md#keys`), derived from its record and the time.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum KeyState {
    Active,
    /// Rotated; still works until the end of its grace delay.
    InGrace {
        until_ms: i64,
    },
    Expired,
    Revoked,
    /// Rotated, and the grace delay is over.
    Retired,
}

impl KeyState {
    /// Whether requests with the key are served (and the key counts toward the plan).
    pub fn usable(self) -> bool {
        matches!(self, KeyState::Active | KeyState::InGrace { .. })
    }

    pub fn name(self) -> &'static str {
        match self {
            KeyState::Active => "active",
            KeyState::InGrace { .. } => "grace",
            KeyState::Expired => "expired",
            KeyState::Revoked => "revoked",
            KeyState::Retired => "retired",
        }
    }
}

impl KeyRecord {
    pub fn state(&self, now_ms: i64) -> KeyState {
        if self.revoked_ms.is_some() {
            return KeyState::Revoked;
        }
        if self.expires_ms.is_some_and(|expires| now_ms >= expires) {
            return KeyState::Expired;
        }
        match self.grace_until_ms {
            Some(until_ms) if now_ms < until_ms => KeyState::InGrace { until_ms },
            Some(_) => KeyState::Retired,
            None => KeyState::Active,
        }
    }
}

#[derive(Clone, Debug, PartialEq, Serialize, Deserialize)]
pub struct WorkflowRecord {
    pub name: String,
    /// Goes up by one whenever the definition changes.
    pub version: u64,
    /// SHA-256 of the canonical encoding of `definition`, to notice changes on import.
    pub digest: [u8; 32],
    pub definition: WorkflowDef,
    pub updated_ms: i64,
}

/// The key of version `version` of workflow `name` among the versions kept: the name, `@`
/// (never in a name) and the version in 20 digits, so a name's versions sort in order. Text
/// PostgreSQL takes (a fleet's control plane keeps these keys in a `text` column).
pub fn workflow_version_key(name: &str, version: u64) -> String {
    format!("{name}@{version:020}")
}

/// The version a stored workflow record starts with since workflows name lists; records
/// without it are of the first version. A first-version record starts with the bincode length
/// of its name (8 little-endian bytes, a name being at most 64 bytes), never with 0xff.
const WORKFLOW_V2: [u8; 4] = [0xff, b'W', b'F', 2];

/// The first version of [`WorkflowRecord`] (its definition had no lists).
#[derive(Deserialize)]
struct WorkflowRecordV1 {
    name: String,
    version: u64,
    digest: [u8; 32],
    definition: crate::workflow::WorkflowDefV1,
    updated_ms: i64,
}

/// How the store (and a fleet's PostgreSQL, which holds the same bytes) keeps workflow
/// records: a workflow with lists as `WORKFLOW_V2` then bincode; one without, as the first
/// version did. Records of the first version read as they were, with no lists, so a store or
/// a fleet needs no migration, and a workflow without lists is read by older binaries too.
pub enum WorkflowCodec {}

impl<'a> heed::BytesEncode<'a> for WorkflowCodec {
    type EItem = WorkflowRecord;

    /// A workflow without lists keeps the first version's bytes, which every version reads
    /// (a fleet may run an older binary beside a newer one, or roll one back).
    fn bytes_encode(
        record: &'a WorkflowRecord,
    ) -> Result<std::borrow::Cow<'a, [u8]>, heed::BoxedError> {
        if record.definition.lists.is_empty() {
            let first = WorkflowRecordV1Ref {
                name: &record.name,
                version: record.version,
                digest: record.digest,
                definition: record.definition.first_version(),
                updated_ms: record.updated_ms,
            };
            let bytes = heed::types::SerdeBincode::<WorkflowRecordV1Ref>::bytes_encode(&first)?;
            return Ok(std::borrow::Cow::Owned(bytes.into_owned()));
        }
        let body = heed::types::SerdeBincode::<WorkflowRecord>::bytes_encode(record)?;
        let mut bytes = Vec::with_capacity(WORKFLOW_V2.len() + body.len());
        bytes.extend_from_slice(&WORKFLOW_V2);
        bytes.extend_from_slice(&body);
        Ok(std::borrow::Cow::Owned(bytes))
    }
}

/// [`WorkflowRecordV1`]'s layout, borrowed, for writing.
#[derive(Serialize)]
struct WorkflowRecordV1Ref<'a> {
    name: &'a str,
    version: u64,
    digest: [u8; 32],
    definition: crate::workflow::WorkflowDefV1Ref<'a>,
    updated_ms: i64,
}

impl<'a> heed::BytesDecode<'a> for WorkflowCodec {
    type DItem = WorkflowRecord;

    fn bytes_decode(bytes: &'a [u8]) -> Result<WorkflowRecord, heed::BoxedError> {
        if let Some(body) = bytes.strip_prefix(&WORKFLOW_V2) {
            return heed::types::SerdeBincode::<WorkflowRecord>::bytes_decode(body);
        }
        let old = heed::types::SerdeBincode::<WorkflowRecordV1>::bytes_decode(bytes)?;
        Ok(WorkflowRecord {
            name: old.name,
            version: old.version,
            digest: old.digest,
            definition: old.definition.into(),
            updated_ms: old.updated_ms,
        })
    }
}

/// An organization's hash or term list: what it holds and its counters (its entries are
/// kept apart, in the `list_entries` database).
#[derive(Clone, Debug, PartialEq, Serialize, Deserialize)]
pub struct ListRecord {
    pub org: String,
    pub name: String,
    pub kind: ListKind,
    /// Image hashes or terms.
    pub content: ListContent,
    /// PDQ matches within this many bits.
    pub distance_max: u32,
    pub created_ms: i64,
    /// Random, drawn at creation: a list deleted and made again under its name is another
    /// list to the follower, even within one millisecond.
    pub uid: u64,
    /// Entries in the list.
    pub entries: u64,
    /// The id the next entry gets.
    pub next_id: u64,
    /// Entries removed over the list's life.
    pub removals: u64,
}

/// The named databases of the hash lists.
#[derive(Clone)]
pub(crate) struct ListTables {
    pub lists: Database<Str, SerdeBincode<ListRecord>>,
    pub entries: Database<Bytes, SerdeBincode<Entry>>,
    pub hashes: Database<Bytes, Bytes>,
    pub removals: Database<Bytes, Bytes>,
}

/// The feedback kept on one check ([`super::feedback`]).
#[derive(Clone, Debug, PartialEq, Serialize, Deserialize)]
pub struct FeedbackRecord {
    pub request_id: String,
    /// The organization whose check it is.
    pub org: String,
    /// The action the check should have had: `accept`, `review` or `reject`.
    pub action: Option<String>,
    /// By category: whether the content was that harm.
    pub labels: std::collections::BTreeMap<String, bool>,
    pub note: Option<String>,
    /// The key that gave the last feedback (`import` for the CLI's imports).
    pub given_by: String,
    /// When feedback was first and last given.
    pub first_ms: i64,
    pub updated_ms: i64,
}

#[cfg(test)]
mod tests {
    use super::*;

    fn key() -> KeyRecord {
        KeyRecord {
            id: "AAAAAAAAAAAA".into(),
            org: "o".into(),
            key_sha256: [0; 32],
            scopes: Scopes::CHECKS,
            workflows: WorkflowAccess::All,
            created_ms: 0,
            expires_ms: None,
            revoked_ms: None,
            grace_until_ms: None,
            rotated_to: None,
            rotated_from: None,
        }
    }

    #[test]
    fn states() {
        let mut record = key();
        assert_eq!(record.state(10), KeyState::Active);
        record.expires_ms = Some(100);
        assert_eq!(record.state(99), KeyState::Active);
        assert_eq!(record.state(100), KeyState::Expired);
        record.expires_ms = None;
        record.grace_until_ms = Some(50);
        assert_eq!(record.state(49), KeyState::InGrace { until_ms: 50 });
        assert_eq!(record.state(50), KeyState::Retired);
        record.revoked_ms = Some(1);
        assert_eq!(record.state(0), KeyState::Revoked);
    }

    #[test]
    fn scopes() {
        assert_eq!(Scopes::parse("image,text"), Ok(Scopes::CHECKS));
        assert_eq!(Scopes::parse("text").unwrap().to_string(), "text");
        assert_eq!(
            Scopes::parse("lists,image").unwrap().to_string(),
            "image,lists"
        );
        assert!(Scopes::parse("video").is_err());
    }

    /// Workflow records of the first version read with no lists; new ones round-trip.
    #[test]
    fn workflow_records_of_both_versions_read() {
        use heed::{BytesDecode, BytesEncode};
        #[derive(Serialize)]
        struct RecordV1 {
            name: String,
            version: u64,
            digest: [u8; 32],
            definition: crate::workflow::WorkflowDefV1,
            updated_ms: i64,
        }
        let definition = crate::workflow::WorkflowDefV1 {
            description: "d".into(),
            paid_only: false,
            text_checks: vec!["wordlist".into()],
            image_checks: Vec::new(),
            categories: Default::default(),
        };
        let old = heed::types::SerdeBincode::<RecordV1>::bytes_encode(&RecordV1 {
            name: "w".into(),
            version: 3,
            digest: [7; 32],
            definition: definition.clone(),
            updated_ms: 9,
        })
        .unwrap()
        .into_owned();
        let read = WorkflowCodec::bytes_decode(&old).unwrap();
        assert_eq!((read.version, read.updated_ms), (3, 9));
        assert_eq!(read.definition, definition.into());
        // Without lists, written as the first version wrote it.
        assert_eq!(
            WorkflowCodec::bytes_encode(&read).unwrap().into_owned(),
            old
        );
        let mut new = read.clone();
        new.definition.lists = vec!["known".into()];
        let bytes = WorkflowCodec::bytes_encode(&new).unwrap().into_owned();
        assert_eq!(WorkflowCodec::bytes_decode(&bytes).unwrap(), new);
        assert!(WorkflowCodec::bytes_decode(&bytes[..bytes.len() - 1]).is_err());
    }

    /// Keys stored before the `lists` scope (two booleans) read as they were.
    #[test]
    fn scopes_keep_the_first_versions_bytes() {
        use heed::{BytesDecode, BytesEncode};
        type Codec = heed::types::SerdeBincode<Scopes>;
        #[derive(Serialize)]
        struct First {
            image: bool,
            text: bool,
        }
        let old = heed::types::SerdeBincode::<First>::bytes_encode(&First {
            image: false,
            text: true,
        })
        .unwrap()
        .into_owned();
        assert_eq!(old, [0, 1]);
        let read = Codec::bytes_decode(&old).unwrap();
        assert_eq!(read, Scopes::parse("text").unwrap());
        let all = Scopes::parse("image,text,lists").unwrap();
        let bytes = Codec::bytes_encode(&all).unwrap().into_owned();
        assert_eq!(bytes, [3, 1]);
        assert_eq!(Codec::bytes_decode(&bytes).unwrap(), all);
        let feedback = Scopes::parse("image,lists,feedback").unwrap();
        let bytes = Codec::bytes_encode(&feedback).unwrap().into_owned();
        assert_eq!(bytes, [7, 0]);
        assert_eq!(Codec::bytes_decode(&bytes).unwrap(), feedback);
        assert!(Codec::bytes_decode(&[8, 1]).is_err());
        assert!(Codec::bytes_decode(&[0, 2]).is_err());
    }
}
