//! The store: the control plane in one LMDB environment (`<data>/store`).
//!
//! It holds organizations, plans, keys (hashes only), workflows with their versions (and every
//! version a workflow had, for the decisions made under it) and the organizations' hash lists
//! ([`lists`]). Their feedback on checks ([`feedback`]) is in an environment of its own beside
//! it (`<data>/feedback`): a write there moves no transaction id the shards' caches watch, so
//! a review tool's stream of feedback never empties them. The
//! admin CLI writes it, in its own process, while the server runs; LMDB's lock file serialises
//! writers and readers never block. The server reads through a per-shard [`view::StoreView`]
//! that caches records and drops its cache whenever LMDB's last committed transaction id
//! moves, so a change made by the CLI is seen by the very next request.
//!
//! Layout: one named database per record type, keyed by name or id, values in bincode.
//! `meta` holds the schema version.

pub mod admin;
pub mod feedback;
pub mod keys;
pub mod lists;
pub mod lists_follower;
pub mod records;
pub mod replica;
pub mod view;

use std::path::{Path, PathBuf};

use anyhow::{bail, Context};
use heed::types::{Bytes, SerdeBincode, Str};
use heed::{Database, Env, EnvOpenOptions};

use records::{KeyRecord, OrgRecord, PlanLimits};

/// The store's map size: a ceiling on the file's growth, not an allocation.
pub const STORE_MAP_BYTES: usize = 16 << 30;
/// The feedback environment's map size (a record is about 100 bytes and a label).
pub const FEEDBACK_MAP_BYTES: usize = 16 << 30;
/// Reader slots: one per thread that reads (shards and CLI processes).
pub const STORE_READERS_MAX: u32 = 1024;
const SCHEMA_VERSION: &[u8] = b"1";

#[derive(Clone)]
pub struct Store {
    env: Env,
    path: PathBuf,
    pub(crate) orgs: Database<Str, SerdeBincode<OrgRecord>>,
    pub(crate) plans: Database<Str, crate::codec::GrownCodec<PlanLimits>>,
    pub(crate) keys: Database<Str, SerdeBincode<KeyRecord>>,
    pub(crate) workflows: Database<Str, records::WorkflowCodec>,
    /// Every version of every workflow, keyed by [`records::workflow_version_key`].
    pub(crate) workflow_versions: Database<Str, records::WorkflowCodec>,
    /// The feedback's environment (`<data>/feedback`) and its one database.
    pub(crate) feedback_env: Env,
    pub(crate) feedback: Database<Str, SerdeBincode<records::FeedbackRecord>>,
    pub(crate) meta: Database<Str, Bytes>,
    pub(crate) list_tables: records::ListTables,
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
            .max_dbs(16)
            .max_readers(STORE_READERS_MAX);
        // SAFETY: heed's `open` is unsafe because the memory map would be undefined behaviour
        // if the file were changed outside LMDB's locking. The store is written only through
        // LMDB (this process and the CLI, both through heed with the default lock file), it
        // lives on a local filesystem (documented), and heed guards against opening the same
        // environment twice in one process.
        let env = unsafe { options.open(&path) }
            .with_context(|| format!("opening the store at {}", path.display()))?;
        let (feedback_env, feedback) = open_feedback(data_dir)?;
        let mut txn = env.write_txn()?;
        let store = Store {
            orgs: env.create_database(&mut txn, Some("orgs"))?,
            plans: env.create_database(&mut txn, Some("plans"))?,
            keys: env.create_database(&mut txn, Some("keys"))?,
            workflows: env.create_database(&mut txn, Some("workflows"))?,
            workflow_versions: env.create_database(&mut txn, Some("workflow_versions"))?,
            feedback_env: feedback_env.clone(),
            feedback,
            meta: env.create_database(&mut txn, Some("meta"))?,
            list_tables: records::ListTables {
                lists: env.create_database(&mut txn, Some("lists"))?,
                entries: env.create_database(&mut txn, Some("list_entries"))?,
                hashes: env.create_database(&mut txn, Some("list_hashes"))?,
                removals: env.create_database(&mut txn, Some("list_removals"))?,
            },
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

    /// The feedback's environment ([`feedback`]).
    pub fn feedback_env(&self) -> &Env {
        &self.feedback_env
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

/// Opens (creating) the feedback's environment under `data_dir`.
fn open_feedback(
    data_dir: &Path,
) -> anyhow::Result<(Env, Database<Str, SerdeBincode<records::FeedbackRecord>>)> {
    let path = data_dir.join("feedback");
    std::fs::create_dir_all(&path)
        .with_context(|| format!("creating the feedback directory {}", path.display()))?;
    let mut options = EnvOpenOptions::new();
    options
        .map_size(FEEDBACK_MAP_BYTES)
        .max_dbs(1)
        .max_readers(STORE_READERS_MAX);
    // SAFETY: as for the store above: written only through LMDB (this process and the CLI,
    // through heed with the default lock file), on a local filesystem, opened once per
    // process (by `Store::open`, itself called once).
    let env = unsafe { options.open(&path) }
        .with_context(|| format!("opening the feedback at {}", path.display()))?;
    let mut txn = env.write_txn()?;
    let db = env.create_database(&mut txn, Some("feedback"))?;
    txn.commit()?;
    Ok((env, db))
}

/// A store in a temporary directory with one plan (`free`) and one organization (`acme`).
#[cfg(test)]
pub(crate) fn test_store_with_org() -> (tempfile::TempDir, Store) {
    let dir = tempfile::tempdir().expect("tempdir");
    let store = Store::open(dir.path()).expect("store");
    let plan = PlanLimits {
        text_chars_max: 1,
        image_pixels_max: 1,
        rate_per_s: 1,
        rate_burst: 1,
        concurrent_max: 1,
        quota_per_month: 1,
        keys_max: 5,
        paid: false,
        engine_down: Default::default(),
        quota_counts: Default::default(),
    };
    store
        .put_plans(&std::collections::BTreeMap::from([(
            "free".to_owned(),
            plan,
        )]))
        .expect("plans");
    store.create_org("acme", "free", 0).expect("org");
    (dir, store)
}
