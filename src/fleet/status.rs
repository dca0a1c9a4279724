//! What the fleet's threads tell the rest of the process, read by `/metrics` and the
//! budgets, never per request: the control plane's state as the follower last saw it, and the
//! budgets' and quota ledger's engines.

use std::sync::atomic::{AtomicBool, AtomicI64, AtomicU32, AtomicU64, Ordering};
use std::sync::Arc;

/// What the follower tells the rest of the process: read by `/metrics`, never per request.
#[derive(Debug, Default)]
pub struct ControlPlaneStatus {
    applied_revision: AtomicI64,
    /// When PostgreSQL last answered, Unix ms.
    last_contact_ms: AtomicI64,
    /// The loss of the connection was logged (once per loss).
    pub(super) lost_logged: AtomicBool,
    /// The staleness past `stale_after_ms` was logged (once per loss).
    pub(super) stale_logged: AtomicBool,
    /// The shards' journal records not shipped yet, reported with each heartbeat.
    pub unshipped: std::sync::OnceLock<Arc<Vec<std::sync::atomic::AtomicU64>>>,
    /// Nodes with a heartbeat in the last [`super::NODE_LIVE_MS`] (this one included), as
    /// of the last round: what a node's fallback share of a budget divides by.
    pub(super) live_nodes: AtomicU32,
    /// The budgets' engine, for `/metrics`.
    pub budgets: std::sync::OnceLock<Arc<BudgetStatus>>,
    /// The quota ledger, for `/metrics`.
    pub quota: std::sync::OnceLock<Arc<QuotaStatus>>,
}

impl ControlPlaneStatus {
    /// Live nodes as of the last round with PostgreSQL (at least 1: this one).
    pub fn live_nodes(&self) -> u32 {
        self.live_nodes.load(Ordering::Relaxed).max(1)
    }

    pub fn applied_revision(&self) -> i64 {
        self.applied_revision.load(Ordering::Relaxed)
    }

    /// Milliseconds since PostgreSQL last answered.
    pub fn staleness_ms(&self, now_ms: i64) -> i64 {
        (now_ms - self.last_contact_ms.load(Ordering::Relaxed)).max(0)
    }

    pub(super) fn contact(&self, revision: i64, now_ms: i64) {
        self.applied_revision.store(revision, Ordering::Relaxed);
        self.last_contact_ms.store(now_ms, Ordering::Relaxed);
        self.lost_logged.store(false, Ordering::Relaxed);
        if self.stale_logged.swap(false, Ordering::Relaxed) {
            tracing::info!(revision, "control plane reached again");
        }
    }
}

/// What the budgets tell `/metrics`.
#[derive(Debug, Default)]
pub struct BudgetStatus {
    /// Redis answered the last round.
    pub engine_up: AtomicBool,
    /// Rounds (pipelines) sent to Redis.
    pub round_trips: AtomicU64,
    /// Takes answered from this node's fallback share while Redis was down.
    pub fallback_takes: AtomicU64,
}

/// The quota ledger as a node sees it, for `/metrics`.
#[derive(Debug, Default)]
pub struct QuotaStatus {
    /// PostgreSQL answered the ledger's last request.
    pub ledger_up: AtomicBool,
    /// Requests (transactions) sent to the ledger.
    pub round_trips: AtomicU64,
    /// Units granted from this node's share while the ledger could not be reached.
    pub fallback_units: AtomicU64,
}
