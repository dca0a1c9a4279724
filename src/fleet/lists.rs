//! Organizations' lists in a fleet: one log of list writes in PostgreSQL (`list_log`), replayed
//! by every node into its own store.
//!
//! Why a log of writes and not the control plane's records: a list holds up to a million
//! entries, and the control plane's way ([`super::control::transact`]: rebuild a store, run
//! the command, diff the dumps) would copy all of them for every write. A write
//! ([`ListWrite`]) is small and carries everything its outcome depends on besides the lists
//! (the new list's uid, the time), so the same writes replayed in the same order give every
//! node the same lists, entry ids included, and the request path does not change: shards
//! match against the compiled lists of their node's store.
//!
//! Writing ([`write()`]), from a node's route or the CLI: under the lists' advisory lock (so
//! revisions follow commit order), the writer brings its store up to the end of the log, tries
//! the write there in a transaction it drops (so the single-node refusals hold with their
//! messages, and the answer is known), appends it under the next revision and notifies the
//! control plane's channel; then it replays the log again, its own write included. A store
//! is therefore never ahead of PostgreSQL, and a write the store refuses is never logged.
//!
//! Following ([`catch_up`]): the control plane's follower replays the log after its store's
//! list revision at start, on every notification and at every heartbeat, as it does the
//! control plane. A store that never followed a fleet's lists, or whose last replayed row is
//! not in the log as it replayed it (the database was restored from a backup, maybe written on
//! since: each row's `written_at` marks it), drops its lists and replays the log from its
//! start.
//!
//! The log is never compacted: a node that joins replays every write since the fleet began
//! (an addition of 200,000 hashes replays in about a second).

use std::time::Duration;

use anyhow::Context as _;
use heed::types::SerdeBincode;
use heed::{BytesDecode, BytesEncode};

use super::{schema, CHANGES_CHANNEL};
use crate::config::ClusterConfig;
use crate::store::lists::{ListError, ListResult, ListWrite, ListWriter, ListWritten, LoggedWrite};
use crate::store::Store;

/// Serialises list writes across the fleet (a `pg_advisory_xact_lock` key).
pub const LISTS_LOCK: i64 = 0x006d_6f64_6c69_7374; // "modlist" in ASCII
/// How long the follower replays the list log per round before it heartbeats again.
pub const FOLLOWER_REPLAY: Duration = Duration::from_secs(2);
/// Log rows replayed in one store transaction at most.
pub const REPLAY_ROWS: i64 = 64;
/// Bytes of log rows held in memory while replaying, at most (one row is read whatever its
/// size, at most [`LOG_WRITE_BYTES_MAX`]).
pub const REPLAY_BYTES_MAX: i64 = 64 << 20;
/// Entries one write of the log adds at most (a route's request is below it; the CLI imports
/// a larger file in writes of this size).
pub const LOG_ENTRIES_MAX: usize = 200_000;
/// A write's time up to its commit, at most (past it the outcome is unknown, and said so).
pub const WRITE_TIMEOUT: Duration = Duration::from_secs(30);
/// Bytes one write of the log holds at most, encoded (so that a replay's memory bound holds:
/// a route's body is at most 16 MiB; `list import` splits a file to fit).
pub const LOG_WRITE_BYTES_MAX: usize = 32 << 20;

/// The fleet's writer, as the routes hold it: each write on its own connection, on the
/// blocking thread the route runs it on.
pub struct FleetLists {
    pub cluster: ClusterConfig,
}

impl ListWriter for FleetLists {
    fn write(&self, store: &Store, org: &str, change: &ListWrite) -> ListResult<ListWritten> {
        let runtime = super::runtime().map_err(ListError::Store)?;
        runtime.block_on(async { Ok(write(&self.cluster, store, org, change).await?.0) })
    }
}

/// An engine failure: the fleet's PostgreSQL could not be reached or failed.
fn unavailable(error: impl Into<anyhow::Error>) -> ListError {
    let error = error.into();
    tracing::warn!(error = format!("{error:#}"), "a fleet list write failed");
    ListError::Unavailable(format!(
        "the fleet's PostgreSQL could not take the list write: {error:#}"
    ))
}

/// Writes `change` to the lists of `org` through the fleet's log, with `store` (the node's, or
/// the CLI's copy) brought up to date on the way; returns what the write did and the revision
/// it was logged under (none when it changed nothing).
///
/// Everything up to the commit is bounded by [`WRITE_TIMEOUT`]. An error before the commit
/// means nothing was written; a failed or timed-out commit leaves the outcome unknown, and
/// says so. The replay after the commit is not bounded (it is this write, unless another
/// writer came in between) and its failure is only logged: the follower retries it.
pub async fn write(
    cluster: &ClusterConfig,
    store: &Store,
    org: &str,
    change: &ListWrite,
) -> ListResult<(ListWritten, Option<i64>)> {
    let bytes = SerdeBincode::<ListWrite>::bytes_encode(change)
        .map_err(|error| ListError::Store(anyhow::anyhow!("encoding a list write: {error}")))?
        .into_owned();
    if bytes.len() > LOG_WRITE_BYTES_MAX {
        return Err(ListError::Invalid(format!(
            "a write to a fleet's lists holds at most {} MiB (this one {} bytes): send fewer entries at a time",
            LOG_WRITE_BYTES_MAX >> 20,
            bytes.len()
        )));
    }
    if let ListWrite::Add { entries, .. } = change {
        if entries.len() > LOG_ENTRIES_MAX {
            return Err(ListError::Invalid(format!(
                "at most {LOG_ENTRIES_MAX} entries a write in a fleet"
            )));
        }
    }
    let mut client = super::connect(cluster, "lists")
        .await
        .map_err(unavailable)?;
    let logged = tokio::time::timeout(
        WRITE_TIMEOUT,
        log_write(&mut client, store, org, change, &bytes),
    )
    .await
    .map_err(|_| {
        ListError::Unavailable(format!(
            "the fleet's PostgreSQL did not answer within {} s: the write may or may not be made (read the list to know)",
            WRITE_TIMEOUT.as_secs()
        ))
    })??;
    if let (_, Some(revision)) = &logged {
        if let Err(error) = catch_up(&client, store, None).await {
            tracing::warn!(
                revision,
                error = %error,
                "a list write is committed but this store has not replayed it yet"
            );
        }
    }
    Ok(logged)
}

/// [`write`] up to the commit.
async fn log_write(
    client: &mut tokio_postgres::Client,
    store: &Store,
    org: &str,
    change: &ListWrite,
    bytes: &[u8],
) -> ListResult<(ListWritten, Option<i64>)> {
    schema::check(client).await.map_err(unavailable)?;
    let tx = client.transaction().await.map_err(unavailable)?;
    tx.execute("SELECT pg_advisory_xact_lock($1)", &[&LISTS_LOCK])
        .await
        .map_err(unavailable)?;
    if matches!(change, ListWrite::Create { .. }) {
        let known = tx
            .query_opt(
                "SELECT 1 FROM control_records WHERE tbl = 'orgs' AND key = $1",
                &[&org],
            )
            .await
            .map_err(unavailable)?;
        if known.is_none() {
            return Err(ListError::NotFound(format!("no organization '{org}'")));
        }
    }
    catch_up(&tx, store, None).await?;
    let written = store.try_list_write(org, change)?;
    if !written.changed() {
        return Ok((written, None));
    }
    let revision: i64 = tx
        .query_one("SELECT nextval('list_revision')", &[])
        .await
        .map_err(unavailable)?
        .get(0);
    tx.execute(
        "INSERT INTO list_log (revision, org, change) VALUES ($1, $2, $3)",
        &[&revision, &org, &bytes],
    )
    .await
    .map_err(unavailable)?;
    tx.execute(
        "SELECT pg_notify($1, $2)",
        &[&CHANGES_CHANNEL, &format!("lists {revision}")],
    )
    .await
    .map_err(unavailable)?;
    tx.commit().await.map_err(|error| {
        tracing::warn!(%error, "committing a fleet list write failed");
        ListError::Unavailable(format!(
            "the fleet's PostgreSQL failed while committing the list write: the write may or may not be made (read the list to know): {error}"
        ))
    })?;
    Ok((written, Some(revision)))
}

/// Replays the log after `store`'s list revision (from the start, after dropping its lists,
/// for a store that never followed one or whose last replayed row is not in the log as it
/// replayed it); returns the revision now applied. With a `deadline`, stops at the first batch
/// boundary past it (the follower goes on at its next round, so that a long replay does not
/// hold its heartbeat).
pub async fn catch_up(
    client: &impl tokio_postgres::GenericClient,
    store: &Store,
    deadline: Option<std::time::Instant>,
) -> ListResult<i64> {
    let latest: i64 = client
        .query_one("SELECT coalesce(max(revision), 0) FROM list_log", &[])
        .await
        .map_err(unavailable)?
        .get(0);
    // Decided on one reading of the store, and reset only if the store is still there: a
    // replay running beside this one (the node's writer and its follower) may move it.
    let mut applied = loop {
        let seen = store.list_position()?;
        let followed = match seen.revision {
            Some(0) => true,
            Some(applied) => applied <= latest && mark_of(client, applied).await? == seen.mark,
            None => false,
        };
        if followed {
            break seen.revision.unwrap_or(0);
        }
        let had_lists = !store.all_lists()?.is_empty();
        if store.reset_lists_if(seen)? {
            match seen.revision {
                Some(applied) => tracing::warn!(
                    applied,
                    latest,
                    "the fleet's list log is not the one this store replayed (restored from a backup, or replaced): replaying it from its start"
                ),
                None if had_lists => tracing::warn!(
                    "the local store has lists but has never followed a fleet: they are replaced by the fleet's"
                ),
                None => {}
            }
            break 0;
        }
    };
    while applied < latest {
        // First the sizes (read from the rows' headers, not their values), then as many rows
        // as fit in REPLAY_BYTES_MAX.
        let sizes = client
            .query(
                "SELECT revision, octet_length(change)::bigint FROM list_log WHERE revision > $1
                 ORDER BY revision LIMIT $2",
                &[&applied, &REPLAY_ROWS],
            )
            .await
            .map_err(unavailable)?;
        let (mut upto, mut bytes) = (applied, 0i64);
        for row in &sizes {
            let size: i64 = row.get(1);
            if upto > applied && bytes + size > REPLAY_BYTES_MAX {
                break;
            }
            (upto, bytes) = (row.get(0), bytes + size);
        }
        let rows = client
            .query(
                &format!(
                    "SELECT revision, org, change, {MARK} FROM list_log
                     WHERE revision > $1 AND revision <= $2 ORDER BY revision"
                ),
                &[&applied, &upto],
            )
            .await
            .map_err(unavailable)?;
        if rows.is_empty() {
            break;
        }
        // Each row is dropped as it is decoded: the batch is not held twice.
        let log: Vec<LoggedWrite> = rows
            .into_iter()
            .map(|row| LoggedWrite {
                revision: row.get(0),
                org: row.get(1),
                change: SerdeBincode::<ListWrite>::bytes_decode(row.get::<_, &[u8]>(2)).ok(),
                mark: row.get(3),
            })
            .collect();
        applied = store.apply_list_log(applied, &log)?;
        if deadline.is_some_and(|deadline| std::time::Instant::now() >= deadline) {
            break;
        }
    }
    Ok(applied)
}

/// A log row's mark ([`LoggedWrite::mark`]), in SQL.
const MARK: &str = "(extract(epoch FROM written_at) * 1000000)::bigint";

/// The mark of the log's row `revision`, if it has one.
async fn mark_of(
    client: &impl tokio_postgres::GenericClient,
    revision: i64,
) -> ListResult<Option<i64>> {
    Ok(client
        .query_opt(
            &format!("SELECT {MARK} FROM list_log WHERE revision = $1"),
            &[&revision],
        )
        .await
        .map_err(unavailable)?
        .map(|row| row.get(0)))
}

/// The CLI's side: `store` (a working copy in the CLI's data directory) brought up to the
/// log's end, for commands that read lists.
pub fn replay_for_cli(cluster: &ClusterConfig, store: &Store) -> anyhow::Result<i64> {
    let runtime = super::runtime()?;
    runtime.block_on(async {
        let client = super::connect(cluster, "lists").await?;
        schema::check(&client).await?;
        catch_up(&client, store, None)
            .await
            .context("replaying the fleet's list log")
    })
}
