//! Writes to the store: what the dashboard would do, done by the admin CLI and at start-up.
//!
//! Every operation is one LMDB write transaction, so a concurrent reader sees all of it or
//! none of it. Rules enforced here, not in the CLI: organization and plan names, the plan's
//! number of keys (at creation and at rotation), the 0 to 24 h rotation grace, and workflow
//! versions.

use std::collections::BTreeMap;

use anyhow::{anyhow, bail, Context};

use super::keys::{self, NewKey};
use super::records;
use super::records::{
    KeyRecord, KeyState, OrgRecord, PlanLimits, PlanOverrides, Scopes, WorkflowAccess,
    WorkflowRecord,
};
use super::Store;
use crate::workflow::{self, WorkflowDef};

/// The longest rotation grace delay (`docs/interface.md#keys`).
pub use crate::bounds::ROTATION_GRACE_MS_MAX;
pub const ORG_NAME_BYTES_MAX: usize = 64;

pub fn validate_org_name(name: &str) -> anyhow::Result<()> {
    let ok = !name.is_empty()
        && name.len() <= ORG_NAME_BYTES_MAX
        && name
            .bytes()
            .all(|b| b.is_ascii_alphanumeric() || b"_.-".contains(&b));
    if !ok {
        bail!("invalid organization name '{name}': 1 to {ORG_NAME_BYTES_MAX} of [A-Za-z0-9_.-]");
    }
    Ok(())
}

/// What a key creation or rotation returns: the key (shown once) and its record.
pub struct IssuedKey {
    pub key: String,
    pub record: KeyRecord,
}

/// How a workflow fared in an import.
#[derive(Debug, PartialEq, Eq)]
pub struct ImportedWorkflow {
    pub name: String,
    pub version: u64,
    pub changed: bool,
}

impl Store {
    /// Writes the plans of the configuration, replacing plans of the same name.
    pub fn put_plans(&self, plans: &BTreeMap<String, PlanLimits>) -> anyhow::Result<()> {
        let mut txn = self.env().write_txn()?;
        for (name, limits) in plans {
            if self.plans.get(&txn, name)?.as_ref() != Some(limits) {
                self.plans.put(&mut txn, name, limits)?;
            }
        }
        txn.commit()?;
        Ok(())
    }

    /// Makes the store ready as `serve` makes a fresh one: the plans of `plans` and the shipped
    /// workflows it does not have yet. What it has is left as it is: the admin commands call
    /// this, and one run with another configuration than the server's must not rewrite the
    /// server's plans (`serve` itself writes its configuration's plans over the store's).
    /// Without it, a command run on a fresh data directory before the first `serve` knew no
    /// plan ("unknown plan 'pro'") and no workflow.
    pub fn initialise(
        &self,
        plans: &BTreeMap<String, PlanLimits>,
        now_ms: i64,
    ) -> anyhow::Result<()> {
        let mut txn = self.env().write_txn()?;
        for (name, limits) in plans {
            if self.plans.get(&txn, name)?.is_none() {
                self.plans.put(&mut txn, name, limits)?;
            }
        }
        txn.commit()?;
        self.add_missing_shipped_workflows(now_ms)?;
        Ok(())
    }

    pub fn plans(&self) -> anyhow::Result<Vec<(String, PlanLimits)>> {
        let txn = self.env().read_txn()?;
        let mut out = Vec::new();
        for entry in self.plans.iter(&txn)? {
            let (name, limits) = entry?;
            out.push((name.to_owned(), limits));
        }
        Ok(out)
    }

    pub fn create_org(&self, name: &str, plan: &str, now_ms: i64) -> anyhow::Result<OrgRecord> {
        validate_org_name(name)?;
        let mut txn = self.env().write_txn()?;
        if self.orgs.get(&txn, name)?.is_some() {
            bail!("organization '{name}' already exists");
        }
        if self.plans.get(&txn, plan)?.is_none() {
            bail!("unknown plan '{plan}'");
        }
        let record = OrgRecord {
            name: name.to_owned(),
            plan: plan.to_owned(),
            suspended: false,
            overrides: PlanOverrides::default(),
            created_ms: now_ms,
        };
        self.orgs.put(&mut txn, name, &record)?;
        txn.commit()?;
        Ok(record)
    }

    /// Applies `change` to an organization's record in one transaction.
    pub fn update_org(
        &self,
        name: &str,
        change: impl FnOnce(&mut OrgRecord) -> anyhow::Result<()>,
    ) -> anyhow::Result<OrgRecord> {
        let mut txn = self.env().write_txn()?;
        let mut record = self
            .orgs
            .get(&txn, name)?
            .ok_or_else(|| anyhow!("no organization '{name}'"))?;
        change(&mut record)?;
        if self.plans.get(&txn, &record.plan)?.is_none() {
            bail!("unknown plan '{}'", record.plan);
        }
        self.orgs.put(&mut txn, name, &record)?;
        txn.commit()?;
        Ok(record)
    }

    pub fn orgs(&self) -> anyhow::Result<Vec<OrgRecord>> {
        let txn = self.env().read_txn()?;
        let mut out = Vec::new();
        for entry in self.orgs.iter(&txn)? {
            out.push(entry?.1);
        }
        Ok(out)
    }

    pub fn org(&self, name: &str) -> anyhow::Result<Option<OrgRecord>> {
        let txn = self.env().read_txn()?;
        Ok(self.orgs.get(&txn, name)?)
    }

    /// Creates a key for `org`, within the plan's number of keys.
    pub fn create_key(
        &self,
        org: &str,
        scopes: Scopes,
        workflows: WorkflowAccess,
        expires_ms: Option<i64>,
        now_ms: i64,
    ) -> anyhow::Result<IssuedKey> {
        if !scopes.image && !scopes.text && !scopes.lists {
            bail!("a key needs at least one scope (image, text, lists)");
        }
        if expires_ms.is_some_and(|expires| expires <= now_ms) {
            bail!("the expiry is in the past");
        }
        let mut txn = self.env().write_txn()?;
        let org_record = self
            .orgs
            .get(&txn, org)?
            .ok_or_else(|| anyhow!("no organization '{org}'"))?;
        if let WorkflowAccess::Only(names) = &workflows {
            if names.is_empty() {
                bail!("the workflow list is empty (use 'all' or name at least one)");
            }
            for name in names {
                if self.workflows.get(&txn, name)?.is_none() {
                    bail!("unknown workflow '{name}'");
                }
            }
        }
        self.check_key_room(&txn, &org_record, None, now_ms)?;
        let new = self.unused_key(&txn)?;
        let record = KeyRecord {
            id: new.id.clone(),
            org: org.to_owned(),
            key_sha256: new.sha256,
            scopes,
            workflows,
            created_ms: now_ms,
            expires_ms,
            revoked_ms: None,
            grace_until_ms: None,
            rotated_to: None,
            rotated_from: None,
        };
        self.keys.put(&mut txn, &record.id, &record)?;
        txn.commit()?;
        Ok(IssuedKey {
            key: new.key,
            record,
        })
    }

    /// Replaces a usable key with a new one (same organization, scopes, workflows and expiry);
    /// the old key keeps working for `grace_ms` and counts toward the plan meanwhile.
    pub fn rotate_key(&self, id: &str, grace_ms: i64, now_ms: i64) -> anyhow::Result<IssuedKey> {
        if !(0..=ROTATION_GRACE_MS_MAX).contains(&grace_ms) {
            bail!("the grace delay must be between 0 and 24 hours");
        }
        let mut txn = self.env().write_txn()?;
        let mut old = self
            .keys
            .get(&txn, id)?
            .ok_or_else(|| anyhow!("no key '{id}'"))?;
        match old.state(now_ms) {
            KeyState::Active => {}
            KeyState::InGrace { .. } | KeyState::Retired => bail!("key '{id}' was already rotated"),
            state => bail!("key '{id}' is {} and cannot be rotated", state.name()),
        }
        let org_record = self
            .orgs
            .get(&txn, &old.org)?
            .ok_or_else(|| anyhow!("the key's organization '{}' is gone", old.org))?;
        // With a grace delay the old key still counts, so the new one needs room of its own;
        // without one, the new key takes the old key's place.
        let leaving = (grace_ms == 0).then_some(id);
        self.check_key_room(&txn, &org_record, leaving, now_ms)?;
        let new = self.unused_key(&txn)?;
        let record = KeyRecord {
            id: new.id.clone(),
            key_sha256: new.sha256,
            created_ms: now_ms,
            revoked_ms: None,
            grace_until_ms: None,
            rotated_to: None,
            rotated_from: Some(old.id.clone()),
            ..old.clone()
        };
        old.grace_until_ms = Some(now_ms + grace_ms);
        old.rotated_to = Some(record.id.clone());
        self.keys.put(&mut txn, &old.id, &old)?;
        self.keys.put(&mut txn, &record.id, &record)?;
        txn.commit()?;
        Ok(IssuedKey {
            key: new.key,
            record,
        })
    }

    pub fn revoke_key(&self, id: &str, now_ms: i64) -> anyhow::Result<KeyRecord> {
        let mut txn = self.env().write_txn()?;
        let mut record = self
            .keys
            .get(&txn, id)?
            .ok_or_else(|| anyhow!("no key '{id}'"))?;
        if record.revoked_ms.is_none() {
            record.revoked_ms = Some(now_ms);
            self.keys.put(&mut txn, id, &record)?;
        }
        txn.commit()?;
        Ok(record)
    }

    pub fn keys(&self, org: Option<&str>) -> anyhow::Result<Vec<KeyRecord>> {
        let txn = self.env().read_txn()?;
        let mut out = Vec::new();
        for entry in self.keys.iter(&txn)? {
            let (_, record) = entry?;
            if org.is_none_or(|org| record.org == org) {
                out.push(record);
            }
        }
        out.sort_by_key(|record| (record.org.clone(), record.created_ms));
        Ok(out)
    }

    fn check_key_room(
        &self,
        txn: &heed::RwTxn<'_>,
        org: &OrgRecord,
        leaving: Option<&str>,
        now_ms: i64,
    ) -> anyhow::Result<()> {
        let plan = self
            .plans
            .get(txn, &org.plan)?
            .ok_or_else(|| anyhow!("unknown plan '{}'", org.plan))?;
        let limits = org.overrides.apply(&plan);
        let mut usable = 0u32;
        for entry in self.keys.iter(txn)? {
            let (_, record) = entry?;
            if record.org == org.name
                && record.state(now_ms).usable()
                && Some(record.id.as_str()) != leaving
            {
                usable += 1;
            }
        }
        if usable >= limits.keys_max {
            bail!(
                "organization '{}' has {usable} usable keys, the most its plan allows ({}); \
                 revoke one first (keys in a rotation grace count)",
                org.name,
                limits.keys_max
            );
        }
        Ok(())
    }

    fn unused_key(&self, txn: &heed::RwTxn<'_>) -> anyhow::Result<NewKey> {
        // Ids are 71 bits of randomness; a collision is astronomically unlikely, but cheap to
        // rule out.
        for _ in 0..8 {
            let new = keys::generate().context("drawing a key from the OS random source")?;
            if self.keys.get(txn, &new.id)?.is_none() {
                return Ok(new);
            }
        }
        bail!("could not draw an unused key id")
    }

    /// Imports workflow definitions: new ones get version 1, changed ones their version + 1,
    /// unchanged ones keep theirs. Workflows not in `defs` are left alone.
    pub fn import_workflows(
        &self,
        defs: &BTreeMap<String, WorkflowDef>,
        now_ms: i64,
    ) -> anyhow::Result<Vec<ImportedWorkflow>> {
        let mut txn = self.env().write_txn()?;
        let mut report = Vec::new();
        for (name, def) in defs {
            workflow::validate_name(name).map_err(|error| anyhow!(error))?;
            let digest = workflow::digest(def);
            let existing = self.workflows.get(&txn, name)?;
            let (version, changed) = match &existing {
                Some(record) if record.digest == digest => (record.version, false),
                Some(record) => (record.version + 1, true),
                None => (1, true),
            };
            if changed {
                // A store from before versions were kept: the version being replaced is kept
                // first, so that the decisions made under it can still be explained.
                if let Some(old) = &existing {
                    let key = records::workflow_version_key(name, old.version);
                    if self.workflow_versions.get(&txn, &key)?.is_none() {
                        self.workflow_versions.put(&mut txn, &key, old)?;
                    }
                }
                let record = WorkflowRecord {
                    name: name.clone(),
                    version,
                    digest,
                    definition: def.clone(),
                    updated_ms: now_ms,
                };
                self.workflows.put(&mut txn, name, &record)?;
                self.workflow_versions.put(
                    &mut txn,
                    &records::workflow_version_key(name, version),
                    &record,
                )?;
            }
            report.push(ImportedWorkflow {
                name: name.clone(),
                version,
                changed,
            });
        }
        txn.commit()?;
        Ok(report)
    }

    /// Imports the shipped workflows the store does not have (all of them in a fresh store,
    /// and those a newer version added); one the store has is never overwritten. Returns the
    /// names imported.
    pub fn add_missing_shipped_workflows(&self, now_ms: i64) -> anyhow::Result<Vec<String>> {
        let existing = self.workflows()?;
        let mut defs = workflow::parse_workflows(workflow::SHIPPED_WORKFLOWS)
            .map_err(|error| anyhow!("shipped workflows: {error}"))?;
        defs.retain(|name, _| !existing.iter().any(|record| &record.name == name));
        if defs.is_empty() {
            return Ok(Vec::new());
        }
        self.import_workflows(&defs, now_ms)?;
        Ok(defs.into_keys().collect())
    }

    /// Version `version` of workflow `name`: the one kept, or the current one if it is that
    /// version (a store from before versions were kept has only the current one).
    pub fn workflow_version(
        &self,
        name: &str,
        version: u64,
    ) -> anyhow::Result<Option<WorkflowRecord>> {
        let txn = self.env().read_txn()?;
        if let Some(record) = self
            .workflow_versions
            .get(&txn, &records::workflow_version_key(name, version))?
        {
            return Ok(Some(record));
        }
        Ok(self
            .workflows
            .get(&txn, name)?
            .filter(|record| record.version == version))
    }

    pub fn workflows(&self) -> anyhow::Result<Vec<WorkflowRecord>> {
        let txn = self.env().read_txn()?;
        let mut out = Vec::new();
        for entry in self.workflows.iter(&txn)? {
            out.push(entry?.1);
        }
        Ok(out)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn limits(keys_max: u32) -> PlanLimits {
        PlanLimits {
            text_chars_max: 5000,
            image_pixels_max: 12_000_000,
            rate_per_s: 10,
            rate_burst: 20,
            concurrent_max: 4,
            quota_per_month: 1000,
            keys_max,
            paid: false,
            engine_down: Default::default(),
            quota_counts: Default::default(),
        }
    }

    fn store_with_org(keys_max: u32) -> (tempfile::TempDir, Store) {
        let dir = tempfile::tempdir().unwrap();
        let store = Store::open(dir.path()).unwrap();
        store
            .put_plans(&BTreeMap::from([("free".to_owned(), limits(keys_max))]))
            .unwrap();
        store.create_org("acme", "free", 0).unwrap();
        (dir, store)
    }

    #[test]
    fn initialising_adds_what_is_missing_and_changes_nothing_else() {
        let (_dir, store) = store_with_org(2);
        let configured = BTreeMap::from([
            ("free".to_owned(), limits(7)),
            ("pro".to_owned(), limits(9)),
        ]);
        store.initialise(&configured, 5).unwrap();
        // The plan the store had keeps its limits; the missing one is added.
        let plans = store.plans().unwrap();
        assert_eq!(
            plans,
            vec![
                ("free".to_owned(), limits(2)),
                ("pro".to_owned(), limits(9))
            ]
        );
        let shipped = workflow::parse_workflows(workflow::SHIPPED_WORKFLOWS).unwrap();
        let names: Vec<String> = store
            .workflows()
            .unwrap()
            .into_iter()
            .map(|record| record.name)
            .collect();
        assert_eq!(names, shipped.into_keys().collect::<Vec<_>>());
        let versions = |store: &Store| -> Vec<u64> {
            let records = store.workflows().unwrap();
            records.iter().map(|record| record.version).collect()
        };
        let before = versions(&store);
        store.initialise(&configured, 6).unwrap();
        assert_eq!(versions(&store), before);
        assert_eq!(store.plans().unwrap(), plans);
    }

    #[test]
    fn key_count_is_enforced_at_creation_and_rotation() {
        let (_dir, store) = store_with_org(2);
        let a = store
            .create_key("acme", Scopes::CHECKS, WorkflowAccess::All, None, 0)
            .unwrap();
        store
            .create_key("acme", Scopes::CHECKS, WorkflowAccess::All, None, 0)
            .unwrap();
        assert!(store
            .create_key("acme", Scopes::CHECKS, WorkflowAccess::All, None, 0)
            .is_err());
        // A rotation with grace needs a free place: the old key still counts.
        assert!(store.rotate_key(&a.record.id, 60_000, 10).is_err());
        // Without grace, the new key takes the old one's place.
        let b = store.rotate_key(&a.record.id, 0, 10).unwrap();
        assert_eq!(b.record.rotated_from.as_deref(), Some(a.record.id.as_str()));
        let old = store
            .keys(Some("acme"))
            .unwrap()
            .into_iter()
            .find(|k| k.id == a.record.id)
            .unwrap();
        assert_eq!(old.state(10), KeyState::Retired);
        // Revoking frees a place.
        store.revoke_key(&b.record.id, 20).unwrap();
        store
            .create_key("acme", Scopes::CHECKS, WorkflowAccess::All, None, 30)
            .unwrap();
    }

    #[test]
    fn rotation_keeps_scopes_workflows_and_expiry() {
        let (_dir, store) = store_with_org(5);
        let scopes = Scopes {
            image: false,
            text: true,
            lists: false,
            feedback: false,
        };
        let old = store
            .create_key("acme", scopes, WorkflowAccess::All, Some(1_000_000), 0)
            .unwrap();
        let new = store.rotate_key(&old.record.id, 3_600_000, 100).unwrap();
        assert_eq!(new.record.scopes, scopes);
        assert_eq!(new.record.expires_ms, Some(1_000_000));
        assert_ne!(new.key, old.key);
        let old_now = store
            .keys(None)
            .unwrap()
            .into_iter()
            .find(|k| k.id == old.record.id)
            .unwrap();
        assert_eq!(
            old_now.state(200),
            KeyState::InGrace {
                until_ms: 3_600_100
            }
        );
        assert!(
            store.rotate_key(&old.record.id, 0, 200).is_err(),
            "rotated twice"
        );
        assert!(store
            .rotate_key(&new.record.id, ROTATION_GRACE_MS_MAX + 1, 200)
            .is_err());
    }

    #[test]
    fn workflow_versions_follow_changes() {
        let (_dir, store) = store_with_org(1);
        let text = "[workflows.a]\ndescription = 'x'\n";
        let defs = workflow::parse_workflows(text).unwrap();
        assert_eq!(store.import_workflows(&defs, 0).unwrap()[0].version, 1);
        assert!(!store.import_workflows(&defs, 1).unwrap()[0].changed);
        let changed = workflow::parse_workflows(&text.replace("'x'", "'y'")).unwrap();
        let report = store.import_workflows(&changed, 2).unwrap();
        assert_eq!((report[0].version, report[0].changed), (2, true));
        // Every version is kept, for the decisions made under it.
        let first = store.workflow_version("a", 1).unwrap().expect("version 1");
        assert_eq!(first.definition.description, "x");
        let second = store.workflow_version("a", 2).unwrap().expect("version 2");
        assert_eq!(second.definition.description, "y");
        assert_eq!(store.workflow_version("a", 3).unwrap(), None);
        assert_eq!(store.workflow_version("b", 1).unwrap(), None);
    }

    #[test]
    fn names_and_plans_are_checked() {
        let (_dir, store) = store_with_org(1);
        assert!(store.create_org("acme", "free", 0).is_err());
        assert!(store.create_org("other", "gold", 0).is_err());
        assert!(store.create_org("bad name", "free", 0).is_err());
        assert!(store
            .create_key(
                "acme",
                Scopes::CHECKS,
                WorkflowAccess::Only(vec!["nope".into()]),
                None,
                0
            )
            .is_err());
    }
}
