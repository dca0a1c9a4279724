//! `modgate serve`: opens the store, binds one listener per shard, starts one glommio
//! executor per CPU, and stops them on SIGTERM or SIGINT.
//!
//! Start-up order: what needs no data directory (the CPUs, the models, the downloader, TLS
//! material: a start that fails on them leaves the directory untouched), the store (creating
//! plans, the shipped workflows and a demo organization on a fresh data directory), listeners
//! (all bound before anything is announced, so the announced address is the one every shard
//! serves), the signal thread, then the shards.
//! `/health` answers 503 until every shard is ready.
//!
//! Stop: the first SIGTERM or SIGINT turns `/health` to 503 at once, closes every listener,
//! closes idle connections and gives requests in flight `drain_timeout_ms`; then the process
//! exits 0. A second signal exits at once with status 1. SIGHUP reloads what can change
//! without a restart ([`reload`]).
//!
//! The `/metrics` listener ([`crate::metrics::scrape`]) is bound with the others, before
//! anything is announced.

pub mod models_dir;
pub mod readable;
pub mod reload;
pub mod shard;
pub mod slots;
pub mod tls;

use std::net::SocketAddr;
use std::os::fd::{IntoRawFd, RawFd};
use std::sync::{Arc, Mutex};

use anyhow::{anyhow, bail, Context};
use futures_lite::FutureExt;
use glommio::{CpuSet, LocalExecutorPoolBuilder, PoolPlacement};
use socket2::{Domain, Protocol, Socket, Type};

use crate::checks::registry;
use crate::checks::TextModels;
use crate::config::{Config, Overrides};
use crate::download::Downloader;
use crate::fleet;
use crate::fleet::follower::ControlPlaneStatus;
use crate::inference::{self, WorkerModels};
use crate::limits::lease::{LocalLeases, Sources};
use crate::logging::LogControl;
use crate::metrics::scrape::{self, ProcessState};
use crate::store::records::{Scopes, WorkflowAccess};
use crate::store::Store;
use shard::{ServerState, ShardResources};

/// Threads for each shard's blocking work.
pub const BLOCKING_THREADS_PER_SHARD: usize = 4;
/// Backlog of each listener.
pub const LISTEN_BACKLOG: i32 = 4096;
/// The organization created on a fresh data directory, so that a new user can try a request.
pub const DEMO_ORG: &str = "demo";

/// Allocations of at least this many bytes get their own mapping, unmapped when freed.
#[cfg(all(target_os = "linux", target_env = "gnu"))]
const MMAP_THRESHOLD_BYTES: libc::c_int = 256 << 10;

/// Makes glibc give large blocks back to the system when they are freed. By default it raises
/// its mmap threshold to the largest block freed (up to 32 MB), after which a burst of body
/// buffers (15 MB images, forms of callers whose key is inside them) is carved from the heap
/// arenas and stays resident after the burst. A fixed threshold keeps every body-sized block
/// in its own mapping, so memory comes back when the burst ends (the shards' buffer pools
/// keep a few for steady traffic and trim them when unused).
fn return_large_blocks_to_the_system() {
    #[cfg(all(target_os = "linux", target_env = "gnu"))]
    {
        // SAFETY: `mallopt` only sets a parameter of glibc's allocator (under its own lock);
        // it takes integers, touches no memory of ours, and blocks already allocated keep
        // working whatever the threshold (free tells a mapped block from a heap one by its
        // header). A 0 return means the value was refused, which only leaves the default.
        let set = unsafe { libc::mallopt(libc::M_MMAP_THRESHOLD, MMAP_THRESHOLD_BYTES) };
        if set == 0 {
            tracing::warn!(
                "could not set malloc's mmap threshold; memory of a burst may stay resident"
            );
        }
    }
}

/// Runs the server on `config` (read under `overrides`, kept for SIGHUP) until a stop signal.
pub fn run(config: Config, overrides: Overrides, log: LogControl) -> anyhow::Result<()> {
    config.validate()?;
    // Before anything reads the registry: workflows may name the configuration's own models.
    crate::checks::custom::register(&config.models.custom).map_err(|error| anyhow!(error))?;
    crate::api::dialect::sightengine::check_declared_models().map_err(|error| anyhow!(error))?;
    return_large_blocks_to_the_system();
    if let Err(error) = rlimit::increase_nofile_limit(u64::MAX) {
        tracing::warn!(%error, "could not raise the open-file limit");
    }
    // Whatever can stop the start without the data directory comes first (the CPUs, the
    // models, the downloader's and the listeners' TLS material), so that a start that fails
    // leaves the directory as it was: a fresh one gets no demo organization and key printed
    // by a server that then stopped.
    let cpus = allowed_cpus()?;
    let shards = match config.server.cores {
        0 => cpus.len(),
        n => n,
    };
    if shards > 256 {
        bail!("at most 256 shards (request ids carry the shard in 8 bits)");
    }
    let (text_models, worker_models) = load_models(&config)?;
    let downloader = Downloader::new(
        config.testing.allow_private_urls,
        config.testing.download_extra_roots.as_deref(),
        crate::bounds::IMAGE_BYTES_MAX,
        &config.limits.download_ports,
        config.testing.dns_servers.as_deref(),
    )?;
    if let Some(path) = &config.testing.download_extra_roots {
        tracing::warn!(path = %path.display(), "testing.download_extra_roots is set: downloads trust extra authorities (test only)");
    }
    if config.testing.allow_private_urls {
        tracing::warn!(
            "testing.allow_private_urls is set: downloads may reach private addresses (test only)"
        );
    }
    if let Some(path) = &config.testing.panic_path {
        tracing::warn!(%path, "testing.panic_path is set: requests to it panic (test only)");
    }
    if config.testing.clock_offset_file.is_some() {
        tracing::warn!("testing.clock_offset_file is set: the clock is shifted (test only)");
    }
    let tls = match (&config.tls.cert, &config.tls.key) {
        (Some(cert), Some(key)) => Some(tls::acceptor(cert, key)?),
        _ => None,
    };
    let store = Store::open(&config.server.data_dir)?;
    let control_plane = match &config.cluster {
        None => {
            let now_ms = config.clock().now_ms();
            store.put_plans(&config.plans)?;
            store.add_missing_shipped_workflows(now_ms)?;
            if let Some(file) = &config.workflows.file {
                let changed = reload::import_workflows(&store, file)?;
                if !changed.is_empty() {
                    tracing::info!(workflows = %changed.join(", "), "imported from workflows.file");
                }
            }
            // Last, once nothing else in the store can fail.
            create_demo_org(&store, &config)?;
            None
        }
        Some(cluster) => {
            // A fleet node's store is a replica of PostgreSQL, written by its follower only.
            if config.workflows.file.is_some() {
                tracing::warn!("workflows.file is not read by a fleet node: import it with `modgate workflow import --config`");
            }
            let status = Arc::new(ControlPlaneStatus::default());
            fleet::follower::initial_sync(cluster, &store, &status)?;
            fleet::follower::spawn(cluster.clone(), store.clone(), status.clone())?;
            announce(format_args!(
                "following the fleet's control plane as node {} (revision {})",
                cluster.node_id(),
                status.applied_revision()
            ));
            Some(status)
        }
    };

    // Before any shard reads its journal (the quota's reconciliation, shipping): what a killed
    // run left staged goes to the disk journals.
    let journal_staging = config.journal_staging_root();
    let recovered = crate::journal::staging::recover(
        &config.server.data_dir,
        journal_staging.as_deref(),
        config.journal.map_bytes,
        config.cluster.is_some(),
    )
    .context("the journal's staging")?;
    if recovered > 0 {
        tracing::info!(
            records = recovered,
            "journal records a stopped run had staged moved to the disk journal"
        );
    }
    let (fds, addr) = bind_listeners(config.server.listen, shards)?;
    let metrics_listener = match config.metrics.address()? {
        Some(address) => Some(
            std::net::TcpListener::bind(address)
                .with_context(|| format!("binding the metrics listener {address}"))?,
        ),
        None => None,
    };
    let state = Arc::new(ServerState::new(shards, control_plane.clone()));
    spawn_signal_thread(
        state.clone(),
        reload::Reloader {
            overrides,
            log,
            store: store.clone(),
            running: config.clone(),
        },
    )?;
    if let Some(listener) = metrics_listener {
        let address = listener.local_addr()?;
        let process: Arc<dyn ProcessState> = state.clone();
        scrape::spawn_listener(listener, state.metrics.clone(), process)
            .context("starting the metrics listener")?;
        announce(format_args!("metrics on http://{address}/metrics"));
    }

    let scheme = if tls.is_some() { "https" } else { "http" };
    announce(format_args!(
        "modgate listening on {scheme}://{addr} with {shards} shard(s)"
    ));
    tracing::info!(%addr, shards, tls = tls.is_some(), "listening");

    let placement = PoolPlacement::Custom(
        (0..shards)
            .map(|i| {
                let cpu = cpus[i % cpus.len()];
                CpuSet::online().map(|set| set.filter(|location| location.cpu == cpu))
            })
            .collect::<Result<_, _>>()
            .map_err(|error| anyhow!("reading the CPU topology: {error}"))?,
    );
    let fds = Arc::new(Mutex::new(fds.into_iter().enumerate().collect::<Vec<_>>()));
    let mut worker_config = registry::worker_config(
        config.inference.queue_depth_max,
        config.inference.batch_rows_max,
        config.inference.core_sharing,
        config.inference.worker_share,
        config.inference.worker_nice,
    );
    worker_config.job_time_max = std::time::Duration::from_millis(config.inference.job_time_max_ms);
    let shipper = match &config.cluster {
        Some(cluster) => {
            let left = fleet::shipper::left_journals(&config.server.data_dir, shards)?;
            let shipper = fleet::shipper::spawn(cluster.clone(), shards, left.len())?;
            if let Some(status) = &control_plane {
                let _ = status.unshipped.set(shipper.unshipped.clone());
            }
            fleet::shipper::ship_left_journals(&shipper, left, config.journal.map_bytes)
                .context("the journals of shards this run does not have")?;
            Some(shipper)
        }
        None => None,
    };
    let leases = budgets(&config, control_plane.as_ref(), shipper.as_ref(), shards)?;
    let lists = crate::store::lists_follower::start(store.clone())
        .context("compiling the organizations' lists")?;
    let list_writer: Arc<dyn crate::store::lists::ListWriter> = match &config.cluster {
        Some(cluster) => Arc::new(fleet::lists::FleetLists {
            cluster: cluster.clone(),
        }),
        None => Arc::new(crate::store::lists::LocalLists),
    };
    let stopping_leases = leases.clone();
    let staging_release = journal_staging
        .clone()
        .map(|root| (config.server.data_dir.clone(), root));
    let config = Arc::new(config);
    let mut pool = LocalExecutorPoolBuilder::new(placement)
        .name("modgate-shard")
        .io_memory(config.server.io_memory_bytes)
        .ring_depth(config.server.ring_depth);
    if config.server.spin_before_park_us > 0 {
        pool = pool.spin_before_park(std::time::Duration::from_micros(
            config.server.spin_before_park_us,
        ));
    }
    let handles = pool
        // Blocking work of a shard (journal commits, quota leases, name resolution) runs
        // here; several threads, so that a slow DNS answer never holds a journal commit.
        .blocking_thread_pool_placement(PoolPlacement::Unbound(BLOCKING_THREADS_PER_SHARD))
        .on_all_shards(move || {
            let claimed = fds.lock().unwrap_or_else(|e| e.into_inner()).pop();
            let (config, state, store, tls) =
                (config.clone(), state.clone(), store.clone(), tls.clone());
            let resources = claimed.map(|_| ShardResources {
                leases: leases.clone(),
                downloader: downloader.clone(),
                text_models: text_models.clone(),
                worker_models: worker_models.clone(),
                worker_config: worker_config.clone(),
                image_results_kept: config.inference.image_results_kept,
                toxblock_windows_kept: config.inference.toxblock_windows_kept,
                shipper: shipper.clone(),
                lists: lists.clone(),
                list_writer: list_writer.clone(),
                journal_staging: journal_staging.clone(),
                // The CPU glommio pinned this executor to: executors claim their shard index
                // in whatever order they start, so `cpus[index]` may be another shard's CPU,
                // and the worker must share its own shard's core.
                cpu: pinned_cpu(),
            });
            async move {
                if let (Some((index, fd)), Some(resources)) = (claimed, resources) {
                    // A panic in the shard's accept loop drops its listener (new connections
                    // go to the other shards) and makes the process unhealthy; the thread and
                    // the other shards live on.
                    let run = shard::run(index, fd, config, state.clone(), store, tls, resources);
                    if std::panic::AssertUnwindSafe(run)
                        .catch_unwind()
                        .await
                        .is_err()
                    {
                        state.shard_failed(index);
                    }
                }
            }
        })
        .map_err(|error| anyhow!("starting the shards: {error}"))?;
    for result in handles.join_all() {
        result.map_err(|error| anyhow!("a shard failed: {error}"))?;
    }
    stopping_leases.stop();
    if let Some((data_dir, root)) = &staging_release {
        crate::journal::staging::release(data_dir, root);
    }
    tracing::info!("stopped");
    Ok(())
}

/// Where the shards lease their budgets from: this process alone; or in a fleet the quota
/// ledger in PostgreSQL, and with `cluster.redis_url` rate and concurrency in Redis/Valkey.
fn budgets(
    config: &Config,
    control_plane: Option<&Arc<ControlPlaneStatus>>,
    shipper: Option<&fleet::shipper::Shipper>,
    shards: usize,
) -> anyhow::Result<Sources> {
    let leases = LocalLeases::open(&config.server.data_dir)?;
    let (Some(cluster), Some(status), Some(shipper)) = (&config.cluster, control_plane, shipper)
    else {
        // A single node: its quota ledger is set back to what the journals charged, and
        // written to disk by a thread of its own.
        leases.expect_journals(shards, &config.server.data_dir);
        let leases = Arc::new(leases);
        leases.start_flusher()?;
        return Ok(Sources::local(leases));
    };
    let quota = Arc::new(fleet::quota::PgQuota::start(
        cluster.clone(),
        shipper.backlog.clone(),
        status.clone(),
    )?);
    let Some(redis_url) = &cluster.redis_url else {
        return Ok(Sources {
            budgets: Arc::new(leases),
            quota,
        });
    };
    let budget_status = Arc::new(fleet::budgets::BudgetStatus::default());
    let _ = status.budgets.set(budget_status.clone());
    let leases = fleet::budgets::FleetLeases::start(
        redis_url,
        cluster.node_id(),
        cluster.permit_ttl_ms,
        status.clone(),
        budget_status,
    )?;
    announce(format_args!(
        "rate and concurrency budgets on Redis at {}",
        fleet::redacted(redis_url)
    ));
    Ok(Sources {
        budgets: Arc::new(leases),
        quota,
    })
}

/// Loads the text models (shared by all shards) and checks the ONNX Runtime library and the
/// model files. With `models.required`, anything missing stops the start with its reason.
fn load_models(config: &Config) -> anyhow::Result<(Arc<TextModels>, Option<WorkerModels>)> {
    let required = config.models.required;
    let models_dir = &match models_dir::resolve(
        &config.server.models_dir,
        &config.models.onnxruntime_library,
    ) {
        Ok(found) => found,
        Err(tried) => {
            let tried: Vec<String> = tried.iter().map(|p| p.display().to_string()).collect();
            let problem = format!(
                "no models directory holds {} (tried, in order: {}); set server.models_dir, --models or {}, or run `python3 models/fetch.py`",
                config.models.onnxruntime_library.display(),
                tried.join(", "),
                models_dir::MODELS_ENV
            );
            if required {
                bail!("{problem}");
            }
            tracing::warn!(%problem, "starting without the models");
            config.server.models_dir.clone()
        }
    };
    if models_dir != &config.server.models_dir {
        tracing::info!(dir = %models_dir.display(), "models found");
    }
    let (text_models, text_problems) =
        TextModels::load(models_dir).map_err(|error| anyhow!(error))?;
    let library = models_dir.join(&config.models.onnxruntime_library);
    let mut preflight = inference::preflight(
        models_dir,
        &library,
        &registry::models(),
        &registry::image_models(),
        required,
    )
    .map_err(|error| anyhow!(error))?;
    for problem in [
        text_problems.tokenizer,
        text_problems.langid,
        text_problems.harm,
    ]
    .into_iter()
    .flatten()
    {
        if required {
            bail!("{problem} (set models.required = false to start without it)");
        }
        preflight.problems.push(problem);
    }
    for problem in &preflight.problems {
        tracing::warn!(%problem, "starting without a model: its categories will be reported as unchecked");
    }
    Ok((Arc::new(text_models), preflight.models))
}

/// On a store without organizations (a fresh data directory), the demo organization with one
/// key, printed once.
fn create_demo_org(store: &Store, config: &Config) -> anyhow::Result<()> {
    let now_ms = config.clock().now_ms();
    if config.server.demo_key && store.orgs()?.is_empty() {
        let plan = if config.plans.contains_key("free") {
            "free".to_owned()
        } else {
            config.plans.keys().next().cloned().unwrap_or_default()
        };
        store.create_org(DEMO_ORG, &plan, now_ms)?;
        let issued =
            store.create_key(DEMO_ORG, Scopes::CHECKS, WorkflowAccess::All, None, now_ms)?;
        announce(format_args!(
            "fresh data directory: created organization '{DEMO_ORG}' (plan {plan}) with this key, shown once:"
        ));
        announce(format_args!("demo key: {}", issued.key));
    }
    Ok(())
}

/// A line on stdout for people and scripts (the address, the demo key); a closed stdout is no
/// reason to stop a server.
fn announce(line: std::fmt::Arguments<'_>) {
    use std::io::Write as _;
    let mut stdout = std::io::stdout().lock();
    let _ = writeln!(stdout, "{line}");
    let _ = stdout.flush();
}

/// The CPUs this process may run on (its affinity mask, e.g. under `taskset`).
fn allowed_cpus() -> anyhow::Result<Vec<usize>> {
    let mask = nix::sched::sched_getaffinity(nix::unistd::Pid::from_raw(0))
        .context("reading the CPU affinity")?;
    let cpus: Vec<usize> = (0..nix::sched::CpuSet::count())
        .filter(|&cpu| mask.is_set(cpu).unwrap_or(false))
        .collect();
    if cpus.is_empty() {
        bail!("no CPU in this process's affinity mask");
    }
    Ok(cpus)
}

/// The one CPU the calling thread is pinned to; `None` if it may run on several.
fn pinned_cpu() -> Option<usize> {
    match allowed_cpus().ok()?.as_slice() {
        [cpu] => Some(*cpu),
        _ => None,
    }
}

/// One SO_REUSEPORT listener per shard, all on the same address. Port 0 picks a free port
/// with the first listener and binds the others to it.
fn bind_listeners(addr: SocketAddr, count: usize) -> anyhow::Result<(Vec<RawFd>, SocketAddr)> {
    let mut bound = addr;
    let mut fds = Vec::with_capacity(count);
    for _ in 0..count {
        let socket = Socket::new(
            Domain::for_address(bound),
            Type::STREAM,
            Some(Protocol::TCP),
        )?;
        socket.set_reuse_address(true)?;
        socket.set_reuse_port(true)?;
        socket
            .bind(&bound.into())
            .with_context(|| format!("binding {bound}"))?;
        socket.listen(LISTEN_BACKLOG)?;
        if bound.port() == 0 {
            bound = socket
                .local_addr()?
                .as_socket()
                .ok_or_else(|| anyhow!("the listener has no IP address"))?;
        }
        fds.push(socket.into_raw_fd());
    }
    Ok((fds, bound))
}

/// SIGTERM and SIGINT stop the server (a second one exits at once); SIGHUP reloads.
fn spawn_signal_thread(
    state: Arc<ServerState>,
    mut reloader: reload::Reloader,
) -> anyhow::Result<()> {
    use signal_hook::consts::{SIGHUP, SIGINT, SIGTERM};
    let mut signals = signal_hook::iterator::Signals::new([SIGTERM, SIGINT, SIGHUP])
        .context("installing signal handlers")?;
    std::thread::Builder::new()
        .name("modgate-signals".into())
        .spawn(move || {
            let mut seen = 0;
            for signal in signals.forever() {
                if signal == SIGHUP {
                    match reloader.reload() {
                        Ok(outcome) => {
                            tracing::info!(outcome = %outcome, "SIGHUP");
                            announce(format_args!("{outcome}"));
                        }
                        Err(outcome) => {
                            tracing::warn!(outcome = %outcome, "SIGHUP");
                            announce(format_args!("{outcome}"));
                        }
                    }
                    continue;
                }
                seen += 1;
                if seen == 1 {
                    tracing::info!(signal, "stopping: draining connections");
                    state.begin_stop();
                } else {
                    eprintln!("modgate: second signal, exiting now");
                    std::process::exit(1);
                }
            }
        })
        .context("starting the signal thread")?;
    Ok(())
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_thread_pinned_to_one_cpu_knows_it_and_an_unpinned_one_does_not() {
        let cpus = allowed_cpus().unwrap();
        let last = *cpus.last().unwrap();
        let pinned = std::thread::spawn(move || {
            let mut set = nix::sched::CpuSet::new();
            set.set(last).unwrap();
            nix::sched::sched_setaffinity(nix::unistd::Pid::from_raw(0), &set).unwrap();
            pinned_cpu()
        })
        .join()
        .unwrap();
        assert_eq!(pinned, Some(last));
        let unpinned = std::thread::spawn(pinned_cpu).join().unwrap();
        if cpus.len() > 1 {
            assert_eq!(unpinned, None);
        } else {
            assert_eq!(unpinned, Some(last));
        }
    }
}
