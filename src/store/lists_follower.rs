//! The compiled lists every shard matches against, kept up to date with the store by one
//! thread of the process.
//!
//! The follower polls the store's last transaction id every [`POLL_MS`]; when it moved, it
//! reads the list records and, for each list that changed, reads what is new: the entries
//! appended since it last read the list and the ids removed since (two range scans,
//! [`CompiledList::appended`], [`CompiledList::without`]), or, for a list deleted and made
//! again, the whole list. The new set of compiled
//! lists is published under a new generation; a shard compares the generation (one atomic
//! load) before it uses its own copy of the set, so an added entry is matched by every shard
//! within [`POLL_MS`] plus the time to read it, and a shard never waits for the follower.
//!
//! Compiling a list of a million PDQ hashes takes 1.7 s (`cargo bench --bench lists --
//! compile`): a list pays it when it is read whole (at start, or when made again) and once per
//! [`crate::lists::DELTA_MAX`] additions or removals, which are otherwise matched as they come.

use std::cell::{Cell, RefCell};
use std::collections::BTreeMap;
use std::sync::atomic::{AtomicU64, Ordering};
use std::sync::{Arc, Mutex, Weak};
use std::time::Duration;

use super::lists::ListRecord;
use super::Store;
use crate::hash::FastMap;
use crate::lists::CompiledList;

/// How often the follower looks for changes.
pub const POLL_MS: u64 = 100;

/// Lists by organization, then by name (looked up by `&str` on the request path, no
/// allocation).
pub type ListSet = FastMap<String, FastMap<String, Arc<CompiledList>>>;

/// What the follower publishes: the compiled lists and their generation.
pub struct ListsHub {
    generation: AtomicU64,
    lists: Mutex<Arc<ListSet>>,
}

impl ListsHub {
    fn publish(&self, lists: ListSet) {
        let mut held = self
            .lists
            .lock()
            .unwrap_or_else(|poisoned| poisoned.into_inner());
        *held = Arc::new(lists);
        self.generation.fetch_add(1, Ordering::Release);
    }

    fn current(&self) -> (u64, Arc<ListSet>) {
        // The generation is read before the set: a set newer than its label is only read
        // again at the next change, never missed.
        let generation = self.generation.load(Ordering::Acquire);
        let held = self
            .lists
            .lock()
            .unwrap_or_else(|poisoned| poisoned.into_inner());
        (generation, held.clone())
    }
}

/// What the follower knows of a list it compiled.
struct Compiled {
    record: ListRecord,
    compiled: Arc<CompiledList>,
}

/// What the follower knows of the store's lists.
#[derive(Default)]
struct Followed {
    /// The lists' epoch when they were read ([`crate::store::lists::ListsRead::epoch`]).
    epoch: Option<Vec<u8>>,
    lists: BTreeMap<(String, String), Compiled>,
}

/// Compiles every list of the store, publishes them, and starts the thread that follows the
/// store; the thread ends when the last [`ListsView`] and the returned hub are dropped.
pub fn start(store: Store) -> anyhow::Result<Arc<ListsHub>> {
    let hub = Arc::new(ListsHub {
        generation: AtomicU64::new(0),
        lists: Mutex::new(Arc::default()),
    });
    let mut followed = Followed::default();
    let mut seen_txn = refresh(&store, &mut followed, &hub)?;
    let weak: Weak<ListsHub> = Arc::downgrade(&hub);
    std::thread::Builder::new()
        .name("modgate-lists".into())
        .spawn(move || loop {
            std::thread::sleep(Duration::from_millis(POLL_MS));
            let Some(hub) = weak.upgrade() else {
                return;
            };
            // What was read, not what LMDB's meta page said before the read: a commit's
            // meta page is written a moment before new readers see its snapshot, so a read
            // begun in between is older than the id the poll saw, and would be taken for it
            // until the next commit.
            if store.last_txn_id() == seen_txn {
                continue;
            }
            match refresh(&store, &mut followed, &hub) {
                Ok(read) => seen_txn = read,
                Err(error) => tracing::error!(%error, "reading the lists failed; retrying"),
            }
        })?;
    Ok(hub)
}

/// Brings `followed` up to the store and publishes it if anything changed; returns the id of
/// the transaction the list records were read in.
fn refresh(store: &Store, followed: &mut Followed, hub: &ListsHub) -> anyhow::Result<usize> {
    let read = store.all_lists_read()?;
    let records = read.records;
    // Lists reset and replayed (a fleet node following a restored log) come back with the
    // same uids and ids but other entries: every list is read whole again.
    let mut changed = read.epoch != followed.epoch;
    if changed {
        followed.lists.clear();
        followed.epoch = read.epoch;
    }
    let followed = &mut followed.lists;
    changed |= records.len() != followed.len();
    let mut next = BTreeMap::new();
    for record in records {
        let key = (record.org.clone(), record.name.clone());
        let compiled = match followed.remove(&key) {
            Some(known) if known.record == record => known.compiled,
            Some(known)
                if known.record.kind == record.kind
                    && known.record.content == record.content
                    && known.record.distance_max == record.distance_max
                    && known.record.uid == record.uid =>
            {
                changed = true;
                // Removals first: an entry removed and its hash added again is then never
                // shadowed by the removed one in a rebuild.
                let mut compiled = known.compiled;
                if record.removals != known.record.removals {
                    let removed =
                        store.removed_since(&record.org, &record.name, known.record.removals)?;
                    compiled = Arc::new(compiled.without(&removed));
                }
                let after = compiled.last_id().unwrap_or(0);
                let (_, appended) = store.list_since(&record.org, &record.name, after)?;
                Arc::new(compiled.appended(appended))
            }
            _ => {
                changed = true;
                let (_, entries) = store.list_since(&record.org, &record.name, 0)?;
                Arc::new(CompiledList::new(
                    &record.name,
                    record.kind,
                    record.distance_max,
                    entries,
                ))
            }
        };
        next.insert(key, Compiled { record, compiled });
    }
    *followed = next;
    if changed {
        let mut set = ListSet::default();
        for ((org, name), known) in followed.iter() {
            set.entry(org.clone())
                .or_default()
                .insert(name.clone(), known.compiled.clone());
        }
        hub.publish(set);
    }
    Ok(read.txn_id)
}

/// A shard's copy of the compiled lists, refreshed when the follower publishes.
pub struct ListsView {
    hub: Arc<ListsHub>,
    generation: Cell<u64>,
    lists: RefCell<Arc<ListSet>>,
}

impl ListsView {
    pub fn new(hub: Arc<ListsHub>) -> ListsView {
        let (generation, lists) = hub.current();
        ListsView {
            hub,
            generation: Cell::new(generation),
            lists: RefCell::new(lists),
        }
    }

    /// The lists of `org` named `names` (those it has).
    pub fn of(&self, org: &str, names: &[String]) -> Vec<Arc<CompiledList>> {
        if names.is_empty() {
            return Vec::new();
        }
        if self.hub.generation.load(Ordering::Acquire) != self.generation.get() {
            let (generation, lists) = self.hub.current();
            self.generation.set(generation);
            *self.lists.borrow_mut() = lists;
        }
        let lists = self.lists.borrow();
        names
            .iter()
            .filter_map(|name| lists.get(org)?.get(name.as_str()).cloned())
            .collect()
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::image::hashes::{ImageHashes, Pdq};
    use crate::lists::{EntryHash, ListContent, ListKind};
    use crate::store::lists::NewEntry;

    fn probe(byte: u8) -> ImageHashes {
        ImageHashes {
            pdq: Some((Pdq([byte; 32]), 100)),
            pdq_tool: None,
            md5: [0; 16],
            sha256: [0; 32],
        }
    }

    fn add(store: &Store, byte: u8) {
        let entry = NewEntry {
            hash: EntryHash::Pdq(Pdq([byte; 32])),
            label: None,
            caller_id: None,
        };
        store.add_entries("acme", "known", &[entry], 0).unwrap();
    }

    fn matched(view: &ListsView, byte: u8) -> bool {
        view.of("acme", &["known".into()])
            .iter()
            .any(|list| list.lookup(&probe(byte)).is_some())
    }

    fn eventually(what: impl Fn() -> bool) -> bool {
        (0..50).any(|_| {
            if what() {
                return true;
            }
            std::thread::sleep(Duration::from_millis(POLL_MS));
            false
        })
    }

    #[test]
    fn shards_see_additions_removals_and_deletions() {
        let (_dir, store) = crate::store::test_store_with_org();
        store
            .create_list("acme", "known", ListKind::Block, ListContent::Image, 31, 0)
            .unwrap();
        add(&store, 1);
        let hub = start(store.clone()).unwrap();
        let view = ListsView::new(hub.clone());
        assert!(matched(&view, 1), "compiled at start");
        assert!(view.of("acme", &["other".into()]).is_empty());
        assert!(view.of("acme2", &["known".into()]).is_empty());
        add(&store, 2);
        assert!(eventually(|| matched(&view, 2)), "an addition");
        assert!(matched(&view, 1));
        store.remove_entry("acme", "known", 1).unwrap();
        assert!(eventually(|| !matched(&view, 1)), "a removal");
        assert!(matched(&view, 2));
        store.delete_list("acme", "known").unwrap();
        assert!(eventually(|| view.of("acme", &["known".into()]).is_empty()));
    }

    #[test]
    fn lists_replayed_after_a_reset_are_read_whole() {
        use crate::store::lists::{ListWrite, LoggedWrite};
        let (_dir, store) = crate::store::test_store_with_org();
        let create =
            ListWrite::create("known", ListKind::Block, ListContent::Image, 31, 0).unwrap();
        let add = |byte: u8| ListWrite::Add {
            name: "known".into(),
            entries: vec![NewEntry {
                hash: EntryHash::Pdq(Pdq([byte; 32])),
                label: None,
                caller_id: None,
            }],
            added_ms: 0,
        };
        let log = |changes: Vec<ListWrite>| -> Vec<LoggedWrite> {
            changes
                .into_iter()
                .enumerate()
                .map(|(at, change)| LoggedWrite {
                    revision: at as i64 + 1,
                    mark: 1,
                    org: "acme".into(),
                    change: Some(change),
                })
                .collect()
        };
        store
            .apply_list_log(0, &log(vec![create.clone(), add(1)]))
            .unwrap();
        let hub = start(store.clone()).unwrap();
        let view = ListsView::new(hub.clone());
        assert!(matched(&view, 1));
        // A restored log: the same list (same uid), another hash under the same entry id.
        let at = store.list_position().unwrap();
        assert!(store.reset_lists_if(at).unwrap());
        store.apply_list_log(0, &log(vec![create, add(2)])).unwrap();
        assert!(eventually(|| matched(&view, 2)), "the replayed entry");
        assert!(!matched(&view, 1), "the entry the restore took away");
    }
}
