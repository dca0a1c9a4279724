//! Organizations' hash lists in the store: the list records, their entries, and an index of
//! the entries by hash (so an entry is added once, and can be found by its hash).
//!
//! Layout (named databases):
//! - `lists`: `org \0 name` to a [`ListRecord`];
//! - `list_entries`: `org \0 name \0 id` (id big-endian, so entries iterate in the order they
//!   were added) to an [`Entry`];
//! - `list_hashes`: `org \0 name \0 kind hash` to the entry's id;
//! - `list_removals`: `org \0 name \0 n` (n big-endian, from 0) to the id of the list's n-th
//!   removed entry.
//!
//! Ids come from the list's `next_id` and are never reused, so a follower that has read a
//! list up to some id reads what was appended since with one range scan; `removals` counts
//! the removal log, so it reads what was removed since the same way.

use heed::types::{Bytes, SerdeBincode, Str};
use heed::{BytesDecode, Database, RoTxn, RwTxn};
use serde::{Deserialize, Serialize};

use super::Store;
pub use crate::lists::NewEntry;
use crate::lists::{
    self, validate_entry_text, Entry, EntryHash, ListContent, ListKind, LISTS_PER_ORG_MAX,
    LIST_ENTRIES_MAX,
};

/// Entries one page of a listing holds at most.
pub const ENTRIES_PAGE_MAX: usize = 1000;

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

/// Why a list operation was refused.
#[derive(Debug)]
pub enum ListError {
    /// No such list (or entry).
    NotFound(String),
    /// A list of that name exists.
    Exists(String),
    /// Bad input, or a limit reached.
    Invalid(String),
    Store(anyhow::Error),
}

impl std::fmt::Display for ListError {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        match self {
            ListError::NotFound(why) | ListError::Exists(why) | ListError::Invalid(why) => {
                f.write_str(why)
            }
            ListError::Store(error) => write!(f, "the store failed: {error:#}"),
        }
    }
}

impl std::error::Error for ListError {}

impl From<heed::Error> for ListError {
    fn from(error: heed::Error) -> Self {
        ListError::Store(error.into())
    }
}

pub type ListResult<T> = Result<T, ListError>;

/// What an addition did.
#[derive(Debug, Default, PartialEq, Eq)]
pub struct Added {
    /// The new entries, with their ids.
    pub added: Vec<Entry>,
    /// Ids of entries that already held a hash given again (not added twice).
    pub existing: Vec<u64>,
}

#[derive(Clone)]
pub(crate) struct ListTables {
    pub lists: Database<Str, SerdeBincode<ListRecord>>,
    pub entries: Database<Bytes, SerdeBincode<Entry>>,
    pub hashes: Database<Bytes, Bytes>,
    pub removals: Database<Bytes, Bytes>,
}

fn list_key(org: &str, name: &str) -> String {
    format!("{org}\0{name}")
}

fn entries_prefix(org: &str, name: &str) -> Vec<u8> {
    let mut key = Vec::with_capacity(org.len() + name.len() + 10);
    key.extend_from_slice(org.as_bytes());
    key.push(0);
    key.extend_from_slice(name.as_bytes());
    key.push(0);
    key
}

fn entry_key(org: &str, name: &str, id: u64) -> Vec<u8> {
    let mut key = entries_prefix(org, name);
    key.extend_from_slice(&id.to_be_bytes());
    key
}

fn hash_key(org: &str, name: &str, hash: &EntryHash) -> Vec<u8> {
    let mut key = entries_prefix(org, name);
    match hash {
        EntryHash::Pdq(pdq) => {
            key.push(b'p');
            key.extend_from_slice(&pdq.0);
        }
        EntryHash::Md5(bytes) => {
            key.push(b'm');
            key.extend_from_slice(bytes);
        }
        EntryHash::Sha256(bytes) => {
            key.push(b's');
            key.extend_from_slice(bytes);
        }
        // A term is in a list once in its normalised form (`F.U.C.K` is `fuck`): at most
        // TERM_BYTES_MAX bytes given, which NFKC may at most triple, well inside LMDB's
        // 511-byte keys beside two 64-byte names.
        EntryHash::Term(term) => {
            key.push(b't');
            key.extend_from_slice(lists::normalised_term(term).as_bytes());
        }
    }
    key
}

impl Store {
    fn list_tables(&self) -> &ListTables {
        &self.list_tables
    }

    fn list_record(&self, txn: &RoTxn, org: &str, name: &str) -> ListResult<ListRecord> {
        self.list_tables()
            .lists
            .get(txn, &list_key(org, name))?
            .ok_or_else(|| ListError::NotFound(format!("no list '{name}'")))
    }

    /// Creates an empty list.
    pub fn create_list(
        &self,
        org: &str,
        name: &str,
        kind: ListKind,
        content: ListContent,
        distance_max: u32,
        now_ms: i64,
    ) -> ListResult<ListRecord> {
        lists::validate_name(name).map_err(ListError::Invalid)?;
        if distance_max > lists::pdq_index::DISTANCE_MAX {
            return Err(ListError::Invalid(format!(
                "distance {distance_max} is above {}",
                lists::pdq_index::DISTANCE_MAX
            )));
        }
        let tables = self.list_tables();
        let mut txn = self.env().write_txn()?;
        if self.orgs.get(&txn, org)?.is_none() {
            return Err(ListError::NotFound(format!("no organization '{org}'")));
        }
        if tables.lists.get(&txn, &list_key(org, name))?.is_some() {
            return Err(ListError::Exists(format!("list '{name}' already exists")));
        }
        if self.org_lists(&txn, org)?.len() >= LISTS_PER_ORG_MAX {
            return Err(ListError::Invalid(format!(
                "the organization has {LISTS_PER_ORG_MAX} lists, the most it may have"
            )));
        }
        let mut uid = [0u8; 8];
        getrandom::fill(&mut uid)
            .map_err(|error| ListError::Store(anyhow::anyhow!("drawing a list id: {error}")))?;
        let record = ListRecord {
            org: org.to_owned(),
            name: name.to_owned(),
            kind,
            content,
            distance_max,
            created_ms: now_ms,
            uid: u64::from_le_bytes(uid),
            entries: 0,
            next_id: 1,
            removals: 0,
        };
        tables.lists.put(&mut txn, &list_key(org, name), &record)?;
        txn.commit()?;
        Ok(record)
    }

    fn org_lists(&self, txn: &RoTxn, org: &str) -> ListResult<Vec<ListRecord>> {
        let prefix = format!("{org}\0");
        let mut out = Vec::new();
        for entry in self.list_tables().lists.prefix_iter(txn, &prefix)? {
            out.push(entry?.1);
        }
        Ok(out)
    }

    /// The lists of `org`, by name.
    pub fn lists_of(&self, org: &str) -> ListResult<Vec<ListRecord>> {
        let txn = self.env().read_txn()?;
        self.org_lists(&txn, org)
    }

    /// Every list of every organization (what the follower compiles).
    pub fn all_lists(&self) -> ListResult<Vec<ListRecord>> {
        let txn = self.env().read_txn()?;
        let mut out = Vec::new();
        for entry in self.list_tables().lists.iter(&txn)? {
            out.push(entry?.1);
        }
        Ok(out)
    }

    pub fn list(&self, org: &str, name: &str) -> ListResult<ListRecord> {
        let txn = self.env().read_txn()?;
        self.list_record(&txn, org, name)
    }

    /// Deletes a list and its entries.
    pub fn delete_list(&self, org: &str, name: &str) -> ListResult<ListRecord> {
        let tables = self.list_tables();
        let mut txn = self.env().write_txn()?;
        let record = self.list_record(&txn, org, name)?;
        let prefix = entries_prefix(org, name);
        delete_prefix(&mut txn, tables.entries.remap_data_type::<Bytes>(), &prefix)?;
        delete_prefix(&mut txn, tables.hashes, &prefix)?;
        delete_prefix(&mut txn, tables.removals, &prefix)?;
        tables.lists.delete(&mut txn, &list_key(org, name))?;
        txn.commit()?;
        Ok(record)
    }

    /// Adds entries (a hash already in the list is not added again); all or none.
    pub fn add_entries(
        &self,
        org: &str,
        name: &str,
        new: &[NewEntry],
        now_ms: i64,
    ) -> ListResult<Added> {
        for entry in new {
            validate_entry_text("label", &entry.label).map_err(ListError::Invalid)?;
            validate_entry_text("id", &entry.caller_id).map_err(ListError::Invalid)?;
        }
        let tables = self.list_tables();
        let mut txn = self.env().write_txn()?;
        let mut record = self.list_record(&txn, org, name)?;
        if let Some(entry) = new
            .iter()
            .find(|entry| entry.hash.content() != record.content)
        {
            return Err(ListError::Invalid(format!(
                "list '{name}' holds {}, not a {}",
                match record.content {
                    ListContent::Image => "image hashes",
                    ListContent::Text => "terms",
                },
                entry.hash.kind()
            )));
        }
        let mut out = Added::default();
        let mut org_entries: u64 = self
            .org_lists(&txn, org)?
            .iter()
            .map(|list| list.entries)
            .sum();
        let list_max = match record.content {
            ListContent::Image => LIST_ENTRIES_MAX,
            ListContent::Text => lists::TEXT_LIST_ENTRIES_MAX,
        };
        for entry in new {
            let hash_key = hash_key(org, name, &entry.hash);
            if let Some(id) = tables.hashes.get(&txn, &hash_key)? {
                out.existing.push(id_of(id)?);
                continue;
            }
            if record.entries >= list_max {
                return Err(ListError::Invalid(format!(
                    "list '{name}' holds {list_max} entries, the most a list of {} may hold",
                    record.content.as_str()
                )));
            }
            if org_entries >= LIST_ENTRIES_MAX {
                return Err(ListError::Invalid(format!(
                    "the organization's lists hold {LIST_ENTRIES_MAX} entries, the most they may"
                )));
            }
            org_entries += 1;
            let stored = Entry {
                id: record.next_id,
                hash: entry.hash.clone(),
                label: entry.label.clone(),
                caller_id: entry.caller_id.clone(),
                added_ms: now_ms,
            };
            tables
                .entries
                .put(&mut txn, &entry_key(org, name, stored.id), &stored)?;
            tables
                .hashes
                .put(&mut txn, &hash_key, &stored.id.to_be_bytes())?;
            record.next_id += 1;
            record.entries += 1;
            out.added.push(stored);
        }
        if !out.added.is_empty() {
            tables.lists.put(&mut txn, &list_key(org, name), &record)?;
            txn.commit()?;
        }
        Ok(out)
    }

    /// Removes the entry `id`.
    pub fn remove_entry(&self, org: &str, name: &str, id: u64) -> ListResult<Entry> {
        let tables = self.list_tables();
        let mut txn = self.env().write_txn()?;
        let mut record = self.list_record(&txn, org, name)?;
        let key = entry_key(org, name, id);
        let entry = tables
            .entries
            .get(&txn, &key)?
            .ok_or_else(|| ListError::NotFound(format!("no entry {id} in list '{name}'")))?;
        tables.entries.delete(&mut txn, &key)?;
        tables
            .hashes
            .delete(&mut txn, &hash_key(org, name, &entry.hash))?;
        tables.removals.put(
            &mut txn,
            &entry_key(org, name, record.removals),
            &id.to_be_bytes(),
        )?;
        record.entries -= 1;
        record.removals += 1;
        tables.lists.put(&mut txn, &list_key(org, name), &record)?;
        txn.commit()?;
        Ok(entry)
    }

    /// The entry holding `hash`, if any.
    pub fn entry_with_hash(
        &self,
        org: &str,
        name: &str,
        hash: &EntryHash,
    ) -> ListResult<Option<u64>> {
        let txn = self.env().read_txn()?;
        self.list_record(&txn, org, name)?;
        match self
            .list_tables()
            .hashes
            .get(&txn, &hash_key(org, name, hash))?
        {
            Some(id) => Ok(Some(id_of(id)?)),
            None => Ok(None),
        }
    }

    /// Up to `limit` entries with ids above `after`, in id order, and the list's record.
    pub fn entries(
        &self,
        org: &str,
        name: &str,
        after: u64,
        limit: usize,
    ) -> ListResult<(ListRecord, Vec<Entry>)> {
        let txn = self.env().read_txn()?;
        let record = self.list_record(&txn, org, name)?;
        let mut out = Vec::new();
        let entries = self.list_tables().entries.remap_data_type::<Bytes>();
        scan_from(entries, &txn, org, name, after.saturating_add(1), |bytes| {
            out.push(SerdeBincode::<Entry>::bytes_decode(bytes).map_err(heed::Error::Decoding)?);
            Ok(out.len() < limit)
        })?;
        Ok((record, out))
    }

    /// The ids of the entries removed from a list, from its `from`-th removal on.
    pub fn removed_since(&self, org: &str, name: &str, from: u64) -> ListResult<Vec<u64>> {
        let txn = self.env().read_txn()?;
        let mut out = Vec::new();
        scan_from(self.list_tables().removals, &txn, org, name, from, |id| {
            out.push(id_of(id)?);
            Ok(true)
        })?;
        Ok(out)
    }

    /// A list's record and every entry above `after`, read in one transaction.
    pub fn list_since(
        &self,
        org: &str,
        name: &str,
        after: u64,
    ) -> ListResult<(ListRecord, Vec<Entry>)> {
        self.entries(org, name, after, usize::MAX)
    }
}

fn id_of(bytes: &[u8]) -> ListResult<u64> {
    let bytes: [u8; 8] = bytes
        .try_into()
        .map_err(|_| ListError::Store(anyhow::anyhow!("a list hash index value is not an id")))?;
    Ok(u64::from_be_bytes(bytes))
}

/// Calls `visit` with the values of a list's records keyed `org \0 name \0 n` (`n` big-endian:
/// entries by id, removals by number), from `n = from` on in order, while it says `true`.
fn scan_from(
    db: Database<Bytes, Bytes>,
    txn: &RoTxn,
    org: &str,
    name: &str,
    from: u64,
    mut visit: impl FnMut(&[u8]) -> ListResult<bool>,
) -> ListResult<()> {
    let start = entry_key(org, name, from);
    let prefix = entries_prefix(org, name);
    let range = (
        std::ops::Bound::Included(start.as_slice()),
        std::ops::Bound::Unbounded,
    );
    for item in db.range(txn, &range)? {
        let (key, value) = item?;
        if !key.starts_with(&prefix) || key.len() != prefix.len() + 8 || !visit(value)? {
            break;
        }
    }
    Ok(())
}

fn delete_prefix(txn: &mut RwTxn, db: Database<Bytes, Bytes>, prefix: &[u8]) -> heed::Result<()> {
    let mut iter = db.prefix_iter_mut(txn, prefix)?;
    while iter.next().transpose()?.is_some() {
        // SAFETY: heed marks `del_current` unsafe because a key or value borrowed from the
        // iterator must not be used after the deletion; the loop keeps no borrow of the
        // current item (the `Option` is dropped before the call).
        unsafe { iter.del_current()? };
    }
    Ok(())
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::image::hashes::Pdq;
    use std::collections::BTreeMap;

    use crate::store::test_store_with_org as store_with_org;

    fn pdq_entry(byte: u8) -> NewEntry {
        NewEntry {
            hash: EntryHash::Pdq(Pdq([byte; 32])),
            label: Some(format!("l{byte}")),
            caller_id: None,
        }
    }

    #[test]
    fn lists_hold_entries_once_in_order() {
        let (_dir, store) = store_with_org();
        store
            .create_list("acme", "known", ListKind::Block, ListContent::Image, 31, 5)
            .unwrap();
        assert!(matches!(
            store.create_list("acme", "known", ListKind::Block, ListContent::Image, 31, 5),
            Err(ListError::Exists(_))
        ));
        assert!(matches!(
            store.create_list(
                "nobody",
                "known",
                ListKind::Block,
                ListContent::Image,
                31,
                5
            ),
            Err(ListError::NotFound(_))
        ));
        let added = store
            .add_entries(
                "acme",
                "known",
                &[pdq_entry(1), pdq_entry(2), pdq_entry(3)],
                9,
            )
            .unwrap();
        assert_eq!(
            added.added.iter().map(|e| e.id).collect::<Vec<_>>(),
            [1, 2, 3]
        );
        let again = store
            .add_entries("acme", "known", &[pdq_entry(2), pdq_entry(4)], 9)
            .unwrap();
        assert_eq!(again.existing, [2]);
        assert_eq!(again.added[0].id, 4);
        let (record, page) = store.entries("acme", "known", 1, 2).unwrap();
        assert_eq!(record.entries, 4);
        assert_eq!(page.iter().map(|e| e.id).collect::<Vec<_>>(), [2, 3]);
        store.remove_entry("acme", "known", 2).unwrap();
        assert!(matches!(
            store.remove_entry("acme", "known", 2),
            Err(ListError::NotFound(_))
        ));
        let (record, rest) = store.list_since("acme", "known", 0).unwrap();
        assert_eq!((record.entries, record.removals, record.next_id), (3, 1, 5));
        store.remove_entry("acme", "known", 3).unwrap();
        assert_eq!(store.removed_since("acme", "known", 0).unwrap(), [2, 3]);
        assert_eq!(store.removed_since("acme", "known", 1).unwrap(), [3]);
        assert!(store.removed_since("acme", "known", 2).unwrap().is_empty());
        assert_eq!(rest.iter().map(|e| e.id).collect::<Vec<_>>(), [1, 3, 4]);
        let rest = store.list_since("acme", "known", 0).unwrap().1;
        assert_eq!(rest.iter().map(|e| e.id).collect::<Vec<_>>(), [1, 4]);
        // The removed hash can come back, with a new id.
        let back = store
            .add_entries("acme", "known", &[pdq_entry(2)], 9)
            .unwrap();
        assert_eq!(back.added[0].id, 5);
        assert_eq!(
            store
                .entry_with_hash("acme", "known", &pdq_entry(2).hash)
                .unwrap(),
            Some(5)
        );
    }

    #[test]
    fn lists_of_one_organization_stay_apart_and_delete_whole() {
        let (_dir, store) = store_with_org();
        store.create_org("acme2", "free", 0).unwrap();
        for org in ["acme", "acme2"] {
            store
                .create_list(org, "a", ListKind::Block, ListContent::Image, 31, 0)
                .unwrap();
            store
                .create_list(org, "ab", ListKind::Allow, ListContent::Image, 10, 0)
                .unwrap();
            store.add_entries(org, "a", &[pdq_entry(7)], 0).unwrap();
            store.add_entries(org, "ab", &[pdq_entry(8)], 0).unwrap();
        }
        let names: BTreeMap<_, _> = store
            .lists_of("acme")
            .unwrap()
            .into_iter()
            .map(|r| (r.name, r.kind))
            .collect();
        assert_eq!(names.len(), 2);
        // `a`'s entries are not `ab`'s.
        assert_eq!(store.list_since("acme", "a", 0).unwrap().1.len(), 1);
        store.delete_list("acme", "a").unwrap();
        assert!(matches!(
            store.list("acme", "a"),
            Err(ListError::NotFound(_))
        ));
        assert_eq!(store.list_since("acme", "ab", 0).unwrap().1.len(), 1);
        assert_eq!(store.list_since("acme2", "a", 0).unwrap().1.len(), 1);
        store
            .create_list("acme", "a", ListKind::Block, ListContent::Image, 31, 0)
            .unwrap();
        assert!(store.list_since("acme", "a", 0).unwrap().1.is_empty());
        assert_eq!(store.all_lists().unwrap().len(), 4);
    }

    #[test]
    fn text_lists_hold_terms_once_normalised() {
        let (_dir, store) = store_with_org();
        store
            .create_list("acme", "slang", ListKind::Block, ListContent::Text, 0, 0)
            .unwrap();
        let term = |text: &str| NewEntry {
            hash: EntryHash::term(text).unwrap(),
            label: None,
            caller_id: None,
        };
        let added = store
            .add_entries(
                "acme",
                "slang",
                &[term("grapefruit"), term("GR4PEFRUIT")],
                0,
            )
            .unwrap();
        assert_eq!(added.added.len(), 1);
        assert_eq!(added.existing, [1]);
        // Hashes do not go into a text list, nor terms into an image list.
        assert!(matches!(
            store.add_entries("acme", "slang", &[pdq_entry(1)], 0),
            Err(ListError::Invalid(_))
        ));
        store
            .create_list("acme", "images", ListKind::Block, ListContent::Image, 31, 0)
            .unwrap();
        assert!(matches!(
            store.add_entries("acme", "images", &[term("x")], 0),
            Err(ListError::Invalid(_))
        ));
        assert!(EntryHash::term("...").is_err());
        assert!(EntryHash::term(&"a".repeat(200)).is_err());
    }

    #[test]
    fn bad_input_is_refused() {
        let (_dir, store) = store_with_org();
        assert!(matches!(
            store.create_list("acme", "Bad", ListKind::Block, ListContent::Image, 31, 0),
            Err(ListError::Invalid(_))
        ));
        assert!(matches!(
            store.create_list("acme", "far", ListKind::Block, ListContent::Image, 64, 0),
            Err(ListError::Invalid(_))
        ));
        store
            .create_list("acme", "l", ListKind::Block, ListContent::Image, 31, 0)
            .unwrap();
        let mut long = pdq_entry(1);
        long.label = Some("x".repeat(lists::ENTRY_TEXT_BYTES_MAX + 1));
        assert!(matches!(
            store.add_entries("acme", "l", &[long], 0),
            Err(ListError::Invalid(_))
        ));
        assert!(store.list_since("acme", "l", 0).unwrap().1.is_empty());
    }
}
