//! The fleet's monthly quota: one ledger in PostgreSQL, granted to nodes in blocks.
//!
//! `quota_ledger.used` counts the units leased to nodes, per organization and month; a grant
//! locks the organization's row, so the fleet never leases more than the quota. Shards lease
//! from their node as on a single node (a block is at most a quarter of what is left, shared
//! by the shards), so a quota is exceeded by at most the checks in progress, never by more
//! than one block per node.
//!
//! Each node also keeps, in `quota_leases`, the units it leased and returned and the checks it
//! spent. The checks are counted by the journal shipper ([`super::shipper`]), in the same
//! transaction that inserts their records, only for records new to the table: exactly once.
//! A graceful stop returns what the shards hold. After a crash, the units the node held are
//! found when it starts again: leased − returned − spent − (checks answered but not shipped
//! yet, counted from the node's own journal before its shards serve) ([`Backlog`]); they go
//! back to the ledger before the node's first new lease. So the ledger, the checks answered
//! and the fleet's journal agree, and no check that was not answered is charged.
//!
//! How it runs beside glommio: `tokio-postgres` on a thread of its own with a current-thread
//! runtime, as the follower and the shipper. The shards' quota leases are already taken off
//! the reactor (on the shards' blocking threads), which here wait for the thread's answer.

use std::collections::HashMap;
use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::{Arc, Condvar, Mutex};
use std::time::Duration;

use anyhow::Context as _;

use super::follower::ControlPlaneStatus;
use crate::config::ClusterConfig;
use crate::limits::bucket::BucketState;
use crate::limits::lease::{BucketSpec, LeaseSource, PermitGrant, QuotaGrant};

/// How long a node waits at start for its shards to count their unshipped records before it
/// gives up reconciling (its held units then stay counted as used: stricter, never looser).
pub const BACKLOG_WAIT: Duration = Duration::from_secs(30);

/// What the shards had answered and not shipped when the process last stopped.
pub struct Backlog {
    shards: usize,
    counts: Mutex<BacklogCounts>,
    reported: Condvar,
}

#[derive(Default)]
struct BacklogCounts {
    reported: usize,
    /// A shard could not read its journal: reconciling would guess.
    unknown: bool,
    charges: HashMap<(String, u32), u64>,
}

impl Backlog {
    pub fn new(shards: usize) -> Backlog {
        Backlog {
            shards,
            counts: Mutex::default(),
            reported: Condvar::new(),
        }
    }

    /// One shard's count (`None`: it could not read its journal).
    pub fn report(&self, charges: Option<Vec<((String, u32), u64)>>) {
        let mut counts = self.counts.lock().unwrap_or_else(|e| e.into_inner());
        counts.reported += 1;
        match charges {
            Some(charges) => {
                for (key, n) in charges {
                    *counts.charges.entry(key).or_default() += n;
                }
            }
            None => counts.unknown = true,
        }
        self.reported.notify_all();
    }

    /// Every shard's count, once all have reported (`None` past `wait`, or if one could not).
    fn wait(&self, wait: Duration) -> Option<HashMap<(String, u32), u64>> {
        let counts = self.counts.lock().unwrap_or_else(|e| e.into_inner());
        let (counts, _) = self
            .reported
            .wait_timeout_while(counts, wait, |counts| counts.reported < self.shards)
            .unwrap_or_else(|e| e.into_inner());
        (counts.reported >= self.shards && !counts.unknown).then(|| counts.charges.clone())
    }
}

enum Request {
    Take {
        org: String,
        month: u32,
        limit: u64,
        want: u64,
        reply: std::sync::mpsc::SyncSender<anyhow::Result<QuotaGrant>>,
    },
    Return {
        org: String,
        month: u32,
        units: u64,
        reply: std::sync::mpsc::SyncSender<anyhow::Result<()>>,
    },
    Used {
        org: String,
        month: u32,
        reply: std::sync::mpsc::SyncSender<anyhow::Result<u64>>,
    },
}

/// The quota on PostgreSQL; rate and concurrency from `local` (this node's own, or Redis's
/// through [`super::budgets::FleetLeases`], which puts this one behind it).
pub struct PgQuota {
    local: Arc<dyn LeaseSource>,
    requests: tokio::sync::mpsc::UnboundedSender<Request>,
    /// Checks spent per (organization, month) in the fleet, as of the last grant, plus what
    /// this node's shards reported since: for `X-Quota-Used`.
    spent: Mutex<HashMap<(String, u32), u64>>,
    down: Arc<AtomicBool>,
}

impl PgQuota {
    pub fn start(
        cluster: ClusterConfig,
        local: Arc<dyn LeaseSource>,
        backlog: Arc<Backlog>,
        _control: Arc<ControlPlaneStatus>,
    ) -> anyhow::Result<PgQuota> {
        let (requests, mut queue) = tokio::sync::mpsc::unbounded_channel::<Request>();
        let down = Arc::new(AtomicBool::new(false));
        let thread_down = down.clone();
        super::spawn_engine_thread("modgate-quota", move || async move {
            let node_id = cluster.node_id();
            let mut client: Option<tokio_postgres::Client> = None;
            let mut reconciled = false;
            while let Some(request) = queue.recv().await {
                if client.as_ref().is_none_or(|c| c.is_closed()) {
                    client = super::connect(&cluster).await.ok();
                }
                let Some(connected) = client.as_mut() else {
                    thread_down.store(true, Ordering::Relaxed);
                    refuse(request, "PostgreSQL cannot be reached");
                    continue;
                };
                if !reconciled {
                    // Before this run's first lease: give back what the last run held.
                    let charges = backlog.wait(BACKLOG_WAIT);
                    match reconcile(connected, &node_id, charges.as_ref()).await {
                        Ok(returned) => {
                            reconciled = true;
                            if returned > 0 {
                                tracing::info!(
                                    units = returned,
                                    "quota units held by this node when it last stopped went back to the ledger"
                                );
                            }
                        }
                        Err(error) => {
                            tracing::warn!(
                                error = format!("{error:#}"),
                                "quota reconciliation failed; retried at the next lease"
                            );
                            client = None;
                            thread_down.store(true, Ordering::Relaxed);
                            refuse(request, "PostgreSQL cannot be reached");
                            continue;
                        }
                    }
                }
                let failed = serve(connected, &node_id, request).await;
                thread_down.store(failed, Ordering::Relaxed);
                if failed {
                    client = None;
                }
            }
        })?;
        Ok(PgQuota {
            local,
            requests,
            spent: Mutex::default(),
            down,
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
            .recv_timeout(super::ROUND_TIMEOUT + super::CONNECT_TIMEOUT)
            .map_err(|_| anyhow::anyhow!("the quota ledger did not answer in time"))?
    }
}

fn refuse(request: Request, why: &str) {
    match request {
        Request::Take { reply, .. } => drop(reply.send(Err(anyhow::anyhow!("{why}")))),
        Request::Return { reply, .. } => drop(reply.send(Err(anyhow::anyhow!("{why}")))),
        Request::Used { reply, .. } => drop(reply.send(Err(anyhow::anyhow!("{why}")))),
    }
}

/// `future`, or an error past [`super::ROUND_TIMEOUT`].
async fn bounded<T>(
    future: impl std::future::Future<Output = anyhow::Result<T>>,
) -> anyhow::Result<T> {
    tokio::time::timeout(super::ROUND_TIMEOUT, future)
        .await
        .unwrap_or_else(|_| Err(anyhow::anyhow!("the quota ledger timed out")))
}

/// Answers one request; whether PostgreSQL failed.
async fn serve(client: &mut tokio_postgres::Client, node_id: &str, request: Request) -> bool {
    match request {
        Request::Take {
            org,
            month,
            limit,
            want,
            reply,
        } => {
            let result = bounded(take(client, node_id, &org, month, limit, want)).await;
            let failed = result.is_err();
            let _ = reply.send(result);
            failed
        }
        Request::Return {
            org,
            month,
            units,
            reply,
        } => {
            let result = bounded(give_back(client, node_id, &org, month, units)).await;
            let failed = result.is_err();
            let _ = reply.send(result);
            failed
        }
        Request::Used { org, month, reply } => {
            let result = bounded(async {
                let row = client
                    .query_opt(
                        "SELECT used FROM quota_ledger WHERE org = $1 AND month = $2",
                        &[&org, &(month as i32)],
                    )
                    .await?;
                anyhow::Ok(row.map_or(0, |row| row.get::<_, i64>(0).max(0) as u64))
            })
            .await;
            let failed = result.is_err();
            let _ = reply.send(result);
            failed
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
) -> anyhow::Result<QuotaGrant> {
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
        let units = units as i64;
        tx.execute(
            "UPDATE quota_ledger SET used = used + $3 WHERE org = $1 AND month = $2",
            &[&org, &month, &units],
        )
        .await?;
        tx.execute(
            "INSERT INTO quota_leases (node_id, org, month, leased) VALUES ($1, $2, $3, $4)
             ON CONFLICT (node_id, org, month) DO UPDATE SET leased = quota_leases.leased + $4",
            &[&node_id, &org, &month, &units],
        )
        .await?;
    }
    let spent: i64 = tx
        .query_one(
            "SELECT coalesce(sum(spent), 0)::bigint FROM quota_leases WHERE org = $1 AND month = $2",
            &[&org, &month],
        )
        .await?
        .get(0);
    tx.commit().await.context("committing a quota lease")?;
    Ok(QuotaGrant {
        units,
        used: used + units,
        spent: spent.max(0) as u64,
    })
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

/// Takes `units` off the ledger's count and adds them to what `node_id` returned.
async fn return_units(
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

/// Gives back to the ledger the units this node held when its last run ended; the units
/// returned. `backlog` is what its journal had answered and not shipped (`None`: unknown, so
/// nothing is returned: the held units stay counted, which can only make the quota stricter).
async fn reconcile(
    client: &mut tokio_postgres::Client,
    node_id: &str,
    backlog: Option<&HashMap<(String, u32), u64>>,
) -> anyhow::Result<u64> {
    let Some(backlog) = backlog else {
        tracing::warn!("the journal's unshipped records could not be counted: units this node held when it last stopped stay counted as used");
        return Ok(0);
    };
    let tx = client.transaction().await?;
    let rows = tx
        .query(
            "SELECT org, month, leased - returned - spent FROM quota_leases
             WHERE node_id = $1 AND leased - returned - spent > 0 FOR UPDATE",
            &[&node_id],
        )
        .await?;
    let mut total = 0;
    for row in rows {
        let (org, month, outstanding): (String, i32, i64) = (row.get(0), row.get(1), row.get(2));
        let answered = backlog
            .get(&(org.clone(), month as u32))
            .copied()
            .unwrap_or(0) as i64;
        let unspent = outstanding - answered;
        if unspent <= 0 {
            continue;
        }
        return_units(&tx, node_id, &org, month, unspent).await?;
        total += unspent as u64;
    }
    tx.commit().await?;
    Ok(total)
}

fn lock<T>(mutex: &Mutex<T>) -> std::sync::MutexGuard<'_, T> {
    mutex.lock().unwrap_or_else(|e| e.into_inner())
}

impl LeaseSource for PgQuota {
    fn take_rate(
        &self,
        key: &str,
        bucket: BucketSpec,
        want: u32,
        now_ms: i64,
    ) -> (u32, BucketState) {
        self.local.take_rate(key, bucket, want, now_ms)
    }

    fn rate_arriving(&self, key: &str) -> Option<futures_channel::oneshot::Receiver<u32>> {
        self.local.rate_arriving(key)
    }

    fn return_rate(&self, key: &str, bucket: BucketSpec, tokens: u32) {
        self.local.return_rate(key, bucket, tokens)
    }

    fn take_permits(&self, org: &str, max: u32, want: u32) -> PermitGrant {
        self.local.take_permits(org, max, want)
    }

    fn take_permits_or_wait(
        &self,
        org: &str,
        max: u32,
        want: u32,
    ) -> Result<PermitGrant, futures_channel::oneshot::Receiver<u32>> {
        self.local.take_permits_or_wait(org, max, want)
    }

    fn return_permits(&self, org: &str, permits: u32) {
        self.local.return_permits(org, permits)
    }

    fn engine_down(&self) -> bool {
        self.down.load(Ordering::Relaxed) || self.local.engine_down()
    }

    fn take_quota(
        &self,
        org: &str,
        month: u32,
        limit: u64,
        want: u64,
    ) -> anyhow::Result<QuotaGrant> {
        let grant = self.ask(|reply| Request::Take {
            org: org.to_owned(),
            month,
            limit,
            want,
            reply,
        })?;
        let mut spent = lock(&self.spent);
        let count = spent.entry((org.to_owned(), month)).or_default();
        *count = (*count).max(grant.spent);
        Ok(QuotaGrant {
            spent: *count,
            ..grant
        })
    }

    fn return_quota(&self, org: &str, month: u32, units: u64) -> anyhow::Result<()> {
        self.ask(|reply| Request::Return {
            org: org.to_owned(),
            month,
            units,
            reply,
        })
    }

    fn quota_used(&self, org: &str, month: u32) -> anyhow::Result<u64> {
        self.ask(|reply| Request::Used {
            org: org.to_owned(),
            month,
            reply,
        })
    }

    fn quota_spent(&self, org: &str, month: u32) -> u64 {
        lock(&self.spent)
            .get(&(org.to_owned(), month))
            .copied()
            .unwrap_or(0)
    }

    fn report_spent(&self, org: &str, month: u32, spent: u64) -> u64 {
        let mut counts = lock(&self.spent);
        let count = counts.entry((org.to_owned(), month)).or_default();
        *count += spent;
        *count
    }

    fn stop(&self) {
        self.local.stop();
    }
}
