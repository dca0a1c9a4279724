//! A shard: one glommio executor pinned to one CPU, with everything a request touches.
//!
//! The executor is glommio with one patch (`vendor/README.md`): its io_uring rings are made
//! `COOP_TASKRUN`, so a request that arrives while the shard is busy waits for the shard's next
//! system call instead of interrupting it with an IPI.
//!
//! The shard owns its listener (one of the SO_REUSEPORT group), its connections, its request-id
//! generator, its `Date` cache and its cached view of the store. Nothing it uses per request
//! is shared with another shard: the only cross-thread state ([`ServerState`]) is read when
//! `/health` is asked and written at start-up and at the stop.
//!
//! Failures stay small: a panic while serving a connection closes that connection alone (see
//! [`conn`] for the 500 it gets when an answer can still be sent). A panic in the shard's own
//! tasks (accept loop, lease janitor, stop watcher, scrape mailbox) ends the shard: its
//! listener closes, so the kernel sends new connections to the other shards, and `/health`
//! answers 503 from then on, so that a load balancer takes the process out ([`ServerState`]).
//!
//! Connections are capped per shard (`connections_per_shard_max`); one over the cap gets
//! `503 busy` and is closed. On stop the listener closes, idle connections are closed, and
//! connections in the middle of a request get until `drain_timeout_ms` to answer it.

use std::cell::{Ref, RefCell};
use std::os::fd::FromRawFd;
use std::rc::Rc;
use std::sync::atomic::{AtomicBool, AtomicUsize, Ordering};
use std::sync::{Arc, Mutex};
use std::task::{Context, Poll, Waker};
use std::time::{Duration, Instant, SystemTime, UNIX_EPOCH};

use futures_lite::{AsyncWriteExt, FutureExt};
use glommio::net::{TcpListener, TcpStream};

use super::readable::ReadableSockets;
use super::slots::ConnSlots;
use crate::api::{self, context::ContextParts, context::Readiness};
use crate::checks::toxblock::KeptWindows;
use crate::checks::{Engine, TextModels};
use crate::config::Config;
use crate::download::Downloader;
use crate::error::{ApiError, ErrorKind};
use crate::fleet::follower::ControlPlaneStatus;
use crate::fleet::shipper::{Shipper, SHIP_INTERVAL, SHIP_LINGER};
use crate::http::conn::{self, ConnConfig, ConnHost};
use crate::http::response::{ConnectionHeader, DateCache, Frame};
use crate::inference::repeats::Repeats;
use crate::inference::share::{CoreSharing, Pace};
use crate::inference::{Worker, WorkerConfig, WorkerModels};
use crate::journal::Journal;
use crate::limits::lease::Sources;
use crate::limits::{ShardLimits, IDLE_RETURN_MS};
use crate::metrics::scrape::{answer_scrapes, MetricsHub, ProcessState};
use crate::metrics::{Gauges, Metrics, ShardSnapshot};
use crate::request_id::{RequestId, RequestIdGen};
use crate::store::lists::ListWriter;
use crate::store::lists_follower::{ListsHub, ListsView};
use crate::store::view::StoreView;
use crate::store::Store;

/// Janitor ticks between two trims of the body-buffer pools (one second).
const BUFFER_TRIM_TICKS: u64 = 5;

/// State shared by all shards and the signal thread. Not touched per request.
pub struct ServerState {
    pub shards: usize,
    /// The shards' mailboxes for `/metrics` scrapes.
    pub metrics: Arc<MetricsHub>,
    ready_shards: AtomicUsize,
    /// Shards ended by a panic in their own tasks: any one makes the process unhealthy.
    failed_shards: AtomicUsize,
    /// In a fleet: how far this node follows the control plane (for `/metrics`).
    control_plane: Option<Arc<ControlPlaneStatus>>,
    /// Shards whose journal cannot commit now: `/health` is 503 on every shard meanwhile.
    pub failing_journals: Arc<AtomicUsize>,
    /// Every shard's disk journal, for the routes that read a check by id.
    pub journals: Arc<crate::journal::shelf::Shelf>,
    stopping: AtomicBool,
    /// One waker per shard's stop watcher (not per connection).
    stop_wakers: Mutex<Vec<Waker>>,
}

impl ServerState {
    pub fn new(shards: usize, control_plane: Option<Arc<ControlPlaneStatus>>) -> Self {
        ServerState {
            control_plane,
            failing_journals: Arc::default(),
            journals: Arc::new(crate::journal::shelf::Shelf::new(shards)),
            shards,
            metrics: Arc::default(),
            ready_shards: AtomicUsize::new(0),
            failed_shards: AtomicUsize::new(0),
            stopping: AtomicBool::new(false),
            stop_wakers: Mutex::new(Vec::new()),
        }
    }

    /// Called by the signal thread: `/health` turns 503 at once and every shard is woken.
    pub fn begin_stop(&self) {
        self.stopping.store(true, Ordering::SeqCst);
        let wakers =
            std::mem::take(&mut *self.stop_wakers.lock().unwrap_or_else(|e| e.into_inner()));
        for waker in wakers {
            waker.wake();
        }
    }

    pub fn is_stopping(&self) -> bool {
        self.stopping.load(Ordering::Relaxed)
    }

    fn poll_stop(&self, cx: &mut Context<'_>) -> Poll<()> {
        if self.is_stopping() {
            return Poll::Ready(());
        }
        let mut wakers = self.stop_wakers.lock().unwrap_or_else(|e| e.into_inner());
        // Checked again under the lock: `begin_stop` sets the flag before taking it.
        if self.is_stopping() {
            return Poll::Ready(());
        }
        if !wakers.iter().any(|waker| waker.will_wake(cx.waker())) {
            wakers.push(cx.waker().clone());
        }
        Poll::Pending
    }

    fn shard_ready(&self) {
        self.ready_shards.fetch_add(1, Ordering::SeqCst);
    }

    /// A shard ended by a panic: `/health` answers 503 from now on.
    pub fn shard_failed(&self, index: usize) {
        self.failed_shards.fetch_add(1, Ordering::SeqCst);
        tracing::error!(
            shard = index,
            "a shard's own task panicked: the shard stopped and /health now answers 503"
        );
    }

    pub fn is_ready(&self) -> bool {
        !self.is_stopping()
            && self.failed_shards.load(Ordering::Relaxed) == 0
            && self.failing_journals.load(Ordering::Relaxed) == 0
            && self.ready_shards.load(Ordering::Relaxed) == self.shards
    }
}

impl Readiness for ServerState {
    fn is_ready(&self) -> bool {
        ServerState::is_ready(self)
    }
}

impl ProcessState for ServerState {
    fn shards(&self) -> usize {
        self.shards
    }

    fn is_ready(&self) -> bool {
        ServerState::is_ready(self)
    }

    fn control_plane(&self) -> Option<(i64, f64)> {
        let status = self.control_plane.as_ref()?;
        let now_ms = crate::clock::Clock::System.now_ms();
        Some((
            status.applied_revision(),
            status.staleness_ms(now_ms) as f64 / 1000.0,
        ))
    }

    fn budgets(&self) -> Option<crate::metrics::exposition::BudgetFigures> {
        let budgets = self.control_plane.as_ref()?.budgets.get()?;
        Some(crate::metrics::exposition::BudgetFigures {
            engine_up: budgets.engine_up.load(Ordering::Relaxed),
            round_trips: budgets.round_trips.load(Ordering::Relaxed),
            fallback_takes: budgets.fallback_takes.load(Ordering::Relaxed),
        })
    }

    fn quota_ledger(&self) -> Option<crate::metrics::exposition::QuotaLedgerFigures> {
        let quota = self.control_plane.as_ref()?.quota.get()?;
        Some(crate::metrics::exposition::QuotaLedgerFigures {
            ledger_up: quota.ledger_up.load(Ordering::Relaxed),
            round_trips: quota.round_trips.load(Ordering::Relaxed),
            fallback_units: quota.fallback_units.load(Ordering::Relaxed),
        })
    }
}

/// What a shard gets from start-up besides its listener.
pub struct ShardResources {
    pub leases: Sources,
    pub downloader: Downloader,
    pub text_models: Arc<TextModels>,
    pub worker_models: Option<WorkerModels>,
    pub worker_config: WorkerConfig,
    /// Image results and tox-block windows the shard keeps for repeats, looked up before a job
    /// goes to the worker (`inference.image_results_kept`, `inference.toxblock_windows_kept`).
    pub image_results_kept: usize,
    pub toxblock_windows_kept: usize,
    /// The CPU the shard (and its model worker) runs on.
    pub cpu: Option<usize>,
    /// In a fleet: where the shard ships its journal.
    pub shipper: Option<Shipper>,
    /// The organizations' compiled lists, published by the lists follower.
    pub lists: Arc<ListsHub>,
    /// Who carries out writes to the lists.
    pub list_writer: Arc<dyn ListWriter>,
    /// Where the journal stages its commits, prepared by the server
    /// ([`crate::journal::staging::recover`]).
    pub journal_staging: Option<std::path::PathBuf>,
}

/// A shard: what its connections need (ids, dates, slots, the stop signal) and the request
/// path's context, to which it hands every request.
pub struct Shard {
    pub index: usize,
    conn_config: ConnConfig,
    state: Arc<ServerState>,
    request_ids: RequestIdGen,
    date: DateCache,
    conns: ConnSlots,
    /// Which connections have bytes waiting (asked by a connection that never waits).
    sockets: ReadableSockets,
    /// Everything a request may touch.
    pub api: api::Context,
}

impl Shard {
    /// What a `/metrics` scrape gets from this shard.
    pub fn metrics_snapshot(&self) -> ShardSnapshot {
        ShardSnapshot {
            shard: self.index,
            counters: self.api.metrics.counters(),
            gauges: Gauges {
                // The accept loop holds a slot of its own while it runs.
                open_connections: self.conns.open.get().saturating_sub(1),
                uploads_in_progress: self.api.uploads.get(),
                model_queue_depth: self.api.checks.worker.as_ref().map_or(0, |w| w.pending()),
                journal_unshipped: self.api.journal.unshipped_count() as usize,
            },
        }
    }
}

impl ConnHost for Shard {
    fn conn_config(&self) -> &ConnConfig {
        &self.conn_config
    }

    fn next_request_id(&self) -> RequestId {
        self.request_ids.next(self.api.now_ms() as u64)
    }

    fn date(&self) -> Ref<'_, String> {
        let seconds = SystemTime::now()
            .duration_since(UNIX_EPOCH)
            .map_or(0, |d| d.as_secs());
        self.date.get(seconds)
    }

    fn is_stopping(&self) -> bool {
        self.conns.stopping.get()
    }

    fn poll_stop(&self, slot: usize, cx: &mut Context<'_>) -> Poll<()> {
        self.conns.poll(slot, cx)
    }

    fn request_started(&self, slot: usize) {
        self.conns.busy(slot);
    }

    fn client(&self, slot: usize) -> Option<std::net::IpAddr> {
        self.conns.peer_of(slot)
    }

    fn others_readable(&self, slot: usize) -> bool {
        self.sockets.others_readable(slot)
    }
}

/// Runs one shard until the server stops and its connections drained.
pub async fn run(
    index: usize,
    listener_fd: std::os::fd::RawFd,
    config: Arc<Config>,
    state: Arc<ServerState>,
    store: Store,
    tls: Option<futures_rustls::TlsAcceptor>,
    resources: ShardResources,
) {
    // SAFETY: `listener_fd` is a bound, listening TCP socket created by `server::run` for this
    // shard alone; ownership passes here and nothing else closes or uses it.
    let listener = unsafe { TcpListener::from_raw_fd(listener_fd) };
    // The shard's niceness, in either `inference.core_sharing` mode (the worker sets its own
    // scheduling; see `crate::inference::share`).
    if !crate::inference::worker::set_thread_nice(config.inference.shard_nice) {
        tracing::warn!(
            nice = config.inference.shard_nice,
            "could not set the shard's niceness"
        );
    }
    let limits = ShardLimits::new(resources.leases.clone(), state.shards);
    let shipper = resources.shipper.clone();
    let downloader = resources.downloader.clone();
    let lists = ListsView::new(resources.lists.clone());
    let list_writer = resources.list_writer.clone();
    let metrics = Metrics::new(config.metrics.enabled());
    let journal_config = crate::journal::JournalConfig {
        staging: resources.journal_staging.clone(),
        ..config.journal_config()
    };
    let journal = match Journal::start(
        &config.server.data_dir,
        index,
        journal_config,
        metrics.clone(),
    ) {
        Ok(journal) => journal,
        Err(error) => {
            tracing::error!(
                shard = index,
                error = format!("{error:#}"),
                "shard could not open its journal"
            );
            resources.leases.quota.report_journal_charges(None);
            return;
        }
    };
    journal.report_failures_to(state.failing_journals.clone());
    let (journal_env, journal_db) = journal.disk();
    state.journals.put(index, journal_env, journal_db);
    // Before this shard serves: the checks its journal has charged, so that a single node's
    // quota ledger is set back to them after a crash.
    let charges = journal.charges_blocking().map_err(|error| {
        tracing::error!(
            shard = index,
            error = format!("{error:#}"),
            "reading the journal's quota counts failed"
        )
    });
    resources.leases.quota.report_journal_charges(charges.ok());
    let engine = match start_engine(index, resources, metrics.clone()).await {
        Ok(engine) => engine,
        Err(error) => {
            tracing::error!(shard = index, %error, "shard could not load its models");
            return;
        }
    };
    let request_ids = match RequestIdGen::from_os(index as u8) {
        Ok(ids) => ids,
        Err(error) => {
            tracing::error!(shard = index, %error, "shard could not start");
            return;
        }
    };
    let readiness: Arc<dyn Readiness> = state.clone();
    let shard = Rc::new(Shard {
        index,
        conn_config: config.conn_config(),
        state: state.clone(),
        request_ids,
        date: DateCache::default(),
        conns: ConnSlots::default(),
        sockets: ReadableSockets::new(),
        api: api::Context::new(ContextParts {
            shard: index,
            scheme: if tls.is_some() { "https" } else { "http" },
            clock: config.clock(),
            request_limits: config.limits.clone(),
            panic_path: config.testing.panic_path.clone(),
            store: StoreView::new(store),
            lists,
            list_writer,
            limits,
            checks: engine,
            journal,
            journals: state.journals.clone(),
            metrics,
            downloader,
            readiness,
        }),
    });
    let shipping = shipper.map(|shipper| {
        let journal = shard.api.journal.clone();
        // Before this shard serves: what it answered and had not shipped when the process
        // last stopped, so that the quota's reconciliation after a crash counts it.
        let charges = match journal.unshipped_charges_blocking(crate::fleet::quota::BACKLOG_IDS_MAX)
        {
            Ok(charges) => charges,
            Err(error) => {
                tracing::error!(
                    shard = index,
                    error = format!("{error:#}"),
                    "reading the journal's unshipped records failed"
                );
                None
            }
        };
        shipper.backlog.report(charges);
        spawn_essential(&state, index, ship_journal(journal, shipper, index))
    });
    let pruning = config.cluster.as_ref().map(|cluster| {
        let keep = Duration::from_secs(u64::from(cluster.local_journal_keep_minutes) * 60);
        spawn_essential(&state, index, prune_shipped_journal(shard.clone(), keep))
    });
    let scrapes = {
        let shard = shard.clone();
        let mailbox = state.metrics.register();
        spawn_essential(
            &state,
            index,
            answer_scrapes(mailbox, move || shard.metrics_snapshot()),
        )
    };
    state.shard_ready();

    // Idle leases go back to the shared source, so no shard sits on another's share, and
    // body buffers no request needed go back to the allocator.
    let janitor = {
        let shard = shard.clone();
        spawn_essential(&state, index, async move {
            for tick in 1u64.. {
                glommio::timer::sleep(Duration::from_millis(IDLE_RETURN_MS as u64)).await;
                shard.api.limits.return_idle(shard.api.now_ms());
                if tick % BUFFER_TRIM_TICKS == 0 {
                    shard.api.text_buffers.trim();
                    shard.api.image_buffers.trim();
                }
            }
        })
    };

    // One task per shard listens for the process-wide stop and fans it out locally.
    let watcher = {
        let shard = shard.clone();
        spawn_essential(&state, index, async move {
            std::future::poll_fn(|cx| shard.state.poll_stop(cx)).await;
            shard.conns.stop();
        })
    };

    let accept_slot = shard.conns.acquire(None);
    let cap = config.server.connections_per_shard_max;
    let per_address_cap = config.server.connections_per_address_max;
    let ipv6_client_prefix_bits = config.server.ipv6_client_prefix_bits;
    loop {
        let accepted = futures_lite::future::or(async { Some(listener.accept().await) }, async {
            std::future::poll_fn(|cx| shard.conns.poll(accept_slot, cx)).await;
            None
        })
        .await;
        let stream = match accepted {
            None => break,
            Some(Ok(stream)) => stream,
            Some(Err(error)) => {
                // Out of descriptors and the like: pause instead of spinning.
                tracing::warn!(shard = index, %error, "accept failed");
                glommio::timer::sleep(Duration::from_millis(10)).await;
                continue;
            }
        };
        let peer = stream
            .peer_addr()
            .ok()
            .map(|address| super::slots::client_of(address.ip(), ipv6_client_prefix_bits));
        // One address may not hold the shard: past its own cap, its new connection is refused.
        let address_full = peer.is_some_and(|ip| shard.conns.count_of(ip) >= per_address_cap);
        // At the shard's cap (`open` counts the accept loop's own slot too), an idle
        // connection is closed to make room rather than the new client refused.
        let shard_full = shard.conns.open.get() > cap && !shard.conns.evict_idle(peer);
        if address_full || shard_full {
            shard.api.metrics.connection_refused();
            // Over TLS a plain answer would be noise before a handshake: the connection is
            // closed (the stream dropped) without one.
            if tls.is_none() {
                glommio::spawn_local(refuse_over_cap(shard.clone(), stream)).detach();
            }
            continue;
        }
        let _ = stream.set_nodelay(true);
        let slot = shard.conns.acquire(peer);
        glommio::spawn_local(serve(shard.clone(), stream, tls.clone(), slot)).detach();
    }
    drop(listener);
    shard.conns.release(accept_slot);
    let deadline = Instant::now() + Duration::from_millis(config.server.drain_timeout_ms);
    while shard.conns.open.get() > 0 && Instant::now() < deadline {
        glommio::timer::sleep(Duration::from_millis(5)).await;
    }
    if shard.conns.open.get() > 0 {
        tracing::warn!(
            shard = index,
            open = shard.conns.open.get(),
            "drain timeout: closing connections with requests in flight"
        );
    }
    drop(shipping);
    drop(pruning);
    drop(watcher);
    drop(janitor);
    drop(scrapes);
    // A graceful stop leaves nothing behind: unspent quota back to the ledger, the journal
    // fsynced (the interval policy may have commits not yet on disk). Blocking here is fine:
    // the shard serves nothing any more.
    shard.api.limits.give_back_blocking();
    shard.api.journal.sync_blocking();
}

/// Ships the shard's journal to the fleet's table, in commit order, for as long as the shard
/// runs: a batch, then its position once the table has it; a failed batch is sent again.
async fn ship_journal(journal: Rc<Journal>, shipper: Shipper, shard: usize) {
    loop {
        let batch = match journal.unshipped().await {
            Ok(batch) => batch,
            Err(error) => {
                tracing::warn!(
                    shard,
                    error = format!("{error:#}"),
                    "reading the journal to ship failed"
                );
                Default::default()
            }
        };
        if batch.last_seq == 0 {
            shipper.unshipped[shard].store(
                journal.unshipped_count(),
                std::sync::atomic::Ordering::Relaxed,
            );
            glommio::timer::sleep(SHIP_INTERVAL).await;
            continue;
        }
        let (last, full) = (batch.last_seq, batch.full);
        let shipped = shipper.ship(shard, batch).await && journal.set_shipped(last).await.is_ok();
        shipper.unshipped[shard].store(
            journal.unshipped_count(),
            std::sync::atomic::Ordering::Relaxed,
        );
        if !shipped {
            glommio::timer::sleep(SHIP_INTERVAL).await;
        } else if !full {
            // Caught up: let the next batch gather rather than ship a few records a round.
            glommio::timer::sleep(SHIP_LINGER).await;
        }
    }
}

/// Deletes the shard's journal records once shipped to the fleet's table and older than
/// `keep` (by their request ids' time), every [`local_prune_interval`]: the table is the
/// fleet's journal, and the local copy would otherwise grow until its map is full.
async fn prune_shipped_journal(shard: Rc<Shard>, keep: Duration) {
    let every = local_prune_interval(keep);
    loop {
        glommio::timer::sleep(every).await;
        let before_ms = shard
            .api
            .now_ms()
            .saturating_sub(i64::try_from(keep.as_millis()).unwrap_or(i64::MAX));
        match shard.api.journal.prune_shipped(before_ms).await {
            Ok(0) => {}
            Ok(deleted) => {
                tracing::debug!(
                    shard = shard.index,
                    deleted,
                    "shipped journal records pruned"
                )
            }
            Err(error) => tracing::warn!(
                shard = shard.index,
                error = format!("{error:#}"),
                "pruning shipped journal records failed; the next pass tries again"
            ),
        }
    }
}

/// How often a shard prunes what it shipped: a sixth of what it keeps, between a second and
/// a minute (so that the journal holds at most about `keep` and a sixth of records).
pub fn local_prune_interval(keep: Duration) -> Duration {
    (keep / 6).clamp(Duration::from_secs(1), Duration::from_secs(60))
}

/// Starts the shard's model worker (if a model runtime is there) and waits until its
/// sessions are loaded: the shard reports ready only after that.
async fn start_engine(
    index: usize,
    resources: ShardResources,
    metrics: Rc<Metrics>,
) -> Result<Engine, String> {
    let ShardResources {
        leases: _,
        downloader: _,
        text_models,
        worker_models,
        worker_config,
        image_results_kept,
        toxblock_windows_kept,
        cpu,
        shipper: _,
        lists: _,
        list_writer: _,
        journal_staging: _,
    } = resources;
    let toxblock_loaded = match (&worker_models, &worker_config.text_model) {
        (Some(models), Some(spec)) => models.path_of(spec).is_some(),
        _ => false,
    };
    let harm_loaded = match (&worker_models, worker_config.text_encoder) {
        (Some(models), Some(spec)) => models.path_of(&spec.model).is_some(),
        _ => false,
    };
    let image_slots_loaded = crate::checks::image_slots_loaded(worker_models.as_ref());
    let measures_ready = crate::checks::measures_ready(worker_models.as_ref());
    let (sharing, share) = (worker_config.sharing, worker_config.share);
    let worker = match worker_models {
        None => None,
        Some(models) => {
            let (worker, ready) = Worker::spawn(index, cpu, models, worker_config)
                .map_err(|error| format!("starting the model worker: {error}"))?;
            ready
                .await
                .map_err(|_| "the model worker stopped while loading".to_owned())??;
            Some(worker)
        }
    };
    let pace = match (&worker, sharing) {
        (Some(_), CoreSharing::Paced) => Pace::new(share),
        _ => Pace::off(),
    };
    Ok(Engine {
        toxblock_ready: toxblock_loaded && text_models.tox_tokenizer.is_some() && worker.is_some(),
        harm_ready: harm_loaded && text_models.harm.is_some() && worker.is_some(),
        image_slots_loaded,
        measures_ready,
        text: text_models,
        worker,
        normalizer: Default::default(),
        turns: Default::default(),
        pace,
        images_kept: RefCell::new(Repeats::new(image_results_kept)),
        toxblock_kept: RefCell::new(KeptWindows::new(toxblock_windows_kept)),
        metrics,
    })
}

/// Spawns one of the shard's own tasks; a panic in it ends the shard ([`ServerState::shard_failed`])
/// instead of unwinding through the executor.
fn spawn_essential(
    state: &Arc<ServerState>,
    index: usize,
    task: impl std::future::Future<Output = ()> + 'static,
) -> glommio::Task<()> {
    let state = state.clone();
    glommio::spawn_local(async move {
        // `AssertUnwindSafe`: after a panic the shard is marked failed and serves nothing more.
        if std::panic::AssertUnwindSafe(task)
            .catch_unwind()
            .await
            .is_err()
        {
            state.shard_failed(index);
        }
    })
}

/// Serves one connection. A panic anywhere in it (TLS, head parsing, a handler after its
/// answer) closes this connection alone: the stream is dropped and the slot freed.
async fn serve(
    shard: Rc<Shard>,
    stream: TcpStream,
    tls: Option<futures_rustls::TlsAcceptor>,
    slot: usize,
) {
    let deadline = Instant::now() + shard.conn_config.header_read_timeout;
    shard.sockets.watch(&stream, slot);
    let served = async {
        match tls {
            None => conn::serve_connection(stream, &*shard, &shard.api, slot, deadline).await,
            Some(acceptor) => {
                if let Some(Ok(stream)) = conn::until(deadline, acceptor.accept(stream)).await {
                    conn::serve_connection(stream, &*shard, &shard.api, slot, deadline).await;
                }
            }
        }
    };
    // `AssertUnwindSafe`: the connection's own state is dropped with the future; what it
    // borrowed of the shard is restored by drop guards (permits, upload places, buffers).
    if std::panic::AssertUnwindSafe(served)
        .catch_unwind()
        .await
        .is_err()
    {
        shard.api.metrics.panic_caught();
        tracing::error!(
            shard = shard.index,
            "a connection's task panicked: the connection was closed"
        );
    }
    shard.conns.release(slot);
}

/// Answers a connection over the cap with 503 and closes it, without reading its request.
async fn refuse_over_cap(shard: Rc<Shard>, mut stream: TcpStream) {
    let request_id = shard.next_request_id();
    let error = ApiError::new(
        ErrorKind::Busy,
        "too many connections on this server; retry shortly",
    )
    .with_retry_after(1);
    let response = crate::api::error_answer(&shard.api, &error, "", &request_id);
    let mut out = Vec::with_capacity(256);
    response.write_to(
        &mut out,
        &Frame {
            request_id: request_id.as_str(),
            date: &shard.date(),
            connection: ConnectionHeader::Close,
            head_only: false,
        },
    );
    let deadline = Instant::now() + shard.conn_config.write_timeout;
    let _ = conn::until(deadline, async {
        stream.write_all(&out).await?;
        stream.close().await
    })
    .await;
}
