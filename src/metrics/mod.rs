//! Prometheus metrics: every shard counts on its own, the scrape sums the shards.
//!
//! A shard's [`Metrics`] is plain memory in an `Rc`, written only by that shard's thread: a
//! request adds to a few array slots and a histogram bucket, with no atomic and no lock. The
//! `/metrics` listener ([`scrape`]) runs on its own thread; to answer a scrape it sends each
//! shard a request over a channel, each shard replies with a copy of its counters (a
//! [`ShardSnapshot`]), and [`exposition`] sums and renders them. Cross-core traffic happens
//! only when Prometheus asks.
//!
//! Label sets are bounded by construction: routes, statuses, error types, formats, models and
//! refusal reasons come from fixed tables; workflow names come from the store (operators make
//! them, not callers) and are capped at [`WORKFLOW_LABELS_MAX`] per shard, the rest counted as
//! `other`. No key id, ref, url or text ever becomes a label.
//!
//! With metrics off (`metrics.listen = ""`) every record call returns at once, which is how the
//! cost of metrics per request is measured.

pub mod exposition;
pub mod histogram;
pub mod scrape;

use std::cell::RefCell;
use std::rc::Rc;

use histogram::{Histogram, BATCH_BOUNDS, LATENCY_BOUNDS_US, STORAGE_BOUNDS_US};

use crate::content::ContentKind;
use crate::download::Refusal;
use crate::error::ErrorKind;
use crate::image::Format;
use crate::route::Route;

/// Statuses with their own label value; anything else is counted as `other`.
pub const STATUSES: [u16; 15] = [
    200, 400, 401, 403, 404, 405, 408, 413, 414, 415, 417, 429, 431, 500, 503,
];
const STATUS_SLOTS: usize = STATUSES.len() + 1;
/// One slot per route, and one for requests that reached no route (unknown path, or refused
/// before routing: a malformed or slow head).
pub const ROUTE_SLOTS: usize = Route::ALL.len() + 1;
/// Workflow names kept as label values per shard; later ones are counted as `other`.
pub const WORKFLOW_LABELS_MAX: usize = 64;
/// `summary.action` values, in label order.
pub const ACTIONS: [&str; 3] = ["accept", "review", "reject"];
/// Histograms labelled by a model's name (the check registry's names, which metrics do not
/// know in advance): a short list searched in order, one entry per model that ran.
pub type ByModel = Vec<(&'static str, Latency)>;

fn observe_by_model(histograms: &mut ByModel, model: &'static str, us: u64) {
    match histograms.iter_mut().find(|(name, _)| *name == model) {
        Some((_, histogram)) => histogram.observe(&LATENCY_BOUNDS_US, us),
        None => {
            let mut histogram = Latency::default();
            histogram.observe(&LATENCY_BOUNDS_US, us);
            histograms.push((model, histogram));
        }
    }
}

fn add_by_model(mine: &mut ByModel, theirs: &ByModel) {
    for (model, histogram) in theirs {
        match mine.iter_mut().find(|(name, _)| name == model) {
            Some((_, existing)) => existing.add(histogram),
            None => mine.push((model, *histogram)),
        }
    }
}

type Latency = Histogram<14>;

/// Everything a shard counts. Also the snapshot a scrape receives, so it is plain data.
#[derive(Clone, Debug)]
pub struct Counters {
    /// Answers by route slot and status slot.
    pub requests: [[u64; STATUS_SLOTS]; ROUTE_SLOTS],
    /// Error answers by route slot and [`ErrorKind`] (in `ErrorKind::ALL` order).
    pub errors: [[u64; ErrorKind::ALL.len()]; ROUTE_SLOTS],
    /// Server time per answer, from the end of the head to the answer, by route slot.
    pub request_seconds: [Latency; ROUTE_SLOTS],
    /// Checks that ran: (workflow, kind, counts by action).
    pub checks: Vec<(String, ContentKind, [u64; 3])>,
    /// Decode time by format (`Format::ALL` order).
    pub decode_seconds: [Latency; 4],
    /// Resize time by image model (open-NSFW, nsfwjs).
    pub resize_seconds: ByModel,
    /// Model run time per request by model; a batch's time is shared.
    pub model_seconds: ByModel,
    /// Image checks answered from a result kept for the same bytes
    /// ([`crate::inference::repeats`]).
    pub image_results_reused: u64,
    /// tox-block windows whose scores were kept from an earlier check of the same words
    /// ([`crate::checks::toxblock`]).
    pub toxblock_windows_reused: u64,
    /// Connections refused at accept over `connections_per_shard_max`.
    pub connections_refused: u64,
    /// Panics caught while serving a connection (each closed that connection alone).
    pub panics: u64,
    pub journal_commits: u64,
    pub journal_commit_failures: u64,
    pub journal_commit_records: Histogram<10>,
    pub journal_commit_seconds: Histogram<14>,
    pub journal_fsync_seconds: Histogram<14>,
    /// Records deleted from the journal once shipped to a fleet's table and older than
    /// `cluster.local_journal_keep_minutes`.
    pub journal_pruned: u64,
    pub download_bytes: u64,
    pub downloads_ok: u64,
    /// Refused downloads by reason (`Refusal::ALL` order).
    pub download_refusals: [u64; Refusal::ALL.len()],
}

impl Default for Counters {
    fn default() -> Self {
        Counters {
            requests: [[0; STATUS_SLOTS]; ROUTE_SLOTS],
            errors: [[0; ErrorKind::ALL.len()]; ROUTE_SLOTS],
            request_seconds: [Latency::default(); ROUTE_SLOTS],
            checks: Vec::new(),
            decode_seconds: [Latency::default(); 4],
            resize_seconds: ByModel::new(),
            model_seconds: ByModel::new(),
            image_results_reused: 0,
            toxblock_windows_reused: 0,
            connections_refused: 0,
            panics: 0,
            journal_commits: 0,
            journal_commit_failures: 0,
            journal_commit_records: Histogram::default(),
            journal_commit_seconds: Histogram::default(),
            journal_fsync_seconds: Histogram::default(),
            journal_pruned: 0,
            download_bytes: 0,
            downloads_ok: 0,
            download_refusals: [0; Refusal::ALL.len()],
        }
    }
}

impl Counters {
    /// Adds another shard's counts to these.
    pub fn add(&mut self, other: &Counters) {
        for (mine, theirs) in self.requests.iter_mut().zip(&other.requests) {
            add_all(mine, theirs);
        }
        for (mine, theirs) in self.errors.iter_mut().zip(&other.errors) {
            add_all(mine, theirs);
        }
        add_histograms(&mut self.request_seconds, &other.request_seconds);
        for (workflow, kind, actions) in &other.checks {
            match self
                .checks
                .iter_mut()
                .find(|(w, k, _)| w == workflow && k == kind)
            {
                Some((_, _, mine)) => add_all(mine, actions),
                None => self.checks.push((workflow.clone(), *kind, *actions)),
            }
        }
        add_histograms(&mut self.decode_seconds, &other.decode_seconds);
        add_by_model(&mut self.resize_seconds, &other.resize_seconds);
        add_by_model(&mut self.model_seconds, &other.model_seconds);
        self.image_results_reused += other.image_results_reused;
        self.toxblock_windows_reused += other.toxblock_windows_reused;
        self.connections_refused += other.connections_refused;
        self.panics += other.panics;
        self.journal_commits += other.journal_commits;
        self.journal_commit_failures += other.journal_commit_failures;
        self.journal_commit_records
            .add(&other.journal_commit_records);
        self.journal_commit_seconds
            .add(&other.journal_commit_seconds);
        self.journal_fsync_seconds.add(&other.journal_fsync_seconds);
        self.journal_pruned += other.journal_pruned;
        self.download_bytes += other.download_bytes;
        self.downloads_ok += other.downloads_ok;
        add_all(&mut self.download_refusals, &other.download_refusals);
    }
}

fn add_all<const N: usize>(mine: &mut [u64; N], theirs: &[u64; N]) {
    for (a, b) in mine.iter_mut().zip(theirs) {
        *a += b;
    }
}

fn add_histograms<const M: usize, const N: usize>(
    mine: &mut [Histogram<N>; M],
    theirs: &[Histogram<N>; M],
) {
    for (a, b) in mine.iter_mut().zip(theirs) {
        a.add(b);
    }
}

/// A shard's gauges, read when the scrape asks.
#[derive(Clone, Copy, Debug, Default)]
pub struct Gauges {
    pub open_connections: usize,
    pub uploads_in_progress: usize,
    pub model_queue_depth: usize,
    /// Journal records committed and not shipped to the fleet's table yet (0 on one node).
    pub journal_unshipped: usize,
}

/// What a shard sends to a scrape.
#[derive(Clone, Debug)]
pub struct ShardSnapshot {
    pub shard: usize,
    pub counters: Counters,
    pub gauges: Gauges,
}

/// A shard's metrics. Not `Send`: only its shard writes it.
pub struct Metrics {
    enabled: bool,
    counters: RefCell<Counters>,
}

fn route_slot(route: Option<Route>) -> usize {
    route.map_or(Route::ALL.len(), Route::index)
}

fn status_slot(status: u16) -> usize {
    STATUSES
        .iter()
        .position(|&s| s == status)
        .unwrap_or(STATUSES.len())
}

fn kind_slot(kind: ErrorKind) -> usize {
    ErrorKind::ALL
        .iter()
        .position(|&k| k == kind)
        .unwrap_or_default()
}

impl Metrics {
    pub fn new(enabled: bool) -> Rc<Metrics> {
        Rc::new(Metrics {
            enabled,
            counters: RefCell::default(),
        })
    }

    /// A copy of the counts so far.
    pub fn counters(&self) -> Counters {
        self.counters.borrow().clone()
    }

    /// One answer: its route (none for requests that reached no route), status, error kind
    /// (for refusals) and server time.
    pub fn request(
        &self,
        route: Option<Route>,
        status: u16,
        error: Option<ErrorKind>,
        elapsed_us: u64,
    ) {
        if !self.enabled {
            return;
        }
        let route = route_slot(route);
        let mut counters = self.counters.borrow_mut();
        counters.requests[route][status_slot(status)] += 1;
        if let Some(kind) = error {
            counters.errors[route][kind_slot(kind)] += 1;
        }
        counters.request_seconds[route].observe(&LATENCY_BOUNDS_US, elapsed_us);
    }

    /// A check that ran, by workflow, kind (`text` or `image`) and action.
    pub fn check(&self, workflow: &str, kind: ContentKind, action: &str) {
        if !self.enabled {
            return;
        }
        let action = ACTIONS.iter().position(|&a| a == action).unwrap_or(0);
        let mut counters = self.counters.borrow_mut();
        let checks = &mut counters.checks;
        let at = match checks
            .iter()
            .position(|(w, k, _)| w == workflow && *k == kind)
        {
            Some(at) => at,
            None => {
                let name = if checks.len() < WORKFLOW_LABELS_MAX {
                    workflow
                } else {
                    "other"
                };
                match checks.iter().position(|(w, k, _)| w == name && *k == kind) {
                    Some(at) => at,
                    None => {
                        checks.push((name.to_owned(), kind, [0; 3]));
                        checks.len() - 1
                    }
                }
            }
        };
        checks[at].2[action] += 1;
    }

    /// The stages of one image check, as the model worker timed them.
    /// `prepared`: each model that ran and the time its input took.
    pub fn image_stages(
        &self,
        format: Format,
        decode_us: u64,
        prepared: impl Iterator<Item = (&'static str, u64)>,
    ) {
        if !self.enabled {
            return;
        }
        let mut counters = self.counters.borrow_mut();
        let format = Format::ALL.iter().position(|&f| f == format).unwrap_or(0);
        counters.decode_seconds[format].observe(&LATENCY_BOUNDS_US, decode_us);
        for (model, us) in prepared {
            observe_by_model(&mut counters.resize_seconds, model, us);
        }
    }

    /// One request's share of a model run.
    pub fn model_run(&self, model: &'static str, us: u64) {
        if !self.enabled {
            return;
        }
        observe_by_model(&mut self.counters.borrow_mut().model_seconds, model, us);
    }

    /// An image check answered from a result kept for the same bytes: nothing was decoded or
    /// run for it, so it adds to no stage's time.
    pub fn image_result_reused(&self) {
        if self.enabled {
            self.counters.borrow_mut().image_results_reused += 1;
        }
    }

    /// `windows` tox-block windows of a check scored from kept results, without a model run.
    pub fn toxblock_windows_reused(&self, windows: usize) {
        if self.enabled && windows > 0 {
            self.counters.borrow_mut().toxblock_windows_reused += windows as u64;
        }
    }

    pub fn connection_refused(&self) {
        if self.enabled {
            self.counters.borrow_mut().connections_refused += 1;
        }
    }

    /// A panic caught while serving a connection. Counted even with metrics off: it is
    /// rare, and a scrape that shows none must mean none happened.
    pub fn panic_caught(&self) {
        self.counters.borrow_mut().panics += 1;
    }

    /// One journal commit of `records` records that took `us` (fsync included under
    /// `journal.sync = "always"`).
    pub fn journal_commit(&self, records: usize, us: u64, ok: bool) {
        if !self.enabled {
            return;
        }
        let mut counters = self.counters.borrow_mut();
        if ok {
            counters.journal_commits += 1;
        } else {
            counters.journal_commit_failures += 1;
        }
        counters
            .journal_commit_records
            .observe(&BATCH_BOUNDS, records as u64);
        counters
            .journal_commit_seconds
            .observe(&STORAGE_BOUNDS_US, us);
    }

    /// One periodic journal fsync (`journal.sync = "interval"`).
    pub fn journal_fsync(&self, us: u64) {
        if self.enabled {
            self.counters
                .borrow_mut()
                .journal_fsync_seconds
                .observe(&STORAGE_BOUNDS_US, us);
        }
    }

    /// Records deleted from the journal once shipped.
    pub fn journal_pruned(&self, records: usize) {
        if self.enabled {
            self.counters.borrow_mut().journal_pruned += records as u64;
        }
    }

    /// One `url` download: its size, or why it was refused.
    pub fn download(&self, outcome: Result<usize, Refusal>) {
        if !self.enabled {
            return;
        }
        let mut counters = self.counters.borrow_mut();
        match outcome {
            Ok(bytes) => {
                counters.downloads_ok += 1;
                counters.download_bytes += bytes as u64;
            }
            Err(reason) => {
                let slot = Refusal::ALL.iter().position(|&r| r == reason).unwrap_or(0);
                counters.download_refusals[slot] += 1;
            }
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn records_land_in_their_slots_and_disabled_metrics_count_nothing() {
        let metrics = Metrics::new(true);
        metrics.request(Some(Route::Text), 200, None, 700);
        metrics.request(Some(Route::Text), 429, Some(ErrorKind::RateLimited), 20);
        metrics.request(None, 404, Some(ErrorKind::NotFound), 5);
        metrics.request(None, 299, None, 5);
        let counters = metrics.counters();
        let text = Route::Text.index();
        assert_eq!(counters.requests[text][status_slot(200)], 1);
        assert_eq!(counters.requests[text][status_slot(429)], 1);
        assert_eq!(counters.requests[Route::ALL.len()][STATUSES.len()], 1);
        assert_eq!(counters.errors[text][kind_slot(ErrorKind::RateLimited)], 1);
        assert_eq!(counters.request_seconds[text].count, 2);

        let off = Metrics::new(false);
        off.request(Some(Route::Text), 200, None, 700);
        off.check("default", ContentKind::Text, "accept");
        assert_eq!(off.counters().request_seconds[text].count, 0);
        assert!(off.counters().checks.is_empty());
    }

    #[test]
    fn route_slots_follow_route_all() {
        for (slot, route) in Route::ALL.iter().enumerate() {
            assert_eq!(route.index(), slot);
        }
    }

    #[test]
    fn workflow_labels_are_capped() {
        let metrics = Metrics::new(true);
        for i in 0..WORKFLOW_LABELS_MAX + 10 {
            metrics.check(&format!("w{i}"), ContentKind::Text, "reject");
        }
        let checks = metrics.counters().checks;
        assert_eq!(checks.len(), WORKFLOW_LABELS_MAX + 1);
        let other = checks.iter().find(|(w, _, _)| w == "other").unwrap();
        assert_eq!(other.2, [0, 0, 10]);
    }

    #[test]
    fn shards_add_up() {
        let a = Metrics::new(true);
        let b = Metrics::new(true);
        a.check("default", ContentKind::Image, "review");
        b.check("default", ContentKind::Image, "review");
        b.check("default", ContentKind::Text, "accept");
        b.download(Ok(1000));
        b.download(Err(Refusal::Address));
        let mut sum = a.counters();
        sum.add(&b.counters());
        assert_eq!(sum.checks.len(), 2);
        assert!(sum
            .checks
            .contains(&("default".into(), ContentKind::Image, [0, 2, 0])));
        assert_eq!((sum.downloads_ok, sum.download_bytes), (1, 1000));
        assert_eq!(sum.download_refusals.iter().sum::<u64>(), 1);
    }
}
