//! Where shards lease rate tokens, concurrency permits and quota units from: the one place
//! that sees all shards.
//!
//! [`LeaseSource`] (rate and concurrency) and [`QuotaSource`] (the monthly quota) are
//! deliberately narrow (take, give back, read) and separate, so that a fleet implements each on
//! its own engine (Redis/Valkey, PostgreSQL) without any change to the request path, which only
//! ever talks to its shard's [`super::ShardLimits`]; [`Sources`] carries the pair.
//!
//! [`LocalLeases`] is the in-process source: rate buckets and concurrency counters in memory
//! (behind mutexes touched once per lease, not per request), and the quota ledger in an LMDB
//! environment (`<data>/counters`) so that it survives restarts. The ledger counts units
//! *leased*; a graceful stop gives back what the shards hold. A process that dies loses the
//! units its shards held, so at the next start, before its first grant, the ledger is set back
//! to the checks the shards' journals charged ([`crate::journal::charges`], committed with the
//! records, so exactly the checks answered): never more, never less.
//!
//! Because the journals are what makes the count exact after a crash, a grant need not wait
//! for the ledger's disk: grants and returns change the ledger in memory, at once, and a
//! thread of its own ([`LocalLeases::start_flusher`]) writes what changed every
//! [`LEDGER_FLUSH_INTERVAL`] and fsyncs it. So no check ever waits for a ledger write, however
//! slow the disk (another process's bulk writes made fsyncs take hundreds of milliseconds);
//! a shard whose lease runs dry takes the next one from memory ([`QuotaSource::try_take_quota`]).
//! What a crash can lose of the ledger is the last interval's grants, which the start's
//! reconciliation replaces by the journals' counts; where it cannot reconcile (a journal that
//! cannot be read, or a month that began before the journals counted), the ledger keeps its
//! last flush, and the quota may be exceeded by the units granted in that interval.

use std::collections::hash_map::Entry;
use std::collections::HashMap;
use std::path::Path;
use std::sync::Mutex;

use anyhow::Context;
use heed::types::{Str, U64};
use heed::{byteorder::BigEndian, Database, Env, EnvOpenOptions};

use super::bucket::{Bucket, BucketState};
use crate::hash::value_of;
pub use crate::journal::charges::ledger_key;
use crate::journal::charges::JournalCharges;
use crate::store::records::EngineDown;

/// A plan's bucket.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct BucketSpec {
    pub rate_per_s: u32,
    pub burst: u32,
}

/// Quota units granted, the organization's count in the ledger after the grant, and the
/// checks it is known to have spent (see `LeaseSource::report_spent`).
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct QuotaGrant {
    pub units: u64,
    pub used: u64,
    pub spent: u64,
}

/// Permits granted, and how many of the organization's `max` were still free after the grant.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct PermitGrant {
    pub granted: u32,
    pub free: u32,
}

/// The shared side of the limits.
pub trait LeaseSource: Send + Sync {
    /// Up to `want` tokens from `key`'s bucket at `now_ms`.
    fn take_rate(
        &self,
        key: &str,
        bucket: BucketSpec,
        want: u32,
        now_ms: i64,
    ) -> (u32, BucketState);
    /// After a [`Self::take_rate`] that granted nothing: a receiver told when a refill for
    /// `key` that is on its way is in (then a take may find tokens), or `None` if none is
    /// (the bucket is dry: refuse). Never blocks.
    fn rate_arriving(&self, _key: &str) -> Option<futures_channel::oneshot::Receiver<u32>> {
        None
    }
    /// Gives back unspent tokens.
    fn return_rate(&self, key: &str, bucket: BucketSpec, tokens: u32);
    /// Up to `want` permits of `org`, of `max` in all.
    fn take_permits(&self, org: &str, max: u32, want: u32) -> PermitGrant;
    fn return_permits(&self, org: &str, permits: u32);
    /// As [`Self::take_permits`], but a source whose permits come from a shared engine may
    /// answer "on their way": the receiver is then handed the permits (0: none), which are
    /// the caller's to return like any other. Never blocks.
    fn take_permits_or_wait(
        &self,
        org: &str,
        max: u32,
        want: u32,
    ) -> Result<PermitGrant, futures_channel::oneshot::Receiver<u32>> {
        Ok(self.take_permits(org, max, want))
    }
    /// Whether the shared engine behind the source cannot be reached now (the source then
    /// answers from this node's share; a plan with `engine_down = "closed"` refuses instead).
    fn engine_down(&self) -> bool {
        false
    }
    /// At a graceful stop, after the shards gave back what they held: tell the engines.
    /// Blocking, bounded.
    fn stop(&self) {}
}

/// The shared side of the monthly quota: a ledger counting the units leased to shards.
pub trait QuotaSource: Send + Sync {
    /// Whether a fleet's quota ledger cannot be reached now (the source then grants from this
    /// node's share of the quota; a plan with `engine_down = "closed"` gets none).
    fn quota_ledger_down(&self) -> bool {
        false
    }
    /// At a graceful stop, after the shards gave back what they held: make the returns
    /// durable. Blocking, bounded.
    fn stop(&self) {}
    /// Up to `want` units of `org`'s quota of `limit` in `month`. May block (a durable write):
    /// call it off the reactor. `engine_down` is the plan's choice while a fleet's ledger
    /// cannot be reached (grant from this node's share, or fail).
    fn take_quota(
        &self,
        org: &str,
        month: u32,
        limit: u64,
        want: u64,
        engine_down: EngineDown,
    ) -> anyhow::Result<QuotaGrant>;
    /// Gives back unspent units (may block).
    fn return_quota(&self, org: &str, month: u32, units: u64) -> anyhow::Result<()>;
    /// As [`Self::take_quota`], at once, from a source that can grant without blocking (the
    /// single node's ledger in memory, once reconciled): `None` when it cannot, and the
    /// caller then takes the blocking path off the reactor.
    fn try_take_quota(
        &self,
        _org: &str,
        _month: u32,
        _limit: u64,
        _want: u64,
    ) -> Option<anyhow::Result<QuotaGrant>> {
        None
    }
    /// As [`Self::return_quota`], at once, from a source that can: `None` when it cannot.
    fn try_return_quota(&self, _org: &str, _month: u32, _units: u64) -> Option<anyhow::Result<()>> {
        None
    }
    /// As [`Self::take_quota`], from a source that answers from a thread of its own (a
    /// fleet's ledger): the request is sent, and the answer is to be awaited, at most
    /// [`AwaitedGrant::wait`], then handed to [`Self::settle_take_quota`]. So no blocking
    /// thread of the shard (which its journal shares) waits on the ledger. `None`: not such
    /// a source.
    fn send_take_quota(
        &self,
        _org: &str,
        _month: u32,
        _limit: u64,
        _want: u64,
    ) -> Option<AwaitedGrant> {
        None
    }
    /// The grant [`Self::send_take_quota`]'s `answer` makes (an error: none came in time).
    fn settle_take_quota(
        &self,
        _org: &str,
        _month: u32,
        _limit: u64,
        _want: u64,
        _engine_down: EngineDown,
        answer: anyhow::Result<QuotaGrant>,
    ) -> anyhow::Result<QuotaGrant> {
        answer
    }
    /// The checks `org` is known to have spent in `month` (what [`Self::report_spent`]
    /// returns), for a shard that has no lease of its own yet. Reads the ledger the first time
    /// (a read transaction: no write, no fsync).
    fn quota_spent(&self, org: &str, month: u32) -> u64;
    /// Adds `spent` checks that ran to `org`'s count for `month` and returns the count: what
    /// every shard has reported, on top of what the ledger held when this process first
    /// leased for that month. Shards report on their janitor tick, so the `X-Quota-Used` they
    /// send lags other shards by at most one tick. Does not block.
    fn report_spent(&self, org: &str, month: u32, spent: u64) -> u64;
    /// A shard's journal counts of charged checks, read at its start before it serves
    /// (`None`: it could not read them). A single node sets its ledger back to them once every
    /// shard has reported; a fleet's ledger settles from its own records.
    fn report_journal_charges(&self, _charges: Option<JournalCharges>) {}
}

/// A grant asked for and not answered yet ([`QuotaSource::send_take_quota`]). Dropping
/// `answer` before it comes tells the source nobody waits: the units go back.
pub struct AwaitedGrant {
    pub answer: futures_channel::oneshot::Receiver<anyhow::Result<QuotaGrant>>,
    /// How long the answer may take: past it, the grant has failed.
    pub wait: std::time::Duration,
}

/// Where a shard's limits lease from: rate and concurrency, and the quota. The same object
/// on a single node ([`LocalLeases`]); in a fleet, Redis/Valkey and PostgreSQL.
#[derive(Clone)]
pub struct Sources {
    pub budgets: std::sync::Arc<dyn LeaseSource>,
    pub quota: std::sync::Arc<dyn QuotaSource>,
}

impl Sources {
    /// Both from this process alone.
    pub fn local(leases: std::sync::Arc<LocalLeases>) -> Sources {
        Sources {
            budgets: leases.clone(),
            quota: leases,
        }
    }

    /// At a graceful stop: both told, budgets first (blocking, bounded).
    pub fn stop(&self) {
        self.budgets.stop();
        self.quota.stop();
    }
}

/// Map size of the counters environment.
pub const COUNTERS_MAP_BYTES: usize = 256 << 20;

/// How often the flusher writes the ledger's changes to `<data>/counters` (and fsyncs them).
pub const LEDGER_FLUSH_INTERVAL: std::time::Duration = std::time::Duration::from_millis(100);

pub struct LocalLeases {
    buckets: Mutex<HashMap<String, Bucket>>,
    permits: Mutex<HashMap<String, u32>>,
    env: Env,
    quota: Database<Str, U64<BigEndian>>,
    /// The ledger as grants see it (the LMDB copy follows it, [`LocalLeases::flush`]).
    ledger: Mutex<Ledger>,
    /// Checks spent per ledger key, as reported by the shards (see `report_spent`).
    spent: Mutex<HashMap<String, u64>>,
    /// The journals' counts gathered at start; grants wait until the ledger is set back.
    reconcile: Mutex<Reconcile>,
    reconciled: std::sync::Condvar,
}

/// How long a grant waits at start for every shard's journal counts before it goes ahead
/// without them (the ledger then keeps what it had: stricter, never looser).
pub const RECONCILE_WAIT: std::time::Duration = std::time::Duration::from_secs(30);

/// The ledger in memory: each key's count of units leased, read from LMDB the first time the
/// key is used, and the keys changed since the last flush.
#[derive(Default)]
struct Ledger {
    used: HashMap<String, u64>,
    dirty: std::collections::HashSet<String>,
}

#[derive(Default)]
struct Reconcile {
    /// Shards that will report (0: nothing to wait for).
    expected: usize,
    reported: usize,
    /// A journal could not be read, or one is not opened by this run: no reconciling.
    unknown: bool,
    /// The latest `since` of the journals: months that began before it are not reconciled.
    since_ms: i64,
    counts: HashMap<String, u64>,
    done: bool,
}

impl LocalLeases {
    pub fn open(data_dir: &Path) -> anyhow::Result<LocalLeases> {
        let path = data_dir.join("counters");
        std::fs::create_dir_all(&path).with_context(|| format!("creating {}", path.display()))?;
        let mut options = EnvOpenOptions::new();
        options.map_size(COUNTERS_MAP_BYTES).max_dbs(2);
        // SAFETY: NO_SYNC only skips the fsync at commit (the flusher fsyncs after each write
        // of changes); it changes what a power loss can take, not the memory safety of the
        // map.
        unsafe {
            options.flags(heed::EnvFlags::NO_SYNC);
        }
        // SAFETY: as for the store (`store::Store::open`): written only through LMDB, on a
        // local filesystem, opened once per process.
        let env = unsafe { options.open(&path) }
            .with_context(|| format!("opening {}", path.display()))?;
        let mut txn = env.write_txn()?;
        let quota = env.create_database(&mut txn, Some("quota"))?;
        txn.commit()?;
        Ok(LocalLeases {
            buckets: Mutex::default(),
            permits: Mutex::default(),
            env,
            quota,
            ledger: Mutex::default(),
            spent: Mutex::default(),
            reconcile: Mutex::new(Reconcile {
                done: true,
                ..Reconcile::default()
            }),
            reconciled: std::sync::Condvar::new(),
        })
    }

    /// Makes grants wait until each of `shards` shards reported its journal's counts
    /// (`LeaseSource::report_journal_charges`) and the ledger was set back to them. A
    /// journal directory of a shard this run does not have (fewer cores than last time) would
    /// be missed, so then nothing is reconciled.
    pub fn expect_journals(&self, shards: usize, data_dir: &Path) {
        let extra = crate::journal::shard_dir(data_dir, shards).exists();
        if extra {
            tracing::warn!(
                shards,
                "a journal of a shard this run does not have exists: the quota ledger is not reconciled with the journals"
            );
        }
        *lock(&self.reconcile) = Reconcile {
            expected: shards,
            unknown: extra,
            ..Reconcile::default()
        };
    }

    /// Waits (bounded) until the ledger was reconciled with the journals.
    fn wait_reconciled(&self) {
        let reconcile = lock(&self.reconcile);
        let (reconcile, timeout) = self
            .reconciled
            .wait_timeout_while(reconcile, RECONCILE_WAIT, |r| !r.done)
            .unwrap_or_else(|e| e.into_inner());
        if timeout.timed_out() && !reconcile.done {
            drop(reconcile);
            tracing::warn!(
                "the journals' quota counts did not all arrive: granting on the ledger as it is"
            );
            lock(&self.reconcile).done = true;
        }
    }

    /// Sets every ledger key of a month the journals counted whole to what they charged.
    /// Answers the units that came back (held by shards when the last run ended).
    fn set_back(&self, since_ms: i64, counts: &HashMap<String, u64>) -> heed::Result<u64> {
        let since_month = crate::clock::month_of(since_ms);
        let whole = |key: &str| {
            let month = key.get(..8).and_then(|m| m.parse::<u32>().ok());
            month.is_some_and(|month| since_ms == 0 || month > since_month)
        };
        // No grant comes before the reconciliation, so the memory holds no change of its own;
        // what it read is dropped with the lock held, and read again from what this writes.
        let mut memory = lock(&self.ledger);
        let mut txn = self.env.write_txn()?;
        let ledger: Vec<(String, u64)> = self
            .quota
            .iter(&txn)?
            .map(|entry| entry.map(|(key, used)| (key.to_owned(), used)))
            .collect::<heed::Result<_>>()?;
        let mut returned = 0;
        for (key, used) in &ledger {
            if !whole(key) {
                continue;
            }
            let charged = counts.get(key).copied().unwrap_or(0);
            if charged != *used {
                returned += used.saturating_sub(charged);
                self.quota.put(&mut txn, key, &charged)?;
            }
        }
        for (key, charged) in counts {
            if whole(key) && !ledger.iter().any(|(k, _)| k == key) {
                self.quota.put(&mut txn, key, charged)?;
            }
        }
        txn.commit()?;
        self.env.force_sync()?;
        let Ledger { used, dirty } = &mut *memory;
        used.retain(|key, _| dirty.contains(key));
        Ok(returned)
    }
}

impl Drop for LocalLeases {
    /// The last handle writes what the flusher has not yet (a graceful stop has already, in
    /// [`QuotaSource::stop`]).
    fn drop(&mut self) {
        if let Err(error) = self.flush() {
            tracing::error!(%error, "writing the quota ledger failed");
        }
    }
}

/// A poisoned lock still guards consistent counters (every update is a single assignment).
pub fn lock<T>(mutex: &Mutex<T>) -> std::sync::MutexGuard<'_, T> {
    mutex
        .lock()
        .unwrap_or_else(|poisoned| poisoned.into_inner())
}

impl LocalLeases {
    /// The ledger's count of `org` in `month`.
    pub fn quota_used(&self, org: &str, month: u32) -> anyhow::Result<u64> {
        let mut ledger = lock(&self.ledger);
        Ok(*self.ledger_entry(&mut ledger, &ledger_key(org, month))?)
    }

    /// The ledger's environment, for tests that hold its writer as a stalled commit would.
    #[cfg(test)]
    pub fn ledger_env(&self) -> Env {
        self.env.clone()
    }

    /// `key`'s count in the ledger in memory, read from LMDB the first time.
    fn ledger_entry<'l>(&self, ledger: &'l mut Ledger, key: &str) -> heed::Result<&'l mut u64> {
        self.entry_from_disk(&mut ledger.used, key)
    }

    /// `key`'s count in `counts`, filled the first time from what `<data>/counters` holds.
    fn entry_from_disk<'c>(
        &self,
        counts: &'c mut HashMap<String, u64>,
        key: &str,
    ) -> heed::Result<&'c mut u64> {
        match counts.entry(key.to_owned()) {
            Entry::Occupied(count) => Ok(count.into_mut()),
            Entry::Vacant(slot) => {
                let txn = self.env.read_txn()?;
                Ok(slot.insert(self.quota.get(&txn, key)?.unwrap_or(0)))
            }
        }
    }

    /// Grants up to `want` units from the ledger in memory (after the reconciliation).
    fn grant(&self, org: &str, month: u32, limit: u64, want: u64) -> anyhow::Result<QuotaGrant> {
        let key = ledger_key(org, month);
        // The count of checks spent starts from the ledger as it was before this process's
        // first grant (a graceful stop returned what the last run leased and did not spend).
        let spent = *self.seeded(&mut lock(&self.spent), &key)?;
        let mut ledger = lock(&self.ledger);
        let used = self.ledger_entry(&mut ledger, &key)?;
        let units = want.min(limit.saturating_sub(*used));
        *used += units;
        let used = *used;
        if units > 0 {
            ledger.dirty.insert(key);
        }
        Ok(QuotaGrant { units, used, spent })
    }

    /// Writes the ledger's changes since the last flush to LMDB and fsyncs them; answers how
    /// many keys were written. A failed write leaves them to the next flush.
    pub fn flush(&self) -> heed::Result<usize> {
        let changed: Vec<(String, u64)> = {
            let mut ledger = lock(&self.ledger);
            let dirty = std::mem::take(&mut ledger.dirty);
            dirty
                .into_iter()
                .filter_map(|key| ledger.used.get(&key).map(|&used| (key, used)))
                .collect()
        };
        if changed.is_empty() {
            return Ok(0);
        }
        let written = (|| {
            let mut txn = self.env.write_txn()?;
            for (key, used) in &changed {
                self.quota.put(&mut txn, key, used)?;
            }
            txn.commit()?;
            self.env.force_sync()
        })();
        if let Err(error) = written {
            lock(&self.ledger)
                .dirty
                .extend(changed.into_iter().map(|(key, _)| key));
            return Err(error);
        }
        Ok(changed.len())
    }

    /// Starts the thread that flushes the ledger every [`LEDGER_FLUSH_INTERVAL`]; it ends
    /// with the last handle on the leases (a graceful stop flushes in [`QuotaSource::stop`]).
    pub fn start_flusher(self: &std::sync::Arc<Self>) -> anyhow::Result<()> {
        let leases = std::sync::Arc::downgrade(self);
        std::thread::Builder::new()
            .name("modgate-ledger".into())
            .spawn(move || loop {
                std::thread::sleep(LEDGER_FLUSH_INTERVAL);
                let Some(leases) = leases.upgrade() else {
                    return;
                };
                if let Err(error) = leases.flush() {
                    tracing::warn!(%error, "writing the quota ledger failed; retrying");
                }
            })
            .context("starting the quota ledger's flusher")?;
        Ok(())
    }

    /// The checks spent under ledger key `key` as this process counts them, starting (the
    /// first time the key is seen) from what the ledger holds. The ledger is read under the
    /// lock and before this process's first grant for the key ([`LeaseSource::take_quota`]
    /// seeds first), so the start never includes units this process leased.
    /// `counts` is the locked `spent` map.
    fn seeded<'c>(
        &self,
        counts: &'c mut HashMap<String, u64>,
        key: &str,
    ) -> heed::Result<&'c mut u64> {
        self.entry_from_disk(counts, key)
    }
}

impl LeaseSource for LocalLeases {
    fn take_rate(
        &self,
        key: &str,
        bucket: BucketSpec,
        want: u32,
        now_ms: i64,
    ) -> (u32, BucketState) {
        let mut buckets = lock(&self.buckets);
        let entry = value_of(&mut buckets, key, || Bucket::full(bucket.burst, now_ms));
        entry.take(bucket.rate_per_s, bucket.burst, want, now_ms)
    }

    fn return_rate(&self, key: &str, bucket: BucketSpec, tokens: u32) {
        let mut buckets = lock(&self.buckets);
        if let Some(entry) = buckets.get_mut(key) {
            entry.give_back(bucket.burst, tokens);
        }
    }

    fn take_permits(&self, org: &str, max: u32, want: u32) -> PermitGrant {
        let mut permits = lock(&self.permits);
        let leased = value_of(&mut permits, org, || 0);
        let granted = want.min(max.saturating_sub(*leased));
        *leased += granted;
        PermitGrant {
            granted,
            free: max.saturating_sub(*leased),
        }
    }

    fn return_permits(&self, org: &str, returned: u32) {
        let mut permits = lock(&self.permits);
        if let Some(leased) = permits.get_mut(org) {
            *leased = leased.saturating_sub(returned);
        }
    }
}

impl QuotaSource for LocalLeases {
    fn take_quota(
        &self,
        org: &str,
        month: u32,
        limit: u64,
        want: u64,
        _engine_down: EngineDown,
    ) -> anyhow::Result<QuotaGrant> {
        self.wait_reconciled();
        self.grant(org, month, limit, want)
    }

    fn try_take_quota(
        &self,
        org: &str,
        month: u32,
        limit: u64,
        want: u64,
    ) -> Option<anyhow::Result<QuotaGrant>> {
        // Until the journals' counts are in, a grant must wait for them: off the reactor.
        if !lock(&self.reconcile).done {
            return None;
        }
        Some(self.grant(org, month, limit, want))
    }

    fn return_quota(&self, org: &str, month: u32, units: u64) -> anyhow::Result<()> {
        let key = ledger_key(org, month);
        let mut ledger = lock(&self.ledger);
        let used = self.ledger_entry(&mut ledger, &key)?;
        *used = used.saturating_sub(units);
        ledger.dirty.insert(key);
        Ok(())
    }

    fn try_return_quota(&self, org: &str, month: u32, units: u64) -> Option<anyhow::Result<()>> {
        Some(self.return_quota(org, month, units))
    }

    fn stop(&self) {
        if let Err(error) = self.flush() {
            tracing::error!(%error, "writing the quota ledger at stop failed");
        }
    }

    fn quota_spent(&self, org: &str, month: u32) -> u64 {
        match self.seeded(&mut lock(&self.spent), &ledger_key(org, month)) {
            Ok(count) => *count,
            Err(error) => {
                tracing::warn!(%error, "reading the quota ledger failed");
                0
            }
        }
    }

    fn report_journal_charges(&self, charges: Option<JournalCharges>) {
        let mut reconcile = lock(&self.reconcile);
        if reconcile.done {
            return;
        }
        reconcile.reported += 1;
        match charges {
            Some(charges) => {
                reconcile.since_ms = reconcile.since_ms.max(charges.since_ms);
                for (key, count) in charges.counts {
                    *reconcile.counts.entry(key).or_default() += count;
                }
            }
            None => reconcile.unknown = true,
        }
        if reconcile.reported < reconcile.expected {
            return;
        }
        if !reconcile.unknown {
            match self.set_back(reconcile.since_ms, &reconcile.counts) {
                Ok(0) => {}
                Ok(returned) => tracing::info!(
                    units = returned,
                    "quota units held when the last run ended went back to the ledger"
                ),
                Err(error) => {
                    tracing::warn!(%error, "setting the quota ledger back to the journals failed")
                }
            }
            // Counts seeded before (`X-Quota-Used` of a check that came first) start again.
            lock(&self.spent).clear();
        }
        reconcile.counts = HashMap::new();
        reconcile.done = true;
        self.reconciled.notify_all();
    }

    fn report_spent(&self, org: &str, month: u32, spent: u64) -> u64 {
        let mut counts = lock(&self.spent);
        let key = ledger_key(org, month);
        let count = match self.seeded(&mut counts, &key) {
            Ok(count) => count,
            Err(error) => {
                tracing::warn!(%error, "reading the quota ledger failed");
                counts.entry(key).or_insert(0)
            }
        };
        *count += spent;
        *count
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn the_ledger_survives_a_reopen_and_never_grants_past_the_limit() {
        let dir = tempfile::tempdir().unwrap();
        {
            let leases = LocalLeases::open(dir.path()).unwrap();
            assert_eq!(
                leases.take_quota("o", 1, 10, 4, EngineDown::Open).unwrap(),
                QuotaGrant {
                    units: 4,
                    used: 4,
                    spent: 0
                }
            );
            assert_eq!(
                leases.take_quota("o", 1, 10, 8, EngineDown::Open).unwrap(),
                QuotaGrant {
                    units: 6,
                    used: 10,
                    spent: 0
                }
            );
            assert_eq!(
                leases
                    .take_quota("o", 1, 10, 1, EngineDown::Open)
                    .unwrap()
                    .units,
                0
            );
            assert_eq!(leases.quota_spent("o", 1), 0);
            leases.return_quota("o", 1, 3).unwrap();
            // Another month, another count.
            assert_eq!(
                leases
                    .take_quota("o", 2, 10, 1, EngineDown::Open)
                    .unwrap()
                    .used,
                1
            );
        }
        let leases = LocalLeases::open(dir.path()).unwrap();
        assert_eq!(leases.quota_used("o", 1).unwrap(), 7);
        // A fresh process counts what the ledger held as spent, and reports add to it.
        assert_eq!(leases.quota_spent("o", 1), 7);
        assert_eq!(leases.report_spent("o", 1, 2), 9);
        assert_eq!(leases.quota_spent("o", 1), 9);
    }

    #[test]
    fn permits_are_conserved() {
        let dir = tempfile::tempdir().unwrap();
        let leases = LocalLeases::open(dir.path()).unwrap();
        let grant = |want| leases.take_permits("o", 3, want);
        assert_eq!(
            grant(2),
            PermitGrant {
                granted: 2,
                free: 1
            }
        );
        assert_eq!(
            grant(2),
            PermitGrant {
                granted: 1,
                free: 0
            }
        );
        assert_eq!(
            grant(1),
            PermitGrant {
                granted: 0,
                free: 0
            }
        );
        leases.return_permits("o", 2);
        assert_eq!(
            grant(5),
            PermitGrant {
                granted: 2,
                free: 0
            }
        );
    }
}
