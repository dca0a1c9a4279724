//! The fleet's monthly quota: one ledger in PostgreSQL, granted to nodes in blocks.
//!
//! `quota_ledger.used` counts the units leased to nodes, per organization and month; a grant
//! locks the organization's row, so the fleet never leases more than the quota. Shards lease
//! from their node as on a single node (a block is at most a quarter of what is left, shared
//! by the shards), so a quota is exceeded by at most the checks in progress, never by more
//! than one block per node.
//!
//! Each node also keeps, in `quota_leases`, the units it leased and returned and the units its
//! checks spent (one a check, or its operations under a plan that counts them: the records say).
//! They are counted by the journal shipper ([`super::shipper`]), in the same transaction that
//! inserts their records, only for records new to the table: exactly once.
//! A graceful stop returns what the shards hold. After a crash, the units the node held are
//! found when it starts again: leased − returned − spent − (units of the checks its journal
//! answered that are not in the fleet's table yet: the request ids read from the journal before
//! the shards serve ([`Backlog`]), less those the table already has, in the reconciling
//! transaction, so a batch shipped just before the crash or shipped again meanwhile is not
//! counted twice). They
//! go back to the ledger before the node's first new lease. So the ledger, the checks answered
//! and the fleet's journal agree, and no check that was not answered is charged.
//!
//! PostgreSQL down: a plan with `engine_down = "closed"` gets 503 `busy` once its shard's units
//! run out. Otherwise the node grants from its share of what was left when it last reached the
//! ledger (that, divided by the live nodes); those units are written to the ledger (and to the
//! node's `leased`) as soon as PostgreSQL answers again, or, after a crash meanwhile, by the
//! reconciliation (a node that spent more than it leased is charged the difference). While
//! its share lasts, a check is answered; past it, 503 `busy` (the quota may not be spent: the
//! fleet cannot tell). Once written, those units count in what the node knows the ledger has
//! used, so the next outage's share is of what is left after them: over any run of outages a
//! node grants in all at most what was left of the quota when it last saw the ledger's count
//! (before, each outage could take a whole share again). An organization the node has not
//! leased for this month counts as unused: its share is the quota divided by the live nodes.
//!
//! Every [`SPENT_REFRESH_EVERY`] the node reads the fleet's checks spent by the organizations
//! its shards hold units of (`Ledger::refresh_spent`): its shards judge from them when the
//! quota nears its end and their idle units should go back, whichever node serves the
//! organization now. The count a shard is told adds the other nodes' shipped checks to the
//! larger of this node's shipped count and its own reports, so a check is never counted
//! twice (shipped and reported) and the count never passes the truth.
//!
//! How it runs beside glommio: `tokio-postgres` on a thread of its own with a current-thread
//! runtime, as the follower and the shipper. A shard sends its grant requests and awaits the
//! answer ([`QuotaSource::send_take_quota`]): none of its blocking threads waits on
//! PostgreSQL; only a graceful stop's flush blocks.

use std::collections::HashMap;
use std::sync::atomic::Ordering;
use std::sync::{Arc, Condvar, Mutex};
use std::time::Duration;

use anyhow::Context as _;

use super::status::ControlPlaneStatus;
pub use super::status::QuotaStatus;
use crate::config::ClusterConfig;
use crate::limits::lease::{lock, AwaitedGrant, QuotaGrant, QuotaSource};
use crate::store::records::EngineDown;

/// How long a node waits at start for its shards to read their unshipped records before it
/// gives up reconciling (its held units then stay counted as used: stricter, never looser).
pub const BACKLOG_WAIT: Duration = Duration::from_secs(30);
/// Request ids a shard reads from its journal's unshipped records at start, at most (about
/// 50 bytes each). Past it the node does not reconcile: its held units stay counted.
pub const BACKLOG_IDS_MAX: usize = 250_000;
/// Request ids looked up in the fleet's table per query while reconciling.
const LOOKUP_CHUNK: usize = 10_000;
/// How often the ledger thread retries writing fallback units while PostgreSQL is down.
const SETTLE_EVERY: Duration = Duration::from_secs(1);
/// How often the ledger thread reads the fleet's checks spent by the organizations this
/// node's shards hold units of (`Ledger::refresh_spent`).
pub const SPENT_REFRESH_EVERY: Duration = Duration::from_secs(1);
/// How long that read may take before it is given up (grants wait behind it).
const SPENT_REFRESH_TIMEOUT: Duration = Duration::from_secs(2);
/// After a failed connection or request, requests are refused at once for this long (the
/// node's share answers them) before the ledger thread connects again.
const RECONNECT_AFTER: Duration = Duration::from_secs(1);

/// Per organization and month, the request ids of checks answered and not shipped, each with
/// its quota units.
type Charges = HashMap<(String, u32), Vec<(String, u32)>>;

/// What the shards had answered and not shipped when the process last stopped.
pub struct Backlog {
    shards: usize,
    counts: Mutex<BacklogCounts>,
    reported: Condvar,
}

#[derive(Default)]
struct BacklogCounts {
    reported: usize,
    /// A shard could not read its journal, or had too much to read: reconciling would guess.
    unknown: bool,
    charges: Charges,
}

impl Backlog {
    pub fn new(shards: usize) -> Backlog {
        Backlog {
            shards,
            counts: Mutex::default(),
            reported: Condvar::new(),
        }
    }

    /// One shard's charged request ids (`None`: it could not read them all).
    pub fn report(&self, charges: Option<crate::journal::shipping::ChargedIds>) {
        let mut counts = lock(&self.counts);
        counts.reported += 1;
        match charges {
            Some(charges) => {
                for (key, ids) in charges {
                    counts.charges.entry(key).or_default().extend(ids);
                }
            }
            None => counts.unknown = true,
        }
        self.reported.notify_all();
    }

    /// Every shard's ids, once all have reported (`None` past `wait`, or if one could not).
    fn charges(&self, wait: Duration) -> Option<Charges> {
        let counts = lock(&self.counts);
        let (counts, _) = self
            .reported
            .wait_timeout_while(counts, wait, |counts| counts.reported < self.shards)
            .unwrap_or_else(|e| e.into_inner());
        (counts.reported >= self.shards && !counts.unknown).then(|| counts.charges.clone())
    }

    /// Reconciled: the ids are not needed any more.
    fn settled(&self) {
        lock(&self.counts).charges = Charges::new();
    }
}

/// The ledger as this node saw it, and what it granted on its own while PostgreSQL was down.
#[derive(Default)]
struct Known {
    /// Per (organization, month): the ledger's `used` at this node's last grant.
    used: HashMap<(String, u32), u64>,
    /// Per (organization, month): units granted from this node's share (positive) or given
    /// back by its shards (negative) while the ledger could not be reached, not written yet.
    owed: HashMap<(String, u32), i64>,
    /// Per (organization, month): the checks the fleet's table counts for the other nodes and
    /// for this one (earlier runs included), as last read (at a grant, or by
    /// `Ledger::refresh_spent`). Both lag shipping.
    shipped: HashMap<(String, u32), Shipped>,
    /// Per (organization, month): the checks this node's shards reported spent in this run.
    reported: HashMap<(String, u32), u64>,
    /// Per (organization, month): this node's checks of earlier runs, as the table counted
    /// them when this run first read it (before its first grant of the organization, so
    /// none of this run's yet), less what this run had reported then.
    own_before: HashMap<(String, u32), u64>,
    /// The latest month a shard reported or was granted in: held units of earlier months are
    /// not read (their leases were dropped at the month's change).
    latest_month: u32,
    /// Per (organization, month): the checks the fleet spent as last told to the shards
    /// ([`Known::spent_now`]): for `X-Quota-Used` and for a shard's judgement of the quota's end.
    spent: HashMap<(String, u32), u64>,
    /// Per (organization, month), only while above 0: units this node's shards hold (granted,
    /// less given back and reported spent). The organizations `Ledger::refresh_spent` reads.
    held: HashMap<(String, u32), u64>,
}

/// Checks counted in the fleet's table for one organization and month.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
struct Shipped {
    others: u64,
    own: u64,
}

enum Request {
    Take {
        org: String,
        month: u32,
        limit: u64,
        want: u64,
        reply: TakeReply,
    },
    /// Not answered: the thread writes it, now or once the ledger answers again.
    Return { org: String, month: u32, units: u64 },
    /// Answered once what was asked before it is written (or could not be).
    Flush {
        reply: std::sync::mpsc::SyncSender<anyhow::Result<()>>,
    },
}

/// Where a grant's answer goes: a thread blocked on it, or a shard awaiting it.
enum TakeReply {
    Blocking(std::sync::mpsc::SyncSender<anyhow::Result<QuotaGrant>>),
    Awaited(futures_channel::oneshot::Sender<anyhow::Result<QuotaGrant>>),
}

impl TakeReply {
    /// Sends `result`; gives it back when nobody waits for it any more.
    fn send(self, result: anyhow::Result<QuotaGrant>) -> Result<(), anyhow::Result<QuotaGrant>> {
        match self {
            TakeReply::Blocking(reply) => reply.send(result).map_err(|unsent| unsent.0),
            TakeReply::Awaited(reply) => reply.send(result),
        }
    }
}

/// How long an answer of the quota thread may take: two rounds with PostgreSQL and a
/// connection.
const ANSWER_WAIT: Duration =
    Duration::from_secs(super::ROUND_TIMEOUT.as_secs() * 2 + super::CONNECT_TIMEOUT.as_secs());

/// The quota on PostgreSQL.
pub struct PgQuota {
    requests: tokio::sync::mpsc::UnboundedSender<Request>,
    known: Arc<Mutex<Known>>,
    status: Arc<QuotaStatus>,
    control: Arc<ControlPlaneStatus>,
}

impl PgQuota {
    pub fn start(
        cluster: ClusterConfig,
        backlog: Arc<Backlog>,
        control: Arc<ControlPlaneStatus>,
    ) -> anyhow::Result<PgQuota> {
        let (requests, mut queue) = tokio::sync::mpsc::unbounded_channel::<Request>();
        let known = Arc::new(Mutex::new(Known::default()));
        let status = Arc::new(QuotaStatus::default());
        status.ledger_up.store(true, Ordering::Relaxed);
        let _ = control.quota.set(status.clone());
        let (thread_known, thread_status) = (known.clone(), status.clone());
        super::spawn_engine_thread("modgate-quota", move || async move {
            let node_id = cluster.node_id();
            let mut ledger = Ledger {
                node_id,
                client: None,
                backlog: Some(backlog),
                known: thread_known,
                status: thread_status,
                retry_at: tokio::time::Instant::now(),
                refreshed_at: tokio::time::Instant::now(),
                refresh_from: 0,
            };
            loop {
                let wait = SETTLE_EVERY.min(SPENT_REFRESH_EVERY);
                let request = match tokio::time::timeout(wait, queue.recv()).await {
                    Ok(Some(request)) => Some(request),
                    Ok(None) => break,
                    Err(_) => None,
                };
                let refresh = ledger.refresh_due();
                let ready = match &request {
                    Some(_) => ledger.ready(&cluster).await,
                    // Idle: only worth a connection if units granted on the node's own are
                    // still to be written, or the fleet's counts are to be read.
                    None if ledger.owes() || refresh => ledger.ready(&cluster).await,
                    None => continue,
                };
                if let Some(request) = request {
                    if ready {
                        ledger.serve(request).await;
                    } else {
                        ledger.refuse(request);
                    }
                }
                if ready && refresh {
                    ledger.refresh_spent().await;
                }
            }
        })?;
        Ok(PgQuota {
            requests,
            known,
            status,
            control,
        })
    }

    fn ask<T>(
        &self,
        make: impl FnOnce(std::sync::mpsc::SyncSender<anyhow::Result<T>>) -> Request,
    ) -> anyhow::Result<T> {
        let (reply, answer) = std::sync::mpsc::sync_channel(1);
        self.requests
            .send(make(reply))
            .map_err(|_| anyhow::anyhow!("the quota thread has stopped"))?;
        answer
            .recv_timeout(ANSWER_WAIT)
            .map_err(|_| anyhow::anyhow!("the quota ledger did not answer in time"))?
    }

    /// While the ledger cannot be reached: up to `want` units of this node's share of what was
    /// left at its last grant (`None`: the share is spent).
    fn fallback(&self, org: &str, month: u32, limit: u64, want: u64) -> Option<QuotaGrant> {
        let live = u64::from(self.control.live_nodes());
        let mut known = lock(&self.known);
        let grant = known.fallback((org.to_owned(), month), limit, live, want)?;
        known.hold((org.to_owned(), month), grant.units as i64);
        drop(known);
        self.status
            .fallback_units
            .fetch_add(grant.units, Ordering::Relaxed);
        Some(grant)
    }
}

impl Known {
    /// The checks the fleet spent for `key`, as well as this node knows without counting one
    /// twice: the other nodes' as shipped, and this node's own, the larger of its shipped count
    /// (earlier runs included) and its earlier runs' count plus what its shards reported in
    /// this run. Each part is at most the truth, so the count never passes it; it never goes
    /// down.
    fn spent_now(&mut self, key: &(String, u32)) -> u64 {
        let shipped = self.shipped.get(key).copied().unwrap_or_default();
        let reported = self.reported.get(key).copied().unwrap_or(0);
        let before = self.own_before.get(key).copied().unwrap_or(0);
        let count = shipped.others + shipped.own.max(before + reported);
        let spent = self.spent.entry(key.clone()).or_default();
        *spent = (*spent).max(count);
        *spent
    }

    /// What the table counted for `key` (at a grant or a refresh): the first time in this run,
    /// it also says what earlier runs of this node spent.
    fn read_shipped(&mut self, key: (String, u32), shipped: Shipped) {
        let reported = self.reported.get(&key).copied().unwrap_or(0);
        self.own_before
            .entry(key.clone())
            .or_insert(shipped.own.saturating_sub(reported));
        self.shipped.insert(key, shipped);
    }

    /// A shard reported or was granted in `month`: what is kept of months before the one
    /// before it is forgotten, and held units of earlier months are no longer read.
    fn saw_month(&mut self, month: u32) {
        if month > self.latest_month {
            self.latest_month = month;
            self.forget_before(month);
            self.held.retain(|(_, held_month), _| *held_month >= month);
        }
    }

    /// `units` more held by this node's shards (negative: fewer).
    fn hold(&mut self, key: (String, u32), units: i64) {
        let held = self.held.get(&key).copied().unwrap_or(0);
        match held.saturating_add_signed(units) {
            0 => self.held.remove(&key),
            held => self.held.insert(key, held),
        };
    }

    /// Forgets what is kept of months before `month - 1` (nothing is asked of them any more),
    /// but units owed to the ledger.
    fn forget_before(&mut self, month: u32) {
        let recent = |key: &(String, u32)| key.1 + 1 >= month;
        self.used.retain(|key, _| recent(key));
        self.shipped.retain(|key, _| recent(key));
        self.reported.retain(|key, _| recent(key));
        self.own_before.retain(|key, _| recent(key));
        self.spent.retain(|key, _| recent(key));
        self.held.retain(|key, _| recent(key));
    }

    /// Up to `want` units of this node's share (of `live` nodes) of what the ledger had left
    /// as this node last knew it, less what it granted since (`None`: the share is spent).
    fn fallback(
        &mut self,
        key: (String, u32),
        limit: u64,
        live: u64,
        want: u64,
    ) -> Option<QuotaGrant> {
        let used = self.used.get(&key).copied().unwrap_or(0);
        let share = limit.saturating_sub(used) / live.max(1);
        let owed = self.owed.entry(key).or_default();
        let units = want.min(share.saturating_sub((*owed).max(0) as u64));
        if units == 0 {
            return (used >= limit).then_some(QuotaGrant {
                units: 0,
                used,
                spent: 0,
            });
        }
        *owed += units as i64;
        let owed = (*owed).max(0) as u64;
        // `spent` is this node's own count, which `take_quota` keeps.
        Some(QuotaGrant {
            units,
            used: used + owed,
            spent: 0,
        })
    }

    /// `written` (units granted on this node's share, or given back, while the ledger could
    /// not be reached) are in the ledger now: they leave `owed` and count in `used`. Without
    /// the second, a node that got no grant from the ledger in between took a whole share
    /// again at every outage, and outages one after another had no bound.
    fn written(&mut self, written: Vec<((String, u32), i64)>) {
        for (key, units) in written {
            if let Some(left) = self.owed.get_mut(&key) {
                *left -= units;
            }
            let used = self.used.entry(key).or_default();
            *used = used.saturating_add_signed(units);
        }
        self.owed.retain(|_, units| *units != 0);
    }
}

/// Units to write once the ledger answers again: granted (positive) or given back.
fn owe(known: &Mutex<Known>, org: String, month: u32, units: i64) {
    *lock(known).owed.entry((org, month)).or_default() += units;
}

/// `future`, or an error past [`super::ROUND_TIMEOUT`].
async fn bounded<T>(
    future: impl std::future::Future<Output = anyhow::Result<T>>,
) -> anyhow::Result<T> {
    tokio::time::timeout(super::ROUND_TIMEOUT, future)
        .await
        .unwrap_or_else(|_| Err(anyhow::anyhow!("the quota ledger timed out")))
}

/// The ledger thread's side: its connection and what it must do before serving.
struct Ledger {
    node_id: String,
    client: Option<tokio_postgres::Client>,
    /// Until the last run's held units have been given back (or judged unknowable).
    backlog: Option<Arc<Backlog>>,
    known: Arc<Mutex<Known>>,
    status: Arc<QuotaStatus>,
    /// No connection attempt before this.
    retry_at: tokio::time::Instant,
    /// When the fleet's counts of checks spent were last read.
    refreshed_at: tokio::time::Instant,
    /// Where the next read of them starts among the organizations (see `refresh_spent`).
    refresh_from: usize,
}

impl Ledger {
    /// Whether [`Self::refresh_spent`] is due: [`SPENT_REFRESH_EVERY`] since the last, and
    /// this node's shards hold units of some organization.
    fn refresh_due(&self) -> bool {
        self.refreshed_at.elapsed() >= SPENT_REFRESH_EVERY && {
            let known = lock(&self.known);
            known
                .held
                .keys()
                .any(|(_, month)| *month == known.latest_month)
        }
    }

    /// Reads the fleet's checks spent by the organizations this node's shards hold units of
    /// (in the latest month they hold units of; at most [`LOOKUP_CHUNK`] a pass, in turn),
    /// into what the shards' reports return ([`QuotaSource::report_spent`]). A shard judges
    /// from them whether the quota is near its end, when it gives back units idle for a
    /// second; without this read, a node learned of the other nodes' checks only at its own
    /// grants, so units left on a node the traffic had moved away from stayed there all month
    /// while other nodes refused checks. A read that fails or takes over
    /// [`SPENT_REFRESH_TIMEOUT`] drops the connection (the next request connects again) and
    /// nothing else: it only helps.
    async fn refresh_spent(&mut self) {
        let Some(client) = self.client.as_ref() else {
            return;
        };
        let (month, mut orgs) = {
            let known = lock(&self.known);
            let month = known.latest_month;
            let orgs: Vec<String> = known
                .held
                .keys()
                .filter(|(_, m)| *m == month)
                .map(|(org, _)| org.clone())
                .collect();
            (month, orgs)
        };
        if orgs.is_empty() {
            return;
        }
        orgs.sort_unstable();
        let from = self.refresh_from % orgs.len();
        orgs.rotate_left(from);
        orgs.truncate(LOOKUP_CHUNK);
        self.refresh_from = from + orgs.len();
        let read = tokio::time::timeout(
            SPENT_REFRESH_TIMEOUT,
            fleet_spent(client, &self.node_id, month, &orgs),
        )
        .await
        .unwrap_or_else(|_| Err(anyhow::anyhow!("timed out")));
        match read {
            Ok(counts) => {
                let mut known = lock(&self.known);
                for (org, shipped) in counts {
                    let key = (org, month);
                    known.read_shipped(key.clone(), shipped);
                    known.spent_now(&key);
                }
            }
            Err(error) => {
                tracing::warn!(
                    error = format!("{error:#}"),
                    "reading the fleet's checks spent failed; read again in a second"
                );
                self.client = None;
            }
        }
        self.refreshed_at = tokio::time::Instant::now();
    }

    fn owes(&self) -> bool {
        lock(&self.known).owed.values().any(|&units| units != 0)
    }

    fn failed(&mut self) {
        self.client = None;
        self.retry_at = tokio::time::Instant::now() + RECONNECT_AFTER;
        self.status.ledger_up.store(false, Ordering::Relaxed);
    }

    /// Connected, reconciled once, and the units granted while PostgreSQL was down written:
    /// whether requests can be served.
    async fn ready(&mut self, cluster: &ClusterConfig) -> bool {
        if self.client.as_ref().is_none_or(|c| c.is_closed()) {
            if tokio::time::Instant::now() < self.retry_at {
                // Failed a moment ago: answer at once (the node's share answers meanwhile).
                return false;
            }
            self.client = super::connect(cluster, "quota").await.ok();
        }
        let Some(client) = self.client.as_mut() else {
            self.failed();
            return false;
        };
        if let Some(backlog) = &self.backlog {
            // Before this run's first lease: give back what the last run held.
            let charges = backlog.charges(BACKLOG_WAIT);
            match bounded(reconcile(client, &self.node_id, charges.as_ref())).await {
                Ok((returned, charged)) => {
                    backlog.settled();
                    self.backlog = None;
                    if returned > 0 || charged > 0 {
                        tracing::info!(
                            returned,
                            charged,
                            "quota units this node held (or spent unrecorded) when it last stopped were settled with the ledger"
                        );
                    }
                }
                Err(error) => {
                    tracing::warn!(
                        error = format!("{error:#}"),
                        "quota reconciliation failed; retried at the next lease"
                    );
                    self.failed();
                    return false;
                }
            }
        }
        let owed: Vec<((String, u32), i64)> = lock(&self.known)
            .owed
            .iter()
            .filter(|(_, &units)| units != 0)
            .map(|(key, &units)| (key.clone(), units))
            .collect();
        if !owed.is_empty() {
            if let Err(error) = bounded(charge(client, &self.node_id, &owed)).await {
                tracing::warn!(
                    error = format!("{error:#}"),
                    "writing quota units granted while the ledger was down failed; retried"
                );
                self.failed();
                return false;
            }
            // Written: what the shards granted or gave back meanwhile stays to write.
            lock(&self.known).written(owed);
        }
        self.status.ledger_up.store(true, Ordering::Relaxed);
        true
    }

    /// Answers `request` without the ledger: a refusal, or a return kept to write later.
    fn refuse(&self, request: Request) {
        let why = || anyhow::anyhow!("PostgreSQL cannot be reached");
        match request {
            Request::Take { reply, .. } => drop(reply.send(Err(why()))),
            Request::Return { org, month, units } => owe(&self.known, org, month, -(units as i64)),
            Request::Flush { reply } => drop(reply.send(Err(why()))),
        }
    }

    /// Answers `request`; only after [`Self::ready`] said yes.
    async fn serve(&mut self, request: Request) {
        let Some(client) = self.client.as_mut() else {
            return self.refuse(request);
        };
        self.status.round_trips.fetch_add(1, Ordering::Relaxed);
        let node_id = self.node_id.as_str();
        let ok = match request {
            Request::Take {
                org,
                month,
                limit,
                want,
                reply,
            } => {
                let result = bounded(take(client, node_id, &org, month, limit, want)).await;
                let ok = result.is_ok();
                // Before the answer: a shard told of a failure asks whether the ledger is down.
                self.status.ledger_up.store(ok, Ordering::Relaxed);
                let result = result.map(|(grant, shipped)| {
                    let mut known = lock(&self.known);
                    known.saw_month(month);
                    known.used.insert((org.clone(), month), grant.used);
                    known.read_shipped((org.clone(), month), shipped);
                    // Counted before the answer goes: a shard that gets it may give units back
                    // at once.
                    known.hold((org.clone(), month), grant.units as i64);
                    grant
                });
                if let Err(Ok(grant)) = reply.send(result) {
                    // The shard stopped waiting: the units it never got go back.
                    lock(&self.known).hold((org.clone(), month), -(grant.units as i64));
                    owe(&self.known, org, month, -(grant.units as i64));
                }
                ok
            }
            Request::Return { org, month, units } => {
                let result = bounded(give_back(client, node_id, &org, month, units)).await;
                if result.is_err() {
                    owe(&self.known, org, month, -(units as i64));
                }
                result.is_ok()
            }
            Request::Flush { reply } => {
                let _ = reply.send(Ok(()));
                true
            }
        };
        if !ok {
            self.failed();
        }
    }
}

async fn take(
    client: &mut tokio_postgres::Client,
    node_id: &str,
    org: &str,
    month: u32,
    limit: u64,
    want: u64,
) -> anyhow::Result<(QuotaGrant, Shipped)> {
    let month = month as i32;
    let tx = client.transaction().await?;
    tx.execute(
        "INSERT INTO quota_ledger (org, month) VALUES ($1, $2) ON CONFLICT DO NOTHING",
        &[&org, &month],
    )
    .await?;
    let used: i64 = tx
        .query_one(
            "SELECT used FROM quota_ledger WHERE org = $1 AND month = $2 FOR UPDATE",
            &[&org, &month],
        )
        .await?
        .get(0);
    let used = used.max(0) as u64;
    let units = want.min(limit.saturating_sub(used));
    if units > 0 {
        add_leased(&tx, node_id, org, month, units as i64).await?;
    }
    let row = tx
        .query_one(
            "SELECT coalesce(sum(spent) FILTER (WHERE node_id <> $3), 0)::bigint,
                    coalesce(sum(spent) FILTER (WHERE node_id = $3), 0)::bigint
             FROM quota_leases WHERE org = $1 AND month = $2",
            &[&org, &month, &node_id],
        )
        .await?;
    tx.commit().await.context("committing a quota lease")?;
    let shipped = Shipped {
        others: row.get::<_, i64>(0).max(0) as u64,
        own: row.get::<_, i64>(1).max(0) as u64,
    };
    Ok((
        QuotaGrant {
            units,
            used: used + units,
            spent: shipped.others + shipped.own,
        },
        shipped,
    ))
}

/// The checks spent in `month` by each of `orgs` (as shipped): by the nodes other than
/// `node_id`, and by it.
async fn fleet_spent(
    client: &tokio_postgres::Client,
    node_id: &str,
    month: u32,
    orgs: &[String],
) -> anyhow::Result<Vec<(String, Shipped)>> {
    let rows = client
        .query(
            "SELECT org,
                    coalesce(sum(spent) FILTER (WHERE node_id <> $3), 0)::bigint,
                    coalesce(sum(spent) FILTER (WHERE node_id = $3), 0)::bigint
             FROM quota_leases WHERE month = $1 AND org = ANY($2) GROUP BY org",
            &[&(month as i32), &orgs, &node_id],
        )
        .await?;
    Ok(rows
        .iter()
        .map(|row| {
            let count = |at: usize| row.get::<_, i64>(at).max(0) as u64;
            let shipped = Shipped {
                others: count(1),
                own: count(2),
            };
            (row.get(0), shipped)
        })
        .collect())
}

/// Counts `units` in the ledger's `used` and in what `node_id` leased.
async fn add_leased(
    tx: &tokio_postgres::Transaction<'_>,
    node_id: &str,
    org: &str,
    month: i32,
    units: i64,
) -> anyhow::Result<()> {
    tx.execute(
        "INSERT INTO quota_ledger (org, month, used) VALUES ($1, $2, $3)
         ON CONFLICT (org, month) DO UPDATE SET used = quota_ledger.used + $3",
        &[&org, &month, &units],
    )
    .await?;
    tx.execute(
        "INSERT INTO quota_leases (node_id, org, month, leased) VALUES ($1, $2, $3, $4)
         ON CONFLICT (node_id, org, month) DO UPDATE SET leased = quota_leases.leased + $4",
        &[&node_id, &org, &month, &units],
    )
    .await?;
    Ok(())
}

/// Writes the units granted (they may take the ledger past the limit: they were granted, so
/// they count) and given back while the ledger could not be reached.
async fn charge(
    client: &mut tokio_postgres::Client,
    node_id: &str,
    owed: &[((String, u32), i64)],
) -> anyhow::Result<()> {
    let tx = client.transaction().await?;
    for ((org, month), units) in owed {
        let month = *month as i32;
        match *units {
            granted if granted > 0 => add_leased(&tx, node_id, org, month, granted).await?,
            returned => return_units(&tx, node_id, org, month, -returned).await?,
        }
    }
    tx.commit()
        .await
        .context("committing quota units granted while the ledger was down")?;
    Ok(())
}

async fn give_back(
    client: &mut tokio_postgres::Client,
    node_id: &str,
    org: &str,
    month: u32,
    units: u64,
) -> anyhow::Result<()> {
    let tx = client.transaction().await?;
    return_units(&tx, node_id, org, month as i32, units as i64).await?;
    tx.commit().await.context("committing a quota return")?;
    Ok(())
}

/// Per organization and month, what `node_id` leased and neither returned nor spent (negative:
/// it spent more than it leased), its rows locked until `tx` ends.
pub(super) async fn outstanding(
    tx: &tokio_postgres::Transaction<'_>,
    node_id: &str,
) -> anyhow::Result<Vec<(String, i32, i64)>> {
    let rows = tx
        .query(
            "SELECT org, month, leased - returned - spent FROM quota_leases
             WHERE node_id = $1 FOR UPDATE",
            &[&node_id],
        )
        .await?;
    Ok(rows
        .iter()
        .map(|row| (row.get(0), row.get(1), row.get(2)))
        .collect())
}

/// Takes `units` off the ledger's count and adds them to what `node_id` returned.
pub(super) async fn return_units(
    tx: &tokio_postgres::Transaction<'_>,
    node_id: &str,
    org: &str,
    month: i32,
    units: i64,
) -> anyhow::Result<()> {
    tx.execute(
        "UPDATE quota_ledger SET used = greatest(used - $3, 0) WHERE org = $1 AND month = $2",
        &[&org, &month, &units],
    )
    .await?;
    tx.execute(
        "UPDATE quota_leases SET returned = returned + $4
         WHERE node_id = $1 AND org = $2 AND month = $3",
        &[&node_id, &org, &month, &units],
    )
    .await?;
    Ok(())
}

/// Settles with the ledger what this node held when its last run ended: the units it held go
/// back; the checks it answered beyond what it leased (granted while the ledger was down and
/// not written before the end) are charged. Answers (returned, charged). `backlog` is the
/// request ids its journal answered and had not shipped (`None`: unknown, so nothing is
/// returned: the held units stay counted, which can only make the quota stricter).
async fn reconcile(
    client: &mut tokio_postgres::Client,
    node_id: &str,
    backlog: Option<&Charges>,
) -> anyhow::Result<(u64, u64)> {
    let Some(backlog) = backlog else {
        tracing::warn!("the journal's unshipped records could not be read: units this node held when it last stopped stay counted as used");
        return Ok((0, 0));
    };
    let tx = client.transaction().await?;
    // Locked first: a batch the shipper inserts meanwhile commits after this transaction, so
    // what is read below (the node's `spent` and the table's rows) is one consistent state.
    let (mut returned, mut charged) = (0, 0);
    for (org, month, outstanding) in outstanding(&tx, node_id).await? {
        let answered = backlog
            .get(&(org.clone(), month as u32))
            .map_or(&[][..], Vec::as_slice);
        let mut unshipped: i64 = answered.iter().map(|&(_, units)| i64::from(units)).sum();
        for chunk in answered.chunks(LOOKUP_CHUNK) {
            let ids: Vec<&str> = chunk.iter().map(|(id, _)| id.as_str()).collect();
            let found: std::collections::HashSet<String> = tx
                .query(
                    "SELECT request_id FROM journal WHERE request_id = ANY($1)",
                    &[&ids],
                )
                .await?
                .iter()
                .map(|row| row.get(0))
                .collect();
            let shipped: i64 = chunk
                .iter()
                .filter(|(id, _)| found.contains(id))
                .map(|&(_, units)| i64::from(units))
                .sum();
            unshipped -= shipped;
        }
        let unspent = outstanding - unshipped;
        if unspent > 0 {
            return_units(&tx, node_id, &org, month, unspent).await?;
            returned += unspent as u64;
        } else if unspent < 0 {
            add_leased(&tx, node_id, &org, month, -unspent).await?;
            charged += unspent.unsigned_abs();
        }
    }
    tx.commit().await?;
    Ok((returned, charged))
}

impl QuotaSource for PgQuota {
    fn quota_ledger_down(&self) -> bool {
        !self.status.ledger_up.load(Ordering::Relaxed)
    }

    fn take_quota(
        &self,
        org: &str,
        month: u32,
        limit: u64,
        want: u64,
        engine_down: EngineDown,
    ) -> anyhow::Result<QuotaGrant> {
        let answer = self.ask(|reply| Request::Take {
            org: org.to_owned(),
            month,
            limit,
            want,
            reply: TakeReply::Blocking(reply),
        });
        self.settle_take_quota(org, month, limit, want, engine_down, answer)
    }

    fn send_take_quota(
        &self,
        org: &str,
        month: u32,
        limit: u64,
        want: u64,
    ) -> Option<AwaitedGrant> {
        let (reply, answer) = futures_channel::oneshot::channel();
        // A send that fails drops `reply`: the answer is then "canceled", a failed grant.
        let _ = self.requests.send(Request::Take {
            org: org.to_owned(),
            month,
            limit,
            want,
            reply: TakeReply::Awaited(reply),
        });
        Some(AwaitedGrant {
            answer,
            wait: ANSWER_WAIT,
        })
    }

    fn settle_take_quota(
        &self,
        org: &str,
        month: u32,
        limit: u64,
        want: u64,
        engine_down: EngineDown,
        answer: anyhow::Result<QuotaGrant>,
    ) -> anyhow::Result<QuotaGrant> {
        let grant = match answer {
            Ok(grant) => grant,
            Err(error) if engine_down == EngineDown::Open => self
                .fallback(org, month, limit, want)
                .ok_or_else(|| error.context("this node's share of the quota is spent"))?,
            Err(error) => return Err(error),
        };
        let mut known = lock(&self.known);
        Ok(QuotaGrant {
            spent: known.spent_now(&(org.to_owned(), month)),
            ..grant
        })
    }

    /// Does not block either: no blocking thread is needed.
    fn try_return_quota(&self, org: &str, month: u32, units: u64) -> Option<anyhow::Result<()>> {
        Some(self.return_quota(org, month, units))
    }

    /// Does not wait: the ledger thread writes the return, now or once PostgreSQL answers
    /// again (if the node stops first, its next start's reconciliation returns the units).
    fn return_quota(&self, org: &str, month: u32, units: u64) -> anyhow::Result<()> {
        lock(&self.known).hold((org.to_owned(), month), -(units as i64));
        self.requests
            .send(Request::Return {
                org: org.to_owned(),
                month,
                units,
            })
            .map_err(|_| anyhow::anyhow!("the quota thread has stopped"))
    }

    fn quota_spent(&self, org: &str, month: u32) -> u64 {
        lock(&self.known)
            .spent
            .get(&(org.to_owned(), month))
            .copied()
            .unwrap_or(0)
    }

    fn report_spent(&self, org: &str, month: u32, spent: u64) -> u64 {
        let mut known = lock(&self.known);
        known.saw_month(month);
        let key = (org.to_owned(), month);
        if spent > 0 {
            *known.reported.entry(key.clone()).or_default() += spent;
            known.hold(key.clone(), -(spent as i64));
        }
        known.spent_now(&key)
    }

    /// Waits (bounded) until the returns the shards made at their stop are written.
    fn stop(&self) {
        if let Err(error) = self.ask(|reply| Request::Flush { reply }) {
            tracing::warn!(
                error = format!("{error:#}"),
                "quota units returned at stop could not be written: the next start returns them"
            );
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn shipped(others: u64, own: u64) -> Shipped {
        Shipped { others, own }
    }

    #[test]
    fn a_check_shipped_and_reported_is_counted_once() {
        let key = ("acme".to_owned(), 7);
        let mut known = Known::default();
        // The table: 100 checks of the other nodes, 30 of this node's earlier runs.
        known.shipped.insert(key.clone(), shipped(100, 30));
        assert_eq!(known.spent_now(&key), 130);
        // This run's shards report 10 checks, then 5 of them are shipped: 140 at most, never
        // 145 (the 5 counted as shipped and as reported).
        known.reported.insert(key.clone(), 10);
        assert_eq!(known.spent_now(&key), 130);
        known.shipped.insert(key.clone(), shipped(100, 35));
        assert_eq!(known.spent_now(&key), 135);
        // In a later run, what this run reported is only in the table.
        let mut later = Known::default();
        later.shipped.insert(key.clone(), shipped(100, 40));
        later.reported.insert(key.clone(), 2);
        assert_eq!(later.spent_now(&key), 140);
        // After a restart, this run's reports add to what earlier runs spent, as the table
        // said at this run's first read (before its first grant).
        let mut restarted = Known::default();
        restarted.read_shipped(key.clone(), shipped(100, 40));
        restarted.reported.insert(key.clone(), 3);
        assert_eq!(restarted.spent_now(&key), 143);
        // A count never goes down (a node forgotten takes its rows with it).
        later.shipped.insert(key.clone(), shipped(0, 40));
        assert_eq!(later.spent_now(&key), 140);
    }

    #[test]
    fn units_held_are_kept_while_above_zero_and_old_months_are_forgotten() {
        let mut known = Known::default();
        let key = |month| ("acme".to_owned(), month);
        known.hold(key(7), 12);
        known.hold(key(7), -11);
        assert_eq!(known.held.get(&key(7)), Some(&1));
        known.hold(key(7), -5);
        assert!(known.held.is_empty(), "not below zero, and gone at zero");
        for month in [5, 6, 7] {
            known.hold(key(month), 1);
            known.used.insert(key(month), 1);
            known.spent.insert(key(month), 1);
        }
        known.forget_before(7);
        let months = |map: &HashMap<(String, u32), u64>| {
            let mut months: Vec<u32> = map.keys().map(|(_, month)| *month).collect();
            months.sort_unstable();
            months
        };
        assert_eq!(months(&known.held), [6, 7]);
        assert_eq!(months(&known.used), [6, 7]);
        assert_eq!(months(&known.spent), [6, 7]);
    }

    #[test]
    fn outages_one_after_another_take_shares_of_what_is_left() {
        let key = || ("acme".to_owned(), 7);
        let mut known = Known::default();
        known.used.insert(key(), 400_000);
        // Two live nodes, a quota of 1,000,000: this node's share is half of what is left.
        let first = known.fallback(key(), 1_000_000, 2, u64::MAX).unwrap();
        assert_eq!((first.units, first.used), (300_000, 700_000));
        assert!(
            known.fallback(key(), 1_000_000, 2, 1).is_none(),
            "the share is spent"
        );
        // The ledger answers again and takes what was granted; then a second outage.
        known.written(vec![(key(), 300_000)]);
        assert!(known.owed.is_empty());
        assert_eq!(known.used[&key()], 700_000);
        let second = known.fallback(key(), 1_000_000, 2, u64::MAX).unwrap();
        assert_eq!((second.units, second.used), (150_000, 850_000));
        // The second outage's grant is written too; units given back (negative) leave `used`,
        // never below 0.
        known.written(vec![(key(), 150_000), (("other".to_owned(), 7), -5)]);
        assert_eq!(known.used[&key()], 850_000);
        assert_eq!(known.used[&("other".to_owned(), 7)], 0);
    }

    #[test]
    fn the_backlog_gathers_every_shard_and_is_unknown_if_one_could_not_read() {
        let backlog = Backlog::new(2);
        backlog.report(Some(vec![(("acme".into(), 7), vec![("a".into(), 1)])]));
        // One shard missing: not known yet.
        assert!(backlog.charges(Duration::from_millis(10)).is_none());
        backlog.report(Some(vec![(("acme".into(), 7), vec![("b".into(), 3)])]));
        let charges = backlog.charges(Duration::from_millis(10)).unwrap();
        assert_eq!(
            charges[&("acme".to_owned(), 7)],
            [("a".to_owned(), 1), ("b".to_owned(), 3)]
        );

        let backlog = Backlog::new(2);
        backlog.report(Some(Vec::new()));
        backlog.report(None);
        assert!(backlog.charges(Duration::from_millis(10)).is_none());
    }
}
