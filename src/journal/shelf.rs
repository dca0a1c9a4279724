//! Every shard's disk journal, for reading a record by request id from any shard: the routes
//! that explain a check or take feedback on it (`GET /v1/checks/{id}`, `POST /v1/feedback`)
//! may be served by a shard other than the one that journaled the check.
//!
//! Each shard puts its environment here once its journal is open; readers take LMDB read
//! transactions, which never block the shard's writer. A record still staged
//! ([`super::staging`]) is not on the disk yet: it is there within a sync interval, and the
//! routes look again after one.

use std::sync::OnceLock;

use heed::types::{Bytes, Str};
use heed::{BytesDecode, Database, Env};

use super::record::{JournalRecord, RecordCodec};

pub struct Shelf {
    shards: Vec<OnceLock<(Env, Database<Str, Bytes>)>>,
}

impl Shelf {
    pub fn new(shards: usize) -> Shelf {
        Shelf {
            shards: (0..shards).map(|_| OnceLock::new()).collect(),
        }
    }

    /// Shard `shard`'s journal, open (a second call for the shard changes nothing).
    pub fn put(&self, shard: usize, env: Env, db: Database<Str, Bytes>) {
        if let Some(slot) = self.shards.get(shard) {
            let _ = slot.set((env, db));
        }
    }

    /// The record of `request_id` on any shard's disk journal.
    pub fn find(&self, request_id: &str) -> anyhow::Result<Option<JournalRecord<'static>>> {
        for (env, db) in self.shards.iter().filter_map(OnceLock::get) {
            let txn = env.read_txn()?;
            if let Some(bytes) = db.get(&txn, request_id)? {
                let record = RecordCodec::bytes_decode(bytes).map_err(|error| {
                    anyhow::anyhow!("a journal record does not decode: {error}")
                })?;
                return Ok(Some(record));
            }
        }
        Ok(None)
    }
}
