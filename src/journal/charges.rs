//! Checks charged to each organization's quota, counted in the journal itself.
//!
//! Every commit adds, in the same LMDB transaction as its records, the quota units of the
//! charged checks (answered, not refused) per quota ledger key ([`ledger_key`]): one per
//! check, or its operations under a plan that counts them. A check is answered only once its
//! record is committed, so these counts are exactly the units answered: after
//! a crash, the single node's quota ledger
//! (which counts units *leased*, some of them lost with the process) is set back to them at
//! start (`LocalLeases::report_journal_charges` in `crate::limits::lease`).
//!
//! `since` says from when the counts are whole: 0 for a journal that had no record when the
//! counts began, else the time they began (an upgrade): months that began before it are not
//! reconciled. A journal directory removed by hand loses its counts, as it loses its records.

use heed::byteorder::BigEndian;
use heed::types::{Bytes, Str, U64};
use heed::{Database, Env, RwTxn};

/// The quota ledger's key of `org` in `month`: the journal counts under it, and the single
/// node's ledger (`crate::limits::lease`) leases under it.
pub fn ledger_key(org: &str, month: u32) -> String {
    use std::fmt::Write;
    // Sized at once (`format!` guesses, then grows it on every check's path).
    let mut key = String::with_capacity(9 + org.len());
    // Writing into a `String` cannot fail.
    let _ = write!(key, "{month:08}/{org}");
    key
}

/// The key of `since` (ledger keys start with a digit).
const SINCE_KEY: &str = "!since";

/// What a journal counted: from when, and the charged checks per ledger key.
#[derive(Clone, Debug, Default, PartialEq, Eq)]
pub struct JournalCharges {
    pub since_ms: i64,
    pub counts: Vec<(String, u64)>,
}

#[derive(Clone, Copy)]
pub struct ChargeCounts {
    db: Database<Str, U64<BigEndian>>,
}

impl ChargeCounts {
    /// Opens (creating) the counts in `env`; `records` tells a new journal from an old one.
    pub fn open(env: &Env, records: Database<Str, Bytes>, now_ms: i64) -> heed::Result<Self> {
        let mut txn = env.write_txn()?;
        let db: Database<Str, U64<BigEndian>> = env.create_database(&mut txn, Some("charges"))?;
        if db.get(&txn, SINCE_KEY)?.is_none() {
            let since = if records.is_empty(&txn)? { 0 } else { now_ms };
            db.put(&mut txn, SINCE_KEY, &(since.max(0) as u64))?;
        }
        txn.commit()?;
        Ok(ChargeCounts { db })
    }

    /// Adds one commit's charged checks (a ledger key and the check's quota units, one pair
    /// per check, in any order).
    pub fn add(&self, txn: &mut RwTxn<'_>, mut charged: Vec<(&str, u32)>) -> heed::Result<()> {
        charged.sort_unstable_by_key(|&(key, _)| key);
        for run in charged.chunk_by(|a, b| a.0 == b.0) {
            let units: u64 = run.iter().map(|&(_, units)| u64::from(units)).sum();
            let count = self.db.get(txn, run[0].0)?.unwrap_or(0);
            self.db.put(txn, run[0].0, &(count + units))?;
        }
        Ok(())
    }

    pub fn read(&self, env: &Env) -> heed::Result<JournalCharges> {
        let txn = env.read_txn()?;
        let mut charges = JournalCharges::default();
        for entry in self.db.iter(&txn)? {
            let (key, count) = entry?;
            if key == SINCE_KEY {
                charges.since_ms = count as i64;
            } else {
                charges.counts.push((key.to_owned(), count));
            }
        }
        Ok(charges)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn counts_add_up_per_key_and_a_new_journal_counts_from_the_start() {
        let dir = tempfile::tempdir().unwrap();
        let (env, records) = super::super::record::open_env(dir.path(), 1 << 22, true).unwrap();
        let charges = ChargeCounts::open(&env, records, 1_000).unwrap();
        let mut txn = env.write_txn().unwrap();
        charges
            .add(
                &mut txn,
                vec![
                    ("00024310/acme", 1),
                    ("00024310/beta", 1),
                    ("00024310/acme", 3),
                ],
            )
            .unwrap();
        txn.commit().unwrap();
        let mut txn = env.write_txn().unwrap();
        charges.add(&mut txn, vec![("00024310/acme", 1)]).unwrap();
        txn.commit().unwrap();
        let read = charges.read(&env).unwrap();
        assert_eq!(read.since_ms, 0);
        assert_eq!(
            read.counts,
            [
                ("00024310/acme".to_owned(), 5),
                ("00024310/beta".to_owned(), 1)
            ]
        );
        // Opened again later: `since` stays.
        let again = ChargeCounts::open(&env, records, 5_000).unwrap();
        assert_eq!(again.read(&env).unwrap().since_ms, 0);
    }

    #[test]
    fn a_journal_with_records_counts_from_when_counting_began() {
        let dir = tempfile::tempdir().unwrap();
        let (env, records) = super::super::record::open_env(dir.path(), 1 << 22, true).unwrap();
        let mut txn = env.write_txn().unwrap();
        records.put(&mut txn, "r1", b"x").unwrap();
        txn.commit().unwrap();
        let charges = ChargeCounts::open(&env, records, 7_000).unwrap();
        assert_eq!(charges.read(&env).unwrap().since_ms, 7_000);
    }
}
