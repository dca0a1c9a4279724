//! The traffic generator: one glommio executor (pinned with `--cpu`) that sends a scenario's
//! requests in open or closed loop.
//!
//! Open loop (`Load::Open`): a dispatcher puts requests on a queue at the arrival rate,
//! whatever the server does; connections take them from the queue, and a new connection is
//! opened when a request is due and none is free, up to `connections_max`. Each request's
//! latency runs from when it was due, so waiting for a connection counts: this is what keeps a
//! slow server from slowing its own measurement (no coordinated omission). When the queue is
//! over `queue_max`, due requests are dropped and counted.
//!
//! Closed loop (`Load::Closed`): N connections each send their next request as soon as the
//! last answer arrived; the rate is whatever the server sustains. Latency then hides queueing
//! (coordinated omission) and is reported as such.
//!
//! Requests due during the warm-up are sent but not counted. After the run, what is queued or
//! in flight gets `drain_timeout` to finish; what is left is counted as unfinished.

use std::cell::{Cell, RefCell};
use std::collections::VecDeque;
use std::future::poll_fn;
use std::net::SocketAddr;
use std::rc::Rc;
use std::task::{Poll, Waker};
use std::time::{Duration, Instant};

use anyhow::anyhow;
use glommio::{LocalExecutorBuilder, Placement};

use crate::client::Connection;
use crate::prepare::{stamp, Prepared, STAMP_VALUES};
use crate::stats::{Stats, Tick};

/// How load is applied.
#[derive(Clone, Copy, Debug, PartialEq)]
pub enum Load {
    /// A fixed arrival rate, requests per second.
    Open { rate: f64, arrivals: Arrivals },
    /// N connections, each sending back to back.
    Closed { connections: usize },
}

/// Spacing of open-loop arrivals.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Arrivals {
    /// Exactly 1/rate apart.
    Uniform,
    /// Exponential gaps with mean 1/rate (a Poisson process, like independent users).
    Poisson,
}

#[derive(Clone, Debug)]
pub struct RunConfig {
    pub server: SocketAddr,
    pub load: Load,
    pub duration: Duration,
    pub warmup: Duration,
    pub connections_max: usize,
    pub queue_max: usize,
    pub drain_timeout: Duration,
    /// Pin the generator to this CPU.
    pub cpu: Option<usize>,
    /// Print a progress line every second (stderr).
    pub progress: bool,
    pub seed: u64,
    /// The server's process, to measure its CPU time over the window.
    pub server_pid: Option<u32>,
}

impl RunConfig {
    pub fn new(server: SocketAddr, load: Load, duration: Duration) -> RunConfig {
        RunConfig {
            server,
            load,
            duration,
            warmup: Duration::ZERO,
            connections_max: 256,
            queue_max: 100_000,
            drain_timeout: Duration::from_secs(10),
            cpu: None,
            progress: false,
            seed: 0x5eed,
            server_pid: None,
        }
    }
}

/// What a run measured.
pub struct RunResult {
    pub stats: Stats,
    /// The measurement window.
    pub window: Duration,
    /// Connections opened (the open loop opens more when the server falls behind).
    pub connections_opened: u64,
    /// The server's CPU time over the window, microseconds (with `server_pid`).
    pub server_cpu_us: Option<u64>,
}

/// Runs `requests` against the server; blocks until done.
pub fn run(config: &RunConfig, requests: &[Prepared]) -> anyhow::Result<RunResult> {
    if requests.is_empty() || requests.iter().all(|r| r.weight == 0) {
        return Err(anyhow!("no requests to send"));
    }
    if let Load::Open { rate, .. } = config.load {
        if !(rate > 0.0 && rate.is_finite()) {
            return Err(anyhow!("the rate must be above 0"));
        }
    }
    let placement = match config.cpu {
        Some(cpu) => Placement::Fixed(cpu),
        None => Placement::Unbound,
    };
    let config = config.clone();
    let requests = requests.to_vec();
    LocalExecutorBuilder::new(placement)
        .name("modgate-load")
        .spawn(move || async move { drive(config, requests).await })
        .map_err(|error| anyhow!("starting the generator: {error}"))?
        .join()
        .map_err(|error| anyhow!("the generator failed: {error}"))
}

struct Job {
    kind: usize,
    due: Instant,
}

struct Engine {
    config: RunConfig,
    requests: Vec<Prepared>,
    cumulative: Vec<u64>,
    rng: Cell<u64>,
    queue: RefCell<VecDeque<Job>>,
    idle: RefCell<VecDeque<Waker>>,
    workers: Cell<usize>,
    in_flight: Cell<usize>,
    /// The open loop's dispatcher still runs (closed loop: the run's end is not reached).
    dispatching: Cell<bool>,
    measure_from: Instant,
    measure_until: Instant,
    stats: RefCell<Stats>,
    connections_opened: Cell<u64>,
    /// The stamp of the next `fresh` request sent; the run starts at a random one, so that
    /// two runs against one server send other content.
    stamp_next: Cell<u64>,
}

impl Engine {
    fn next_random(&self) -> u64 {
        // xorshift64*: plenty for picking requests and arrival gaps.
        let mut x = self.rng.get();
        x ^= x >> 12;
        x ^= x << 25;
        x ^= x >> 27;
        self.rng.set(x);
        x.wrapping_mul(0x2545_F491_4F6C_DD1D)
    }

    fn pick(&self) -> usize {
        let total = self.cumulative.last().copied().unwrap_or(1).max(1);
        let ticket = self.next_random() % total;
        self.cumulative
            .iter()
            .position(|&edge| ticket < edge)
            .unwrap_or(0)
    }

    fn counted(&self, due: Instant) -> bool {
        due >= self.measure_from && due < self.measure_until
    }

    /// Puts a due request on the queue and makes sure a connection will take it.
    fn enqueue(self: &Rc<Self>, due: Instant) {
        let counted = self.counted(due);
        if counted {
            self.stats.borrow_mut().sent();
        } else if due < self.measure_from {
            self.stats.borrow_mut().warmup_sent();
        }
        if self.queue.borrow().len() >= self.config.queue_max {
            if counted {
                self.stats.borrow_mut().dropped += 1;
            }
            return;
        }
        self.queue.borrow_mut().push_back(Job {
            kind: self.pick(),
            due,
        });
        if let Some(waker) = self.idle.borrow_mut().pop_front() {
            waker.wake();
        } else if self.workers.get() < self.config.connections_max {
            self.spawn_worker();
        }
    }

    fn spawn_worker(self: &Rc<Self>) {
        self.workers.set(self.workers.get() + 1);
        glommio::spawn_local(open_loop_worker(self.clone())).detach();
    }

    async fn next_job(&self) -> Option<Job> {
        poll_fn(|cx| {
            if let Some(job) = self.queue.borrow_mut().pop_front() {
                return Poll::Ready(Some(job));
            }
            if !self.dispatching.get() {
                return Poll::Ready(None);
            }
            let mut idle = self.idle.borrow_mut();
            if !idle.iter().any(|w| w.will_wake(cx.waker())) {
                idle.push_back(cx.waker().clone());
            }
            Poll::Pending
        })
        .await
    }

    /// A copy of a `fresh` request with the next stamp in each of its places.
    fn stamped(&self, request: &Prepared) -> Vec<u8> {
        let value = self.stamp_next.get();
        self.stamp_next.set(value.wrapping_add(1));
        let mut bytes = request.bytes.to_vec();
        for &at in &request.stamps {
            stamp(value, &mut bytes[at..]);
        }
        bytes
    }

    /// Sends one request on `connection` (opening it if needed) and records the outcome.
    async fn send(&self, connection: &mut Option<Connection>, job: Job) {
        self.in_flight.set(self.in_flight.get() + 1);
        let request = &self.requests[job.kind];
        let stamped;
        let bytes: &[u8] = match request.stamps.is_empty() {
            true => &request.bytes,
            false => {
                stamped = self.stamped(request);
                &stamped
            }
        };
        let outcome = async {
            if connection.is_none() {
                *connection = Some(Connection::connect(self.config.server).await?);
                self.connections_opened
                    .set(self.connections_opened.get() + 1);
            }
            match connection.as_mut() {
                Some(open) => open.exchange(bytes).await,
                None => Err(std::io::ErrorKind::NotConnected.into()),
            }
        }
        .await;
        self.in_flight.set(self.in_flight.get() - 1);
        let counted = self.counted(job.due);
        match outcome {
            Ok(answer) => {
                if answer.close {
                    *connection = None;
                }
                let latency_us = job.due.elapsed().as_micros() as u64;
                if counted {
                    self.stats.borrow_mut().answered(
                        job.kind,
                        request.kind.expected_status(),
                        answer.status,
                        answer.error_type,
                        latency_us,
                    );
                } else if job.due < self.measure_from {
                    let ok = answer.status == request.kind.expected_status();
                    self.stats.borrow_mut().warmup_answered(ok, latency_us);
                }
            }
            Err(_) => {
                *connection = None;
                if counted {
                    self.stats.borrow_mut().transport_error(job.kind);
                } else if job.due < self.measure_from {
                    self.stats.borrow_mut().warmup_error();
                }
            }
        }
    }
}

async fn open_loop_worker(engine: Rc<Engine>) {
    let mut connection = None;
    while let Some(job) = engine.next_job().await {
        engine.send(&mut connection, job).await;
    }
    engine.workers.set(engine.workers.get() - 1);
}

async fn closed_loop_worker(engine: Rc<Engine>, end: Instant) {
    let mut connection = None;
    loop {
        let due = Instant::now();
        if due >= end {
            break;
        }
        if engine.counted(due) {
            engine.stats.borrow_mut().sent();
        } else {
            engine.stats.borrow_mut().warmup_sent();
        }
        let kind = engine.pick();
        engine.send(&mut connection, Job { kind, due }).await;
    }
    engine.workers.set(engine.workers.get() - 1);
}

async fn dispatch(engine: Rc<Engine>, rate: f64, arrivals: Arrivals, end: Instant) {
    let mean_gap_s = 1.0 / rate;
    let mut due = Instant::now();
    while due < end {
        let now = Instant::now();
        if due > now {
            glommio::timer::sleep(due - now).await;
        }
        // Everything due by now goes out, even after a late wake: the schedule is kept.
        let now = Instant::now();
        while due <= now && due < end {
            engine.enqueue(due);
            let gap_s = match arrivals {
                Arrivals::Uniform => mean_gap_s,
                Arrivals::Poisson => {
                    let uniform = (engine.next_random() >> 11) as f64 / (1u64 << 53) as f64;
                    -mean_gap_s * (1.0 - uniform).ln()
                }
            };
            due += Duration::from_secs_f64(gap_s);
        }
    }
    engine.dispatching.set(false);
    for waker in engine.idle.borrow_mut().drain(..) {
        waker.wake();
    }
}

fn progress_line(tick: &Tick, engine: &Engine, warming: bool) -> String {
    format!(
        "[{:>4}s{}] sent {}/s  done {}/s  errors {}  p99 {:.2} ms  in flight {}  queued {}  connections {}",
        tick.t_s,
        if warming { " warm-up" } else { "" },
        tick.sent,
        tick.completed,
        tick.errors,
        tick.p99_us as f64 / 1000.0,
        engine.in_flight.get(),
        engine.queue.borrow().len(),
        engine.workers.get(),
    )
}

async fn drive(config: RunConfig, requests: Vec<Prepared>) -> RunResult {
    let start = Instant::now();
    let measure_from = start + config.warmup;
    let measure_until = measure_from + config.duration;
    let mut total = 0;
    let cumulative = requests
        .iter()
        .map(|r| {
            total += u64::from(r.weight);
            total
        })
        .collect();
    let engine = Rc::new(Engine {
        stats: RefCell::new(Stats::new(requests.len())),
        rng: Cell::new(config.seed.max(1)),
        config: config.clone(),
        requests,
        cumulative,
        queue: RefCell::default(),
        idle: RefCell::default(),
        workers: Cell::new(0),
        in_flight: Cell::new(0),
        dispatching: Cell::new(true),
        measure_from,
        measure_until,
        connections_opened: Cell::new(0),
        stamp_next: Cell::new(run_nonce() % STAMP_VALUES),
    });

    let ticker = {
        let engine = engine.clone();
        glommio::spawn_local(async move {
            let mut second = 0u64;
            loop {
                second += 1;
                let at = start + Duration::from_secs(second);
                let now = Instant::now();
                if at > now {
                    glommio::timer::sleep(at - now).await;
                }
                let warming = at <= measure_from;
                let tick = if warming {
                    // Warm-up seconds are shown, not kept.
                    let mut stats = engine.stats.borrow_mut();
                    let tick = stats.tick(second);
                    stats.timeline.pop();
                    tick
                } else {
                    let t_s = (at - measure_from).as_secs();
                    engine.stats.borrow_mut().tick(t_s)
                };
                if engine.config.progress {
                    eprintln!("{}", progress_line(&tick, &engine, warming));
                }
                if at >= measure_until {
                    break;
                }
            }
        })
    };

    // The server's CPU time at the window's edges.
    let server_cpu = config.server_pid.map(|pid| {
        glommio::spawn_local(async move {
            sleep_until(measure_from).await;
            let from = crate::server_cpu::process_cpu_ns(pid).ok()?;
            sleep_until(measure_until).await;
            let until = crate::server_cpu::process_cpu_ns(pid).ok()?;
            Some(until.saturating_sub(from) / 1000)
        })
    });

    match config.load {
        Load::Open { rate, arrivals } => {
            dispatch(engine.clone(), rate, arrivals, measure_until).await;
        }
        Load::Closed { connections } => {
            let workers: Vec<_> = (0..connections.max(1))
                .map(|_| {
                    engine.workers.set(engine.workers.get() + 1);
                    glommio::spawn_local(closed_loop_worker(engine.clone(), measure_until))
                })
                .collect();
            for worker in workers {
                worker.await;
            }
            engine.dispatching.set(false);
        }
    }
    ticker.await;
    let server_cpu_us = match server_cpu {
        Some(task) => task.await,
        None => None,
    };

    // Drain: what is queued or in flight gets `drain_timeout`.
    let deadline = Instant::now() + config.drain_timeout;
    while (engine.in_flight.get() > 0 || !engine.queue.borrow().is_empty())
        && Instant::now() < deadline
    {
        glommio::timer::sleep(Duration::from_millis(5)).await;
    }
    let unfinished = engine
        .queue
        .borrow()
        .iter()
        .filter(|job| engine.counted(job.due))
        .count()
        + engine.in_flight.get();
    let mut stats = engine.stats.replace(Stats::new(0));
    stats.unfinished = unfinished as u64;
    RunResult {
        stats,
        window: config.duration,
        connections_opened: engine.connections_opened.get(),
        server_cpu_us,
    }
}

/// A number no two runs share in practice: the clock's nanoseconds, scrambled.
fn run_nonce() -> u64 {
    let nanos = std::time::SystemTime::now()
        .duration_since(std::time::UNIX_EPOCH)
        .map_or(0, |since| since.as_nanos() as u64);
    // splitmix64's finaliser: nearby clock readings give unrelated numbers.
    let mut x = nanos ^ u64::from(std::process::id()).rotate_left(32);
    x = (x ^ (x >> 30)).wrapping_mul(0xBF58_476D_1CE4_E5B9);
    x = (x ^ (x >> 27)).wrapping_mul(0x94D0_49BB_1331_11EB);
    x ^ (x >> 31)
}

async fn sleep_until(at: Instant) {
    let now = Instant::now();
    if at > now {
        glommio::timer::sleep(at - now).await;
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn weighted_picks_follow_the_weights() {
        let request = |weight| Prepared {
            name: String::new(),
            kind: crate::scenario::Kind::Health,
            weight,
            route: "/health",
            bytes: Default::default(),
            stamps: Vec::new(),
        };
        let engine = Engine {
            config: RunConfig::new(
                "127.0.0.1:1".parse().unwrap(),
                Load::Closed { connections: 1 },
                Duration::ZERO,
            ),
            requests: vec![request(1), request(3)],
            cumulative: vec![1, 4],
            rng: Cell::new(42),
            queue: RefCell::default(),
            idle: RefCell::default(),
            workers: Cell::new(0),
            in_flight: Cell::new(0),
            dispatching: Cell::new(true),
            measure_from: Instant::now(),
            measure_until: Instant::now(),
            stats: RefCell::new(Stats::new(2)),
            connections_opened: Cell::new(0),
            stamp_next: Cell::new(0),
        };
        let picks: Vec<usize> = (0..40_000).map(|_| engine.pick()).collect();
        let second = picks.iter().filter(|&&p| p == 1).count() as f64 / picks.len() as f64;
        assert!((second - 0.75).abs() < 0.02, "{second}");
    }
}
