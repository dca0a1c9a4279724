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

use std::ops::Bound;

use heed::byteorder::BigEndian;
use heed::types::{Bytes, Str, U64};
use heed::{Database, Env, RwTxn};

use super::record::{id_floor, JournalRecord, RecordCodec};

/// A prune pass first reads every record not shipped yet (none of them may go); past this
/// many (PostgreSQL down for long), it waits for a pass with fewer.
pub const PRUNE_UNSHIPPED_READ_MAX: u64 = 1_000_000;

/// Records read for one batch at most.
pub const SHIP_BATCH_RECORDS_MAX: usize = 4_000;

/// Request ids of charged checks, each with its quota units, per (organization, month).
pub type ChargedIds = Vec<((String, u32), Vec<(String, u32)>)>;

/// The commit-order index of a shard's journal and its shipping position.
#[derive(Clone, Copy)]
pub struct ShipIndex {
    order: Database<U64<BigEndian>, Str>,
    meta: Database<Str, U64<BigEndian>>,
}

/// Texts of one column of a batch, in one buffer: a batch of a thousand records costs a few
/// allocations, not thousands, and is freed as cheaply by the thread that ships it.
#[derive(Debug, Default)]
pub struct TextColumn {
    text: String,
    spans: Vec<Option<(usize, usize)>>,
}

impl TextColumn {
    pub fn push(&mut self, value: Option<&str>) {
        let span = value.map(|value| {
            let start = self.text.len();
            self.text.push_str(value);
            (start, self.text.len())
        });
        self.spans.push(span);
    }

    pub fn get(&self, row: usize) -> Option<&str> {
        let (start, end) = (*self.spans.get(row)?)?;
        self.text.get(start..end)
    }

    pub fn iter(&self) -> impl Iterator<Item = Option<&str>> {
        (0..self.spans.len()).map(|row| self.get(row))
    }

    pub fn len(&self) -> usize {
        self.spans.len()
    }

    pub fn is_empty(&self) -> bool {
        self.spans.is_empty()
    }
}

/// Records to ship, by column, in commit order; `last_seq` is the position they bring the
/// shard to (0: nothing to ship).
#[derive(Debug, Default)]
pub struct ShipBatch {
    pub last_seq: u64,
    pub request_ids: TextColumn,
    pub unix_ms: Vec<i64>,
    pub orgs: TextColumn,
    pub key_ids: TextColumn,
    pub refs: TextColumn,
    /// The records as JSON.
    pub json: TextColumn,
    /// The quota month and units each record's check was charged, if it was charged.
    pub charged: Vec<Option<(u32, u32)>>,
    /// The batch stopped at [`SHIP_BATCH_RECORDS_MAX`]: more records wait.
    pub full: bool,
}

impl ShipBatch {
    fn push(&mut self, request_id: &str, record: &JournalRecord<'_>, json: &str) {
        self.request_ids.push(Some(request_id));
        self.unix_ms.push(record.unix_ms);
        self.orgs.push(record.org.as_deref());
        self.key_ids.push(record.key_id.as_deref());
        self.refs.push(record.reference.as_deref());
        self.json.push(Some(json));
        self.charged.push(record.charged());
    }

    pub fn len(&self) -> usize {
        self.request_ids.len()
    }

    pub fn is_empty(&self) -> bool {
        self.request_ids.is_empty()
    }
}

/// A stored record, decoded, and as JSON.
fn as_json(value: &[u8]) -> Result<(JournalRecord<'static>, String), String> {
    use heed::BytesDecode;
    let record = RecordCodec::bytes_decode(value).map_err(|error| error.to_string())?;
    let json = simd_json::to_string(&record).map_err(|error| error.to_string())?;
    Ok((record, json))
}

/// The key of `meta` under which the time (ms) from which records are known to have been
/// numbered for shipping is kept: only records from then on are pruned once shipped.
const PRUNE_FROM_KEY: &str = "prune_from";

/// A journal opened outside a fleet (no `[cluster]`): the records it takes are numbered for
/// no shipping, so the time from which shipped records may be pruned is dropped, and the next
/// open in a fleet records a new one, after them.
pub fn forget_prune_from(env: &Env) -> heed::Result<()> {
    let mut txn = env.write_txn()?;
    let meta: Option<Database<Str, U64<BigEndian>>> = env.open_database(&txn, Some("shipping"))?;
    if let Some(meta) = meta {
        meta.delete(&mut txn, PRUNE_FROM_KEY)?;
    }
    txn.commit()
}

/// What a prune of shipped records may not reach: the smallest request id among the records
/// not shipped yet, as far as the index has been read (sequence numbers up to `read_through`).
/// Read once a pass ([`ShipIndex::unshipped_floor`]), then brought up to date by each of the
/// pass's transactions, which read only what was committed since.
#[derive(Debug, Default)]
pub struct UnshippedFloor {
    smallest: Option<String>,
    read_through: u64,
}

impl UnshippedFloor {
    fn see(&mut self, seq: u64, request_id: &str) {
        if self
            .smallest
            .as_deref()
            .is_none_or(|smallest| request_id < smallest)
        {
            self.smallest = Some(request_id.to_owned());
        }
        self.read_through = self.read_through.max(seq);
    }
}

impl ShipIndex {
    /// Opens (creating) the index in `env`, whose records are in `records`; returns it and
    /// the next sequence number. An open that finds no time from which shipped records may be
    /// pruned records one: `now_ms`, or just after the newest record's if that is later (a
    /// clock set back). Records written before it (by a single node, by a node out of its
    /// fleet for a while: see [`forget_prune_from`], by an older build) may be in no fleet's
    /// table, so they are never pruned as shipped.
    pub fn open(
        env: &Env,
        records: Database<Str, Bytes>,
        now_ms: i64,
    ) -> anyhow::Result<(ShipIndex, u64)> {
        let mut txn = env.write_txn()?;
        let index = ShipIndex {
            order: env.create_database(&mut txn, Some("commit_order"))?,
            meta: env.create_database(&mut txn, Some("shipping"))?,
        };
        if index.meta.get(&txn, PRUNE_FROM_KEY)?.is_none() {
            let newest = records
                .last(&txn)?
                .and_then(|(key, _)| crate::request_id::unix_ms_of(key))
                .map_or(0, |ms| ms + 1);
            let from = now_ms.max(newest).max(0) as u64;
            index.meta.put(&mut txn, PRUNE_FROM_KEY, &from)?;
        }
        let next = index.next_in(&txn)?;
        txn.commit()?;
        Ok((index, next))
    }

    /// The index of `env` if it has one (a fleet node's journal), for `modgate journal prune`
    /// on the node's data directory.
    pub fn existing(env: &Env) -> heed::Result<Option<ShipIndex>> {
        let txn = env.read_txn()?;
        let order = env.open_database(&txn, Some("commit_order"))?;
        let meta = env.open_database(&txn, Some("shipping"))?;
        // Committed, not dropped: LMDB closes the handles a transaction opened if it aborts.
        txn.commit()?;
        Ok(order
            .zip(meta)
            .map(|(order, meta)| ShipIndex { order, meta }))
    }

    /// The smallest request id among the records not shipped yet (a read of every one of
    /// them, which does not hold up commits): the bound of a pass of
    /// [`ShipIndex::prune_shipped`]. `None` while more than `max` wait to ship (PostgreSQL
    /// down for long): that read would take seconds.
    pub fn unshipped_floor(&self, env: &Env, max: u64) -> heed::Result<Option<UnshippedFloor>> {
        let txn = env.read_txn()?;
        self.unshipped_floor_in(&txn, max)
    }

    fn unshipped_floor_in(
        &self,
        txn: &heed::RoTxn<'_>,
        max: u64,
    ) -> heed::Result<Option<UnshippedFloor>> {
        let shipped = self.meta.get(txn, "shipped")?.unwrap_or(0);
        let last = self.order.last(txn)?.map_or(0, |(seq, _)| seq);
        if last.saturating_sub(shipped) > max {
            return Ok(None);
        }
        let mut floor = UnshippedFloor::default();
        for entry in self.order.range(txn, &(shipped + 1..))? {
            let (seq, request_id) = entry?;
            floor.see(seq, request_id);
        }
        Ok(Some(floor))
    }

    /// For `modgate journal prune` on a fleet node's data directory: deletes the records
    /// before `before` and before every record not shipped yet, in `txn`; returns how many
    /// and how many were kept for being unshipped (an error while more than `max` wait).
    pub fn prune_up_to_unshipped(
        &self,
        txn: &mut RwTxn<'_>,
        records: Database<Str, Bytes>,
        before: &str,
        max: u64,
    ) -> anyhow::Result<usize> {
        let Some(floor) = self.unshipped_floor_in(txn, max)? else {
            anyhow::bail!("more than {max} records wait to be shipped to the fleet's table: prune once they are (see fleet status)");
        };
        let until = floor.smallest.as_deref().map_or(before, |s| before.min(s));
        let range: (Bound<&str>, Bound<&str>) = (Bound::Unbounded, Bound::Excluded(until));
        Ok(records.delete_range(txn, &range)?)
    }

    /// Deletes up to `max` records whose request ids are before `before`, and before every
    /// record not shipped yet (`floor`, brought up to date in this transaction with what was
    /// committed since it was read), and not before the time this index began; returns how
    /// many. A record not shipped yet is never deleted.
    pub fn prune_shipped(
        &self,
        env: &Env,
        records: Database<Str, Bytes>,
        before: &str,
        floor: &mut UnshippedFloor,
        max: usize,
    ) -> heed::Result<usize> {
        let mut txn = env.write_txn()?;
        for entry in self.order.range(&txn, &(floor.read_through + 1..))? {
            let (seq, request_id) = entry?;
            floor.see(seq, request_id);
        }
        let from_ms = self.meta.get(&txn, PRUNE_FROM_KEY)?.unwrap_or(u64::MAX);
        let from = id_floor(from_ms.min(i64::MAX as u64) as i64);
        let mut until = before;
        if let Some(smallest) = floor.smallest.as_deref() {
            until = until.min(smallest);
        }
        if from.as_str() >= until || max == 0 {
            return Ok(0);
        }
        let range = (Bound::Included(from.as_str()), Bound::Excluded(until));
        // The `max`th key, if there are that many: the slice ends there.
        let last = records
            .range(&txn, &range)?
            .nth(max - 1)
            .transpose()?
            .map(|(key, _)| key.to_owned());
        let deleted = match last {
            Some(last) => records.delete_range(
                &mut txn,
                &(
                    Bound::Included(from.as_str()),
                    Bound::Included(last.as_str()),
                ),
            )?,
            None => records.delete_range(&mut txn, &range)?,
        };
        txn.commit()?;
        Ok(deleted)
    }

    /// The next sequence number, as of `txn`.
    pub fn next_in(&self, txn: &heed::RoTxn<'_>) -> heed::Result<u64> {
        let shipped = self.meta.get(txn, "shipped")?.unwrap_or(0);
        Ok(self
            .order
            .last(txn)?
            .map_or(shipped + 1, |(seq, _)| seq.max(shipped) + 1))
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

    /// Up to [`SHIP_BATCH_RECORDS_MAX`] records after the shipped position, in commit order,
    /// decoded and encoded as JSON by the calling thread. A record that cannot be read is
    /// logged with its request id and left out: it cannot be shipped, and the prune of shipped
    /// records deletes it with them (`modgate journal` could not read it either).
    pub fn unshipped(&self, env: &Env, records: Database<Str, Bytes>) -> heed::Result<ShipBatch> {
        let txn = env.read_txn()?;
        let from = self.meta.get(&txn, "shipped")?.unwrap_or(0) + 1;
        let mut batch = ShipBatch::default();
        let mut read = 0;
        for entry in self.order.range(&txn, &(from..))? {
            let (seq, request_id) = entry?;
            batch.last_seq = seq;
            read += 1;
            if let Some(value) = records.get(&txn, request_id)? {
                match as_json(value) {
                    Ok((record, json)) => batch.push(request_id, &record, &json),
                    Err(error) => tracing::error!(
                        request_id,
                        %error,
                        "a journal record could not be read for shipping; skipped"
                    ),
                }
            }
            if read >= SHIP_BATCH_RECORDS_MAX {
                batch.full = true;
                break;
            }
        }
        Ok(batch)
    }

    /// The request ids of the checks charged (answered, not refused) among the records after
    /// the shipped position, per organization and month: what the fleet's quota ledger may
    /// not know yet after a crash (see `fleet::quota`). `None` past `max` ids.
    pub fn unshipped_charges(
        &self,
        env: &Env,
        records: Database<Str, Bytes>,
        max: usize,
    ) -> heed::Result<Option<ChargedIds>> {
        use heed::BytesDecode;
        let txn = env.read_txn()?;
        let from = self.meta.get(&txn, "shipped")?.unwrap_or(0) + 1;
        let mut charged: std::collections::BTreeMap<(String, u32), Vec<(String, u32)>> =
            Default::default();
        let mut count = 0;
        for entry in self.order.range(&txn, &(from..))? {
            let (_, request_id) = entry?;
            let Some(value) = records.get(&txn, request_id)? else {
                continue;
            };
            let Ok(record) = RecordCodec::bytes_decode(value) else {
                continue;
            };
            if let (Some(org), Some((month, units))) = (&record.org, record.charged()) {
                count += 1;
                if count > max {
                    return Ok(None);
                }
                charged
                    .entry((org.to_string(), month))
                    .or_default()
                    .push((request_id.to_owned(), units));
            }
        }
        Ok(Some(charged.into_iter().collect()))
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

#[cfg(test)]
mod tests {
    use super::*;
    use crate::journal::record::open_env;
    use heed::BytesEncode;
    use std::borrow::Cow;

    fn record(id: &str, org: &str, error: Option<&'static str>) -> JournalRecord<'static> {
        JournalRecord {
            request_id: Cow::Owned(id.to_owned()),
            // 2026-11-24 and 2026-12-01 (UTC), two quota months.
            unix_ms: if id.ends_with('x') {
                1_764_547_200_000
            } else {
                1_763_942_400_000
            },
            route: "/v1/text".into(),
            kind: "text".into(),
            key_id: None,
            org: Some(Cow::Owned(org.to_owned())),
            reference: None,
            workflow: None,
            workflow_version: None,
            status: if error.is_some() { 429 } else { 200 },
            error_type: error.map(Cow::Borrowed),
            action: error.is_none().then_some(Cow::Borrowed("accept")),
            scores: vec![],
            unchecked: vec![],
            time_ms: 0,
            // r5's check counted three operations.
            units: if id == "r5" { 3 } else { 1 },
        }
    }

    #[test]
    fn a_text_column_keeps_each_value_and_each_absence() {
        let mut column = TextColumn::default();
        column.push(Some("acme"));
        column.push(None);
        column.push(Some(""));
        column.push(Some("é漢"));
        assert_eq!(column.len(), 4);
        assert_eq!(
            column.iter().collect::<Vec<_>>(),
            [Some("acme"), None, Some(""), Some("é漢")]
        );
        assert_eq!(column.get(4), None);
    }

    #[test]
    fn a_batch_is_full_only_when_more_records_wait() {
        let dir = tempfile::tempdir().unwrap();
        let (env, db) = open_env(dir.path(), 1 << 26, true).unwrap();
        let (index, first) = ShipIndex::open(&env, db, 0).unwrap();
        let ids: Vec<String> = (0..=SHIP_BATCH_RECORDS_MAX)
            .map(|n| format!("r{n:05}"))
            .collect();
        let mut txn = env.write_txn().unwrap();
        for id in &ids {
            let record = record(id, "acme", None);
            let bytes = RecordCodec::bytes_encode(&record).unwrap();
            db.put(&mut txn, id, &bytes).unwrap();
        }
        let keys: Vec<&str> = ids.iter().map(String::as_str).collect();
        index.append(&mut txn, first, &keys).unwrap();
        txn.commit().unwrap();
        let batch = index.unshipped(&env, db).unwrap();
        assert_eq!(batch.len(), SHIP_BATCH_RECORDS_MAX);
        assert!(batch.full);
        index.set_shipped(&env, batch.last_seq).unwrap();
        let rest = index.unshipped(&env, db).unwrap();
        assert_eq!(rest.len(), 1);
        assert!(!rest.full);
    }

    /// Commits one record per id into `db`, numbered for shipping from `first`.
    fn commit(env: &Env, db: Database<Str, Bytes>, index: ShipIndex, first: u64, ids: &[&str]) {
        let mut txn = env.write_txn().unwrap();
        for id in ids {
            let record = record(id, "acme", None);
            let bytes = RecordCodec::bytes_encode(&record).unwrap();
            db.put(&mut txn, id, &bytes).unwrap();
        }
        index.append(&mut txn, first, ids).unwrap();
        txn.commit().unwrap();
    }

    fn keys(env: &Env, db: Database<Str, Bytes>) -> Vec<String> {
        let txn = env.read_txn().unwrap();
        db.iter(&txn)
            .unwrap()
            .map(|entry| entry.unwrap().0.to_owned())
            .collect()
    }

    /// The request id of millisecond `ms`, told apart by `n`.
    fn id_at(ms: i64, n: u8) -> String {
        crate::request_id::RequestIdGen::new(n, 0)
            .next(ms as u64)
            .as_str()
            .to_owned()
    }

    #[test]
    fn a_prune_deletes_shipped_records_before_the_cutoff_and_never_an_unshipped_one() {
        let dir = tempfile::tempdir().unwrap();
        let (env, db) = open_env(dir.path(), 1 << 24, true).unwrap();
        // Records before the index began (a single node's) are not the prune's.
        let before_fleet = id_at(500, 0);
        {
            let mut txn = env.write_txn().unwrap();
            let record = record(&before_fleet, "acme", None);
            let bytes = RecordCodec::bytes_encode(&record).unwrap();
            db.put(&mut txn, &before_fleet, &bytes).unwrap();
            txn.commit().unwrap();
        }
        let (index, first) = ShipIndex::open(&env, db, 1_000).unwrap();
        // Five records at 1, 2, 3, 4 and 5 seconds; the first three shipped.
        let ids: Vec<String> = (1..=5).map(|s| id_at(s * 1_000, s as u8)).collect();
        let refs: Vec<&str> = ids.iter().map(String::as_str).collect();
        commit(&env, db, index, first, &refs);
        index.set_shipped(&env, first + 2).unwrap();
        // A cutoff past every record deletes the shipped ones only, in slices of two.
        let cutoff = id_floor(10_000);
        let mut floor = index.unshipped_floor(&env, 100).unwrap().unwrap();
        assert_eq!(
            index
                .prune_shipped(&env, db, &cutoff, &mut floor, 2)
                .unwrap(),
            2
        );
        assert_eq!(
            index
                .prune_shipped(&env, db, &cutoff, &mut floor, 2)
                .unwrap(),
            1
        );
        assert_eq!(
            index
                .prune_shipped(&env, db, &cutoff, &mut floor, 2)
                .unwrap(),
            0
        );
        assert_eq!(
            keys(&env, db),
            [before_fleet.clone(), ids[3].clone(), ids[4].clone()]
        );
        // A check that began at 1.5 s commits after the floor was read, and is not shipped:
        // the next transaction reads it and leaves it, and what is after it.
        index.set_shipped(&env, first + 4).unwrap();
        let mut floor = index.unshipped_floor(&env, 100).unwrap().unwrap();
        let late = id_at(1_500, 9);
        commit(&env, db, index, first + 5, &[&late]);
        assert_eq!(
            index
                .prune_shipped(&env, db, &cutoff, &mut floor, 10)
                .unwrap(),
            0
        );
        assert_eq!(
            keys(&env, db),
            [
                before_fleet.clone(),
                late.clone(),
                ids[3].clone(),
                ids[4].clone()
            ]
        );
        // Shipped, it goes; a cutoff at 4.5 s keeps the record of 5 s.
        index.set_shipped(&env, first + 5).unwrap();
        let mut floor = index.unshipped_floor(&env, 100).unwrap().unwrap();
        let cutoff = id_floor(4_500);
        assert_eq!(
            index
                .prune_shipped(&env, db, &cutoff, &mut floor, 10)
                .unwrap(),
            2
        );
        assert_eq!(keys(&env, db), [before_fleet, ids[4].clone()]);
        // The time the index began is kept across opens.
        drop(floor);
        let prune_from = |index: ShipIndex| {
            let txn = env.read_txn().unwrap();
            index.meta.get(&txn, PRUNE_FROM_KEY).unwrap()
        };
        let (index, _) = ShipIndex::open(&env, db, 9_000).unwrap();
        assert_eq!(prune_from(index), Some(1_000));
        // Opened outside a fleet, then in one again with a clock behind the newest record
        // (written at 5 s): what was written outside is never pruned as shipped.
        forget_prune_from(&env).unwrap();
        let (index, _) = ShipIndex::open(&env, db, 3_000).unwrap();
        assert_eq!(prune_from(index), Some(5_001));
        assert!(ShipIndex::existing(&env).unwrap().is_some());
        // More waiting to ship than a pass reads: no floor, no prune.
        commit(
            &env,
            db,
            index,
            first + 6,
            &[&id_at(6_000, 1), &id_at(6_001, 1)],
        );
        assert!(index.unshipped_floor(&env, 1).unwrap().is_none());
        assert!(index.unshipped_floor(&env, 2).unwrap().is_some());
        // `modgate journal prune` on the node's directory: everything before the first record
        // not shipped, the one written before the fleet included; nothing while too many wait.
        let mut txn = env.write_txn().unwrap();
        assert!(index
            .prune_up_to_unshipped(&mut txn, db, &cutoff, 1)
            .is_err());
        let cutoff = id_floor(10_000);
        assert_eq!(
            index
                .prune_up_to_unshipped(&mut txn, db, &cutoff, 2)
                .unwrap(),
            2
        );
        txn.commit().unwrap();
        assert_eq!(keys(&env, db), [id_at(6_000, 1), id_at(6_001, 1)]);
    }

    #[test]
    fn unshipped_charges_are_the_charged_ids_after_the_shipped_position() {
        let dir = tempfile::tempdir().unwrap();
        let (env, db) = open_env(dir.path(), 1 << 22, true).unwrap();
        let (index, first) = ShipIndex::open(&env, db, 0).unwrap();
        let records = [
            record("r1", "acme", None),
            record("r2", "acme", None),
            record("r3", "acme", Some("quota_exceeded")),
            record("r4x", "acme", None),
            record("r5", "beta", None),
        ];
        let mut txn = env.write_txn().unwrap();
        for record in &records {
            let bytes = RecordCodec::bytes_encode(record).unwrap();
            db.put(&mut txn, &record.request_id, &bytes).unwrap();
        }
        let ids: Vec<&str> = records.iter().map(|r| &*r.request_id).collect();
        index.append(&mut txn, first, &ids).unwrap();
        txn.commit().unwrap();
        // The first record shipped: the rest counts, refusals aside, by org and month.
        index.set_shipped(&env, first).unwrap();
        let mut charged = index.unshipped_charges(&env, db, 10).unwrap().unwrap();
        charged.sort();
        let november = crate::clock::month_of(1_763_942_400_000);
        let december = crate::clock::month_of(1_764_547_200_000);
        assert_ne!(november, december);
        assert_eq!(
            charged,
            vec![
                (("acme".to_owned(), november), vec![("r2".to_owned(), 1)]),
                (("acme".to_owned(), december), vec![("r4x".to_owned(), 1)]),
                (("beta".to_owned(), november), vec![("r5".to_owned(), 3)]),
            ]
        );
        // Past the bound: unknown, not a partial count.
        assert_eq!(index.unshipped_charges(&env, db, 2).unwrap(), None);
    }
}
