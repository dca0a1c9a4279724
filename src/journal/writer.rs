//! A shard's journal: records appended by the checks, committed in groups (to staging or the
//! disk journal), shipped, pruned; the module's documentation tells the durability contract.

use std::cell::{Cell, RefCell};
use std::path::{Path, PathBuf};
use std::rc::Rc;
use std::task::{Poll, Waker};
use std::time::{Duration, Instant};

use heed::types::{Bytes, Str};
use heed::{Database, Env};

use crate::metrics::Metrics;

use super::record::{open_env, shard_dir, stored_units, JournalConfig, JournalRecord, SyncPolicy};
use super::shipping::PRUNE_UNSHIPPED_READ_MAX;
use super::staging::stage;
use super::{charges, query, shipping, staging};

/// Where a record is on its way to disk.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
enum Outcome {
    #[default]
    Waiting,
    Committed,
    Failed,
}

/// Where a record's commit outcome lands, and who waits for it.
#[derive(Default)]
struct Slot {
    outcome: Cell<Outcome>,
    waker: RefCell<Option<Waker>>,
}

/// A record on its way to a commit: key, encoded value, and where its outcome lands.
struct PendingRecord {
    key: String,
    value: Vec<u8>,
    /// The quota ledger key the check is charged to, if it is.
    charge: Option<String>,
    slot: Rc<Slot>,
}

/// A shard's journal writer.
pub struct Journal {
    env: Env,
    db: Database<Str, Bytes>,
    config: JournalConfig,
    /// Encoded records waiting for the next commit.
    pending: RefCell<Vec<PendingRecord>>,
    committer: RefCell<Option<Waker>>,
    /// The shard's metrics: commits, batch sizes, commit and fsync times.
    metrics: Rc<Metrics>,
    /// Commits so far; the interval syncer fsyncs only when this moved.
    commits: Cell<u64>,
    /// The interval's last fsync of the disk journal failed ([`Journal::synced`]).
    sync_failed: Cell<bool>,
    /// With staging: commits into the disk journal (past a full staging) since its last
    /// fsync, which the mover's next pass fsyncs.
    disk_commits_unsynced: Cell<u64>,
    /// In a fleet: the commit-order index and where shipping is.
    ship: Option<ShipState>,
    /// Checks charged to each quota, counted with the records.
    charges: charges::ChargeCounts,
    /// The last commit failed (disk full, map full, I/O error): `/health` answers 503 and the
    /// committer probes every [`PROBE_INTERVAL`] until a commit succeeds again.
    failing: Cell<bool>,
    /// Failures not logged yet, and when the last one was: one line per
    /// [`FAILURE_LOG_INTERVAL`] at most.
    failures_unlogged: Cell<u64>,
    failure_logged_at: Cell<Option<Instant>>,
    /// The process's count of failing journals, for `/health` on every shard.
    failing_shards: std::cell::OnceCell<std::sync::Arc<std::sync::atomic::AtomicUsize>>,
    /// Until when commits go to the blocking threads after a slow one on the shard's thread
    /// (see [`Journal::commits_inline`]).
    inline_paused_until: Cell<Option<Instant>>,
    /// Where records are committed first, if they are staged ([`staging`]).
    staging: Option<StagingState>,
}

/// A shard's staging: its environment, the next sequence number, and the disk journal's mark.
struct StagingState {
    /// `None` while it is made anew ([`Journal::renew_staging`]): commits go to the disk.
    staged: RefCell<Option<staging::Staged>>,
    dir: PathBuf,
    next: Cell<u64>,
    marks: Database<Str, heed::types::U64<heed::byteorder::BigEndian>>,
    /// Records staged since the mover last emptied the staging.
    unmoved: Cell<u64>,
    /// When a commit last found the tmpfs full and was logged ([`Journal::staging_full`]).
    full_logged_at: Cell<Option<Instant>>,
    /// A commit found the tmpfs full since staging was last made anew.
    overflowed: Cell<bool>,
    /// A commit into staging is under way (its records are not in the disk journal yet).
    committing: Cell<bool>,
}

/// Where a commit's records went.
enum Committed {
    Staged,
    /// Into the disk journal, without staging or past a full one; in a fleet, with the
    /// commit-order number after them.
    Disk {
        next_order: Option<u64>,
    },
}

/// A commit into the disk journal on the shard's own thread that took longer than this (the
/// disk is slow: another process's bulk writes throttle the page cache) sends commits to the
/// blocking threads for [`INLINE_PAUSE`], so that a slow disk stalls no more than that one
/// commit of the shard. Commits into staging never pause: they wait for no disk.
pub const INLINE_COMMIT_SLOW: Duration = Duration::from_millis(2);
pub const INLINE_PAUSE: Duration = Duration::from_secs(5);

/// Records one transaction of a prune of shipped records deletes at most (about a
/// millisecond of the writer's lock), and the pause between two of them.
pub const PRUNE_SLICE_RECORDS_MAX: usize = 1_000;
pub const PRUNE_SLICE_PAUSE: Duration = Duration::from_millis(5);

/// How often a failing journal tries a commit of its own (so that it recovers even when no
/// check arrives, as happens once `/health` has turned traffic away).
pub const PROBE_INTERVAL: Duration = Duration::from_secs(1);
/// At most one log line per this while commits fail.
pub const FAILURE_LOG_INTERVAL: Duration = Duration::from_secs(10);

#[derive(Debug)]
pub struct JournalError;

/// Where shipping is, in a fleet.
struct ShipState {
    index: shipping::ShipIndex,
    /// The next sequence number a commit gives.
    next: Cell<u64>,
    /// The last sequence number in the fleet's table.
    shipped: Cell<u64>,
}

impl Journal {
    /// Opens shard `shard`'s journal and starts its committer (and syncer) on the current
    /// executor.
    pub fn start(
        data_dir: &Path,
        shard: usize,
        config: JournalConfig,
        metrics: Rc<Metrics>,
    ) -> anyhow::Result<Rc<Journal>> {
        let no_sync = matches!(config.sync, SyncPolicy::Interval(_));
        let (env, db) = open_env(&shard_dir(data_dir, shard), config.map_bytes, no_sync)?;
        let now_ms = crate::clock::Clock::System.now_ms();
        let charges = charges::ChargeCounts::open(&env, db, now_ms)?;
        let ship = if config.ship {
            let (index, next) = shipping::ShipIndex::open(&env, db, now_ms)?;
            let shipped = index.shipped(&env)?;
            Some(ShipState {
                index,
                next: Cell::new(next),
                shipped: Cell::new(shipped),
            })
        } else {
            shipping::forget_prune_from(&env)?;
            None
        };
        let staging = match (&config.staging, config.sync) {
            (Some(root), SyncPolicy::Interval(_)) => {
                let dir = root.join(format!("shard-{shard}"));
                let staged = staging::open(&dir, config.map_bytes)?;
                let marks = staging::open_marks(&env)?;
                // What a killed run left staged (usually moved already by `staging::recover`).
                let disk = staging::DiskJournal {
                    env: &env,
                    records: db,
                    charges,
                    order: ship.as_ref().map(|ship| ship.index),
                    marks,
                };
                staging::move_all(&staged, &disk)?;
                if let Some(ship) = &ship {
                    let txn = env.read_txn()?;
                    ship.next.set(ship.index.next_in(&txn)?);
                }
                let next = staging::next_seq(&staged, staging::moved(&env, marks)?)?;
                Some(StagingState {
                    staged: RefCell::new(Some(staged)),
                    dir,
                    next: Cell::new(next),
                    marks,
                    unmoved: Cell::new(0),
                    full_logged_at: Cell::new(None),
                    overflowed: Cell::new(false),
                    committing: Cell::new(false),
                })
            }
            _ => None,
        };
        let journal = Rc::new(Journal {
            staging,
            ship,
            charges,
            failing: Cell::new(false),
            failures_unlogged: Cell::new(0),
            failure_logged_at: Cell::new(None),
            failing_shards: std::cell::OnceCell::new(),
            inline_paused_until: Cell::new(None),
            env,
            db,
            config,
            pending: RefCell::default(),
            committer: RefCell::default(),
            metrics,
            commits: Cell::new(0),
            sync_failed: Cell::new(false),
            disk_commits_unsynced: Cell::new(0),
        });
        glommio::spawn_local(journal.clone().commit_loop()).detach();
        if let (SyncPolicy::Interval(every), true) =
            (journal.config.sync, journal.staging.is_some())
        {
            glommio::spawn_local(journal.clone().move_loop(every)).detach();
        } else if let SyncPolicy::Interval(every) = journal.config.sync {
            let syncing = journal.clone();
            glommio::spawn_local(async move {
                let mut synced_commits = 0;
                loop {
                    let failed = syncing.sync_failed.get();
                    glommio::timer::sleep(if failed { PROBE_INTERVAL } else { every }).await;
                    // Nothing committed since the last fsync: nothing to make durable (after
                    // a failed one, it is tried again all the same).
                    let commits = syncing.commits.get();
                    if commits == synced_commits && !failed {
                        continue;
                    }
                    synced_commits = commits;
                    let env = syncing.env.clone();
                    let started = Instant::now();
                    let synced = glommio::executor()
                        .spawn_blocking(move || env.force_sync())
                        .await;
                    syncing.synced(synced, started.elapsed());
                }
            })
            .detach();
        }
        Ok(journal)
    }

    /// With staging: how often staged records move to the disk journal (a record answered
    /// is on the disk within about this; [`super::shelf`] readers look again after it).
    pub fn staging_interval(&self) -> Option<Duration> {
        match (self.config.sync, &self.staging) {
            (SyncPolicy::Interval(every), Some(_)) => Some(every),
            _ => None,
        }
    }

    /// The disk journal's environment and records, for readers of other shards
    /// ([`super::shelf`]).
    pub fn disk(&self) -> (Env, Database<Str, Bytes>) {
        (self.env.clone(), self.db)
    }

    /// Appends `record` and returns once it is committed.
    pub async fn append(&self, record: &JournalRecord<'_>) -> Result<(), JournalError> {
        // Staging takes records while the disk journal cannot: refuse, as a failing journal
        // does, rather than let staging hold what the disk may never take. Nor is a check
        // answered while the interval's fsync fails.
        if (self.staging.is_some() && self.failing.get()) || self.sync_failed.get() {
            return Err(JournalError);
        }
        // Records are encoded here, on the shard, so the blocking commit only copies bytes.
        let value = crate::codec::encode(record).map_err(|error| {
            tracing::error!(%error, "encoding a journal record failed");
            JournalError
        })?;
        let slot = Rc::new(Slot::default());
        let charge = record
            .org
            .as_deref()
            .zip(record.charged_month())
            .map(|(org, month)| charges::ledger_key(org, month));
        self.pending.borrow_mut().push(PendingRecord {
            key: record.request_id.clone().into_owned(),
            value,
            charge,
            slot: slot.clone(),
        });
        if let Some(waker) = self.committer.borrow_mut().take() {
            waker.wake();
        }
        std::future::poll_fn(|cx| match slot.outcome.get() {
            Outcome::Committed => Poll::Ready(Ok(())),
            Outcome::Failed => Poll::Ready(Err(JournalError)),
            Outcome::Waiting => {
                *slot.waker.borrow_mut() = Some(cx.waker().clone());
                Poll::Pending
            }
        })
        .await
    }

    /// Reports this journal's failures to `counter` too (shared by every shard's journal).
    pub fn report_failures_to(&self, counter: std::sync::Arc<std::sync::atomic::AtomicUsize>) {
        let _ = self.failing_shards.set(counter);
    }

    /// Whether the last commit (or probe) failed: checks cannot be recorded now.
    pub fn is_failing(&self) -> bool {
        self.failing.get()
    }

    /// Whether the next commit runs on the shard's own thread. Without an fsync at commit (the
    /// interval policy) a commit is a write into the page cache, tens of microseconds: less
    /// than handing it to a blocking thread and being woken with its outcome, which at an
    /// ordinary load is a park and a wake-up of the shard per check. With `sync = "always"`
    /// (an fsync each), a failing journal, or for [`INLINE_PAUSE`] after a slow commit, the
    /// blocking threads take it and the shard serves on meanwhile.
    fn commits_inline(&self) -> bool {
        matches!(self.config.sync, SyncPolicy::Interval(_))
            && !self.failing.get()
            // Past a full staging, commits go to the disk, which may be slow (see
            // [`Journal::staging_full`]).
            && !self
                .staging
                .as_ref()
                .is_some_and(|staging| staging.overflowed.get())
            && self
                .inline_paused_until
                .get()
                .is_none_or(|until| Instant::now() >= until)
    }

    async fn commit_loop(self: Rc<Self>) {
        loop {
            let work = futures_lite::future::or(
                async {
                    std::future::poll_fn(|cx| {
                        if self.pending.borrow().is_empty() {
                            *self.committer.borrow_mut() = Some(cx.waker().clone());
                            Poll::Pending
                        } else {
                            Poll::Ready(())
                        }
                    })
                    .await;
                    true
                },
                async {
                    // With staging, the mover finds out when the disk takes records again.
                    if self.failing.get() && self.staging.is_none() {
                        glommio::timer::sleep(PROBE_INTERVAL).await;
                    } else {
                        std::future::pending::<()>().await;
                    }
                    false
                },
            )
            .await;
            if !work {
                self.probe().await;
                continue;
            }
            // The checks that the same poll of the reactor woke append their records before
            // this commit takes them: one transaction for all, at no added wait.
            glommio::executor().yield_now().await;
            let (mut records, mut slots);
            {
                let mut pending = self.pending.borrow_mut();
                let take = pending.len().min(self.config.batch_records_max);
                records = Vec::with_capacity(take);
                slots = Vec::with_capacity(take);
                for record in pending.drain(..take) {
                    records.push((record.key, record.value, record.charge));
                    slots.push(record.slot);
                }
            }
            let count = records.len();
            let (env, db, charges) = (self.env.clone(), self.db, self.charges);
            // Sequence numbers in commit order, taken only once the commit succeeded (a failed
            // commit wrote nothing, so its numbers are given again).
            let order = self.ship.as_ref().map(|ship| (ship.index, ship.next.get()));
            let staged = self.staging.as_ref().and_then(|staging| {
                let staged = staging.staged.borrow().clone()?;
                staging.committing.set(true);
                Some((staged, staging.next.get()))
            });
            let commit = move || -> heed::Result<Committed> {
                if let Some((staged, first)) = staged {
                    match stage(&staged, first, &records) {
                        // Staging is full (the disk was slow for long, or the tmpfs is
                        // small): the disk journal takes the records, as without staging.
                        Err(error) if staging::is_full(&error) => {}
                        staged => return staged.map(|()| Committed::Staged),
                    }
                }
                let mut txn = env.write_txn()?;
                for (key, value, _) in &records {
                    db.put(&mut txn, key, value)?;
                }
                let mut next_order = None;
                if let Some((index, _)) = order {
                    // Numbered in the transaction: a staging move may have numbered records
                    // since the shard's count was read.
                    let first = index.next_in(&txn)?;
                    let keys: Vec<&str> = records.iter().map(|(key, ..)| key.as_str()).collect();
                    index.append(&mut txn, first, &keys)?;
                    next_order = Some(first + keys.len() as u64);
                }
                let charged: Vec<(&str, u32)> = records
                    .iter()
                    .filter_map(|(_, value, charge)| {
                        Some((charge.as_deref()?, stored_units(value)))
                    })
                    .collect();
                if !charged.is_empty() {
                    charges.add(&mut txn, charged)?;
                }
                txn.commit()?;
                Ok(Committed::Disk { next_order })
            };
            let started = Instant::now();
            let committed = if self.commits_inline() {
                let committed = commit();
                // Staging is a tmpfs: a slow commit there waited for the mover's slice or for
                // the core, which a blocking thread on the same core would not shorten.
                if self.staging.is_none() && started.elapsed() > INLINE_COMMIT_SLOW {
                    self.inline_paused_until
                        .set(Some(Instant::now() + INLINE_PAUSE));
                }
                committed
            } else {
                glommio::executor().spawn_blocking(commit).await
            };
            if let Some(staging) = &self.staging {
                staging.committing.set(false);
            }
            let ok = match committed {
                Ok(Committed::Staged) => {
                    self.commits.set(self.commits.get() + 1);
                    if let Some(staging) = &self.staging {
                        staging.next.set(staging.next.get() + count as u64);
                        staging.unmoved.set(staging.unmoved.get() + count as u64);
                    }
                    true
                }
                Ok(Committed::Disk { next_order }) => {
                    self.commits.set(self.commits.get() + 1);
                    if let (Some(ship), Some(next)) = (&self.ship, next_order) {
                        // A move may have numbered later records and reported first.
                        ship.next.set(ship.next.get().max(next));
                    }
                    if self.staging.is_some() {
                        self.disk_commits_unsynced
                            .set(self.disk_commits_unsynced.get() + 1);
                        self.staging_full(count);
                    } else {
                        self.recovered();
                    }
                    true
                }
                Err(error) => {
                    self.failed(&error, count);
                    false
                }
            };
            self.metrics
                .journal_commit(count, started.elapsed().as_micros() as u64, ok);
            for slot in slots {
                slot.outcome.set(if ok {
                    Outcome::Committed
                } else {
                    Outcome::Failed
                });
                if let Some(waker) = slot.waker.borrow_mut().take() {
                    waker.wake();
                }
            }
        }
    }

    /// With staging: every `every` (every [`PROBE_INTERVAL`] while failing), moves what is
    /// staged into the disk journal on the blocking threads ([`staging::move_batch`]), in
    /// slices of [`staging::MOVE_SLICE_RECORDS`] so that no one of them holds the shard's core
    /// for long, then fsyncs it once; a failed move or fsync makes the journal fail (checks
    /// 503, `/health` 503) until one succeeds.
    async fn move_loop(self: Rc<Self>, every: Duration) {
        let Some(staging) = &self.staging else {
            return;
        };
        let mut slice_max = staging::MOVE_SLICE_RECORDS;
        loop {
            let failing = self.failing.get();
            glommio::timer::sleep(if failing { PROBE_INTERVAL } else { every }).await;
            if staging.overflowed.get() {
                self.renew_staging(staging);
            }
            if staging.unmoved.get() == 0 && !failing && self.disk_commits_unsynced.get() == 0 {
                continue;
            }
            let started = Instant::now();
            match self.move_slices(staging, &mut slice_max).await {
                // Moved, or an fsync failed before: the fsync decides (only a good one ends a
                // failed one's refusals).
                Ok(moved_any)
                    if moved_any
                        || self.sync_failed.get()
                        || self.disk_commits_unsynced.get() > 0 =>
                {
                    let unsynced = self.disk_commits_unsynced.get();
                    let env = self.env.clone();
                    let synced = glommio::executor()
                        .spawn_blocking(move || env.force_sync())
                        .await;
                    let ok = synced.is_ok();
                    self.synced(synced, started.elapsed());
                    if ok {
                        // Those committed during the fsync wait for the next one.
                        self.disk_commits_unsynced
                            .set(self.disk_commits_unsynced.get() - unsynced);
                        self.recovered();
                    }
                }
                // Nothing staged to move while failing: a commit into the disk journal failed
                // (one past a full staging). Only a write there tells it takes them again.
                Ok(_) if self.failing.get() => self.probe().await,
                Ok(_) => self.recovered(),
                Err(error) => self.failed(&error, staging.unmoved.get() as usize),
            }
        }
    }

    /// One interval's move, unsynced ([`staging::Fsync::Later`]): slices of at most
    /// `slice_max` records (halved while one does not fit, grown back after) until one comes
    /// back short or what was staged when it began has moved, so that a stream of new records
    /// (or slices slowed by a busy disk) never holds the interval's fsync off. Answers whether
    /// anything moved.
    async fn move_slices(
        &self,
        staging: &StagingState,
        slice_max: &mut usize,
    ) -> heed::Result<bool> {
        let mut left = staging.unmoved.get();
        let mut moved_any = false;
        loop {
            let (env, records, charges, marks) =
                (self.env.clone(), self.db, self.charges, staging.marks);
            let Some(staged) = staging.staged.borrow().clone() else {
                return Ok(moved_any);
            };
            let order = self.ship.as_ref().map(|ship| ship.index);
            let max = *slice_max;
            let moved = glommio::executor()
                .spawn_blocking(move || {
                    staging::move_batch(
                        &staged,
                        &staging::DiskJournal {
                            env: &env,
                            records,
                            charges,
                            order,
                            marks,
                        },
                        max,
                        staging::Fsync::Later,
                    )
                })
                .await;
            let moved = match moved {
                Ok(moved) => moved,
                Err(error) => match staging::smaller_after(&error, max) {
                    Some(smaller) => {
                        *slice_max = smaller;
                        continue;
                    }
                    None => return Err(error),
                },
            };
            *slice_max = (max * 2).min(staging::MOVE_SLICE_RECORDS);
            if let (Some(ship), Some(next)) = (&self.ship, moved.next_order) {
                // A commit past a full staging may have numbered later records.
                ship.next.set(ship.next.get().max(next));
            }
            if moved.taken == 0 {
                staging.unmoved.set(0);
                return Ok(moved_any);
            }
            moved_any = true;
            staging
                .unmoved
                .set(staging.unmoved.get().saturating_sub(moved.taken as u64));
            left = left.saturating_sub(moved.taken as u64);
            if moved.taken < max || left == 0 {
                // What came meanwhile waits for the next interval, so a shard under load
                // fsyncs once an interval, not once per move.
                return Ok(moved_any);
            }
        }
    }

    /// A commit went to the disk journal because staging was full: until staging is made
    /// anew, commits go to the blocking threads ([`Journal::commits_inline`]: the disk may be
    /// slow, that is how staging filled), and a warning is logged at most once per
    /// [`FAILURE_LOG_INTERVAL`].
    fn staging_full(&self, records: usize) {
        let Some(staging) = &self.staging else {
            return;
        };
        staging.overflowed.set(true);
        if log_due(&staging.full_logged_at) {
            tracing::warn!(
                records,
                staging = %staging.dir.display(),
                "the journal's staging is full: commits go to the disk journal until the mover has emptied it and made it anew"
            );
        }
    }

    /// After commits found the tmpfs full: once the mover has emptied staging and no commit
    /// into it is under way, its environment is closed, removed and opened anew. A full tmpfs
    /// stays full of the emptied file's pages, which LMDB reuses, but every write transaction
    /// allocates room past the last page ever used ([`staging::Staged::allocate_for`]), so
    /// without this commits would go to the disk journal until the next start. On the shard's
    /// thread: a few file operations on a tmpfs.
    fn renew_staging(&self, staging: &StagingState) {
        if staging.committing.get() {
            return;
        }
        let empty = match &*staging.staged.borrow() {
            Some(staged) => staged
                .env
                .read_txn()
                .and_then(|txn| staged.db.len(&txn))
                .is_ok_and(|len| len == 0),
            None => true,
        };
        if !empty {
            return;
        }
        // Closed first (the last handle: no commit or move holds one now): heed opens a path
        // once per process.
        drop(staging.staged.borrow_mut().take());
        if let Err(error) = std::fs::remove_dir_all(&staging.dir) {
            if error.kind() != std::io::ErrorKind::NotFound {
                tracing::warn!(%error, dir = %staging.dir.display(), "removing the journal's full staging");
            }
        }
        match staging::open(&staging.dir, self.config.map_bytes) {
            Ok(staged) => {
                *staging.staged.borrow_mut() = Some(staged);
                staging.overflowed.set(false);
                tracing::debug!(dir = %staging.dir.display(), "the journal's staging was emptied and made anew: commits are staged again");
            }
            Err(error) => tracing::warn!(
                error = format!("{error:#}"),
                "the journal's staging could not be made anew: commits go to the disk journal; tried again next interval"
            ),
        }
    }

    /// A commit failed: noted for `/health`, logged at most once per [`FAILURE_LOG_INTERVAL`].
    fn failed(&self, error: &heed::Error, records: usize) {
        if !self.failing.replace(true) {
            if let Some(counter) = self.failing_shards.get() {
                counter.fetch_add(1, std::sync::atomic::Ordering::Relaxed);
            }
        }
        if log_due(&self.failure_logged_at) {
            tracing::error!(
                %error,
                records,
                failures_since_last_line = self.failures_unlogged.get(),
                "journal commit failed: checks are refused with 503 until it commits again"
            );
            self.failures_unlogged.set(0);
        } else {
            self.failures_unlogged.set(self.failures_unlogged.get() + 1);
        }
    }

    /// The interval's fsync of the disk journal (after the mover's moves, or without staging)
    /// ended with `outcome`. A failed one makes the
    /// journal fail (checks 503, `/health` 503) until an fsync succeeds: the records
    /// committed since the last good one may not be on the disk, and the kernel may have
    /// dropped them, so no answer is given on a journal that cannot make records durable.
    fn synced(&self, outcome: heed::Result<()>, took: Duration) {
        match outcome {
            Ok(()) => {
                self.metrics.journal_fsync(took.as_micros() as u64);
                if self.sync_failed.replace(false) {
                    self.recovered();
                }
            }
            Err(error) => {
                if !self.sync_failed.replace(true) {
                    tracing::error!(%error, "journal fsync failed: the records of the last interval may be lost; checks are refused with 503 until an fsync succeeds");
                }
                self.failed(&error, 0);
            }
        }
    }

    fn recovered(&self) {
        // Only a good fsync ends a failed one's refusals (a commit or probe does not).
        if self.sync_failed.get() {
            return;
        }
        if self.failing.replace(false) {
            if let Some(counter) = self.failing_shards.get() {
                counter.fetch_sub(1, std::sync::atomic::Ordering::Relaxed);
            }
            tracing::info!("journal commits again");
            self.failure_logged_at.set(None);
            self.failures_unlogged.set(0);
        }
    }

    /// A commit of nothing but a probe record, written and deleted: whether the journal can
    /// take a write again.
    async fn probe(&self) {
        let (env, db) = (self.env.clone(), self.db);
        let probed = glommio::executor()
            .spawn_blocking(move || -> heed::Result<()> {
                const PROBE_KEY: &str = "~probe";
                let mut txn = env.write_txn()?;
                db.put(&mut txn, PROBE_KEY, &[0u8; 64])?;
                db.delete(&mut txn, PROBE_KEY)?;
                txn.commit()
            })
            .await;
        match probed {
            Ok(()) => self.recovered(),
            Err(error) => self.failed(&error, 0),
        }
    }

    /// In a fleet: the records committed after the shipped position, in commit order, at most
    /// a batch (read on the blocking pool). Empty on a single node.
    pub async fn unshipped(&self) -> anyhow::Result<shipping::ShipBatch> {
        let Some(ship) = &self.ship else {
            return Ok(shipping::ShipBatch::default());
        };
        let (env, db, index) = (self.env.clone(), self.db, ship.index);
        Ok(glommio::executor()
            .spawn_blocking(move || index.unshipped(&env, db))
            .await?)
    }

    /// In a fleet: the request ids of the checks charged among the records not shipped yet,
    /// per organization and month (blocking; read once at start; `None` past `max`). Empty
    /// on a single node.
    pub fn unshipped_charges_blocking(
        &self,
        max: usize,
    ) -> anyhow::Result<Option<shipping::ChargedIds>> {
        let Some(ship) = &self.ship else {
            return Ok(Some(Vec::new()));
        };
        Ok(ship.index.unshipped_charges(&self.env, self.db, max)?)
    }

    /// The checks charged to each quota, as committed (blocking; read once at start).
    pub fn charges_blocking(&self) -> anyhow::Result<charges::JournalCharges> {
        Ok(self.charges.read(&self.env)?)
    }

    /// Records that records up to `seq` are in the fleet's table.
    pub async fn set_shipped(&self, seq: u64) -> anyhow::Result<()> {
        let Some(ship) = &self.ship else {
            return Ok(());
        };
        let (env, index) = (self.env.clone(), ship.index);
        glommio::executor()
            .spawn_blocking(move || index.set_shipped(&env, seq))
            .await?;
        ship.shipped.set(seq);
        Ok(())
    }

    /// In a fleet: deletes the records shipped to the fleet's table whose request ids are
    /// before `before_ms` (never one not shipped yet), in slices of
    /// [`PRUNE_SLICE_RECORDS_MAX`], each its own short write transaction on the blocking pool,
    /// with [`PRUNE_SLICE_PAUSE`] between them so that the checks' commits go in between.
    /// Returns how many. Nothing on a single node.
    pub async fn prune_shipped(&self, before_ms: i64) -> anyhow::Result<usize> {
        let Some(ship) = &self.ship else {
            return Ok(0);
        };
        let index = ship.index;
        let env = self.env.clone();
        let floor = glommio::executor()
            .spawn_blocking(move || index.unshipped_floor(&env, PRUNE_UNSHIPPED_READ_MAX))
            .await?;
        let Some(mut floor) = floor else {
            tracing::debug!(
                "more than {PRUNE_UNSHIPPED_READ_MAX} records wait to ship: no prune this pass"
            );
            return Ok(0);
        };
        let before: std::sync::Arc<str> = query::id_floor(before_ms).into();
        let (mut deleted, mut max) = (0, PRUNE_SLICE_RECORDS_MAX);
        loop {
            let (env, db, before) = (self.env.clone(), self.db, before.clone());
            let (slice, back) = glommio::executor()
                .spawn_blocking(move || {
                    let slice = index.prune_shipped(&env, db, &before, &mut floor, max);
                    (slice, floor)
                })
                .await;
            floor = back;
            let slice = match slice {
                Ok(slice) => slice,
                // A full map: a delete writes pages too; smaller ones fit, and free pages.
                Err(error) => match staging::smaller_after(&error, max) {
                    Some(smaller) => {
                        max = smaller;
                        continue;
                    }
                    None => return Err(error.into()),
                },
            };
            deleted += slice;
            self.metrics.journal_pruned(slice);
            if slice < max {
                return Ok(deleted);
            }
            max = (max * 2).min(PRUNE_SLICE_RECORDS_MAX);
            glommio::timer::sleep(PRUNE_SLICE_PAUSE).await;
        }
    }

    /// Records committed and not shipped yet (0 on a single node).
    pub fn unshipped_count(&self) -> u64 {
        self.ship.as_ref().map_or(0, |ship| {
            (ship.next.get() - 1).saturating_sub(ship.shipped.get())
        })
    }

    /// At a graceful stop: everything staged moved to the disk journal and the staging
    /// removed, or (without staging) an fsync (the interval policy may have commits not yet on
    /// disk). Blocking.
    pub fn sync_blocking(&self) {
        let Some(staging) = &self.staging else {
            if let Err(error) = self.env.force_sync() {
                tracing::error!(%error, "journal fsync at stop failed");
            }
            return;
        };
        let disk = staging::DiskJournal {
            env: &self.env,
            records: self.db,
            charges: self.charges,
            order: self.ship.as_ref().map(|ship| ship.index),
            marks: staging.marks,
        };
        let moved = match &*staging.staged.borrow() {
            Some(staged) => staging::move_all(staged, &disk).map(|_| ()),
            // Being made anew: everything was moved.
            None => self.env.force_sync(),
        };
        if let Err(error) = moved {
            // Left staged: the next start moves it (unless the machine restarts first).
            tracing::error!(%error, "moving the staged journal records at stop failed");
            return;
        }
        if let Err(error) = std::fs::remove_dir_all(&staging.dir) {
            tracing::warn!(%error, dir = %staging.dir.display(), "removing the journal's staging");
        }
    }
}

/// Whether a line rate-limited by `logged_at` is due (none in the last
/// [`FAILURE_LOG_INTERVAL`]); if so, it is taken as logged now.
fn log_due(logged_at: &Cell<Option<Instant>>) -> bool {
    let due = logged_at
        .get()
        .is_none_or(|at| at.elapsed() >= FAILURE_LOG_INTERVAL);
    if due {
        logged_at.set(Some(Instant::now()));
    }
    due
}

#[cfg(test)]
mod tests {
    use super::*;

    fn record(id: &str) -> JournalRecord<'static> {
        query::tests::record(id, "k1", 1_764_000_000_000)
    }

    fn config(sync: SyncPolicy, staging: Option<PathBuf>) -> JournalConfig {
        JournalConfig {
            sync,
            batch_records_max: 512,
            map_bytes: 64 << 20,
            ship: false,
            staging,
        }
    }

    /// Issue 13: the commits of concurrent checks are grouped, and no append returns before
    /// its record is committed: a read transaction (which sees committed data only) finds each
    /// record the moment its append returns.
    fn appends_return_only_once_committed(sync: SyncPolicy) {
        glommio::LocalExecutorBuilder::default()
            .spawn(move || async move {
                let dir = tempfile::tempdir().expect("tempdir");
                let config = config(sync, None);
                let journal =
                    Journal::start(dir.path(), 0, config, Metrics::new(true)).expect("journal");
                let checks: Vec<_> = (0..200)
                    .map(|check| {
                        let journal = journal.clone();
                        glommio::spawn_local(async move {
                            let id = format!("{check:05}");
                            let mut record = record(&id);
                            // One check of four operations (the marked layout).
                            record.units = if check == 7 { 4 } else { 1 };
                            journal.append(&record).await.expect("committed");
                            let txn = journal.env.read_txn().expect("read");
                            assert!(
                                journal.db.get(&txn, &id).expect("get").is_some(),
                                "record {id} answered before its commit"
                            );
                        })
                    })
                    .collect();
                for check in checks {
                    check.await;
                }
                let commits = journal.commits.get();
                assert!(commits < 20, "{commits} commits for 200 concurrent records");
                drop(dir);
            })
            .expect("executor")
            .join()
            .expect("test");
    }

    #[test]
    fn appends_return_only_once_committed_on_the_shard() {
        appends_return_only_once_committed(SyncPolicy::Interval(Duration::from_millis(100)));
    }

    #[test]
    fn appends_return_only_once_committed_and_synced() {
        appends_return_only_once_committed(SyncPolicy::Always);
    }

    /// Issue 13: with staging, no answer waits for the disk journal. While another thread
    /// holds its writer (as a commit stuck behind a bulk writer's I/O does), appends return,
    /// each committed to staging; once the writer lets go, the mover moves them all, and a
    /// graceful stop leaves no staging behind.
    #[test]
    fn staged_appends_do_not_wait_for_the_disk_journal() {
        glommio::LocalExecutorBuilder::default()
            .spawn(|| async {
                let dir = tempfile::tempdir().expect("tempdir");
                let root = dir.path().join("staging-root");
                let config = config(
                    SyncPolicy::Interval(Duration::from_millis(20)),
                    Some(root.clone()),
                );
                let journal =
                    Journal::start(dir.path(), 0, config, Metrics::new(true)).expect("journal");
                let env = journal.env.clone();
                let (held, is_held) = std::sync::mpsc::channel();
                let (release, released) = std::sync::mpsc::channel::<()>();
                let holder = std::thread::spawn(move || {
                    let txn = env.write_txn().expect("writer");
                    held.send(()).expect("held");
                    let let_go = released.recv_timeout(Duration::from_secs(30)).is_ok();
                    drop(txn);
                    let_go
                });
                is_held.recv().expect("held");
                let checks: Vec<_> = (0..100)
                    .map(|check| {
                        let journal = journal.clone();
                        glommio::spawn_local(async move {
                            let id = format!("{check:05}");
                            let mut record = record(&id);
                            // One check of four operations (the marked layout).
                            record.units = if check == 7 { 4 } else { 1 };
                            journal.append(&record).await.expect("committed");
                        })
                    })
                    .collect();
                for check in checks {
                    check.await;
                }
                {
                    let staged = journal.staging.as_ref().expect("staging").staged.borrow();
                    let staged = staged.as_ref().expect("staged");
                    let txn = staged.env.read_txn().expect("read");
                    assert_eq!(
                        staged.db.len(&txn).expect("len"),
                        100,
                        "committed to staging"
                    );
                }
                let _ = release.send(());
                assert!(
                    holder.join().expect("holder"),
                    "the appends returned only once the disk journal's writer let go"
                );
                let on_disk = || {
                    let txn = journal.env.read_txn().expect("read");
                    journal.db.len(&txn).expect("len")
                };
                let deadline = Instant::now() + Duration::from_secs(10);
                while on_disk() < 100 {
                    assert!(Instant::now() < deadline, "the mover moved {}", on_disk());
                    glommio::timer::sleep(Duration::from_millis(10)).await;
                }
                let charges = journal.charges_blocking().expect("charges");
                assert_eq!(charges.counts.iter().map(|(_, n)| n).sum::<u64>(), 103);
                journal.append(&record("00100")).await.expect("committed");
                journal.sync_blocking();
                assert_eq!(on_disk(), 101, "moved at the stop");
                assert!(!root.join("shard-0").exists(), "no staging left behind");
                drop(dir);
            })
            .expect("executor")
            .join()
            .expect("test");
    }

    /// Without staging, a failed fsync of the interval: checks are refused and the journal
    /// says it fails until an fsync succeeds; a commit or probe meanwhile does not end it.
    #[test]
    fn a_failed_interval_fsync_refuses_checks_until_one_succeeds() {
        glommio::LocalExecutorBuilder::default()
            .spawn(|| async {
                let dir = tempfile::tempdir().expect("tempdir");
                let config = config(SyncPolicy::Interval(Duration::from_secs(3_600)), None);
                let journal =
                    Journal::start(dir.path(), 0, config, Metrics::new(true)).expect("journal");
                journal.append(&record("00001")).await.expect("committed");
                let eio = || heed::Error::Io(std::io::Error::from_raw_os_error(libc::EIO));
                journal.synced(Err(eio()), Duration::ZERO);
                assert!(journal.is_failing());
                assert!(journal.append(&record("00002")).await.is_err());
                journal.probe().await;
                journal.recovered();
                assert!(journal.is_failing(), "only an fsync ends it");
                journal.synced(Ok(()), Duration::ZERO);
                assert!(!journal.is_failing());
                journal.append(&record("00003")).await.expect("committed");
                drop(dir);
            })
            .expect("executor")
            .join()
            .expect("test");
    }

    /// The disk was slow for long and staged commits filled the tmpfs: the commits after go to
    /// the disk journal (numbered for shipping in their transaction, after what the mover
    /// numbered), no check is refused, and the stop's move still empties the full tmpfs.
    #[test]
    fn a_full_staging_tmpfs_sends_commits_to_the_disk_journal() {
        // Unmounted after the executor, whose tasks hold the journal, has ended.
        let tmpfs = staging::tests::SmallTmpfs::mount(2 << 20);
        let root = tmpfs.dir.path().join("staging-root");
        glommio::LocalExecutorBuilder::default()
            .spawn(|| async {
                let dir = tempfile::tempdir().expect("tempdir");
                let config = JournalConfig {
                    ship: true,
                    batch_records_max: 8,
                    // The mover does not run unless the test runs it.
                    ..config(SyncPolicy::Interval(Duration::from_secs(3_600)), Some(root))
                };
                let journal =
                    Journal::start(dir.path(), 0, config, Metrics::new(true)).expect("journal");
                const CHECKS: usize = 3_000;
                let checks: Vec<_> = (0..CHECKS)
                    .map(|check| {
                        let journal = journal.clone();
                        glommio::spawn_local(async move {
                            let mut record = record(&format!("{check:05}"));
                            record.reference = Some(std::borrow::Cow::Owned("r".repeat(1_000)));
                            journal.append(&record).await.is_ok()
                        })
                    })
                    .collect();
                let mut committed = 0;
                for check in checks {
                    committed += usize::from(check.await);
                }
                assert_eq!(committed, CHECKS, "no check refused");
                assert!(!journal.is_failing());
                let staging = journal.staging.as_ref().expect("staging");
                let staged = || {
                    let staged = staging.staged.borrow();
                    let staged = staged.as_ref().expect("staged");
                    let txn = staged.env.read_txn().expect("read");
                    staged.db.len(&txn).expect("len") as usize
                };
                let on_disk = || {
                    let txn = journal.env.read_txn().expect("read");
                    journal.db.len(&txn).expect("len") as usize
                };
                let first_staged = staged();
                assert!(
                    first_staged > 0 && on_disk() > 0,
                    "{first_staged} staged, {} on disk",
                    on_disk()
                );
                assert_eq!(first_staged + on_disk(), CHECKS);
                assert!(
                    journal.disk_commits_unsynced.get() > 0,
                    "the mover's next pass fsyncs the commits past the full staging"
                );
                // The mover empties the full tmpfs (its deletes fit in the room commits
                // left), and staging is made anew: the next commit is staged again.
                let mut slice_max = staging::MOVE_SLICE_RECORDS;
                journal
                    .move_slices(staging, &mut slice_max)
                    .await
                    .expect("moved");
                while staging.unmoved.get() > 0 || staged() > 0 {
                    journal
                        .move_slices(staging, &mut slice_max)
                        .await
                        .expect("moved");
                }
                assert_eq!(on_disk(), CHECKS);
                assert!(staging.overflowed.get());
                journal.renew_staging(staging);
                assert!(!staging.overflowed.get(), "made anew");
                journal.append(&record("03000")).await.expect("committed");
                assert_eq!(staged(), 1, "staged again");
                journal.sync_blocking();
                assert_eq!(on_disk(), CHECKS + 1, "moved at the stop");
                // Each record numbered once for shipping: none overwrote another's number.
                let mut numbered = 0;
                let mut batch = journal.unshipped().await.expect("unshipped");
                while !batch.is_empty() {
                    numbered += batch.len();
                    journal.set_shipped(batch.last_seq).await.expect("shipped");
                    batch = journal.unshipped().await.expect("unshipped");
                }
                assert_eq!(numbered, CHECKS + 1);
                drop(dir);
            })
            .expect("executor")
            .join()
            .expect("test");
        drop(tmpfs);
    }

    /// A commit on the shard's thread held up longer than [`INLINE_COMMIT_SLOW`] by another
    /// writer: into the disk journal, it sends the next ones to the blocking threads; into
    /// staging (a tmpfs, where only the mover holds the lock up), it does not.
    fn slow_inline_commit(staged: bool) {
        glommio::LocalExecutorBuilder::default()
            .spawn(move || async move {
                let dir = tempfile::tempdir().expect("tempdir");
                let root = tempfile::tempdir_in(staging::DEFAULT_TMPFS).expect("tmpfs dir");
                let config = config(
                    SyncPolicy::Interval(Duration::from_millis(100)),
                    staged.then(|| root.path().to_owned()),
                );
                let journal =
                    Journal::start(dir.path(), 0, config, Metrics::new(true)).expect("journal");
                assert!(journal.commits_inline());
                // Another writer holds the lock for longer than a fast commit takes.
                let env = match &journal.staging {
                    Some(staging) => staging
                        .staged
                        .borrow()
                        .as_ref()
                        .expect("staged")
                        .env
                        .clone(),
                    None => journal.env.clone(),
                };
                let (held, is_held) = std::sync::mpsc::channel();
                let holder = std::thread::spawn(move || {
                    let txn = env.write_txn().expect("writer");
                    held.send(()).expect("held");
                    std::thread::sleep(INLINE_COMMIT_SLOW * 5);
                    drop(txn);
                });
                is_held.recv().expect("held");
                journal.append(&record("00001")).await.expect("committed");
                holder.join().expect("holder");
                assert_eq!(journal.commits_inline(), staged, "paused unless staged");
                journal.append(&record("00002")).await.expect("committed");
                drop(dir);
            })
            .expect("executor")
            .join()
            .expect("test");
    }

    #[test]
    fn a_slow_commit_into_the_disk_journal_pauses_inline_commits() {
        slow_inline_commit(false);
    }

    #[test]
    fn a_slow_commit_into_staging_does_not_pause_inline_commits() {
        slow_inline_commit(true);
    }
}
