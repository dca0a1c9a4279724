//! The node side of the control plane: follow the change log into the local LMDB store.
//!
//! The store keeps the revision it applied and that revision's mark (its commit time, as the
//! change log holds it, [`Mark`]); a node whose revision is past the log's end, or whose
//! marked change is not in the log as it applied it (a database restored from a backup,
//! maybe written on since), takes a snapshot instead of the changes after its revision.
//!
//! At start ([`initial_sync`], before any shard serves) a node whose store has never been
//! synchronised takes a snapshot of `control_records` as of the latest revision, read in one
//! repeatable-read transaction; a node that has applied revision R takes the changes after R.
//! Then [`spawn`] starts the follower thread: it listens on [`CHANGES_CHANNEL`], applies the
//! changes after its revision whenever a notification comes and at least every
//! [`HEARTBEAT_MS`] (so a lost notification costs at most that), and heartbeats its applied
//! revision into `nodes`. The organizations' lists follow the same way, from their own log
//! ([`super::lists::catch_up`]). After a lost connection it reconnects and catches up from its last
//! applied revision, so a missed notification is never a missed change.
//!
//! While PostgreSQL cannot be reached the node keeps answering from its last applied state;
//! [`ControlPlaneStatus`] says how stale that is (a metric, a log line past
//! `cluster.stale_after_ms`).

use std::sync::atomic::Ordering;
use std::sync::Arc;
use std::time::Duration;

use tokio_postgres::AsyncMessage;

pub use super::status::ControlPlaneStatus;
use super::{schema, CHANGES_CHANNEL, HEARTBEAT_MS};
use crate::clock::Clock;
use crate::config::ClusterConfig;
use crate::store::replica::{Mark, RawChange};
use crate::store::Store;

/// Revisions applied in one LMDB transaction at most while catching up.
pub const CATCH_UP_REVISIONS_MAX: i64 = 1_000;
/// Wait before reconnecting after PostgreSQL was lost.
pub const RECONNECT_DELAY: Duration = Duration::from_millis(500);

/// Brings `store` up to the fleet's latest revision and registers the node. Blocking: called
/// before the shards start, so that a node never answers from an empty or outdated store.
pub fn initial_sync(
    cluster: &ClusterConfig,
    store: &Store,
    status: &ControlPlaneStatus,
) -> anyhow::Result<()> {
    let runtime = super::runtime()?;
    runtime.block_on(async {
        let mut client = super::connect(cluster, "follow").await?;
        schema::check(&client).await?;
        let revision = match store.revision()? {
            Some(revision) => catch_up_or_snapshot(&mut client, store, revision).await?,
            None => {
                if !store.dump()?.is_empty() {
                    tracing::warn!(
                        "the local store has records but has never followed a fleet: it is replaced by the fleet's control plane"
                    );
                }
                snapshot(&mut client, store).await?
            }
        };
        let lists = super::lists::catch_up(&client, store, None).await?;
        heartbeat(&client, &cluster.node_id(), (revision, lists), true).await?;
        status.contact(revision, Clock::System.now_ms());
        tracing::info!(revision, lists, node = %cluster.node_id(), "control plane synchronised");
        Ok(())
    })
}

/// Starts the follower thread.
pub fn spawn(
    cluster: ClusterConfig,
    store: Store,
    status: Arc<ControlPlaneStatus>,
) -> anyhow::Result<()> {
    super::spawn_engine_thread("modgate-fleet", move || follow(cluster, store, status))
}

async fn follow(cluster: ClusterConfig, store: Store, status: Arc<ControlPlaneStatus>) {
    loop {
        let Err(error) = follow_once(&cluster, &store, &status).await;
        // One warning when the connection is lost, one error once the node is stale; the
        // retries in between are quiet. Both are re-armed by the next contact.
        if !status.lost_logged.swap(true, Ordering::Relaxed) {
            tracing::warn!(
                error = format!("{error:#}"),
                "control plane connection lost; reconnecting"
            );
        }
        let stale_ms = status.staleness_ms(Clock::System.now_ms());
        if stale_ms > cluster.stale_after_ms as i64
            && !status.stale_logged.swap(true, Ordering::Relaxed)
        {
            tracing::error!(
                stale_ms,
                revision = status.applied_revision(),
                "control plane unreachable: answering from the last applied state"
            );
        }
        tokio::time::sleep(RECONNECT_DELAY).await;
    }
}

/// One connection's life: listen, catch up on every notification and heartbeat, until the
/// connection fails.
async fn follow_once(
    cluster: &ClusterConfig,
    store: &Store,
    status: &ControlPlaneStatus,
) -> anyhow::Result<std::convert::Infallible> {
    let (mut client, mut connection) = super::postgres_config(cluster, "follow")?
        .connect(tokio_postgres::NoTls)
        .await?;
    let (notified, mut notifications) = tokio::sync::mpsc::unbounded_channel();
    tokio::spawn(async move {
        loop {
            match std::future::poll_fn(|cx| connection.poll_message(cx)).await {
                Some(Ok(AsyncMessage::Notification(_))) => {
                    if notified.send(()).is_err() {
                        return;
                    }
                }
                Some(Ok(_)) => {}
                Some(Err(_)) | None => return,
            }
        }
    });
    client
        .batch_execute(&format!("LISTEN {CHANGES_CHANNEL}"))
        .await?;
    let node_id = cluster.node_id();
    let mut revision = store.revision()?.unwrap_or(0);
    loop {
        // One round, bounded: a partitioned network ends it and the loop reconnects.
        revision = tokio::time::timeout(super::ROUND_TIMEOUT, async {
            let revision = catch_up_or_snapshot(&mut client, store, revision).await?;
            let replay_until = std::time::Instant::now() + super::lists::FOLLOWER_REPLAY;
            let lists = super::lists::catch_up(&client, store, Some(replay_until)).await?;
            heartbeat(&client, &node_id, (revision, lists), false).await?;
            anyhow::Ok(revision)
        })
        .await
        .map_err(|_| {
            anyhow::anyhow!(
                "a round with PostgreSQL took over {:?}",
                super::ROUND_TIMEOUT
            )
        })??;
        if let Some(unshipped) = status.unshipped.get() {
            let total: u64 = unshipped.iter().map(|n| n.load(Ordering::Relaxed)).sum();
            client
                .execute(
                    "UPDATE nodes SET journal_unshipped = $2 WHERE node_id = $1",
                    &[&node_id, &(total as i64)],
                )
                .await?;
        }
        let live: i64 = client
            .query_one(
                "SELECT count(*) FROM nodes WHERE heartbeat_at > now() - make_interval(secs => $1)",
                &[&(super::NODE_LIVE_MS as f64 / 1000.0)],
            )
            .await?
            .get(0);
        status
            .live_nodes
            .store(live.clamp(1, i64::from(u32::MAX)) as u32, Ordering::Relaxed);
        status.contact(revision, Clock::System.now_ms());
        tokio::select! {
            received = notifications.recv() => {
                if received.is_none() {
                    anyhow::bail!("the connection closed");
                }
                while notifications.try_recv().is_ok() {}
            }
            _ = tokio::time::sleep(Duration::from_millis(HEARTBEAT_MS)) => {}
        }
    }
}

/// Takes the whole control plane as of its latest revision; returns that revision.
async fn snapshot(client: &mut tokio_postgres::Client, store: &Store) -> anyhow::Result<i64> {
    let tx = client
        .build_transaction()
        .isolation_level(tokio_postgres::IsolationLevel::RepeatableRead)
        .read_only(true)
        .start()
        .await?;
    let revision: i64 = tx
        .query_one(
            "SELECT coalesce(max(revision), 0) FROM control_changes",
            &[],
        )
        .await?
        .get(0);
    let records = super::read_records(&tx).await?;
    let mark = match revision {
        0 => None,
        _ => mark_of(&tx, revision).await?,
    };
    tx.commit().await?;
    store.replace_all(&records, revision, mark)?;
    Ok(revision)
}

/// The changes after `revision` applied, or a snapshot when the database is behind this node;
/// the revision now applied.
async fn catch_up_or_snapshot(
    client: &mut tokio_postgres::Client,
    store: &Store,
    revision: i64,
) -> anyhow::Result<i64> {
    match catch_up(client, store, revision).await? {
        CaughtUp::At(revision) => Ok(revision),
        CaughtUp::DatabaseBehind { latest } => {
            tracing::warn!(
                applied = revision,
                latest,
                "the control plane is behind this node (restored or replaced): taking a snapshot"
            );
            snapshot(client, store).await
        }
        CaughtUp::NotFollowed => {
            tracing::warn!(
                applied = revision,
                "the change this node applied last is not in the change log (pruned while the node was down, or the database was restored from a backup and written on since, or replaced): taking a snapshot"
            );
            snapshot(client, store).await
        }
    }
}

/// Where a catch-up ended.
enum CaughtUp {
    At(i64),
    /// The database's latest revision is below this node's: it was restored from a backup or
    /// replaced. Applying "the changes after our revision" would skip everything up to it, so
    /// the node takes a snapshot instead.
    DatabaseBehind {
        latest: i64,
    },
    /// The change this node applied last is not in the database as it applied it (or the
    /// node kept no mark of it): it was pruned while the node was down
    /// ([`super::control`]'s retention), or the database was restored from a backup and
    /// written on since, or replaced. Applying "the changes after our revision" would skip
    /// changes or mix two histories.
    NotFollowed,
}

/// A change-log row's mark ([`Mark::at_us`]), in SQL.
const MARK: &str = "(extract(epoch FROM changed_at) * 1000000)::bigint";

/// The mark of revision `revision` in the change log, if it has rows.
async fn mark_of(
    client: &impl tokio_postgres::GenericClient,
    revision: i64,
) -> anyhow::Result<Option<Mark>> {
    Ok(client
        .query_opt(
            &format!("SELECT {MARK} FROM control_changes WHERE revision = $1 LIMIT 1"),
            &[&revision],
        )
        .await?
        .map(|row| Mark {
            revision,
            at_us: row.get(0),
        }))
}

/// Applies the changes after `revision`, a bounded range of revisions per LMDB transaction.
async fn catch_up(
    client: &tokio_postgres::Client,
    store: &Store,
    mut revision: i64,
) -> anyhow::Result<CaughtUp> {
    let mut first = true;
    loop {
        let latest: i64 = client
            .query_one(
                "SELECT coalesce(max(revision), 0) FROM control_changes",
                &[],
            )
            .await?
            .get(0);
        if first && latest < revision {
            return Ok(CaughtUp::DatabaseBehind { latest });
        }
        if first && revision > 0 {
            let kept = store.control_mark()?;
            let found = match kept {
                Some(mark) => mark_of(client, mark.revision).await?,
                None => None,
            };
            if kept.is_none() || found != kept {
                return Ok(CaughtUp::NotFollowed);
            }
        }
        first = false;
        if latest <= revision {
            return Ok(CaughtUp::At(revision));
        }
        let upto = latest.min(revision + CATCH_UP_REVISIONS_MAX);
        let rows = client
            .query(
                &format!(
                    "SELECT tbl, key, value, revision, {MARK} FROM control_changes
                     WHERE revision > $1 AND revision <= $2 ORDER BY revision, seq"
                ),
                &[&revision, &upto],
            )
            .await?;
        let changes: Vec<RawChange> = rows
            .iter()
            .map(|row| RawChange {
                table: row.get(0),
                key: row.get(1),
                value: row.get(2),
            })
            .collect();
        let mark = rows.last().map(|row| Mark {
            revision: row.get(3),
            at_us: row.get(4),
        });
        store.apply_changes(&changes, upto, mark)?;
        tracing::debug!(
            from = revision,
            to = upto,
            changes = changes.len(),
            "control plane changes applied"
        );
        revision = upto;
    }
}

/// Records the node as live, with the control-plane and list-log revisions it has applied.
async fn heartbeat(
    client: &tokio_postgres::Client,
    node_id: &str,
    (revision, lists): (i64, i64),
    starting: bool,
) -> anyhow::Result<()> {
    let started = if starting {
        "now()"
    } else {
        "nodes.started_at"
    };
    client
        .execute(
            &format!(
                "INSERT INTO nodes (node_id, applied_revision, applied_list_revision, started_at,
                    heartbeat_at, version)
                 VALUES ($1, $2, $4, now(), now(), $3)
                 ON CONFLICT (node_id) DO UPDATE SET applied_revision = EXCLUDED.applied_revision,
                    applied_list_revision = EXCLUDED.applied_list_revision,
                    heartbeat_at = now(), version = EXCLUDED.version, started_at = {started}"
            ),
            &[&node_id, &revision, &env!("CARGO_PKG_VERSION"), &lists],
        )
        .await?;
    Ok(())
}
