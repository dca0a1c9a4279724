//! A journal record and the shard journal's files: the record's encoding, the directory of
//! each shard's environment and how one is opened.

use std::borrow::Cow;
use std::path::{Path, PathBuf};
use std::time::Duration;

use anyhow::Context;
use heed::types::{Bytes, Str};
use heed::{Database, Env, EnvFlags, EnvOpenOptions};
use serde::{Deserialize, Serialize};

use crate::request_id::RequestId;

/// One journal record. Borrowed when written, owned when read.
#[derive(Clone, Debug, PartialEq, Serialize, Deserialize)]
pub struct JournalRecord<'a> {
    pub request_id: Cow<'a, str>,
    /// When an admitted check was admitted (the quota month it is charged to); when a
    /// request refused before admission was answered.
    pub unix_ms: i64,
    /// The route's path.
    pub route: Cow<'a, str>,
    /// `text` or `image`.
    pub kind: Cow<'a, str>,
    /// The presented key's id, when the key was well formed (even if it was refused).
    pub key_id: Option<Cow<'a, str>>,
    /// The organization, when the key was accepted.
    pub org: Option<Cow<'a, str>>,
    /// The caller's `ref` (bincode stores fields by position, so the name is free).
    #[serde(rename = "ref")]
    pub reference: Option<Cow<'a, str>>,
    pub workflow: Option<Cow<'a, str>>,
    pub workflow_version: Option<u64>,
    pub status: u16,
    /// `error.type` of a refusal.
    pub error_type: Option<Cow<'a, str>>,
    /// `summary.action` of a check that ran.
    pub action: Option<Cow<'a, str>>,
    pub scores: Vec<(Cow<'a, str>, f64)>,
    pub unchecked: Vec<Cow<'a, str>>,
    pub time_ms: u64,
    /// The quota units the check costs if it ran: 1, or its operations under a plan that
    /// counts operations. The last field: records of one unit are stored as they were
    /// before it ([`crate::codec`]), and JSON without it (the fleet's older rows) reads as 1.
    #[serde(default = "one_unit")]
    pub units: u32,
}

fn one_unit() -> u32 {
    1
}

impl JournalRecord<'_> {
    /// The quota month a record charged: a check that ran (no refusal, an action), counted
    /// in the month it was recorded.
    pub fn charged_month(&self) -> Option<u32> {
        (self.error_type.is_none() && self.action.is_some())
            .then(|| crate::clock::month_of(self.unix_ms))
    }

    /// The quota month and units a record charged (see [`Self::charged_month`]).
    pub fn charged(&self) -> Option<(u32, u32)> {
        self.charged_month().map(|month| (month, self.units))
    }
}

impl crate::codec::Grown for JournalRecord<'_> {
    /// A record of the older layout starts with its request id's bincode length (8
    /// little-endian bytes; an id is at most a few hundred bytes): never 0xff then these.
    const MARKER: [u8; 4] = [0xff, b'J', b'R', 2];
    /// A `u32` of 1.
    const OLDER_TAIL: &'static [u8] = &[1, 0, 0, 0];
    fn fits_older(&self) -> bool {
        self.units == 1
    }
}

/// How the journal stores records ([`crate::codec::GrownCodec`]).
pub type RecordCodec = crate::codec::GrownCodec<JournalRecord<'static>>;

/// The quota units of a stored record: 1 for a record in the older layout (as every record of
/// one unit is stored), else read from the record. 0 for bytes that are not a record (they
/// were never answered as a check, so they are not charged).
pub fn stored_units(value: &[u8]) -> u32 {
    use crate::codec::Grown;
    if !value.starts_with(&JournalRecord::MARKER) {
        return 1;
    }
    crate::codec::decode::<JournalRecord<'static>>(value).map_or(0, |record| record.units)
}

#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum SyncPolicy {
    Always,
    Interval(Duration),
}

/// Settings of the journal (`[journal]` in the configuration).
#[derive(Clone, Debug)]
pub struct JournalConfig {
    pub sync: SyncPolicy,
    pub batch_records_max: usize,
    pub map_bytes: usize,
    /// Keep the commit-order index for shipping (a fleet node).
    pub ship: bool,
    /// Under the interval policy: the staging root on tmpfs where records are committed
    /// before their answers ([`super::staging`]); `None`: commits go to the disk journal.
    pub staging: Option<PathBuf>,
}

pub fn shard_dir(data_dir: &Path, shard: usize) -> PathBuf {
    data_dir.join("journal").join(format!("shard-{shard}"))
}

/// The shard a `shard-N` directory (a journal's or a staging's) belongs to.
pub fn shard_of_dir(dir: &Path) -> Option<usize> {
    dir.file_name()?
        .to_str()?
        .strip_prefix("shard-")?
        .parse()
        .ok()
}

/// Opens (creating) a journal environment. `no_sync` for the interval policy.
pub fn open_env(
    path: &Path,
    map_bytes: usize,
    no_sync: bool,
) -> anyhow::Result<(Env, Database<Str, Bytes>)> {
    std::fs::create_dir_all(path).with_context(|| format!("creating {}", path.display()))?;
    let mut options = EnvOpenOptions::new();
    options.map_size(map_bytes).max_dbs(8);
    if no_sync {
        // SAFETY: NO_SYNC only skips the fsync at commit; it changes what a power loss can
        // take (documented above), not the memory safety of the map. The other conditions
        // are those of `store::Store::open`.
        unsafe {
            options.flags(EnvFlags::NO_SYNC);
        }
    }
    // SAFETY: as for the store: written only through LMDB, local filesystem, opened once per
    // process (each shard opens its own directory).
    let env = unsafe { options.open(path) }
        .with_context(|| format!("opening the journal {}", path.display()))?;
    let mut txn = env.write_txn()?;
    let db = env.create_database(&mut txn, Some("records"))?;
    txn.commit()?;
    Ok((env, db))
}

/// The smallest request id of millisecond `ms`: journal keys at or after it are not older.
pub fn id_floor(ms: i64) -> String {
    RequestId::from_bits((ms.max(0) as u128) << 80)
        .as_str()
        .to_owned()
}
