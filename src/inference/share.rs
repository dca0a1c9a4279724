//! How a shard and its model worker share their core (`inference.core_sharing`).
//!
//! The two threads run on one core. With `"weights"` both are ordinary threads at their
//! niceness and the kernel splits the core by their weights. That split is right on average
//! but coarse in time: when both are busy the kernel switches between them at its ticks (4 ms
//! on a kernel built with HZ=250), and a shard that is runnable but not running cannot be
//! woken, so a `/health` arriving while the worker runs waits for the next tick or two. Beside
//! a saturating mix of texts and images `/health`'s p99 was 6 to 8 ms that way.
//!
//! With `"paced"` (the default) the worker runs at `SCHED_IDLE`, so the kernel gives the core
//! back to the shard the moment the shard has anything to do, and the shard leaves the worker
//! its share itself: while the worker has jobs, a check pauses first once the shard has taken
//! more than `1 - inference.worker_share` of its core's time by [`CHECK_QUANTUM`] ([`Pace`]).
//! During the pause the shard has nothing to run but light requests, so the worker runs; a
//! request that arrives wakes the shard, which preempts the worker at once. A pause ends early
//! when the worker runs out of jobs. Texts and images still split the core as configured, but
//! a light request does not wait for the worker. A request of any kind pauses too once the
//! debt is larger ([`REQUEST_QUANTUM`]): without that, one client hammering `/health` took
//! the core, since only checks paused; so under a flood of light requests alone (or very large
//! texts) a light request can wait for a pause.
//!
//! Measured (`tuning/fairness.sh`, one shard, 2 rounds against `"weights"` at worker 0 and
//! shard 3): `/health`'s p99 beside texts and images 7.2 and 7.6 → 0.86 and 1.06 ms; images
//! keep 62 and 61 % of their throughput beside texts (62 and 62 before) and 66 and 63 % beside
//! a `/health` hammer (70 and 67); texts in the mix 6,830 and 6,145/s → 5,697 and 5,318/s,
//! since the threads now switch every millisecond or so, not every 4 ms tick.
//!
//! The shard's time is its thread's CPU time (`CLOCK_THREAD_CPUTIME_ID`), read before each
//! check and each request, and only while the worker has jobs. It counts what the shard's
//! thread does (parsing, answers, journal appends), not only the checks, so the split holds
//! whatever the requests cost; journal commits on the blocking threads are not counted. The
//! clock comes from `nix`, which the server already uses for its system calls.
//!
//! What pacing does not cover, and the trade:
//! - Work before a request reaches the routes (TLS handshakes, refusals before routing, the
//!   503 over the connection cap) never pauses; the debt it leaves is paid by the checks after
//!   it, but never more than [`PAUSE_MAX`] at once (the rest is forgiven).
//! - A worker at `SCHED_IDLE` gets nothing while any ordinary thread wants its core. On a host
//!   whose cores run other busy programs, `"weights"` keeps the images going. With more shards
//!   than CPUs, two shards share a core and each paces only for its own worker. The kernel
//!   also counts a core running only `SCHED_IDLE` threads as idle when it places a waking
//!   thread that is not pinned, so modgate's unpinned threads (the journal's blocking pool,
//!   the metrics and list threads) and other programs' land on the workers' cores first.
//! - A shard that spins before it sleeps (`server.spin_before_park_us`) spins through its
//!   pauses, so the configuration refuses a spin of half a [`PAUSE_SLICE`] or more.
//!
//! "The worker has jobs" is [`super::Worker::busy`]: a job counts from its submission until
//! the worker has run it, or skipped it because its caller went away.

use std::cell::Cell;
use std::time::{Duration, Instant};

use glommio::timer::Timer;
use nix::time::{clock_gettime, ClockId};
use serde::Deserialize;

/// Debt below this is carried to later checks instead of paid at once: the shard runs and
/// pauses in stretches of about this length, not a pause per check (each costs two switches
/// between the threads and a turn of the shard's reactor). It also bounds how long a light
/// request that arrives while the shard runs its checks waits for the next pause, when the
/// shard polls its sockets.
pub const CHECK_QUANTUM: Duration = Duration::from_micros(500);
/// The debt at which any request pauses before it is handled, not only a check: a client
/// that floods the shard with light requests (`/health`, lists) takes no more of the core than
/// checks would. Larger than [`CHECK_QUANTUM`], so that beside checks (which pay their debt
/// first) a light request is not held.
pub const REQUEST_QUANTUM: Duration = Duration::from_millis(2);
/// The longest pause, whatever the debt: debt beyond it is forgiven, so that shard work that
/// never pauses (TLS handshakes, refusals before routing) cannot stall the checks after it
/// for long.
pub const PAUSE_MAX: Duration = Duration::from_millis(20);
/// A pause is taken in slices of at most this, and ends early once the worker has no jobs.
pub const PAUSE_SLICE: Duration = Duration::from_millis(1);
/// A window of accounting older than this with no debt is started afresh, so credit saved
/// while the shard was lightly loaded cannot be spent in one long run later.
pub const WINDOW_SPAN: Duration = Duration::from_millis(10);

/// The `inference.core_sharing` modes.
#[derive(Clone, Copy, Debug, Deserialize, PartialEq, Eq)]
#[serde(rename_all = "lowercase")]
pub enum CoreSharing {
    /// The worker at `SCHED_IDLE`; the shard paces its checks while the worker has jobs.
    Paced,
    /// Both threads ordinary, at their niceness; the kernel splits the core by weight.
    Weights,
}

/// A shard's pacing of its checks while its worker has jobs.
pub struct Pace {
    /// The share of the core the shard keeps while the worker has jobs; `None`: never pace.
    shard_share: Option<f64>,
    window: Cell<Option<Window>>,
}

/// Where the current accounting window started: wall time and the shard's CPU time.
#[derive(Clone, Copy, Debug)]
struct Window {
    wall: Instant,
    cpu: Duration,
}

impl Pace {
    /// Pacing that leaves the worker `worker_share` (0 to 1) of the core while it has jobs;
    /// a share of 0 never pauses.
    pub fn new(worker_share: f64) -> Pace {
        let shard_share = 1.0 - worker_share.clamp(0.0, 1.0);
        Pace {
            shard_share: (worker_share > 0.0).then_some(shard_share.max(0.01)),
            window: Cell::new(None),
        }
    }

    /// No pacing (`"weights"`, or no model worker).
    pub fn off() -> Pace {
        Pace {
            shard_share: None,
            window: Cell::new(None),
        }
    }

    /// Pauses if the shard owes the worker at least `quantum` of its core's time
    /// ([`CHECK_QUANTUM`] before a check, [`REQUEST_QUANTUM`] before any request).
    /// `worker_busy` says whether the worker has jobs; it is asked again every
    /// [`PAUSE_SLICE`] of a pause, which ends early when the worker has run out of them (the
    /// core would sit idle otherwise).
    pub async fn pause_if_owed(&self, worker_busy: impl Fn() -> bool, quantum: Duration) {
        if self.shard_share.is_none() {
            return;
        }
        let owed = if worker_busy() {
            match thread_cpu_time() {
                Some(cpu) => self.owed(Some((Instant::now(), cpu)), quantum),
                None => None,
            }
        } else {
            self.owed(None, quantum)
        };
        let Some(pause) = owed else {
            return;
        };
        let end = Instant::now() + pause;
        loop {
            let left = end.saturating_duration_since(Instant::now());
            if left.is_zero() {
                return;
            }
            Timer::new(left.min(PAUSE_SLICE)).await;
            if !worker_busy() {
                self.window.set(None);
                return;
            }
        }
    }

    /// The pause owed now, given the wall and CPU time when the worker has jobs (`None`: it
    /// has none, which ends the window).
    fn owed(&self, busy_at: Option<(Instant, Duration)>, quantum: Duration) -> Option<Duration> {
        let share = self.shard_share?;
        let Some((wall, cpu)) = busy_at else {
            self.window.set(None);
            return None;
        };
        let Some(window) = self.window.get() else {
            self.window.set(Some(Window { wall, cpu }));
            return None;
        };
        let elapsed = wall.saturating_duration_since(window.wall);
        let used = cpu.saturating_sub(window.cpu);
        let earned = elapsed.mul_f64(share);
        if used <= earned {
            if elapsed >= WINDOW_SPAN {
                self.window.set(Some(Window { wall, cpu }));
            }
            return None;
        }
        let debt = used - earned;
        if debt < quantum {
            return None;
        }
        // The shard uses next to nothing while it pauses, so its earnings catch up with what
        // it used after debt / share of wall time.
        let pause = debt.div_f64(share);
        if pause > PAUSE_MAX {
            // The rest is forgiven: the window starts afresh when this pause ends.
            self.window.set(Some(Window {
                wall: wall + PAUSE_MAX,
                cpu,
            }));
            return Some(PAUSE_MAX);
        }
        Some(pause)
    }
}

/// The calling thread's CPU time; `None` if the clock cannot be read (then nothing pauses).
fn thread_cpu_time() -> Option<Duration> {
    let time = clock_gettime(ClockId::CLOCK_THREAD_CPUTIME_ID).ok()?;
    let seconds = u64::try_from(time.tv_sec()).ok()?;
    let nanos = u32::try_from(time.tv_nsec()).ok()?;
    Some(Duration::new(seconds, nanos))
}

/// Puts the calling thread at `SCHED_IDLE`: it runs only when nothing ordinary wants its core,
/// and an ordinary thread that wakes takes the core from it at once. Whether it took.
pub fn set_thread_idle() -> bool {
    let param = libc::sched_param { sched_priority: 0 };
    // SAFETY: sched_setscheduler(2) reads the `sched_param` through the pointer during the
    // call only, and `param` lives on this stack frame until the call returns; on Linux pid 0
    // means the calling thread. Lowering one's own policy to SCHED_IDLE needs no privilege.
    unsafe { libc::sched_setscheduler(0, libc::SCHED_IDLE, &param) == 0 }
}

#[cfg(test)]
mod tests {
    use super::*;

    const MS: Duration = Duration::from_millis(1);

    fn at(start: Instant, wall_ms: f64, cpu_ms: f64) -> Option<(Instant, Duration)> {
        Some((
            start + MS.mul_f64(wall_ms),
            Duration::from_secs(100) + MS.mul_f64(cpu_ms),
        ))
    }

    #[test]
    fn a_shard_within_its_share_never_pauses() {
        let pace = Pace::new(0.6);
        let start = Instant::now();
        assert_eq!(pace.owed(at(start, 0.0, 0.0), CHECK_QUANTUM), None);
        // 40 % of 5 ms is 2 ms; 2 ms used.
        assert_eq!(pace.owed(at(start, 5.1, 2.0), CHECK_QUANTUM), None);
    }

    #[test]
    fn debt_is_carried_below_the_quantum_and_paid_above_it() {
        let pace = Pace::new(0.6);
        let start = Instant::now();
        pace.owed(at(start, 0.0, 0.0), CHECK_QUANTUM);
        // Earned 0.4 ms of 1 ms, used 0.8: 0.4 ms of debt, under the quantum.
        assert_eq!(pace.owed(at(start, 1.0, 0.8), CHECK_QUANTUM), None);
        // Earned 0.8 ms of 2 ms, used 2: 1.2 ms of debt, paid back in 1.2 / 0.4 = 3 ms.
        let pause = pace.owed(at(start, 2.0, 2.0), CHECK_QUANTUM).unwrap();
        assert!((pause.as_secs_f64() - 0.003).abs() < 1e-6, "{pause:?}");
        // After that pause (no CPU used meanwhile), nothing more is owed.
        assert_eq!(pace.owed(at(start, 5.1, 2.0), CHECK_QUANTUM), None);
    }

    #[test]
    fn a_request_pays_only_a_larger_debt_than_a_check() {
        let pace = Pace::new(0.5);
        let start = Instant::now();
        pace.owed(at(start, 0.0, 0.0), REQUEST_QUANTUM);
        // 1.5 ms used of 0.75 earned: a check would pause, a request goes on.
        assert_eq!(pace.owed(at(start, 1.5, 1.5), REQUEST_QUANTUM), None);
        assert!(pace.owed(at(start, 1.5, 1.5), CHECK_QUANTUM).is_some());
        // 4 ms used of 2 earned: a request pauses too, for 2 / 0.5 = 4 ms.
        let pause = pace.owed(at(start, 4.0, 4.0), REQUEST_QUANTUM).unwrap();
        assert!((pause.as_secs_f64() - 0.004).abs() < 1e-6, "{pause:?}");
    }

    #[test]
    fn a_pause_is_never_longer_than_the_cap() {
        let pace = Pace::new(0.9);
        let start = Instant::now();
        pace.owed(at(start, 0.0, 0.0), CHECK_QUANTUM);
        assert_eq!(
            pace.owed(at(start, 10.0, 10.0), CHECK_QUANTUM),
            Some(PAUSE_MAX)
        );
    }

    #[test]
    fn an_idle_worker_ends_the_window_and_old_credit_is_dropped() {
        let pace = Pace::new(0.5);
        let start = Instant::now();
        pace.owed(at(start, 0.0, 0.0), CHECK_QUANTUM);
        // The worker went idle: the window ends; it starts again when it is busy again.
        assert_eq!(pace.owed(None, CHECK_QUANTUM), None);
        assert_eq!(pace.owed(at(start, 100.0, 1.0), CHECK_QUANTUM), None);
        // A whole window with little used: the credit is not kept...
        assert_eq!(pace.owed(at(start, 120.0, 2.0), CHECK_QUANTUM), None);
        // ...so a run right after it owes from the new window's start.
        let pause = pace.owed(at(start, 121.0, 3.2), CHECK_QUANTUM).unwrap();
        assert!((pause.as_secs_f64() - 0.0014).abs() < 1e-6, "{pause:?}");
    }

    #[test]
    fn a_share_of_zero_or_weights_never_pauses() {
        let start = Instant::now();
        for pace in [Pace::new(0.0), Pace::off()] {
            pace.owed(at(start, 0.0, 0.0), CHECK_QUANTUM);
            assert_eq!(pace.owed(at(start, 1.0, 1000.0), CHECK_QUANTUM), None);
        }
    }

    #[test]
    fn the_thread_clock_reads_and_advances() {
        let before = thread_cpu_time().unwrap();
        let mut x = 0u64;
        for i in 0..2_000_000u64 {
            x = x.wrapping_mul(31).wrapping_add(i);
        }
        std::hint::black_box(x);
        assert!(thread_cpu_time().unwrap() > before);
    }
}
