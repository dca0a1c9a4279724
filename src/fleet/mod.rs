//! A fleet of modgate nodes on PostgreSQL: one control plane for every node.
//!
//! PostgreSQL is the one source of truth for organizations, plans, keys and workflows
//! ([`schema`]). The admin CLI changes it in one transaction that also appends to a change log
//! and notifies ([`control`]); each node follows the log into its own LMDB store
//! ([`follower`]), so the request path is unchanged: a shard reads LMDB, never an engine, and
//! a change reaches it as the store view's cache notices LMDB's new transaction.
//!
//! How it runs beside glommio: the engine client is `tokio-postgres`, the maintained async
//! PostgreSQL client, on one side thread per process with a current-thread tokio runtime
//! (the follower); the CLI runs the same client on a runtime of its own. The shards never await
//! it: they talk to it only through the LMDB store it writes and a few atomics it sets
//! ([`follower::ControlPlaneStatus`]). glommio's executors cannot drive tokio's I/O, and a
//! client on its own thread keeps a slow or dead PostgreSQL away from every request.
//!
//! Organizations' lists are a log of writes every node replays ([`lists`]), followed by the
//! same thread. Journals ship to one table ([`shipper`]), on a thread of their own too.
//!
//! Rate and concurrency budgets live in Redis/Valkey ([`budgets`]), the monthly quota in a
//! PostgreSQL ledger ([`quota`]).

pub mod budgets;
pub mod control;
pub mod follower;
pub mod lists;
pub mod quota;
pub mod schema;
pub mod shipper;
pub mod status;

use anyhow::Context as _;

use crate::config::ClusterConfig;

/// The channel PostgreSQL notifies on when the control plane changes.
pub const CHANGES_CHANNEL: &str = "modgate_changes";
/// How long a node counts as live after its last heartbeat.
pub const NODE_LIVE_MS: i64 = 5_000;
/// How often a node heartbeats (and polls the change log, in case a notification was lost).
pub const HEARTBEAT_MS: u64 = 1_000;

/// A runtime for the CLI's engine calls.
pub fn runtime() -> anyhow::Result<tokio::runtime::Runtime> {
    tokio::runtime::Builder::new_current_thread()
        .enable_all()
        .build()
        .context("starting the engine client's runtime")
}

/// Runs `task` on a thread of its own named `name`, on a current-thread tokio runtime: how
/// every engine client of the process (follower, shipper) lives beside glommio.
pub fn spawn_engine_thread<F>(
    name: &str,
    task: impl FnOnce() -> F + Send + 'static,
) -> anyhow::Result<()>
where
    F: std::future::Future<Output = ()>,
{
    let thread = name.to_owned();
    std::thread::Builder::new()
        .name(name.into())
        .spawn(move || match runtime() {
            Ok(runtime) => runtime.block_on(task()),
            Err(error) => {
                tracing::error!(
                    thread,
                    error = format!("{error:#}"),
                    "an engine thread could not start"
                )
            }
        })
        .with_context(|| format!("starting {name}"))?;
    Ok(())
}

/// Every record of the control plane as the database holds it now (in `client`'s
/// transaction, when it is one).
pub async fn read_records(
    client: &impl tokio_postgres::GenericClient,
) -> anyhow::Result<Vec<crate::store::replica::RawRecord>> {
    Ok(client
        .query("SELECT tbl, key, value FROM control_records", &[])
        .await?
        .iter()
        .map(|row| crate::store::replica::RawRecord {
            table: row.get(0),
            key: row.get(1),
            value: row.get(2),
        })
        .collect())
}

/// Bounds on every PostgreSQL connection: a partitioned network fails a connection within
/// these instead of TCP's own quarter of an hour.
pub const CONNECT_TIMEOUT: std::time::Duration = std::time::Duration::from_secs(5);
pub const TCP_USER_TIMEOUT: std::time::Duration = std::time::Duration::from_secs(10);
/// One round of the follower or one shipped batch, at most.
pub const ROUND_TIMEOUT: std::time::Duration = std::time::Duration::from_secs(10);

/// The connection settings of `cluster`, with the bounds above.
pub fn postgres_config(
    cluster: &ClusterConfig,
    role: &str,
) -> anyhow::Result<tokio_postgres::Config> {
    let mut config: tokio_postgres::Config = cluster
        .postgres_url
        .parse()
        .with_context(|| format!("cluster.postgres_url {}", redacted(&cluster.postgres_url)))?;
    config
        .connect_timeout(CONNECT_TIMEOUT)
        .tcp_user_timeout(TCP_USER_TIMEOUT)
        .keepalives(true)
        .keepalives_idle(std::time::Duration::from_secs(5));
    // Named in `pg_stat_activity` by what it is for and which node holds it, unless the URL
    // names it.
    if config.get_application_name().is_none() {
        config.application_name(format!("modgate {role} {}", cluster.node_id()));
    }
    Ok(config)
}

/// Connects to the control plane for `role` (its `application_name`: `modgate ROLE NODE`);
/// the connection is driven by a task on the current runtime.
pub async fn connect(
    cluster: &ClusterConfig,
    role: &str,
) -> anyhow::Result<tokio_postgres::Client> {
    let (client, connection) = postgres_config(cluster, role)?
        .connect(tokio_postgres::NoTls)
        .await
        .with_context(|| {
            format!(
                "connecting to PostgreSQL at {}",
                redacted(&cluster.postgres_url)
            )
        })?;
    tokio::spawn(async move {
        if let Err(error) = connection.await {
            tracing::warn!(%error, "PostgreSQL connection ended");
        }
    });
    Ok(client)
}

/// A connection URL without its password, for messages and logs.
pub fn redacted(url: &str) -> String {
    match url::Url::parse(url) {
        Ok(mut parsed) if parsed.password().is_some() => {
            let _ = parsed.set_password(Some("***"));
            parsed.to_string()
        }
        _ => url.to_owned(),
    }
}

#[cfg(test)]
mod tests {
    #[test]
    fn passwords_are_not_shown() {
        assert_eq!(
            super::redacted("postgres://modgate:s3cret@127.0.0.1:5432/modgate"),
            "postgres://modgate:***@127.0.0.1:5432/modgate"
        );
        assert_eq!(
            super::redacted("postgres://modgate@127.0.0.1/db"),
            "postgres://modgate@127.0.0.1/db"
        );
    }
}
