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

use heed::types::{Bytes, SerdeBincode};
use heed::{BytesDecode, Database, RoTxn, RwTxn};
use serde::{Deserialize, Serialize};

pub use super::records::ListRecord;
use super::records::ListTables;
use super::Store;
pub use crate::lists::NewEntry;
use crate::lists::{
    self, validate_entry_text, Entry, EntryHash, ListContent, ListKind, LISTS_PER_ORG_MAX,
    LIST_ENTRIES_MAX,
};

/// Entries one page of a listing holds at most.
pub const ENTRIES_PAGE_MAX: usize = 1000;

/// Why a list operation was refused.
#[derive(Debug)]
pub enum ListError {
    /// No such list (or entry).
    NotFound(String),
    /// A list of that name exists.
    Exists(String),
    /// Bad input, or a limit reached.
    Invalid(String),
    /// The engine that keeps a fleet's lists could not take the write: nothing was written,
    /// unless the message says the commit's outcome is unknown.
    Unavailable(String),
    Store(anyhow::Error),
}

impl std::fmt::Display for ListError {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        match self {
            ListError::NotFound(why)
            | ListError::Exists(why)
            | ListError::Invalid(why)
            | ListError::Unavailable(why) => f.write_str(why),
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

/// The lists as read in one transaction.
pub struct ListsRead {
    /// The transaction's id: the last one committed when the read began.
    pub txn_id: usize,
    /// The lists' epoch (drawn by each reset of a fleet node's lists): when it changes, every
    /// list is new, whatever its uid.
    pub epoch: Option<Vec<u8>>,
    pub records: Vec<ListRecord>,
}

/// What an addition did.
#[derive(Debug, Default, PartialEq, Eq)]
pub struct Added {
    /// The new entries, with their ids.
    pub added: Vec<Entry>,
    /// Ids of entries that already held a hash given again (not added twice).
    pub existing: Vec<u64>,
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

/// A change to an organization's lists, as the routes and the CLI ask for it.
///
/// It carries everything its outcome depends on besides the lists themselves (the new list's
/// `uid`, the time), so applying the same changes in the same order to the same lists gives
/// the same lists, entry ids included: how a fleet keeps lists, as a log of these in
/// PostgreSQL that every node replays (`crate::fleet::lists`).
#[derive(Clone, Debug, PartialEq, Serialize, Deserialize)]
pub enum ListWrite {
    Create {
        name: String,
        kind: ListKind,
        content: ListContent,
        distance_max: u32,
        created_ms: i64,
        uid: u64,
    },
    Delete {
        name: String,
    },
    /// Entries added all or none; a hash already in the list is not added again.
    Add {
        name: String,
        entries: Vec<NewEntry>,
        added_ms: i64,
    },
    Remove {
        name: String,
        id: u64,
    },
}

impl ListWrite {
    /// The creation of an empty list, with a fresh random `uid`: a list deleted and made again
    /// under its name is another list to the follower, even within one millisecond.
    pub fn create(
        name: &str,
        kind: ListKind,
        content: ListContent,
        distance_max: u32,
        now_ms: i64,
    ) -> ListResult<ListWrite> {
        let mut uid = [0u8; 8];
        getrandom::fill(&mut uid)
            .map_err(|error| ListError::Store(anyhow::anyhow!("drawing a list id: {error}")))?;
        Ok(ListWrite::Create {
            name: name.to_owned(),
            kind,
            content,
            distance_max,
            created_ms: now_ms,
            uid: u64::from_le_bytes(uid),
        })
    }

    /// The list it changes.
    pub fn list_name(&self) -> &str {
        match self {
            ListWrite::Create { name, .. }
            | ListWrite::Delete { name }
            | ListWrite::Add { name, .. }
            | ListWrite::Remove { name, .. } => name,
        }
    }
}

/// What a [`ListWrite`] did.
#[derive(Debug, PartialEq)]
pub enum ListWritten {
    Created(ListRecord),
    Deleted(ListRecord),
    Added(Added),
    Removed(Entry),
}

impl ListWritten {
    /// Whether the store changed (an addition of hashes all in the list already did not).
    pub fn changed(&self) -> bool {
        match self {
            ListWritten::Added(added) => !added.added.is_empty(),
            _ => true,
        }
    }
}

/// Who carries out list writes: the store itself on a single node, the fleet's list log in a
/// fleet. The routes hold one and run it on a blocking thread.
pub trait ListWriter: Send + Sync {
    fn write(&self, store: &Store, org: &str, change: &ListWrite) -> ListResult<ListWritten>;
}

/// A single node's writer: the change applied to the store.
pub struct LocalLists;

impl ListWriter for LocalLists {
    fn write(&self, store: &Store, org: &str, change: &ListWrite) -> ListResult<ListWritten> {
        store.write_list(org, change)
    }
}

/// The key under which `meta` holds the last list-log revision applied to the store.
const LIST_REVISION: &str = "list_revision";
/// The key under which `meta` holds the mark of that revision's row (when it was written, in
/// the fleet's microseconds): a log restored from a backup and written on since has the
/// revision again under another mark.
const LIST_MARK: &str = "list_mark";

/// The key under which `meta` holds the lists' epoch, drawn anew by every reset.
const LISTS_EPOCH: &str = "lists_epoch";

/// Where a store is in a fleet's list log: the last revision applied and its mark.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub struct ListPosition {
    /// `None`: the store's lists never followed a fleet.
    pub revision: Option<i64>,
    pub mark: Option<i64>,
}

/// One change of a fleet's list log, as a store replays it.
#[derive(Clone, Debug, PartialEq)]
pub struct LoggedWrite {
    pub revision: i64,
    /// When the row was written (Unix microseconds): what tells it from another row of the
    /// same revision in a log restored from a backup.
    pub mark: i64,
    pub org: String,
    /// `None`: a change this build cannot read.
    pub change: Option<ListWrite>,
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

    /// Applies `change` to the lists of `org` (an existing organization, for a creation).
    pub fn write_list(&self, org: &str, change: &ListWrite) -> ListResult<ListWritten> {
        let mut txn = self.env().write_txn()?;
        if matches!(change, ListWrite::Create { .. }) && self.orgs.get(&txn, org)?.is_none() {
            return Err(ListError::NotFound(format!("no organization '{org}'")));
        }
        let written = self.apply_list_write(&mut txn, org, change)?;
        if written.changed() {
            txn.commit()?;
        }
        Ok(written)
    }

    /// What `change` would do, found by applying it in a transaction that is then dropped:
    /// the fleet's writer learns a write's answer (or refusal) before it appends it to the log.
    pub fn try_list_write(&self, org: &str, change: &ListWrite) -> ListResult<ListWritten> {
        let mut txn = self.env().write_txn()?;
        self.apply_list_write(&mut txn, org, change)
    }

    /// Applies `change` in `txn`. Everything it checks is in the lists and the change itself
    /// (not the organizations, which a fleet's nodes learn on another path), so a replay on
    /// every node decides alike. On an error `txn` holds part of the change: drop it.
    fn apply_list_write(
        &self,
        txn: &mut RwTxn,
        org: &str,
        change: &ListWrite,
    ) -> ListResult<ListWritten> {
        Ok(match change {
            ListWrite::Create {
                name,
                kind,
                content,
                distance_max,
                created_ms,
                uid,
            } => ListWritten::Created(self.create_list_in(
                txn,
                org,
                name,
                (*kind, *content, *distance_max),
                *created_ms,
                *uid,
            )?),
            ListWrite::Delete { name } => {
                ListWritten::Deleted(self.delete_list_in(txn, org, name)?)
            }
            ListWrite::Add {
                name,
                entries,
                added_ms,
            } => ListWritten::Added(self.add_entries_in(txn, org, name, entries, *added_ms)?),
            ListWrite::Remove { name, id } => {
                ListWritten::Removed(self.remove_entry_in(txn, org, name, *id)?)
            }
        })
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
        let change = ListWrite::create(name, kind, content, distance_max, now_ms)?;
        match self.write_list(org, &change)? {
            ListWritten::Created(record) => Ok(record),
            other => Err(unexpected(&other)),
        }
    }

    fn create_list_in(
        &self,
        txn: &mut RwTxn,
        org: &str,
        name: &str,
        (kind, content, distance_max): (ListKind, ListContent, u32),
        created_ms: i64,
        uid: u64,
    ) -> ListResult<ListRecord> {
        lists::validate_name(name).map_err(ListError::Invalid)?;
        if distance_max > lists::pdq_index::DISTANCE_MAX {
            return Err(ListError::Invalid(format!(
                "distance {distance_max} is above {}",
                lists::pdq_index::DISTANCE_MAX
            )));
        }
        let tables = self.list_tables();
        if tables.lists.get(txn, &list_key(org, name))?.is_some() {
            return Err(ListError::Exists(format!("list '{name}' already exists")));
        }
        if self.org_lists(txn, org)?.len() >= LISTS_PER_ORG_MAX {
            return Err(ListError::Invalid(format!(
                "the organization has {LISTS_PER_ORG_MAX} lists, the most it may have"
            )));
        }
        let record = ListRecord {
            org: org.to_owned(),
            name: name.to_owned(),
            kind,
            content,
            distance_max,
            created_ms,
            uid,
            entries: 0,
            next_id: 1,
            removals: 0,
        };
        tables.lists.put(txn, &list_key(org, name), &record)?;
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

    /// Every list of every organization.
    pub fn all_lists(&self) -> ListResult<Vec<ListRecord>> {
        Ok(self.all_lists_read()?.records)
    }

    /// Every list of every organization, as the lists follower compiles them.
    pub fn all_lists_read(&self) -> ListResult<ListsRead> {
        let txn = self.env().read_txn()?;
        let mut records = Vec::new();
        for entry in self.list_tables().lists.iter(&txn)? {
            records.push(entry?.1);
        }
        let epoch = self.meta.get(&txn, LISTS_EPOCH)?.map(<[u8]>::to_vec);
        Ok(ListsRead {
            txn_id: txn.id(),
            epoch,
            records,
        })
    }

    pub fn list(&self, org: &str, name: &str) -> ListResult<ListRecord> {
        let txn = self.env().read_txn()?;
        self.list_record(&txn, org, name)
    }

    /// Deletes a list and its entries.
    pub fn delete_list(&self, org: &str, name: &str) -> ListResult<ListRecord> {
        let change = ListWrite::Delete { name: name.into() };
        match self.write_list(org, &change)? {
            ListWritten::Deleted(record) => Ok(record),
            other => Err(unexpected(&other)),
        }
    }

    fn delete_list_in(&self, txn: &mut RwTxn, org: &str, name: &str) -> ListResult<ListRecord> {
        let tables = self.list_tables();
        let record = self.list_record(txn, org, name)?;
        let prefix = entries_prefix(org, name);
        delete_prefix(txn, tables.entries.remap_data_type::<Bytes>(), &prefix)?;
        delete_prefix(txn, tables.hashes, &prefix)?;
        delete_prefix(txn, tables.removals, &prefix)?;
        tables.lists.delete(txn, &list_key(org, name))?;
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
        let change = ListWrite::Add {
            name: name.into(),
            entries: new.to_vec(),
            added_ms: now_ms,
        };
        match self.write_list(org, &change)? {
            ListWritten::Added(added) => Ok(added),
            other => Err(unexpected(&other)),
        }
    }

    fn add_entries_in(
        &self,
        txn: &mut RwTxn,
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
        let mut record = self.list_record(txn, org, name)?;
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
            .org_lists(txn, org)?
            .iter()
            .map(|list| list.entries)
            .sum();
        let list_max = match record.content {
            ListContent::Image => LIST_ENTRIES_MAX,
            ListContent::Text => lists::TEXT_LIST_ENTRIES_MAX,
        };
        for entry in new {
            let hash_key = hash_key(org, name, &entry.hash);
            if let Some(id) = tables.hashes.get(txn, &hash_key)? {
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
                .put(txn, &entry_key(org, name, stored.id), &stored)?;
            tables
                .hashes
                .put(txn, &hash_key, &stored.id.to_be_bytes())?;
            record.next_id += 1;
            record.entries += 1;
            out.added.push(stored);
        }
        if !out.added.is_empty() {
            tables.lists.put(txn, &list_key(org, name), &record)?;
        }
        Ok(out)
    }

    /// Removes the entry `id`.
    pub fn remove_entry(&self, org: &str, name: &str, id: u64) -> ListResult<Entry> {
        let change = ListWrite::Remove {
            name: name.into(),
            id,
        };
        match self.write_list(org, &change)? {
            ListWritten::Removed(entry) => Ok(entry),
            other => Err(unexpected(&other)),
        }
    }

    fn remove_entry_in(
        &self,
        txn: &mut RwTxn,
        org: &str,
        name: &str,
        id: u64,
    ) -> ListResult<Entry> {
        let tables = self.list_tables();
        let mut record = self.list_record(txn, org, name)?;
        let key = entry_key(org, name, id);
        let entry = tables
            .entries
            .get(txn, &key)?
            .ok_or_else(|| ListError::NotFound(format!("no entry {id} in list '{name}'")))?;
        tables.entries.delete(txn, &key)?;
        tables
            .hashes
            .delete(txn, &hash_key(org, name, &entry.hash))?;
        tables.removals.put(
            txn,
            &entry_key(org, name, record.removals),
            &id.to_be_bytes(),
        )?;
        record.entries -= 1;
        record.removals += 1;
        tables.lists.put(txn, &list_key(org, name), &record)?;
        Ok(entry)
    }

    /// The last revision of a fleet's list log applied here; `None` for a store whose lists
    /// never followed one.
    pub fn list_revision(&self) -> ListResult<Option<i64>> {
        Ok(self.list_position()?.revision)
    }

    /// Where the store is in a fleet's list log, read in one transaction.
    pub fn list_position(&self) -> ListResult<ListPosition> {
        let txn = self.env().read_txn()?;
        self.list_position_in(&txn)
    }

    fn list_position_in(&self, txn: &RoTxn) -> ListResult<ListPosition> {
        let number = |key: &str| -> ListResult<Option<i64>> {
            Ok(self
                .meta
                .get(txn, key)?
                .and_then(|bytes| <[u8; 8]>::try_from(bytes).ok())
                .map(i64::from_le_bytes))
        };
        Ok(ListPosition {
            revision: number(LIST_REVISION)?,
            mark: number(LIST_MARK)?,
        })
    }

    /// Drops every list and sets the list revision to 0 (a store about to replay a fleet's
    /// list log from its start), if the store is still at `seen`; returns whether it did. The
    /// check and the reset are one transaction, so a replay that moved the store meanwhile is
    /// never wiped on the strength of an older reading. The lists get a new epoch: the same
    /// lists replayed again (same uids, same ids) are new lists to the lists follower.
    pub fn reset_lists_if(&self, seen: ListPosition) -> ListResult<bool> {
        let tables = self.list_tables();
        let mut txn = self.env().write_txn()?;
        if self.list_position_in(&txn)? != seen {
            return Ok(false);
        }
        tables.lists.clear(&mut txn)?;
        tables.entries.clear(&mut txn)?;
        tables.hashes.clear(&mut txn)?;
        tables.removals.clear(&mut txn)?;
        self.meta
            .put(&mut txn, LIST_REVISION, &0i64.to_le_bytes())?;
        self.meta.delete(&mut txn, LIST_MARK)?;
        let mut epoch = [0u8; 8];
        getrandom::fill(&mut epoch)
            .map_err(|error| ListError::Store(anyhow::anyhow!("drawing a lists epoch: {error}")))?;
        self.meta.put(&mut txn, LISTS_EPOCH, &epoch)?;
        txn.commit()?;
        Ok(true)
    }

    /// Applies the changes of a fleet's list log (in revision order) that come after revision
    /// `after`, in one transaction, if the store is still at `after`; returns the revision the
    /// store is at (the last applied, or where another replay had taken it: the caller goes on
    /// from there). Each change is all or none (a nested transaction). A change the store
    /// refuses (it was refused alike where it was written, or a build that decides otherwise
    /// wrote it), or one this build cannot read (`None`), is logged and passed over, alike on
    /// every node. Two replays at once (a node's follower and its writer, or the CLI) thus
    /// apply each change once, in order, and never onto lists another replay has just reset.
    pub fn apply_list_log(&self, after: i64, log: &[LoggedWrite]) -> ListResult<i64> {
        let mut txn = self.env().write_txn()?;
        let stored = self.list_position_in(&txn)?.revision.unwrap_or(0);
        if stored != after {
            return Ok(stored);
        }
        let mut applied = after;
        let mut mark = None;
        for LoggedWrite {
            revision,
            mark: row_mark,
            org,
            change,
        } in log
        {
            if *revision <= applied {
                continue;
            }
            applied = *revision;
            mark = Some(*row_mark);
            let Some(change) = change else {
                tracing::error!(
                    revision,
                    org,
                    "a change of the fleet's list log cannot be read by this build: passed over"
                );
                continue;
            };
            let mut nested = self.env().nested_write_txn(&mut txn)?;
            match self.apply_list_write(&mut nested, org, change) {
                Ok(_) => nested.commit()?,
                Err(ListError::Store(error)) => return Err(ListError::Store(error)),
                Err(refused) => {
                    drop(nested);
                    tracing::warn!(
                        revision,
                        org,
                        list = change.list_name(),
                        reason = %refused,
                        "a change of the fleet's list log was refused here and passed over"
                    );
                }
            }
        }
        if let Some(mark) = mark {
            self.meta
                .put(&mut txn, LIST_REVISION, &applied.to_le_bytes())?;
            self.meta.put(&mut txn, LIST_MARK, &mark.to_le_bytes())?;
            txn.commit()?;
        }
        Ok(applied)
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

/// A write answered with another kind of outcome than it asked for: a bug, reported as a store
/// failure rather than a panic.
fn unexpected(written: &ListWritten) -> ListError {
    ListError::Store(anyhow::anyhow!("a list write answered {written:?}"))
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

    /// What a list holds, as comparable rows: record and entries.
    fn contents(store: &Store, name: &str) -> (ListRecord, Vec<Entry>) {
        store.list_since("acme", name, 0).unwrap()
    }

    #[test]
    fn a_replayed_log_gives_every_store_the_same_lists_once() {
        let (_a, a) = store_with_org();
        let (_b, b) = store_with_org();
        let create =
            ListWrite::create("known", ListKind::Block, ListContent::Image, 31, 5).unwrap();
        let full = |n: u8| ListWrite::Add {
            name: "known".into(),
            entries: (0..n).map(pdq_entry).collect(),
            added_ms: 7,
        };
        let log = logged(vec![
            Some(create.clone()),
            Some(full(3)),
            // Refused alike everywhere (the list exists): passed over.
            Some(create),
            Some(ListWrite::Remove {
                name: "known".into(),
                id: 2,
            }),
            // Unreadable by this build: passed over.
            None,
            Some(full(5)),
        ]);
        assert_eq!(a.list_revision().unwrap(), None);
        assert_eq!(a.apply_list_log(0, &log).unwrap(), 6);
        assert_eq!(a.list_position().unwrap().mark, Some(600));
        // In two parts, the second read before the first was applied: the same lists.
        assert_eq!(b.apply_list_log(0, &log[..3]).unwrap(), 3);
        // A replay that read from an older position applies nothing, and learns where the
        // store is.
        assert_eq!(b.apply_list_log(0, &log).unwrap(), 3);
        assert_eq!(b.apply_list_log(3, &log).unwrap(), 6);
        let (record, entries) = contents(&a, "known");
        assert_eq!(contents(&b, "known"), (record.clone(), entries.clone()));
        assert_eq!((record.entries, record.next_id, record.removals), (5, 7, 1));
        // The hash removed at revision 4 came back at 6 under a new id (4).
        assert_eq!(
            entries.iter().map(|e| e.id).collect::<Vec<_>>(),
            [1, 3, 4, 5, 6]
        );
        // A reset only from the position it was decided on; it draws a new epoch.
        let at = a.list_position().unwrap();
        let epoch = a.all_lists_read().unwrap().epoch;
        assert!(!a.reset_lists_if(ListPosition::default()).unwrap());
        assert_eq!(a.all_lists().unwrap().len(), 1);
        assert!(a.reset_lists_if(at).unwrap());
        assert!(a.all_lists().unwrap().is_empty());
        assert_eq!(
            a.list_position().unwrap(),
            ListPosition {
                revision: Some(0),
                mark: None
            }
        );
        assert_ne!(a.all_lists_read().unwrap().epoch, epoch);
    }

    /// Changes as a log holds them: revisions from 1, marks 100 apart.
    fn logged(changes: Vec<Option<ListWrite>>) -> Vec<LoggedWrite> {
        changes
            .into_iter()
            .enumerate()
            .map(|(at, change)| LoggedWrite {
                revision: at as i64 + 1,
                mark: (at as i64 + 1) * 100,
                org: "acme".into(),
                change,
            })
            .collect()
    }

    #[test]
    fn a_change_refused_half_way_leaves_nothing_of_itself() {
        let (_dir, store) = store_with_org();
        let log = logged(vec![
            Some(ListWrite::create("known", ListKind::Block, ListContent::Image, 31, 0).unwrap()),
            // Two hashes, then a term: refused after the hashes were written.
            Some(ListWrite::Add {
                name: "known".into(),
                entries: vec![
                    pdq_entry(1),
                    pdq_entry(2),
                    NewEntry {
                        hash: EntryHash::term("grapefruit").unwrap(),
                        label: None,
                        caller_id: None,
                    },
                ],
                added_ms: 0,
            }),
            Some(ListWrite::Add {
                name: "known".into(),
                entries: vec![pdq_entry(9)],
                added_ms: 0,
            }),
        ]);
        assert_eq!(store.apply_list_log(0, &log).unwrap(), 3);
        let (record, entries) = contents(&store, "known");
        assert_eq!((record.entries, record.next_id), (1, 2));
        assert_eq!(entries[0].hash, pdq_entry(9).hash);
        assert_eq!(
            store
                .entry_with_hash("acme", "known", &pdq_entry(1).hash)
                .unwrap(),
            None
        );
    }

    #[test]
    fn a_dry_run_answers_and_changes_nothing() {
        let (_dir, store) = store_with_org();
        store
            .create_list("acme", "known", ListKind::Block, ListContent::Image, 31, 0)
            .unwrap();
        let add = ListWrite::Add {
            name: "known".into(),
            entries: vec![pdq_entry(1)],
            added_ms: 0,
        };
        let tried = store.try_list_write("acme", &add).unwrap();
        assert!(tried.changed());
        assert_eq!(store.list("acme", "known").unwrap().entries, 0);
        assert_eq!(store.write_list("acme", &add).unwrap(), tried);
        let again = store.try_list_write("acme", &add).unwrap();
        assert!(!again.changed(), "{again:?}");
    }
}
