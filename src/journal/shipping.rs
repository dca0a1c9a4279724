//! The journal's side of shipping records to a fleet's table ([`crate::fleet::shipper`]).
//!
//! Request ids are drawn when a request starts and records commit when it ends, so id order
//! is not commit order: a slow check commits after a fast one with a later id. Shipping by id
//! would skip it. So, in a fleet, each commit also gives its records consecutive sequence
//! numbers in commit order (`order`: big-endian sequence to request id, in the same
//! transaction as the records), and the position shipped so far is kept in the same
//! environment (`meta.shipped`). A record is shipped at least once: the position moves only
//! after the fleet's table has the batch, and a resend after a crash is a no-op there (the
//! request id is its key).

use heed::byteorder::BigEndian;
use heed::types::{Bytes, Str, U64};
use heed::{Database, Env, RwTxn};

/// Records read for one batch at most.
pub const SHIP_BATCH_RECORDS_MAX: usize = 1_000;

/// The commit-order index of a shard's journal and its shipping position.
#[derive(Clone, Copy)]
pub struct ShipIndex {
    order: Database<U64<BigEndian>, Str>,
    meta: Database<Str, U64<BigEndian>>,
}

/// One record to ship: its sequence number, request id and encoded record.
pub struct Unshipped {
    pub seq: u64,
    pub request_id: String,
    pub value: Vec<u8>,
}

impl ShipIndex {
    /// Opens (creating) the index in `env`; returns it and the next sequence number.
    pub fn open(env: &Env) -> anyhow::Result<(ShipIndex, u64)> {
        let mut txn = env.write_txn()?;
        let index = ShipIndex {
            order: env.create_database(&mut txn, Some("commit_order"))?,
            meta: env.create_database(&mut txn, Some("shipping"))?,
        };
        let shipped = index.meta.get(&txn, "shipped")?.unwrap_or(0);
        let next = index
            .order
            .last(&txn)?
            .map_or(shipped + 1, |(seq, _)| seq.max(shipped) + 1);
        txn.commit()?;
        Ok((index, next))
    }

    /// Records `keys` (one commit's records) under sequence numbers from `first`.
    pub fn append(&self, txn: &mut RwTxn<'_>, first: u64, keys: &[&str]) -> heed::Result<()> {
        for (offset, key) in keys.iter().enumerate() {
            self.order.put(txn, &(first + offset as u64), key)?;
        }
        Ok(())
    }

    /// The last sequence number shipped (0: none).
    pub fn shipped(&self, env: &Env) -> heed::Result<u64> {
        let txn = env.read_txn()?;
        Ok(self.meta.get(&txn, "shipped")?.unwrap_or(0))
    }

    /// Up to [`SHIP_BATCH_RECORDS_MAX`] records after the shipped position, in commit order.
    pub fn unshipped(
        &self,
        env: &Env,
        records: Database<Str, Bytes>,
    ) -> heed::Result<Vec<Unshipped>> {
        let txn = env.read_txn()?;
        let from = self.meta.get(&txn, "shipped")?.unwrap_or(0) + 1;
        let mut out = Vec::new();
        for entry in self.order.range(&txn, &(from..))? {
            let (seq, request_id) = entry?;
            if let Some(value) = records.get(&txn, request_id)? {
                out.push(Unshipped {
                    seq,
                    request_id: request_id.to_owned(),
                    value: value.to_vec(),
                });
            }
            if out.len() >= SHIP_BATCH_RECORDS_MAX {
                break;
            }
        }
        Ok(out)
    }

    /// Moves the shipped position to `seq` (the batch is in the fleet's table).
    /// The index entries up to it go too: the index holds only what is still to ship.
    pub fn set_shipped(&self, env: &Env, seq: u64) -> heed::Result<()> {
        let mut txn = env.write_txn()?;
        self.meta.put(&mut txn, "shipped", &seq)?;
        self.order.delete_range(&mut txn, &(..=seq))?;
        txn.commit()
    }
}
