//! The store as records: what a fleet's control plane keeps in PostgreSQL and each node
//! replays into its LMDB store ([`crate::fleet`]).
//!
//! A record is a table name, a key and the bytes LMDB holds for it (bincode of the table's
//! record type), so PostgreSQL stores exactly what the nodes read and the request path does
//! not change. `meta.revision` holds the last change-log revision applied to this store; a
//! store with none has never been synchronised with a fleet.

use std::collections::BTreeMap;

use anyhow::bail;
use heed::types::{Bytes, Str};
use heed::{Database, RwTxn};

use super::Store;

/// The key under which `meta` holds the [`Mark`] of the last change applied.
const CONTROL_MARK: &str = "control_mark";

/// The tables that make up the control plane.
pub const TABLES: [&str; 5] = ["orgs", "plans", "keys", "workflows", "workflow_versions"];

/// One record of the control plane.
#[derive(Clone, Debug, PartialEq, Eq, PartialOrd, Ord)]
pub struct RawRecord {
    pub table: String,
    pub key: String,
    pub value: Vec<u8>,
}

/// Which change-log revision a store last applied, as the log itself tells it from another
/// log's revision of the same number: when that revision was committed (Unix microseconds). A
/// control plane restored from a backup and written on since has the number again, under
/// another time.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct Mark {
    pub revision: i64,
    pub at_us: i64,
}

/// A change: a record written (`value`) or deleted (`None`).
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct RawChange {
    pub table: String,
    pub key: String,
    pub value: Option<Vec<u8>>,
}

impl Store {
    fn raw_table(&self, table: &str) -> anyhow::Result<Database<Str, Bytes>> {
        Ok(match table {
            "orgs" => self.orgs.remap_data_type::<Bytes>(),
            "plans" => self.plans.remap_data_type::<Bytes>(),
            "keys" => self.keys.remap_data_type::<Bytes>(),
            "workflows" => self.workflows.remap_data_type::<Bytes>(),
            "workflow_versions" => self.workflow_versions.remap_data_type::<Bytes>(),
            other => bail!("no table '{other}' in the store"),
        })
    }

    /// Every record of the control plane, by table and key.
    pub fn dump(&self) -> anyhow::Result<BTreeMap<(String, String), Vec<u8>>> {
        let txn = self.env().read_txn()?;
        let mut out = BTreeMap::new();
        for table in TABLES {
            for entry in self.raw_table(table)?.iter(&txn)? {
                let (key, value) = entry?;
                out.insert((table.to_owned(), key.to_owned()), value.to_vec());
            }
        }
        Ok(out)
    }

    /// The changes that turn `before` into `after` (two dumps).
    pub fn diff(
        before: &BTreeMap<(String, String), Vec<u8>>,
        after: &BTreeMap<(String, String), Vec<u8>>,
    ) -> Vec<RawChange> {
        let mut changes = Vec::new();
        for ((table, key), value) in after {
            if before.get(&(table.clone(), key.clone())) != Some(value) {
                changes.push(RawChange {
                    table: table.clone(),
                    key: key.clone(),
                    value: Some(value.clone()),
                });
            }
        }
        for (table, key) in before.keys() {
            if !after.contains_key(&(table.clone(), key.clone())) {
                changes.push(RawChange {
                    table: table.clone(),
                    key: key.clone(),
                    value: None,
                });
            }
        }
        changes
    }

    /// Replaces the whole control plane with `records`, as of `revision` (whose row is
    /// `mark`), in one transaction.
    pub fn replace_all(
        &self,
        records: &[RawRecord],
        revision: i64,
        mark: Option<Mark>,
    ) -> anyhow::Result<()> {
        let mut txn = self.env().write_txn()?;
        for table in TABLES {
            self.raw_table(table)?.clear(&mut txn)?;
        }
        for record in records {
            self.raw_table(&record.table)?
                .put(&mut txn, &record.key, &record.value)?;
        }
        self.set_revision(&mut txn, revision)?;
        match mark {
            Some(mark) => self.set_mark(&mut txn, mark)?,
            None => {
                self.meta.delete(&mut txn, CONTROL_MARK)?;
            }
        }
        txn.commit()?;
        Ok(())
    }

    /// Applies `changes` and records `revision`, in one transaction; `mark`: the last of
    /// them (none: keep the one before, for a range of revisions without changes).
    pub fn apply_changes(
        &self,
        changes: &[RawChange],
        revision: i64,
        mark: Option<Mark>,
    ) -> anyhow::Result<()> {
        let mut txn = self.env().write_txn()?;
        for change in changes {
            let table = self.raw_table(&change.table)?;
            match &change.value {
                Some(value) => table.put(&mut txn, &change.key, value)?,
                None => {
                    table.delete(&mut txn, &change.key)?;
                }
            }
        }
        self.set_revision(&mut txn, revision)?;
        if let Some(mark) = mark {
            self.set_mark(&mut txn, mark)?;
        }
        txn.commit()?;
        Ok(())
    }

    /// The mark of the last change applied here; `None` for a store never synchronised, or
    /// synchronised by a build that kept none.
    pub fn control_mark(&self) -> anyhow::Result<Option<Mark>> {
        let txn = self.env().read_txn()?;
        Ok(self.meta.get(&txn, CONTROL_MARK)?.and_then(|bytes| {
            let revision = i64::from_le_bytes(bytes.get(..8)?.try_into().ok()?);
            let at_us = i64::from_le_bytes(bytes.get(8..16)?.try_into().ok()?);
            Some(Mark { revision, at_us })
        }))
    }

    fn set_mark(&self, txn: &mut RwTxn<'_>, mark: Mark) -> anyhow::Result<()> {
        let mut bytes = [0u8; 16];
        bytes[..8].copy_from_slice(&mark.revision.to_le_bytes());
        bytes[8..].copy_from_slice(&mark.at_us.to_le_bytes());
        self.meta.put(txn, CONTROL_MARK, &bytes)?;
        Ok(())
    }

    /// The last change-log revision applied here; `None` for a store never synchronised.
    pub fn revision(&self) -> anyhow::Result<Option<i64>> {
        let txn = self.env().read_txn()?;
        Ok(self
            .meta
            .get(&txn, "revision")?
            .and_then(|bytes| <[u8; 8]>::try_from(bytes).ok())
            .map(i64::from_le_bytes))
    }

    fn set_revision(&self, txn: &mut RwTxn<'_>, revision: i64) -> anyhow::Result<()> {
        self.meta.put(txn, "revision", &revision.to_le_bytes())?;
        Ok(())
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::store::records::{Scopes, WorkflowAccess};

    #[test]
    fn a_diff_replayed_on_a_copy_gives_the_same_store() {
        let (a, b) = (tempfile::tempdir().unwrap(), tempfile::tempdir().unwrap());
        let source = Store::open(a.path()).unwrap();
        let replica = Store::open(b.path()).unwrap();
        let plan = crate::store::records::PlanLimits {
            text_chars_max: 5000,
            image_pixels_max: 12_000_000,
            rate_per_s: 5,
            rate_burst: 10,
            concurrent_max: 4,
            quota_per_month: 10_000,
            keys_max: 3,
            paid: false,
            engine_down: Default::default(),
            quota_counts: Default::default(),
        };
        source
            .put_plans(&BTreeMap::from([("free".to_owned(), plan)]))
            .unwrap();
        source.create_org("acme", "free", 0).unwrap();
        let empty = BTreeMap::new();
        let first = source.dump().unwrap();
        replica
            .apply_changes(&Store::diff(&empty, &first), 1, None)
            .unwrap();
        assert_eq!(replica.dump().unwrap(), first);
        let issued = source
            .create_key("acme", Scopes::CHECKS, WorkflowAccess::All, None, 0)
            .unwrap();
        source.revoke_key(&issued.record.id, 5).unwrap();
        let second = source.dump().unwrap();
        let changes = Store::diff(&first, &second);
        assert!(!changes.is_empty());
        let mark = Mark {
            revision: 2,
            at_us: 7,
        };
        replica.apply_changes(&changes, 2, Some(mark)).unwrap();
        assert_eq!(replica.control_mark().unwrap(), Some(mark));
        assert_eq!(replica.dump().unwrap(), second);
        assert_eq!(replica.revision().unwrap(), Some(2));
        replica.apply_changes(&[], 3, None).unwrap();
        assert_eq!(
            replica.control_mark().unwrap(),
            Some(mark),
            "kept over a gap"
        );
        // A full replacement drops what is not in the snapshot.
        let records: Vec<RawRecord> = first
            .iter()
            .map(|((table, key), value)| RawRecord {
                table: table.clone(),
                key: key.clone(),
                value: value.clone(),
            })
            .collect();
        replica.replace_all(&records, 3, None).unwrap();
        assert_eq!(replica.control_mark().unwrap(), None);
        assert_eq!(replica.dump().unwrap(), first);
    }
}
