//! Reading the journals: `modgate journal` merges every shard's journal in time order
//! (request ids sort by time, so a k-way merge on keys is a merge on time), with filters;
//! `modgate journal prune` deletes what is older than a date.
//!
//! Both work while the server runs: LMDB readers never block the writers, and a prune is an
//! ordinary write transaction per shard. Pruned pages are reused by later records; the files do
//! not shrink.

use std::collections::BinaryHeap;
use std::ops::Bound;
use std::path::{Path, PathBuf};

use anyhow::Context;
use heed::BytesDecode;

pub use super::record::id_floor;
use super::record::{open_env, JournalRecord, RecordCodec};
use super::shipping::PRUNE_UNSHIPPED_READ_MAX;

/// What `modgate journal` keeps.
#[derive(Clone, Debug, Default)]
pub struct Filter {
    pub key_id: Option<String>,
    pub reference: Option<String>,
    pub org: Option<String>,
    pub since_ms: Option<i64>,
    pub until_ms: Option<i64>,
}

impl Filter {
    fn keeps(&self, record: &JournalRecord<'_>) -> bool {
        let matches = |want: &Option<String>, have: &Option<std::borrow::Cow<'_, str>>| {
            want.as_deref()
                .is_none_or(|want| have.as_deref() == Some(want))
        };
        matches(&self.key_id, &record.key_id)
            && matches(&self.reference, &record.reference)
            && matches(&self.org, &record.org)
    }
}

/// The journal directories of every shard that ever ran on `data_dir`.
pub fn shard_dirs(data_dir: &Path) -> anyhow::Result<Vec<PathBuf>> {
    let root = data_dir.join("journal");
    let mut dirs = Vec::new();
    if root.exists() {
        for entry in
            std::fs::read_dir(&root).with_context(|| format!("reading {}", root.display()))?
        {
            let path = entry?.path();
            if path
                .file_name()
                .and_then(|n| n.to_str())
                .is_some_and(|n| n.starts_with("shard-"))
            {
                dirs.push(path);
            }
        }
    }
    dirs.sort();
    Ok(dirs)
}

/// Records in key order, from one shard's journal or from what is staged.
type Source<'a> = Box<dyn Iterator<Item = heed::Result<(String, Vec<u8>)>> + 'a>;

/// Calls `each` with every record that passes `filter`, oldest first, across shards, the
/// records still staged ([`super::staging`]) included.
pub fn for_each(
    data_dir: &Path,
    map_bytes: usize,
    filter: &Filter,
    mut each: impl FnMut(&JournalRecord<'_>) -> anyhow::Result<()>,
) -> anyhow::Result<usize> {
    // What is staged is read before the disk journals' transactions begin: a record moved
    // meanwhile is then in both (and dropped once below), never in neither. (Read after, a
    // move committed between the disk's snapshot and the staging read would hide the record
    // from both: the snapshot predates it, and staging no longer has it.)
    let staged = match super::staging::linked_root(data_dir) {
        Some(root) => Some(super::staging::read_all(&root, map_bytes)?),
        None => None,
    };
    let opened = shard_dirs(data_dir)?
        .iter()
        .map(|dir| open_env(dir, map_bytes, false))
        .collect::<anyhow::Result<Vec<_>>>()?;
    let txns = opened
        .iter()
        .map(|(env, _)| env.read_txn())
        .collect::<heed::Result<Vec<_>>>()?;
    let since = filter.since_ms.map(id_floor);
    let until = filter.until_ms.map(id_floor);
    let range: (Bound<&str>, Bound<&str>) = (
        since.as_deref().map_or(Bound::Unbounded, Bound::Included),
        until.as_deref().map_or(Bound::Unbounded, Bound::Excluded),
    );
    let mut sources: Vec<Source<'_>> = Vec::with_capacity(opened.len() + 1);
    for ((_, db), txn) in opened.iter().zip(&txns) {
        sources.push(Box::new(db.range(txn, &range)?.map(|entry| {
            entry.map(|(key, value)| (key.to_owned(), value.to_vec()))
        })));
    }
    if let Some(staged) = staged {
        let in_range = move |key: &String| {
            since.as_deref().is_none_or(|since| key.as_str() >= since)
                && until.as_deref().is_none_or(|until| key.as_str() < until)
        };
        sources.push(Box::new(
            staged
                .into_iter()
                .filter(move |(key, _)| in_range(key))
                .map(Ok),
        ));
    }
    // Min-heap of (key, source) over the heads of every source.
    let mut heads: BinaryHeap<std::cmp::Reverse<(String, usize, Vec<u8>)>> = BinaryHeap::new();
    for (source, iter) in sources.iter_mut().enumerate() {
        if let Some(entry) = iter.next() {
            let (key, value) = entry?;
            heads.push(std::cmp::Reverse((key, source, value)));
        }
    }
    let mut count = 0;
    let mut last_key: Option<String> = None;
    while let Some(std::cmp::Reverse((key, source, value))) = heads.pop() {
        if let Some(entry) = sources[source].next() {
            let (next_key, next_value) = entry?;
            heads.push(std::cmp::Reverse((next_key, source, next_value)));
        }
        if last_key.as_deref() == Some(key.as_str()) {
            continue; // staged and moved: the same record twice
        }
        let record = RecordCodec::bytes_decode(&value)
            .map_err(|error| anyhow::anyhow!("a journal record does not decode: {error}"))?;
        if filter.keeps(&record) {
            each(&record)?;
            count += 1;
        }
        last_key = Some(key);
    }
    Ok(count)
}

/// Deletes records older than `before_ms` in every shard's journal; returns how many. Records
/// that old still staged ([`super::staging`]: only with a cutoff in the last seconds, or a
/// server stopped by a crash) are waited for, up to `staged_wait`, and deleted once moved; past
/// that, the error says how many are left (a start moves them; prune again after it).
pub fn prune(
    data_dir: &Path,
    map_bytes: usize,
    before_ms: i64,
    staged_wait: std::time::Duration,
) -> anyhow::Result<usize> {
    let before = id_floor(before_ms);
    let deadline = std::time::Instant::now() + staged_wait;
    let mut deleted = 0;
    loop {
        // Counted before the disk is pruned: a record moved before the count is on the disk
        // by the prune that follows it.
        let staged = match super::staging::linked_root(data_dir) {
            Some(root) => super::staging::read_all(&root, map_bytes)?
                .iter()
                .filter(|(key, _)| key.as_str() < before.as_str())
                .count(),
            None => 0,
        };
        deleted += prune_disk(data_dir, map_bytes, &before)?;
        if staged == 0 {
            return Ok(deleted);
        }
        if std::time::Instant::now() >= deadline {
            anyhow::bail!(
                "deleted {deleted} records; {staged} more are still staged (the server moves them to the journal every sync interval, or at its next start): run the prune again then"
            );
        }
        std::thread::sleep(std::time::Duration::from_millis(50));
    }
}

/// Deletes the disk journals' records with keys before `before`; on a fleet node's data
/// directory, never one not shipped to the fleet's table yet.
fn prune_disk(data_dir: &Path, map_bytes: usize, before: &str) -> anyhow::Result<usize> {
    let mut deleted = 0;
    for dir in shard_dirs(data_dir)? {
        let (env, db) = open_env(&dir, map_bytes, false)?;
        let index = super::shipping::ShipIndex::existing(&env)?;
        let mut txn = env.write_txn()?;
        deleted += match index {
            Some(index) => index
                .prune_up_to_unshipped(&mut txn, db, before, PRUNE_UNSHIPPED_READ_MAX)
                .with_context(|| format!("pruning {}", dir.display()))?,
            None => {
                let range: (Bound<&str>, Bound<&str>) = (Bound::Unbounded, Bound::Excluded(before));
                db.delete_range(&mut txn, &range)?
            }
        };
        txn.commit()?;
    }
    Ok(deleted)
}

#[cfg(test)]
pub(crate) mod tests {
    use super::*;
    use heed::BytesEncode;
    use std::borrow::Cow;

    /// A check's record, for the journal's tests.
    pub(crate) fn record(id: &str, key: &str, ms: i64) -> JournalRecord<'static> {
        JournalRecord {
            request_id: Cow::Owned(id.to_owned()),
            unix_ms: ms,
            route: "/v1/text".into(),
            kind: "text".into(),
            key_id: Some(Cow::Owned(key.to_owned())),
            org: Some("acme".into()),
            reference: None,
            workflow: Some("default".into()),
            workflow_version: Some(1),
            status: 200,
            error_type: None,
            action: Some("accept".into()),
            scores: vec![("profanity".into(), 0.1)],
            unchecked: vec![],
            time_ms: 0,
            units: 1,
        }
    }

    #[test]
    fn merges_shards_in_time_order_filters_and_prunes() {
        let dir = tempfile::tempdir().unwrap();
        let map = 1 << 24;
        let ids = |shard: u8, ms: i64| {
            crate::request_id::RequestIdGen::new(shard, 0)
                .next(ms as u64)
                .as_str()
                .to_owned()
        };
        for (shard, times) in [(0usize, vec![1000, 3000, 5000]), (1, vec![2000, 4000])] {
            let (env, db) = open_env(
                &super::super::record::shard_dir(dir.path(), shard),
                map,
                false,
            )
            .unwrap();
            let mut txn = env.write_txn().unwrap();
            for ms in times {
                let id = ids(shard as u8, ms);
                let key = if ms == 4000 { "other" } else { "k" };
                let value = record(&id, key, ms);
                let encoded = RecordCodec::bytes_encode(&value).unwrap();
                db.put(&mut txn, &id, &encoded).unwrap();
            }
            txn.commit().unwrap();
        }
        let mut seen = Vec::new();
        for_each(dir.path(), map, &Filter::default(), |r| {
            seen.push(r.unix_ms);
            Ok(())
        })
        .unwrap();
        assert_eq!(seen, [1000, 2000, 3000, 4000, 5000]);
        let mut seen = Vec::new();
        let filter = Filter {
            key_id: Some("k".into()),
            since_ms: Some(1500),
            until_ms: Some(5000),
            ..Filter::default()
        };
        for_each(dir.path(), map, &filter, |r| {
            seen.push(r.unix_ms);
            Ok(())
        })
        .unwrap();
        assert_eq!(seen, [2000, 3000]);
        assert_eq!(
            prune(dir.path(), map, 3000, std::time::Duration::ZERO).unwrap(),
            2
        );
        let count = for_each(dir.path(), map, &Filter::default(), |_| Ok(())).unwrap();
        assert_eq!(count, 3);
    }
}
