//! The store: the control plane in one LMDB environment (`<data>/store`).
//!
//! It holds organizations, plans, keys (hashes only) and workflows with their versions. The
//! admin CLI writes it, in its own process, while the server runs; LMDB's lock file serialises
//! writers and readers never block. The server reads through a per-shard [`view::StoreView`]
//! that caches records and drops its cache whenever LMDB's last committed transaction id
//! moves, so a change made by the CLI is seen by the very next request.
//!
//! Layout: one named database per record type, keyed by name or id, values in bincode.
//! `meta` holds the schema version.

pub mod admin;
pub mod keys;
pub mod records;
pub mod replica;
pub mod view;

use std::path::{Path, PathBuf};

use anyhow::{bail, Context};
use heed::types::{Bytes, SerdeBincode, Str};
use heed::{Database, Env, EnvOpenOptions};

use records::{KeyRecord, OrgRecord, PlanLimits, WorkflowRecord};

/// The store's map size: a ceiling on the file's growth, not an allocation.
pub const STORE_MAP_BYTES: usize = 1 << 30;
/// Reader slots: one per thread that reads (shards and CLI processes).
pub const STORE_READERS_MAX: u32 = 1024;
const SCHEMA_VERSION: &[u8] = b"1";

#[derive(Clone)]
pub struct Store {
    env: Env,
    path: PathBuf,
    pub(crate) orgs: Database<Str, SerdeBincode<OrgRecord>>,
    pub(crate) plans: Database<Str, SerdeBincode<PlanLimits>>,
    pub(crate) keys: Database<Str, SerdeBincode<KeyRecord>>,
    pub(crate) workflows: Database<Str, SerdeBincode<WorkflowRecord>>,
    pub(crate) meta: Database<Str, Bytes>,
}

impl Store {
    /// Opens (creating if needed) the store under `data_dir`.
    pub fn open(data_dir: &Path) -> anyhow::Result<Store> {
        let path = data_dir.join("store");
        std::fs::create_dir_all(&path)
            .with_context(|| format!("creating the store directory {}", path.display()))?;
        let mut options = EnvOpenOptions::new();
        options
            .map_size(STORE_MAP_BYTES)
            .max_dbs(8)
            .max_readers(STORE_READERS_MAX);
        // SAFETY: heed's `open` is unsafe because the memory map would be undefined behaviour
        // if the file were changed outside LMDB's locking. The store is written only through
        // LMDB (this process and the CLI, both through heed with the default lock file), it
        // lives on a local filesystem (documented), and heed guards against opening the same
        // environment twice in one process.
        let env = unsafe { options.open(&path) }
            .with_context(|| format!("opening the store at {}", path.display()))?;
        let mut txn = env.write_txn()?;
        let store = Store {
            orgs: env.create_database(&mut txn, Some("orgs"))?,
            plans: env.create_database(&mut txn, Some("plans"))?,
            keys: env.create_database(&mut txn, Some("keys"))?,
            workflows: env.create_database(&mut txn, Some("workflows"))?,
            meta: env.create_database(&mut txn, Some("meta"))?,
            env: env.clone(),
            path,
        };
        match store.meta.get(&txn, "schema")? {
            None => store.meta.put(&mut txn, "schema", SCHEMA_VERSION)?,
            Some(version) if version == SCHEMA_VERSION => {}
            Some(version) => bail!(
                "the store at {} has schema {}, this build reads schema {}",
                store.path.display(),
                String::from_utf8_lossy(version),
                String::from_utf8_lossy(SCHEMA_VERSION)
            ),
        }
        txn.commit()?;
        Ok(store)
    }

    pub fn env(&self) -> &Env {
        &self.env
    }

    pub fn path(&self) -> &Path {
        &self.path
    }

    /// The id of the last committed write transaction, read from LMDB's meta page without a
    /// transaction: it moves whenever any process commits a change.
    pub fn last_txn_id(&self) -> usize {
        self.env.info().last_txn_id
    }
}
