//! The admin side of the control plane: every admin command, run on the fleet.
//!
//! An admin command runs unchanged on a [`Store`]: [`transact`] gives it one, filled from
//! `control_records` in a temporary directory, inside a PostgreSQL transaction that holds the
//! admin lock. What the command changed (the difference of the store before and after) is
//! written back to `control_records`, appended to `control_changes` under one new revision, and
//! announced with `NOTIFY`, all in that transaction. So the rules of the single-node store
//! (plan key counts, rotation grace, workflow versions) hold in the fleet by construction, and
//! a fleet change is all or nothing.
//!
//! [`wait_for_nodes`] then waits until every live node has applied the revision.

use std::time::{Duration, Instant};

use anyhow::{anyhow, Context as _};
use serde::Serialize;

use super::{connect, schema, CHANGES_CHANNEL, NODE_LIVE_MS};
use crate::config::ClusterConfig;
use crate::store::Store;

/// Runs `op` on the fleet's control plane; returns its value and the revision it made (none
/// when it changed nothing).
pub async fn transact<T>(
    cluster: &ClusterConfig,
    op: impl FnOnce(&Store) -> anyhow::Result<T>,
) -> anyhow::Result<(T, Option<i64>)> {
    let mut client = connect(cluster, "admin").await?;
    schema::check(&client).await?;
    let tx = client.transaction().await?;
    tx.execute("SELECT pg_advisory_xact_lock($1)", &[&schema::ADMIN_LOCK])
        .await?;
    let records = super::read_records(&tx).await?;
    let dir = tempfile::tempdir().context("a directory for the control plane's working copy")?;
    let store = Store::open(dir.path())?;
    store.replace_all(&records, 0, None)?;
    let before = store.dump()?;
    let value = op(&store)?;
    let changes = Store::diff(&before, &store.dump()?);
    if changes.is_empty() {
        tx.commit().await?;
        return Ok((value, None));
    }
    let revision: i64 = tx
        .query_one("SELECT nextval('control_revision')", &[])
        .await?
        .get(0);
    for (seq, change) in changes.iter().enumerate() {
        match &change.value {
            Some(bytes) => {
                tx.execute(
                    "INSERT INTO control_records (tbl, key, value, revision) VALUES ($1, $2, $3, $4)
                     ON CONFLICT (tbl, key) DO UPDATE SET value = EXCLUDED.value, revision = EXCLUDED.revision",
                    &[&change.table, &change.key, bytes, &revision],
                )
                .await?;
            }
            None => {
                tx.execute(
                    "DELETE FROM control_records WHERE tbl = $1 AND key = $2",
                    &[&change.table, &change.key],
                )
                .await?;
            }
        }
        tx.execute(
            "INSERT INTO control_changes (revision, seq, tbl, key, value) VALUES ($1, $2, $3, $4, $5)",
            &[&revision, &(seq as i32), &change.table, &change.key, &change.value],
        )
        .await?;
    }
    prune_changes(&tx, cluster.change_log_keep_hours).await?;
    tx.execute(
        "SELECT pg_notify($1, $2)",
        &[&CHANGES_CHANNEL, &revision.to_string()],
    )
    .await?;
    tx.commit().await?;
    Ok((value, Some(revision)))
}

/// Deletes the changes older than `keep_hours` that every live node has applied, under the
/// admin lock of the write that just appended one. Kept whatever their age: the latest
/// revision (a snapshot's and a catch-up's end) and each live node's last applied revision
/// (its mark: a node whose marked change is gone takes a snapshot). A node that is not live
/// and comes back after its changes were pruned finds its mark gone and takes a snapshot, so
/// pruning never makes a node miss a change; the log grows with admin writes only, so one
/// statement per admin write is all the upkeep it needs.
async fn prune_changes(
    tx: &tokio_postgres::Transaction<'_>,
    keep_hours: u32,
) -> anyhow::Result<u64> {
    let pruned = tx
        .execute(
            "DELETE FROM control_changes
             WHERE changed_at < now() - make_interval(hours => $1)
               AND revision < (SELECT coalesce(min(applied_revision), 0) FROM nodes
                               WHERE heartbeat_at > now() - make_interval(secs => $2))",
            &[&(keep_hours as i32), &(NODE_LIVE_MS as f64 / 1000.0)],
        )
        .await
        .context("pruning the change log")?;
    if pruned > 0 {
        tracing::info!(pruned, "old control-plane changes pruned");
    }
    Ok(pruned)
}

/// A revision nodes apply: of the control plane's change log, or of the lists' log
/// ([`super::lists`]).
#[derive(Clone, Copy, Debug)]
pub enum Revision {
    Control(i64),
    Lists(i64),
}

/// The live nodes that have not applied `revision` after `timeout` (empty: all have).
pub async fn wait_for_nodes(
    cluster: &ClusterConfig,
    revision: Revision,
    timeout: Duration,
) -> anyhow::Result<Vec<String>> {
    let client = connect(cluster, "admin").await?;
    let deadline = Instant::now() + timeout;
    let (column, revision) = match revision {
        Revision::Control(revision) => ("applied_revision", revision),
        Revision::Lists(revision) => ("applied_list_revision", revision),
    };
    let query = format!(
        "SELECT node_id FROM nodes
         WHERE heartbeat_at > now() - make_interval(secs => $1::float8 / 1000)
           AND {column} < $2
         ORDER BY node_id"
    );
    loop {
        let behind: Vec<String> = client
            .query(&query, &[&(NODE_LIVE_MS as f64), &revision])
            .await?
            .iter()
            .map(|row| row.get(0))
            .collect();
        if behind.is_empty() || Instant::now() >= deadline {
            return Ok(behind);
        }
        tokio::time::sleep(Duration::from_millis(20)).await;
    }
}

/// One node, as `fleet status` shows it.
#[derive(Debug, Serialize)]
pub struct NodeStatus {
    pub node_id: String,
    pub live: bool,
    pub applied_revision: i64,
    /// Revisions the node still has to apply.
    pub behind: i64,
    /// The list log's revision the node has replayed ([`super::lists`]).
    pub applied_list_revision: i64,
    /// List-log revisions the node still has to replay.
    pub lists_behind: i64,
    pub heartbeat_age_ms: i64,
    /// Journal records committed on the node and not in the fleet's table yet.
    pub journal_unshipped: i64,
    pub version: String,
}

/// The fleet, as `fleet status` shows it.
#[derive(Debug, Serialize)]
pub struct FleetStatus {
    pub revision: i64,
    /// The list log's latest revision.
    pub list_revision: i64,
    pub schema_version: i32,
    pub postgres: String,
    pub redis: String,
    pub nodes: Vec<NodeStatus>,
}

pub async fn status(cluster: &ClusterConfig) -> anyhow::Result<FleetStatus> {
    let client = connect(cluster, "admin").await?;
    schema::check(&client).await?;
    let revision: i64 = client
        .query_one(
            "SELECT coalesce(max(revision), 0) FROM control_changes",
            &[],
        )
        .await?
        .get(0);
    let list_revision: i64 = client
        .query_one("SELECT coalesce(max(revision), 0) FROM list_log", &[])
        .await?
        .get(0);
    let nodes = client
        .query(
            "SELECT node_id, applied_revision,
                    (extract(epoch FROM now() - heartbeat_at) * 1000)::bigint, version,
                    journal_unshipped, applied_list_revision
             FROM nodes ORDER BY node_id",
            &[],
        )
        .await?
        .iter()
        .map(|row| {
            let applied: i64 = row.get(1);
            let age: i64 = row.get(2);
            let lists: i64 = row.get(5);
            NodeStatus {
                node_id: row.get(0),
                live: age < NODE_LIVE_MS,
                applied_revision: applied,
                behind: (revision - applied).max(0),
                applied_list_revision: lists,
                lists_behind: (list_revision - lists).max(0),
                heartbeat_age_ms: age,
                journal_unshipped: row.get(4),
                version: row.get(3),
            }
        })
        .collect();
    Ok(FleetStatus {
        revision,
        list_revision,
        schema_version: schema::current_version(),
        postgres: "ok".to_owned(),
        redis: match &cluster.redis_url {
            None => "not configured".to_owned(),
            Some(url) => redis_health(url),
        },
        nodes,
    })
}

/// `ok`, or why Redis/Valkey at `url` does not answer a `PING` (bounded by the budgets'
/// timeouts).
fn redis_health(url: &str) -> String {
    let timeout = super::budgets::REDIS_TIMEOUT;
    let pinged = redis::Client::open(url)
        .and_then(|client| client.get_connection_with_timeout(timeout))
        .and_then(|mut connection| {
            connection.set_read_timeout(Some(timeout))?;
            redis::cmd("PING").query::<String>(&mut connection)
        });
    match pinged {
        Ok(_) => "ok".to_owned(),
        Err(error) => format!("unreachable: {error}"),
    }
}

/// What `fleet forget` did.
#[derive(Debug, Serialize)]
pub struct Forgotten {
    pub node_id: String,
    /// Quota units the node held (leased, neither returned nor spent) that went back.
    pub units_returned: i64,
}

/// Drops a node that is gone for good: its row in `nodes` (so `fleet status` and the admin
/// commands' waits no longer name it), and the quota units it held, back to the ledger. Its
/// rate tokens and permits in Redis expire by themselves. Refused for a live node. Checks it
/// answered and had not shipped are unknown here: their units go back too (if the node ever
/// starts again, it ships them and its next reconciliation charges them again).
pub async fn forget(cluster: &ClusterConfig, node_id: &str) -> anyhow::Result<Forgotten> {
    let mut client = connect(cluster, "admin").await?;
    schema::check(&client).await?;
    let tx = client.transaction().await?;
    let age: Option<i64> = tx
        .query_opt(
            "SELECT (extract(epoch FROM now() - heartbeat_at) * 1000)::bigint FROM nodes
             WHERE node_id = $1 FOR UPDATE",
            &[&node_id],
        )
        .await?
        .map(|row| row.get(0));
    match age {
        None => anyhow::bail!("no node '{node_id}' in the fleet"),
        Some(age) if age < NODE_LIVE_MS => anyhow::bail!(
            "node '{node_id}' is live (heartbeat {age} ms ago): stop it first, then forget it"
        ),
        Some(_) => {}
    }
    let mut units_returned = 0;
    for (org, month, units) in super::quota::outstanding(&tx, node_id).await? {
        if units > 0 {
            super::quota::return_units(&tx, node_id, &org, month, units).await?;
            units_returned += units;
        }
    }
    tx.execute("DELETE FROM nodes WHERE node_id = $1", &[&node_id])
        .await?;
    tx.commit().await.context("committing the forgetting")?;
    Ok(Forgotten {
        node_id: node_id.to_owned(),
        units_returned,
    })
}

/// Runs an admin command on the fleet from synchronous code (the CLI): the change, then the
/// wait for the live nodes when it made one. `strict`: nodes still behind after the wait are
/// an error (revocation, suspension); otherwise they are only reported.
pub fn run_admin<T>(
    cluster: &ClusterConfig,
    strict: bool,
    op: impl FnOnce(&Store) -> anyhow::Result<T>,
) -> anyhow::Result<T> {
    let runtime = super::runtime()?;
    runtime.block_on(async {
        let (value, revision) = transact(cluster, op).await?;
        if let Some(revision) = revision {
            let behind = wait_for_nodes(cluster, Revision::Control(revision), ADMIN_WAIT).await?;
            if !behind.is_empty() {
                let message = format!(
                    "revision {revision} is committed, but these live nodes had not applied it after {} s: {}",
                    ADMIN_WAIT.as_secs(),
                    behind.join(", ")
                );
                if strict {
                    return Err(anyhow!(message));
                }
                eprintln!("modgate: {message}");
            }
        }
        Ok(value)
    })
}

/// How long an admin command waits for the live nodes to apply its change.
pub const ADMIN_WAIT: Duration = Duration::from_secs(5);
