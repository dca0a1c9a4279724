//! A shard's read view of the store: records cached in the shard, dropped on any change.
//!
//! Every request starts with [`StoreView::sync`], which compares LMDB's last committed
//! transaction id with the one the cache was filled under (a read of the meta page, no
//! transaction, no lock, no write to shared memory). If any process has committed since, the
//! whole cache is dropped and records are read again as requests need them. Changes are rare
//! (the CLI), requests are many: in the steady state a request reads no LMDB page at all.
//!
//! Invariant: a cached record is never older than the transaction id it is labelled with,
//! because the id is read before the records.

use std::cell::{Cell, RefCell};
use std::collections::BTreeMap;
use std::rc::Rc;

use super::records::{KeyRecord, OrgRecord, PlanLimits, WorkflowRecord};
use super::Store;
use crate::hash::FastMap;

/// Records a shard keeps before it starts over (bounds the cache's memory).
pub const CACHED_RECORDS_MAX: usize = 100_000;

/// An organization with its effective limits (plan plus overrides).
#[derive(Debug)]
pub struct OrgEntry {
    pub record: OrgRecord,
    pub limits: PlanLimits,
}

pub type Workflows = BTreeMap<String, Rc<WorkflowRecord>>;

pub struct StoreView {
    store: Store,
    /// The transaction id the cache was filled under.
    seen_txn_id: Cell<usize>,
    keys: RefCell<FastMap<String, Rc<KeyRecord>>>,
    orgs: RefCell<FastMap<String, Rc<OrgEntry>>>,
    workflows: RefCell<Option<Rc<Workflows>>>,
}

impl StoreView {
    pub fn new(store: Store) -> Self {
        StoreView {
            store,
            seen_txn_id: Cell::new(usize::MAX),
            keys: RefCell::default(),
            orgs: RefCell::default(),
            workflows: RefCell::default(),
        }
    }

    pub fn store(&self) -> &Store {
        &self.store
    }

    /// Drops the cache if the store changed since it was filled.
    pub fn sync(&self) {
        let txn_id = self.store.last_txn_id();
        if txn_id != self.seen_txn_id.get() {
            self.keys.borrow_mut().clear();
            self.orgs.borrow_mut().clear();
            self.workflows.borrow_mut().take();
            self.seen_txn_id.set(txn_id);
        }
    }

    /// A read transaction for filling the cache. LMDB writes a commit's meta page (what
    /// [`Store::last_txn_id`] reads) a moment before new readers get its snapshot: a read begun
    /// in between is older than the id [`StoreView::sync`] saw. Such a read lowers the id the
    /// cache counts as filled under, so the next sync drops what it cached, instead of keeping
    /// (say) a key revoked by that commit until the next one.
    fn read_txn(&self) -> heed::Result<heed::RoTxn<'_, heed::WithTls>> {
        let txn = self.store.env().read_txn()?;
        if txn.id() < self.seen_txn_id.get() {
            self.seen_txn_id.set(txn.id());
        }
        Ok(txn)
    }

    pub fn key(&self, id: &str) -> heed::Result<Option<Rc<KeyRecord>>> {
        if let Some(record) = self.keys.borrow().get(id) {
            return Ok(Some(record.clone()));
        }
        let txn = self.read_txn()?;
        let Some(record) = self.store.keys.get(&txn, id)? else {
            return Ok(None);
        };
        let record = Rc::new(record);
        insert_bounded(&mut self.keys.borrow_mut(), id, record.clone());
        Ok(Some(record))
    }

    pub fn org(&self, name: &str) -> heed::Result<Option<Rc<OrgEntry>>> {
        if let Some(entry) = self.orgs.borrow().get(name) {
            return Ok(Some(entry.clone()));
        }
        let txn = self.read_txn()?;
        let Some(record) = self.store.orgs.get(&txn, name)? else {
            return Ok(None);
        };
        let Some(plan) = self.store.plans.get(&txn, &record.plan)? else {
            return Ok(None);
        };
        let limits = record.overrides.apply(&plan);
        let entry = Rc::new(OrgEntry { record, limits });
        insert_bounded(&mut self.orgs.borrow_mut(), name, entry.clone());
        Ok(Some(entry))
    }

    /// Every workflow, by name.
    pub fn workflows(&self) -> heed::Result<Rc<Workflows>> {
        if let Some(workflows) = self.workflows.borrow().as_ref() {
            return Ok(workflows.clone());
        }
        let txn = self.read_txn()?;
        let mut workflows = Workflows::new();
        for entry in self.store.workflows.iter(&txn)? {
            let (name, record) = entry?;
            workflows.insert(name.to_owned(), Rc::new(record));
        }
        let workflows = Rc::new(workflows);
        *self.workflows.borrow_mut() = Some(workflows.clone());
        Ok(workflows)
    }
}

fn insert_bounded<V>(map: &mut FastMap<String, V>, key: &str, value: V) {
    if map.len() >= CACHED_RECORDS_MAX {
        map.clear();
    }
    map.insert(key.to_owned(), value);
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::store::records::{Scopes, WorkflowAccess};

    #[test]
    fn a_change_by_another_handle_is_seen_at_the_next_sync() {
        let (_dir, store) = crate::store::test_store_with_org();
        let issued = store
            .create_key("acme", Scopes::CHECKS, WorkflowAccess::All, None, 0)
            .unwrap();
        let view = StoreView::new(store.clone());
        view.sync();
        let cached = view.key(&issued.record.id).unwrap().unwrap();
        assert_eq!(cached.revoked_ms, None);
        store.revoke_key(&issued.record.id, 5).unwrap();
        // Without a sync the cache answers; after it, the revocation shows.
        assert_eq!(
            view.key(&issued.record.id).unwrap().unwrap().revoked_ms,
            None
        );
        view.sync();
        assert_eq!(
            view.key(&issued.record.id).unwrap().unwrap().revoked_ms,
            Some(5)
        );
        assert!(view.key("AAAAAAAAAAAA").unwrap().is_none());
        assert_eq!(view.org("acme").unwrap().unwrap().limits.keys_max, 5);
    }
}
