//! The control plane's schema in PostgreSQL, as versioned migrations.
//!
//! `modgate db migrate` applies the migrations a database lacks, in order, each in the same
//! transaction as its row in `modgate_schema`, under an advisory lock so that two migrating
//! processes do not race; running it again does nothing. `modgate serve` and every admin
//! command refuse a database whose schema is not the one this build knows, and say what to
//! run.
//!
//! Tables:
//! - `control_records`: every record of the control plane (`tbl`, `key`, the bytes a node's
//!   LMDB store holds for it), the current state.
//! - `control_changes`: the change log; one revision per admin transaction, one row per record
//!   written (`value`) or deleted (null). Revisions are drawn under the admin lock, so they
//!   follow commit order and a node that has applied revision R has seen everything before.
//!   Admin writes prune changes older than `cluster.change_log_keep_hours` that every live
//!   node has applied (`control::prune_changes`).
//! - `nodes`: each node's applied revision, heartbeat and journal records not shipped yet,
//!   for `fleet status` and for admin commands that wait until every live node has a change.
//! - `journal`: every node's journal records ([`super::shipper`]), keyed by request id, with
//!   the record as JSON and the columns `modgate journal` filters on. The record is `json`,
//!   kept as the node wrote it (PostgreSQL checks it is JSON and stores the text): modgate
//!   only reads it back whole, and `jsonb` cost PostgreSQL a third of its CPU per record to
//!   parse and reorder (its `->` and `->>` work on `json` as well; a query that needs `jsonb`
//!   casts). `request_id` and `org` compare bytewise (`COLLATE "C"`): equality is the same under
//!   any deterministic collation, no query orders by them but for ties, and the locale's
//!   comparison only slowed the indexes.
//! - `quota_ledger`: each organization's units leased per month (the quota's one count);
//!   `quota_leases`: per node, organization and month, the units it leased, returned, and the
//!   checks it is known to have spent (counted as their records ship) ([`super::quota`]).
//! - `list_log`: every write to the organizations' lists, under revisions drawn from
//!   `list_revision` under the lists' lock; each node replays it into its store and reports
//!   the revision it reached in `nodes.applied_list_revision` ([`super::lists`]).

use anyhow::{bail, Context as _};

/// Serialises schema changes and admin writes (a `pg_advisory_xact_lock` key).
pub const ADMIN_LOCK: i64 = 0x006d_6f64_6761_7465; // "modgate" in ASCII

/// `(version, SQL)`, in order. Never edit one that has shipped: add the next.
pub const MIGRATIONS: &[(i32, &str)] = &[
    (
        1,
        "CREATE TABLE control_records (
        tbl text NOT NULL,
        key text NOT NULL,
        value bytea NOT NULL,
        revision bigint NOT NULL,
        PRIMARY KEY (tbl, key)
    );
    CREATE SEQUENCE control_revision;
    CREATE TABLE control_changes (
        revision bigint NOT NULL,
        seq integer NOT NULL,
        tbl text NOT NULL,
        key text NOT NULL,
        value bytea,
        changed_at timestamptz NOT NULL DEFAULT now(),
        PRIMARY KEY (revision, seq)
    );
    CREATE TABLE nodes (
        node_id text PRIMARY KEY,
        applied_revision bigint NOT NULL,
        started_at timestamptz NOT NULL,
        heartbeat_at timestamptz NOT NULL,
        version text NOT NULL
    );",
    ),
    (
        2,
        "CREATE TABLE journal (
        request_id text PRIMARY KEY,
        node_id text NOT NULL,
        shard integer NOT NULL,
        unix_ms bigint NOT NULL,
        org text,
        key_id text,
        ref text,
        record jsonb NOT NULL,
        shipped_at timestamptz NOT NULL DEFAULT now()
    );
    CREATE INDEX journal_time ON journal (unix_ms);
    CREATE INDEX journal_org_time ON journal (org, unix_ms);
    ALTER TABLE nodes ADD COLUMN journal_unshipped bigint NOT NULL DEFAULT 0;",
    ),
    (
        3,
        "CREATE TABLE quota_ledger (
        org text NOT NULL,
        month integer NOT NULL,
        used bigint NOT NULL DEFAULT 0,
        PRIMARY KEY (org, month)
    );
    CREATE TABLE quota_leases (
        node_id text NOT NULL,
        org text NOT NULL,
        month integer NOT NULL,
        leased bigint NOT NULL DEFAULT 0,
        returned bigint NOT NULL DEFAULT 0,
        spent bigint NOT NULL DEFAULT 0,
        PRIMARY KEY (node_id, org, month)
    );",
    ),
    (
        4,
        "CREATE SEQUENCE list_revision;
    CREATE TABLE list_log (
        revision bigint PRIMARY KEY,
        org text NOT NULL,
        change bytea NOT NULL,
        written_at timestamptz NOT NULL DEFAULT now()
    );
    ALTER TABLE nodes ADD COLUMN applied_list_revision bigint NOT NULL DEFAULT 0;",
    ),
    (
        5,
        // What PostgreSQL spends per shipped record: `jsonb` parsed each one and sorted its
        // keys (a third of the backend's CPU per record), and the keys' default collation
        // compared request ids and organizations through the C library's locale. One ALTER, so
        // the table is rewritten once (its indexes with it).
        "ALTER TABLE journal
        ALTER COLUMN record TYPE json USING record::json,
        ALTER COLUMN request_id TYPE text COLLATE \"C\",
        ALTER COLUMN org TYPE text COLLATE \"C\";",
    ),
];

/// Indexes that no build relies on for what it reads or writes, only for speed: made by every
/// `db migrate` if missing, without a schema version, so that nodes of the previous build
/// (which refuse a schema newer than theirs) keep working while the fleet is upgraded.
const INDEXES: &str =
    // A quota grant sums every node's `spent` of one organization and month: without this,
    // a scan of the whole table (a row per node, organization and month).
    "CREATE INDEX IF NOT EXISTS quota_leases_org_month ON quota_leases (org, month);";

/// The schema version this build reads and writes.
pub fn current_version() -> i32 {
    MIGRATIONS.last().map_or(0, |(version, _)| *version)
}

/// Applies the missing migrations; returns the versions applied.
pub async fn migrate(client: &mut tokio_postgres::Client) -> anyhow::Result<Vec<i32>> {
    let tx = client.transaction().await?;
    tx.execute("SELECT pg_advisory_xact_lock($1)", &[&ADMIN_LOCK])
        .await?;
    tx.batch_execute(
        "CREATE TABLE IF NOT EXISTS modgate_schema (
            version integer PRIMARY KEY,
            applied_at timestamptz NOT NULL DEFAULT now()
        )",
    )
    .await?;
    let have: i32 = tx
        .query_one("SELECT coalesce(max(version), 0) FROM modgate_schema", &[])
        .await?
        .get(0);
    if have > current_version() {
        bail!(
            "the database has schema version {have}, newer than this build's {}: upgrade modgate",
            current_version()
        );
    }
    let mut applied = Vec::new();
    for (version, sql) in MIGRATIONS.iter().filter(|(version, _)| *version > have) {
        tx.batch_execute(sql)
            .await
            .with_context(|| format!("migration {version}"))?;
        tx.execute(
            "INSERT INTO modgate_schema (version) VALUES ($1)",
            &[version],
        )
        .await?;
        applied.push(*version);
    }
    tx.batch_execute(INDEXES).await.context("the indexes")?;
    tx.commit().await?;
    Ok(applied)
}

/// Refuses a database whose schema is not this build's, saying what to run.
pub async fn check(client: &tokio_postgres::Client) -> anyhow::Result<()> {
    let exists: bool = client
        .query_one(
            "SELECT EXISTS (SELECT 1 FROM information_schema.tables WHERE table_name = 'modgate_schema')",
            &[],
        )
        .await?
        .get(0);
    let have: i32 = if exists {
        client
            .query_one("SELECT coalesce(max(version), 0) FROM modgate_schema", &[])
            .await?
            .get(0)
    } else {
        0
    };
    let want = current_version();
    if have < want {
        bail!(
            "the database has schema version {have}, this build needs {want}: run `modgate db migrate --config FILE`"
        );
    }
    if have > want {
        bail!("the database has schema version {have}, newer than this build's {want}: upgrade modgate");
    }
    Ok(())
}
