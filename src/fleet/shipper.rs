//! Journal shipping: every node's journal records into one PostgreSQL table.
//!
//! The per-shard LMDB journal stays the write-ahead record: a check is answered once its
//! record is committed there, as on a single node. Each shard then ships what it committed, in
//! commit order ([`crate::journal::shipping`]), in batches, to this thread, whose connections
//! (`cluster.shipping_connections`, by default one per shard up to
//! [`SHIP_CONNECTIONS_DEFAULT_MAX`]) insert them with the request id as the primary key
//! (`ON CONFLICT DO NOTHING`): at least once on the node's side, exactly once in the table.
//! The shard moves its position only after the insert committed, so a crash, a lost
//! connection or PostgreSQL down means a resend, never a loss.
//!
//! The sink is this narrow interface ([`Shipper::ship`]: a batch in, success or failure out);
//! a Kafka or NATS JetStream sink would be another thread behind the same call.

use std::sync::atomic::{AtomicU64, Ordering};
use std::sync::Arc;
use std::time::Duration;

use anyhow::Context as _;
use futures_channel::oneshot;

use super::connect;
use crate::config::ClusterConfig;
use crate::journal::query::Filter;
use crate::journal::shipping::ShipBatch;
use crate::journal::JournalRecord;

struct Batch {
    shard: i32,
    records: ShipBatch,
    done: oneshot::Sender<bool>,
}

/// The shards' handle on the shipping thread.
#[derive(Clone)]
pub struct Shipper {
    batches: tokio::sync::mpsc::UnboundedSender<Batch>,
    /// Records committed and not shipped yet, per shard (set by each shard).
    pub unshipped: Arc<Vec<AtomicU64>>,
    /// What each shard had not shipped at start, for the quota's reconciliation.
    pub backlog: Arc<super::quota::Backlog>,
}

impl Shipper {
    /// Ships `records` of `shard`; `true` once they are in the table.
    pub async fn ship(&self, shard: usize, records: ShipBatch) -> bool {
        let (done, outcome) = oneshot::channel();
        let batch = Batch {
            shard: shard as i32,
            records,
            done,
        };
        if self.batches.send(batch).is_err() {
            return false;
        }
        outcome.await.unwrap_or(false)
    }

    /// Records not shipped yet on this node.
    pub fn unshipped_total(&self) -> u64 {
        self.unshipped
            .iter()
            .map(|n| n.load(Ordering::Relaxed))
            .sum()
    }
}

/// Unless `cluster.shipping_connections` says otherwise, at most this many connections ship
/// a node's journal, one batch in flight on each: a shard has one batch in flight, so one
/// connection per shard up to here. One PostgreSQL backend takes about 17 µs of CPU per
/// record (in `tuning/fleet/bench.sh`), so one connection caps a node at roughly 50,000
/// records a second, less than a many-core node checks.
pub const SHIP_CONNECTIONS_DEFAULT_MAX: usize = 4;

/// The connections a node of `shards` shards ships over: `shipping_connections` (validated
/// against [`crate::config::SHIPPING_CONNECTIONS_RANGE`]) or one per shard up to
/// [`SHIP_CONNECTIONS_DEFAULT_MAX`]; never more than the shards, nor fewer than one.
pub fn connections(shipping_connections: Option<usize>, shards: usize) -> usize {
    shipping_connections
        .unwrap_or(SHIP_CONNECTIONS_DEFAULT_MAX)
        .min(shards)
        .max(1)
}

/// The batches waiting for a connection, shared by the connections' loops.
type Queue = Arc<tokio::sync::Mutex<tokio::sync::mpsc::UnboundedReceiver<Batch>>>;

/// Starts the shipping thread for `shards` shards, and `left` journals of shards this run
/// does not have ([`ship_left_journals`]), which report their backlog too.
pub fn spawn(cluster: ClusterConfig, shards: usize, left: usize) -> anyhow::Result<Shipper> {
    let (batches, queue) = tokio::sync::mpsc::unbounded_channel::<Batch>();
    let queue: Queue = Arc::new(tokio::sync::Mutex::new(queue));
    let unshipped = Arc::new((0..shards).map(|_| AtomicU64::new(0)).collect::<Vec<_>>());
    let backlog = Arc::new(super::quota::Backlog::new(shards + left));
    let connections = connections(cluster.shipping_connections, shards);
    super::spawn_engine_thread("modgate-ship", move || async move {
        let node_id: Arc<str> = cluster.node_id().into();
        let mut loops = tokio::task::JoinSet::new();
        for _ in 0..connections {
            loops.spawn(ship_loop(cluster.clone(), node_id.clone(), queue.clone()));
        }
        while loops.join_next().await.is_some() {}
    })?;
    Ok(Shipper {
        batches,
        unshipped,
        backlog,
    })
}

/// One connection's loop: takes the next batch of any shard, inserts it, reports the outcome;
/// connects when it has a batch and no connection. Ends when the shards' sender is gone.
async fn ship_loop(cluster: ClusterConfig, node_id: Arc<str>, queue: Queue) {
    let mut client: Option<tokio_postgres::Client> = None;
    loop {
        // The lock is held while waiting, so the loops take batches in turn.
        let Some(batch) = queue.lock().await.recv().await else {
            return;
        };
        if client.as_ref().is_none_or(|c| c.is_closed()) {
            client = connect(&cluster, "ship").await.ok();
        }
        let shipped = match &mut client {
            Some(client) => {
                match tokio::time::timeout(super::ROUND_TIMEOUT, insert(client, &node_id, &batch))
                    .await
                {
                    Ok(result) => result,
                    Err(_) => Err(anyhow::anyhow!("the insert timed out")),
                }
            }
            None => Err(anyhow::anyhow!("PostgreSQL cannot be reached")),
        };
        if let Err(error) = &shipped {
            tracing::debug!(
                error = format!("{error:#}"),
                "journal batch not shipped; the shard will resend it"
            );
            client = None;
        }
        let _ = batch.done.send(shipped.is_ok());
    }
}

/// Inserts a batch; in the same transaction, the quota units charged among the rows that were
/// new to the table are added to this node's `quota_leases.spent` (a resent row adds nothing).
async fn insert(
    client: &mut tokio_postgres::Client,
    node_id: &str,
    batch: &Batch,
) -> anyhow::Result<()> {
    let records = &batch.records;
    let ids: Vec<&str> = records.request_ids.iter().flatten().collect();
    let orgs: Vec<Option<&str>> = records.orgs.iter().collect();
    let keys: Vec<Option<&str>> = records.key_ids.iter().collect();
    let refs: Vec<Option<&str>> = records.refs.iter().collect();
    let json: Vec<&str> = records.json.iter().flatten().collect();
    if ids.len() != records.len() || json.len() != records.len() {
        anyhow::bail!("a shipping batch with missing columns");
    }
    let tx = client.transaction().await?;
    let inserted = tx
        .query(
            "INSERT INTO journal (request_id, node_id, shard, unix_ms, org, key_id, ref, record)
             SELECT r, $1, $2, t, o, k, f, j::json
             FROM unnest($3::text[], $4::bigint[], $5::text[], $6::text[], $7::text[], $8::text[])
                  AS u(r, t, o, k, f, j)
             ON CONFLICT (request_id) DO NOTHING
             RETURNING request_id",
            &[
                &node_id,
                &batch.shard,
                &ids,
                &records.unix_ms,
                &orgs,
                &keys,
                &refs,
                &json,
            ],
        )
        .await
        .context("inserting journal records")?;
    let new: std::collections::HashSet<&str> = inserted.iter().map(|row| row.get(0)).collect();
    let mut charged: std::collections::BTreeMap<(&str, u32), i64> = Default::default();
    for (row, id) in ids.iter().enumerate() {
        let org = records.orgs.get(row);
        let charge = records.charged.get(row).copied().flatten();
        if let (Some(org), Some((month, units))) = (org, charge) {
            if new.contains(id) {
                *charged.entry((org, month)).or_default() += i64::from(units);
            }
        }
    }
    for ((org, month), spent) in charged {
        tx.execute(
            "INSERT INTO quota_leases (node_id, org, month, spent) VALUES ($1, $2, $3, $4)
             ON CONFLICT (node_id, org, month)
             DO UPDATE SET spent = quota_leases.spent + EXCLUDED.spent",
            &[&node_id, &org, &(month as i32), &spent],
        )
        .await
        .context("counting the checks shipped")?;
    }
    tx.commit().await?;
    Ok(())
}

/// The journals of shards this run does not have (`journal/shard-N` with N past the last
/// shard: a node restarted on fewer cores), by shard number.
pub fn left_journals(
    data_dir: &std::path::Path,
    shards: usize,
) -> anyhow::Result<Vec<(usize, std::path::PathBuf)>> {
    Ok(crate::journal::query::shard_dirs(data_dir)?
        .into_iter()
        .filter_map(|dir| {
            let shard = crate::journal::shard_of_dir(&dir)?;
            (shard >= shards).then_some((shard, dir))
        })
        .collect())
}

/// What [`left_journals`] hold and had not shipped: their charges go to the quota's
/// reconciliation now (before any shard serves), and a thread of their own ships their
/// records, as their shards would have, until none is left. Their local copies stay (to
/// `modgate journal prune` on the node's data directory).
pub fn ship_left_journals(
    shipper: &Shipper,
    journals: Vec<(usize, std::path::PathBuf)>,
    map_bytes: usize,
) -> anyhow::Result<()> {
    let mut opened = Vec::with_capacity(journals.len());
    for (shard, dir) in journals {
        let open = || -> anyhow::Result<_> {
            let (env, records) = crate::journal::open_env(&dir, map_bytes, true)?;
            let now_ms = crate::clock::Clock::System.now_ms();
            let (index, _) = crate::journal::shipping::ShipIndex::open(&env, records, now_ms)?;
            Ok((env, records, index))
        };
        match open() {
            Ok((env, records, index)) => {
                let charges = index.unshipped_charges(&env, records, super::quota::BACKLOG_IDS_MAX);
                shipper.backlog.report(charges.ok().flatten());
                opened.push((shard, env, records, index));
            }
            // The node serves all the same; the quota's reconciliation, not knowing what
            // this journal holds, is left out (stricter, never looser).
            Err(error) => {
                tracing::error!(
                    shard,
                    error = format!("{error:#}"),
                    "the journal of a shard this run does not have cannot be opened: what it did not ship stays there"
                );
                shipper.backlog.report(None);
            }
        }
    }
    if opened.is_empty() {
        return Ok(());
    }
    let shipper = shipper.clone();
    std::thread::Builder::new()
        .name("modgate-ship-left".into())
        .spawn(move || {
            for (shard, env, records, index) in opened {
                let shipped = futures_lite::future::block_on(ship_all(
                    &shipper, shard, &env, records, index,
                ));
                match shipped {
                    Ok(0) => {}
                    Ok(count) => tracing::info!(
                        shard,
                        records = count,
                        "the journal of a shard this run does not have is shipped"
                    ),
                    Err(error) => tracing::error!(
                        shard,
                        error = format!("{error:#}"),
                        "shipping the journal of a shard this run does not have failed; the next start tries again"
                    ),
                }
            }
        })?;
    Ok(())
}

/// Ships everything `index` has not shipped, a batch at a time, retrying a batch the table
/// did not take every [`SHIP_INTERVAL`]; returns how many records went.
async fn ship_all(
    shipper: &Shipper,
    shard: usize,
    env: &heed::Env,
    records: heed::Database<heed::types::Str, heed::types::Bytes>,
    index: crate::journal::shipping::ShipIndex,
) -> anyhow::Result<usize> {
    let mut count = 0;
    loop {
        let batch = index.unshipped(env, records)?;
        if batch.last_seq == 0 {
            return Ok(count);
        }
        let (last, len) = (batch.last_seq, batch.len());
        if shipper.ship(shard, batch).await {
            index.set_shipped(env, last)?;
            count += len;
        } else {
            std::thread::sleep(SHIP_INTERVAL);
        }
    }
}

/// `modgate journal` on a fleet: the table's records matching `filter`, in time order.
pub async fn query(
    cluster: &ClusterConfig,
    filter: &Filter,
    each: &mut dyn FnMut(&JournalRecord<'_>) -> anyhow::Result<()>,
) -> anyhow::Result<u64> {
    let client = connect(cluster, "journal").await?;
    super::schema::check(&client).await?;
    let rows = client
        .query(
            "SELECT record::text FROM journal
             WHERE ($1::text IS NULL OR key_id = $1) AND ($2::text IS NULL OR ref = $2)
               AND ($3::text IS NULL OR org = $3)
               AND ($4::bigint IS NULL OR unix_ms >= $4) AND ($5::bigint IS NULL OR unix_ms < $5)
             ORDER BY unix_ms, request_id",
            &[
                &filter.key_id,
                &filter.reference,
                &filter.org,
                &filter.since_ms,
                &filter.until_ms,
            ],
        )
        .await?;
    let mut count = 0;
    for row in rows {
        let text: String = row.get(0);
        let mut bytes = text.into_bytes();
        let record: JournalRecord<'static> = simd_json::serde::from_slice(&mut bytes)
            .map_err(|error| anyhow::anyhow!("a journal row that is not a record: {error}"))?;
        each(&record)?;
        count += 1;
    }
    Ok(count)
}

/// `modgate journal prune` on a fleet: deletes the table's records older than `before_ms`.
pub async fn prune(cluster: &ClusterConfig, before_ms: i64) -> anyhow::Result<u64> {
    let client = connect(cluster, "journal").await?;
    super::schema::check(&client).await?;
    Ok(client
        .execute("DELETE FROM journal WHERE unix_ms < $1", &[&before_ms])
        .await?)
}

/// How long a shard waits between shipping rounds when it has nothing new.
pub const SHIP_INTERVAL: Duration = Duration::from_millis(200);

/// How long a shard that has caught up waits before its next batch, so that at a steady load
/// a round ships many records (each round is a PostgreSQL transaction, two blocking-pool hops
/// and an LMDB commit for the position) instead of the few committed during the last round.
/// It bounds the shipping lag of a steady load, not of a backlog: full batches go at once.
pub const SHIP_LINGER: Duration = Duration::from_millis(100);

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn connections_are_one_per_shard_up_to_the_default_or_as_configured() {
        assert_eq!(connections(None, 1), 1);
        assert_eq!(connections(None, 2), 2);
        assert_eq!(connections(None, 64), SHIP_CONNECTIONS_DEFAULT_MAX);
        assert_eq!(connections(Some(1), 8), 1);
        assert_eq!(connections(Some(16), 32), 16);
        // A shard has one batch in flight: more connections than shards would stay idle.
        assert_eq!(connections(Some(16), 2), 2);
        assert_eq!(connections(None, 0), 1);
    }
}
