//! The fleet's rate and concurrency budgets on Redis/Valkey.
//!
//! Each key's token bucket and each organization's concurrency count live in Redis, changed
//! only by the Lua scripts below, which run atomically on the server's clock (`TIME`), so
//! that nodes with skewed clocks still share one bucket. A node never asks Redis per check:
//! it takes a *block* (a tenth of a second of a key's rate, a few permits) and its shards take
//! their small leases from that block through [`LeaseSource`], as on a single node.
//!
//! How it runs beside glommio: the client is the `redis` crate (the maintained Rust client,
//! used here without its async runtimes), on one thread of its own with a blocking
//! connection and short socket timeouts. The shards never wait for it: they change
//! `NodeBudgets` under a mutex (once per shard lease, not per check) and nudge the thread,
//! which sends every pending request of a round in one pipeline and writes the answers back.
//!
//! Rate. A node's balance for a key is the tokens it holds minus the tokens it lent (a node
//! that has no tokens yet, or whose refill is still on its way, admits up to one block on
//! credit rather than make a check wait for Redis). A refill asks for what brings the
//! balance back to one block, so it also pays the debt. Hence over any window T a key is
//! admitted at most `rate_burst + rate_per_s × T + block` on each node, where a node's block
//! is [`node_block`] held plus [`node_block`] lent plus what its shards hold (see docs/fleet.md).
//!
//! Concurrency. Redis keeps, per organization, one hash: each node's permits, and when they
//! expire (the server's clock plus `cluster.permit_ttl_ms`). A take counts only unexpired
//! entries, so a node killed with `kill -9` gives its permits back within the TTL; a live node
//! restates its count every [`HEARTBEAT_MS`] (or a third of the TTL, if shorter), which also
//! rebuilds the hash after Redis restarted empty. The node states its own count (it is the one that knows it), so a lost
//! or repeated answer never leaks a permit. An organization never has more than
//! `concurrent_max` checks in progress while Redis is up: Redis's count of a node is never
//! below what the node's shards use (permits are registered before use and released after).
//! A check that finds no permit on its node waits for one round with Redis (its shard does
//! not: only that request's task awaits).
//!
//! Redis down: each node falls back to its share of every limit (limit / live nodes, from the
//! control plane's heartbeats), says so in `modgate_budget_fallback`, and a plan with
//! `engine_down = "closed"` refuses checks with 503 instead (see [`LeaseSource::engine_down`]).

use std::collections::HashMap;
use std::sync::atomic::Ordering;
use std::sync::{Arc, Condvar, Mutex, MutexGuard};
use std::time::Duration;

use anyhow::Context as _;
use futures_channel::oneshot;

pub use super::status::BudgetStatus;
use super::status::ControlPlaneStatus;
use super::HEARTBEAT_MS;
use crate::clock::Clock;
use crate::limits::bucket::{Bucket, BucketState};
use crate::limits::lease::{BucketSpec, LeaseSource, PermitGrant};
use crate::limits::IDLE_RETURN_MS;

/// How long a round with Redis may take (connect, or one pipeline) before the node counts it
/// as down.
pub const REDIS_TIMEOUT: Duration = Duration::from_millis(500);
/// While Redis is down, how often the thread tries to reconnect.
pub const RECONNECT_EVERY: Duration = Duration::from_millis(250);
/// The thread's tick when nothing nudges it: idle returns, heartbeats.
pub const TICK: Duration = Duration::from_millis(50);
/// Requests sent in one pipeline at most.
pub const PIPELINE_MAX: usize = 512;

/// A node's rate block for `bucket`: a tenth of a second of its rate, at least one token,
/// at most the burst. The node holds at most this and lends at most this.
pub fn node_block(bucket: BucketSpec) -> u32 {
    (bucket.rate_per_s / 10).clamp(1, bucket.burst.max(1))
}

/// `KEYS[1]` the bucket; `ARGV` rate per second, burst, tokens wanted. Returns granted, whole
/// tokens left, and milliseconds until one token is there.
const RATE_TAKE: &str = r"
local rate = tonumber(ARGV[1])
local burst = tonumber(ARGV[2])
local want = tonumber(ARGV[3])
local t = redis.call('TIME')
local now = tonumber(t[1]) * 1000 + math.floor(tonumber(t[2]) / 1000)
local b = redis.call('HMGET', KEYS[1], 'tokens', 'ms')
local tokens = tonumber(b[1])
local ms = tonumber(b[2])
if tokens == nil or ms == nil then
  tokens = burst
  ms = now
end
if now > ms then
  tokens = math.min(burst, tokens + (now - ms) * rate / 1000)
  ms = now
end
local granted = math.max(0, math.min(want, math.floor(tokens)))
tokens = tokens - granted
redis.call('HSET', KEYS[1], 'tokens', tostring(tokens), 'ms', tostring(ms))
redis.call('PEXPIRE', KEYS[1], math.ceil(burst * 1000 / rate) + 1000)
local retry = 0
if tokens < 1 then
  retry = math.ceil((1 - tokens) * 1000 / rate)
end
return {granted, math.floor(tokens), retry}
";

/// `KEYS[1]` the bucket; `ARGV` burst, tokens given back. A bucket that expired is full.
const RATE_RETURN: &str = r"
local tokens = tonumber(redis.call('HGET', KEYS[1], 'tokens'))
if tokens == nil then
  return {0}
end
redis.call('HSET', KEYS[1], 'tokens', tostring(math.min(tonumber(ARGV[1]), tokens + tonumber(ARGV[2]))))
return {1}
";

/// `KEYS[1]` the organization's hash; `ARGV` node, max, permits wanted, TTL in ms, the
/// node's count now. Sets the node's count to its count plus the grant, with a fresh
/// expiry; returns granted and free after.
const PERMITS_TAKE: &str = r"
local node = ARGV[1]
local max = tonumber(ARGV[2])
local want = tonumber(ARGV[3])
local ttl = tonumber(ARGV[4])
local mine = tonumber(ARGV[5])
local t = redis.call('TIME')
local now = tonumber(t[1]) * 1000 + math.floor(tonumber(t[2]) / 1000)
local h = redis.call('HGETALL', KEYS[1])
local expiry = {}
for i = 1, #h, 2 do
  if string.sub(h[i], 1, 1) == '~' then
    expiry[string.sub(h[i], 2)] = tonumber(h[i + 1])
  end
end
local used = 0
for i = 1, #h, 2 do
  local n = h[i]
  if string.sub(n, 1, 1) ~= '~' and n ~= node then
    local e = expiry[n]
    if e == nil or e < now then
      redis.call('HDEL', KEYS[1], n, '~' .. n)
    else
      used = used + tonumber(h[i + 1])
    end
  end
end
local granted = math.max(0, math.min(want, max - used - mine))
redis.call('HSET', KEYS[1], node, mine + granted, '~' .. node, now + ttl)
redis.call('PEXPIRE', KEYS[1], ttl * 2)
return {granted, math.max(0, max - used - mine - granted)}
";

/// `KEYS[1]` the organization's hash; `ARGV` node, the node's count, TTL in ms. States the
/// node's count (a release, or the heartbeat); 0 removes the node.
const PERMITS_SET: &str = r"
local node = ARGV[1]
local held = tonumber(ARGV[2])
local ttl = tonumber(ARGV[3])
if held <= 0 then
  redis.call('HDEL', KEYS[1], node, '~' .. node)
  return {0}
end
local t = redis.call('TIME')
local now = tonumber(t[1]) * 1000 + math.floor(tonumber(t[2]) / 1000)
redis.call('HSET', KEYS[1], node, held, '~' .. node, now + ttl)
redis.call('PEXPIRE', KEYS[1], ttl * 2)
return {1}
";

fn rate_key(key_id: &str) -> String {
    format!("modgate:rate:{key_id}")
}

fn permits_key(org: &str) -> String {
    format!("modgate:permits:{org}")
}

/// A key's balance on this node.
struct NodeRate {
    bucket: BucketSpec,
    /// Tokens held (positive) or lent (negative), between `-block` and `block`.
    balance: i64,
    /// A refill is in the current round.
    asking: bool,
    /// No refill before this (the bucket was dry at the last one).
    next_ask_ms: i64,
    /// The bucket as Redis last showed it.
    seen: BucketState,
    touched_ms: i64,
    /// Used while Redis is down: this node's share of the bucket.
    fallback: Option<Bucket>,
    /// Checks waiting for this round's refill (told the tokens it brought; 0: none).
    waiters: Vec<oneshot::Sender<u32>>,
}

/// An organization's permits on this node.
#[derive(Default)]
struct NodePermits {
    max: u32,
    /// Registered in Redis for this node (as far as this node has told it).
    held: u32,
    /// In use by this node's shards.
    in_use: u32,
    /// Wanted beyond `held` by checks waiting for the next round.
    wanted: u32,
    /// A take is in the current round.
    asking: bool,
    /// `held` changed and Redis must hear it.
    dirty: bool,
    /// Free in the whole fleet at the last grant.
    free: u32,
    touched_ms: i64,
    /// Checks waiting for the next round's grant, and for the current round's, with the
    /// permits each wants. Each is handed its permits (counted in `in_use` from then on), or
    /// told 0: refuse.
    waiting: Vec<(oneshot::Sender<u32>, u32)>,
    in_flight: Vec<(oneshot::Sender<u32>, u32)>,
    /// The most in use in the current window of [`IDLE_RETURN_MS`], and in the one before.
    peak: u32,
    peak_before: u32,
    window_ms: i64,
}

impl NodePermits {
    /// Notes `in_use` in the window of `now_ms`.
    fn note_use(&mut self, now_ms: i64) {
        let elapsed = now_ms - self.window_ms;
        if elapsed >= IDLE_RETURN_MS {
            self.peak_before = if elapsed < 2 * IDLE_RETURN_MS {
                self.peak
            } else {
                0
            };
            self.peak = self.in_use;
            self.window_ms = now_ms;
        } else {
            self.peak = self.peak.max(self.in_use);
        }
    }

    /// This node's share while Redis is down: its part of `max` (at least one), or what Redis
    /// had granted it before it went down, if more.
    fn share(&self, live: u32) -> u32 {
        (self.max / live).max(1).max(self.held)
    }

    /// The most in use over the last one or two windows.
    fn recent_peak(&self) -> u32 {
        self.peak.max(self.peak_before)
    }
}

/// The node's side of the budgets, shared by its shards and the Redis thread.
#[derive(Default)]
struct NodeBudgets {
    rate: HashMap<String, NodeRate>,
    permits: HashMap<String, NodePermits>,
    /// Something for the thread to send.
    pending: bool,
    engine_up: bool,
    last_heartbeat_ms: i64,
    /// Live nodes as the shards last saw them.
    live: u32,
    /// The process is stopping: one last round states every count, then the thread ends.
    stopping: bool,
    stopped: bool,
}

/// The fleet's [`LeaseSource`]: rate and concurrency through Redis.
pub struct FleetLeases {
    shared: Arc<Shared>,
    control: Arc<ControlPlaneStatus>,
}

struct Shared {
    budgets: Mutex<NodeBudgets>,
    nudge: Condvar,
    /// Signalled when the thread ends.
    ended: Condvar,
    status: Arc<BudgetStatus>,
}

fn lock(shared: &Shared) -> MutexGuard<'_, NodeBudgets> {
    crate::limits::lease::lock(&shared.budgets)
}

impl FleetLeases {
    /// Starts the Redis thread for `redis_url`.
    pub fn start(
        redis_url: &str,
        node_id: String,
        permit_ttl_ms: u64,
        control: Arc<ControlPlaneStatus>,
        status: Arc<BudgetStatus>,
    ) -> anyhow::Result<FleetLeases> {
        let client = redis::Client::open(redis_url)
            .with_context(|| format!("cluster.redis_url {}", super::redacted(redis_url)))?;
        let shared = Arc::new(Shared {
            budgets: Mutex::new(NodeBudgets {
                engine_up: true,
                ..NodeBudgets::default()
            }),
            nudge: Condvar::new(),
            ended: Condvar::new(),
            status,
        });
        let leases = FleetLeases {
            shared: shared.clone(),
            control,
        };
        let thread = RedisThread {
            client,
            connection: None,
            scripts: Scripts::new(),
            shared,
            node_id,
            permit_ttl_ms,
            logged_down: false,
        };
        std::thread::Builder::new()
            .name("modgate-budgets".into())
            .spawn(move || thread.run())
            .context("starting the budgets thread")?;
        Ok(leases)
    }

    fn live_nodes(&self) -> u32 {
        self.control.live_nodes().max(1)
    }

    fn nudge(&self, budgets: &mut NodeBudgets) {
        if !budgets.pending {
            budgets.pending = true;
            self.shared.nudge.notify_one();
        }
    }

    /// Up to `want` permits from this node's hand (or its share while Redis is down); with a
    /// `waiter` and too few in hand, `None`: the waiter is handed its permits after the next
    /// round.
    fn take_permits_inner(
        &self,
        org: &str,
        max: u32,
        want: u32,
        waiter: Option<oneshot::Sender<u32>>,
    ) -> Option<PermitGrant> {
        let now_ms = Clock::System.now_ms();
        let live = self.live_nodes();
        let mut budgets = lock(&self.shared);
        let engine_up = budgets.engine_up;
        budgets.live = live;
        let permits = budgets.permits.entry(org.to_owned()).or_default();
        permits.max = max;
        permits.touched_ms = now_ms;
        if !engine_up {
            let share = permits.share(live);
            let granted = want.min(share.saturating_sub(permits.in_use));
            permits.in_use += granted;
            if permits.in_use > permits.held {
                // Stated to Redis as soon as it is back, so its count covers these checks.
                permits.held = permits.in_use;
                permits.dirty = true;
            }
            self.shared
                .status
                .fallback_takes
                .fetch_add(1, Ordering::Relaxed);
            return Some(PermitGrant {
                granted,
                free: share.saturating_sub(permits.in_use),
            });
        }
        let spare = permits.held.saturating_sub(permits.in_use);
        if spare >= want || waiter.is_none() {
            let granted = want.min(spare);
            permits.in_use += granted;
            permits.note_use(now_ms);
            // The shards' view of what is free: this node's part of it.
            return Some(PermitGrant {
                granted,
                free: permits.free / live,
            });
        }
        if let Some(waiter) = waiter {
            permits.waiting.push((waiter, want));
        }
        permits.wanted += want - spare;
        self.nudge(&mut budgets);
        None
    }
}

/// A node's spare permits for an organization with `free` permits left in the fleet: one
/// when at least one per live node is free (the next check then needs no round), else none.
/// While permits are that plentiful a node also keeps what it used at its peak over the last
/// one or two [`IDLE_RETURN_MS`] ([`NodePermits::recent_peak`]): its checks come and go in
/// waves (a journal commit ends many at once), and returning each wave's permits to take them
/// again would cost a round with Redis per wave.
fn permit_spare(free: u32, live: u32) -> u32 {
    u32::from(free >= live)
}

impl LeaseSource for FleetLeases {
    fn take_rate(
        &self,
        key: &str,
        bucket: BucketSpec,
        want: u32,
        now_ms: i64,
    ) -> (u32, BucketState) {
        let block = i64::from(node_block(bucket));
        let live = self.live_nodes();
        let mut budgets = lock(&self.shared);
        let engine_up = budgets.engine_up;
        let rate = budgets
            .rate
            .entry(key.to_owned())
            .or_insert_with(|| NodeRate {
                bucket,
                balance: 0,
                asking: false,
                next_ask_ms: 0,
                seen: BucketState {
                    remaining: bucket.burst,
                    reset_s: 0,
                    retry_after_s: 0,
                },
                touched_ms: now_ms,
                fallback: None,
                waiters: Vec::new(),
            });
        rate.bucket = bucket;
        rate.touched_ms = now_ms;
        if !engine_up {
            // Tokens in hand first, then this node's share of the bucket.
            let from_balance = rate.balance.clamp(0, i64::from(want)) as u32;
            rate.balance -= i64::from(from_balance);
            let share = BucketSpec {
                rate_per_s: (bucket.rate_per_s / live).max(1),
                burst: (bucket.burst / live).max(1),
            };
            let fallback = rate
                .fallback
                .get_or_insert_with(|| Bucket::full(share.burst, now_ms));
            let (granted, state) =
                fallback.take(share.rate_per_s, share.burst, want - from_balance, now_ms);
            self.shared
                .status
                .fallback_takes
                .fetch_add(1, Ordering::Relaxed);
            return (from_balance + granted, state);
        }
        rate.fallback = None;
        let granted = (rate.balance + block).clamp(0, i64::from(want)) as u32;
        rate.balance -= i64::from(granted);
        let seen = rate.seen;
        if !rate.asking && rate.balance <= block / 2 && now_ms >= rate.next_ask_ms {
            rate.asking = true;
            self.nudge(&mut budgets);
        }
        (granted, seen)
    }

    fn rate_arriving(&self, key: &str) -> Option<oneshot::Receiver<u32>> {
        let mut budgets = lock(&self.shared);
        let rate = budgets.rate.get_mut(key).filter(|rate| rate.asking)?;
        let (sender, receiver) = oneshot::channel();
        rate.waiters.push(sender);
        Some(receiver)
    }

    fn return_rate(&self, key: &str, _bucket: BucketSpec, tokens: u32) {
        let mut budgets = lock(&self.shared);
        if let Some(rate) = budgets.rate.get_mut(key) {
            rate.balance += i64::from(tokens);
        }
    }

    fn take_permits(&self, org: &str, max: u32, want: u32) -> PermitGrant {
        self.take_permits_inner(org, max, want, None)
            .unwrap_or(PermitGrant {
                granted: 0,
                free: 0,
            })
    }

    fn take_permits_or_wait(
        &self,
        org: &str,
        max: u32,
        want: u32,
    ) -> Result<PermitGrant, oneshot::Receiver<u32>> {
        let (sender, receiver) = oneshot::channel();
        self.take_permits_inner(org, max, want, Some(sender))
            .ok_or(receiver)
    }

    fn return_permits(&self, org: &str, returned: u32) {
        let live = self.live_nodes();
        let mut budgets = lock(&self.shared);
        if let Some(permits) = budgets.permits.get_mut(org) {
            permits.in_use = permits.in_use.saturating_sub(returned);
            permits.note_use(Clock::System.now_ms());
            let spare = permit_spare(permits.free, live);
            let keep = if spare > 0 {
                (permits.in_use + spare).max(permits.recent_peak())
            } else {
                permits.in_use
            };
            if permits.held > keep {
                // Released at once on this side; Redis hears it at the next round (until then
                // it counts more than this node uses: stricter, never looser).
                permits.held = keep;
                permits.dirty = true;
                self.nudge(&mut budgets);
            }
        }
    }

    fn engine_down(&self) -> bool {
        !lock(&self.shared).engine_up
    }

    fn stop(&self) {
        let mut budgets = lock(&self.shared);
        for permits in budgets.permits.values_mut() {
            permits.held = permits.in_use;
            permits.dirty = true;
        }
        budgets.stopping = true;
        self.nudge(&mut budgets);
        // The last round is bounded by the socket timeouts.
        let _ =
            self.shared
                .ended
                .wait_timeout_while(budgets, 2 * REDIS_TIMEOUT + TICK, |budgets| {
                    !budgets.stopped
                });
    }
}

/// The scripts, loaded on every new connection.
struct Scripts {
    rate_take: redis::Script,
    rate_return: redis::Script,
    permits_take: redis::Script,
    permits_set: redis::Script,
}

impl Scripts {
    fn new() -> Scripts {
        Scripts {
            rate_take: redis::Script::new(RATE_TAKE),
            rate_return: redis::Script::new(RATE_RETURN),
            permits_take: redis::Script::new(PERMITS_TAKE),
            permits_set: redis::Script::new(PERMITS_SET),
        }
    }

    fn load(&self, connection: &mut redis::Connection) -> redis::RedisResult<()> {
        for script in [
            &self.rate_take,
            &self.rate_return,
            &self.permits_take,
            &self.permits_set,
        ] {
            script.load(connection)?;
        }
        Ok(())
    }
}

/// One request of a round, and where its answer goes.
enum Job {
    RateTake { key: String, asked: u32 },
    RateReturn,
    PermitsTake { org: String, asked: u32 },
    PermitsSet,
}

struct RedisThread {
    client: redis::Client,
    connection: Option<redis::Connection>,
    scripts: Scripts,
    shared: Arc<Shared>,
    node_id: String,
    permit_ttl_ms: u64,
    logged_down: bool,
}

impl RedisThread {
    fn run(mut self) {
        loop {
            let (jobs, pipe, stopping) = {
                let mut budgets = lock(&self.shared);
                if !budgets.pending {
                    budgets = self
                        .shared
                        .nudge
                        .wait_timeout(budgets, TICK)
                        .map(|(guard, _)| guard)
                        .unwrap_or_else(|poisoned| poisoned.into_inner().0);
                }
                budgets.pending = false;
                let now_ms = Clock::System.now_ms();
                let (jobs, pipe) = self.collect(&mut budgets, now_ms);
                (jobs, pipe, budgets.stopping)
            };
            if jobs.is_empty() && self.connection.is_some() {
                if stopping {
                    return self.end();
                }
                continue;
            }
            let answers = self.send(&pipe);
            let mut budgets = lock(&self.shared);
            let now_ms = Clock::System.now_ms();
            match answers {
                Ok(answers) => {
                    if !budgets.engine_up {
                        tracing::info!("Redis reached again: budgets are the fleet's again");
                        // Restate every count at once (Redis may have restarted empty).
                        budgets.last_heartbeat_ms = 0;
                    }
                    budgets.engine_up = true;
                    self.logged_down = false;
                    apply(&mut budgets, jobs, &answers, now_ms);
                }
                Err(error) => {
                    if budgets.engine_up || !self.logged_down {
                        tracing::warn!(
                            %error,
                            "Redis cannot be reached: each node falls back to its share of the budgets"
                        );
                        self.logged_down = true;
                    }
                    budgets.engine_up = false;
                    self.connection = None;
                    fail(&mut budgets, jobs);
                }
            }
            self.shared
                .status
                .engine_up
                .store(budgets.engine_up, Ordering::Relaxed);
            let down = !budgets.engine_up;
            drop(budgets);
            if stopping {
                return self.end();
            }
            if down {
                std::thread::sleep(RECONNECT_EVERY);
            }
        }
    }

    fn end(&self) {
        lock(&self.shared).stopped = true;
        self.shared.ended.notify_all();
    }

    /// This round's requests, as a pipeline, and what each answer is for.
    fn collect(&self, budgets: &mut NodeBudgets, now_ms: i64) -> (Vec<Job>, redis::Pipeline) {
        let mut jobs = Vec::new();
        let mut pipe = redis::pipe();
        let ttl = self.permit_ttl_ms;
        // Restated at least three times per TTL, so a live node's count never lapses.
        let every_ms = (HEARTBEAT_MS as i64)
            .min(ttl as i64 / 3)
            .max(TICK.as_millis() as i64);
        let heartbeat = now_ms - budgets.last_heartbeat_ms >= every_ms;
        if heartbeat {
            budgets.last_heartbeat_ms = now_ms;
        }
        budgets.rate.retain(|key, rate| {
            let idle = now_ms - rate.touched_ms >= IDLE_RETURN_MS;
            if idle && !rate.asking && rate.balance > 0 {
                // Idle tokens go back to the bucket.
                pipe.cmd("EVALSHA")
                    .arg(self.scripts.rate_return.get_hash())
                    .arg(1)
                    .arg(rate_key(key))
                    .arg(rate.bucket.burst)
                    .arg(rate.balance);
                jobs.push(Job::RateReturn);
                rate.balance = 0;
            }
            if idle && !rate.asking && rate.balance < 0 && now_ms >= rate.next_ask_ms {
                // A debt is paid even when the key goes quiet.
                rate.asking = true;
            }
            let block = i64::from(node_block(rate.bucket));
            if rate.asking && jobs.len() < PIPELINE_MAX {
                let asked = (block - rate.balance).max(1) as u32;
                pipe.cmd("EVALSHA")
                    .arg(self.scripts.rate_take.get_hash())
                    .arg(1)
                    .arg(rate_key(key))
                    .arg(rate.bucket.rate_per_s)
                    .arg(rate.bucket.burst)
                    .arg(asked);
                jobs.push(Job::RateTake {
                    key: key.clone(),
                    asked,
                });
            }
            // Forgotten once idle with nothing held, lent or asked for.
            rate.asking || rate.balance != 0 || now_ms - rate.touched_ms < 10 * IDLE_RETURN_MS
        });
        let live = budgets.live.max(1);
        budgets.permits.retain(|org, permits| {
            if jobs.len() >= PIPELINE_MAX {
                return true;
            }
            if !permits.asking
                && permits.held > permits.in_use
                && now_ms - permits.touched_ms >= IDLE_RETURN_MS
            {
                // A spare idle this long goes back to the fleet.
                permits.held = permits.in_use;
                permits.dirty = true;
            }
            if permits.wanted > 0 && !permits.asking {
                permits.asking = true;
                let asked = permits.wanted + permit_spare(permits.free, 2 * live);
                permits.wanted = 0;
                permits.in_flight = std::mem::take(&mut permits.waiting);
                pipe.cmd("EVALSHA")
                    .arg(self.scripts.permits_take.get_hash())
                    .arg(1)
                    .arg(permits_key(org))
                    .arg(&self.node_id)
                    .arg(permits.max)
                    .arg(asked)
                    .arg(ttl)
                    .arg(permits.held);
                jobs.push(Job::PermitsTake {
                    org: org.clone(),
                    asked,
                });
                permits.dirty = false;
            } else if permits.dirty || (heartbeat && permits.held > 0) {
                pipe.cmd("EVALSHA")
                    .arg(self.scripts.permits_set.get_hash())
                    .arg(1)
                    .arg(permits_key(org))
                    .arg(&self.node_id)
                    .arg(permits.held)
                    .arg(ttl);
                jobs.push(Job::PermitsSet);
                permits.dirty = false;
            }
            permits.held > 0
                || permits.asking
                || permits.in_use > 0
                || now_ms - permits.touched_ms < 10 * IDLE_RETURN_MS
        });
        (jobs, pipe)
    }

    /// Sends one round; the answers in order, each a list of integers.
    fn send(&mut self, pipe: &redis::Pipeline) -> anyhow::Result<Vec<Vec<i64>>> {
        if self.connection.is_none() {
            let mut connection = self.client.get_connection_with_timeout(REDIS_TIMEOUT)?;
            connection.set_read_timeout(Some(REDIS_TIMEOUT))?;
            connection.set_write_timeout(Some(REDIS_TIMEOUT))?;
            self.scripts.load(&mut connection)?;
            self.connection = Some(connection);
        }
        let Some(connection) = self.connection.as_mut() else {
            anyhow::bail!("no connection");
        };
        if pipe.is_empty() {
            return Ok(Vec::new());
        }
        self.shared
            .status
            .round_trips
            .fetch_add(1, Ordering::Relaxed);
        match pipe.query::<Vec<Vec<i64>>>(connection) {
            Ok(answers) => Ok(answers),
            Err(error)
                if error.kind() == redis::ErrorKind::Server(redis::ServerErrorKind::NoScript) =>
            {
                // Redis restarted between rounds and lost the scripts: load them, send again.
                self.scripts.load(connection)?;
                Ok(pipe.query::<Vec<Vec<i64>>>(connection)?)
            }
            Err(error) => Err(error.into()),
        }
    }
}

/// Writes a round's answers into the node's budgets.
fn apply(budgets: &mut NodeBudgets, jobs: Vec<Job>, answers: &[Vec<i64>], now_ms: i64) {
    for (job, answer) in jobs.into_iter().zip(answers) {
        let number = |index: usize| answer.get(index).copied().unwrap_or(0).max(0);
        match job {
            Job::RateTake { key, asked } => {
                let Some(rate) = budgets.rate.get_mut(&key) else {
                    continue;
                };
                let granted = number(0).min(i64::from(asked));
                rate.balance += granted;
                rate.asking = false;
                for waiter in rate.waiters.drain(..) {
                    let _ = waiter.send(granted as u32);
                }
                let rate_per_s = i64::from(rate.bucket.rate_per_s.max(1));
                let retry_ms = number(2);
                rate.seen = BucketState {
                    remaining: number(1).min(i64::from(u32::MAX)) as u32,
                    reset_s: ((i64::from(rate.bucket.burst) - number(1)).max(0) / rate_per_s)
                        as u32,
                    retry_after_s: ((retry_ms + 999) / 1000) as u32,
                };
                if granted < i64::from(asked) {
                    // The bucket is dry: ask again once a block could have come in.
                    let block_ms = i64::from(node_block(rate.bucket)) * 1000 / rate_per_s;
                    rate.next_ask_ms = now_ms + block_ms.clamp(10, 1000).max(retry_ms.min(1000));
                }
            }
            Job::PermitsTake { org, asked } => {
                let Some(permits) = budgets.permits.get_mut(&org) else {
                    continue;
                };
                let granted = number(0).min(i64::from(asked)) as u32;
                permits.held += granted;
                permits.free = number(1).min(i64::from(u32::MAX)) as u32;
                permits.asking = false;
                // Handed to the checks that waited, in order, so that no check that came
                // later takes them first.
                for (waiter, want) in permits.in_flight.drain(..) {
                    let spare = permits.held.saturating_sub(permits.in_use);
                    let given = if spare >= want { want } else { 0 };
                    permits.in_use += given;
                    if waiter.send(given).is_err() {
                        // The check is gone: its permits stay as this node's spare.
                        permits.in_use -= given;
                    }
                }
                permits.note_use(now_ms);
                if permits.wanted > 0 {
                    // Checks that came while this round was out: the next round.
                    budgets.pending = true;
                }
            }
            Job::RateReturn | Job::PermitsSet => {}
        }
    }
}

/// A round that failed: nothing was granted. Checks waiting for permits get them from this
/// node's share, as every take does while Redis is down (so a check is not refused
/// `too_many_concurrent` because Redis went away under it); checks waiting for rate tokens are
/// told 0 and take again from the share. What was to be stated is stated again at the next
/// round.
fn fail(budgets: &mut NodeBudgets, jobs: Vec<Job>) {
    let live = budgets.live.max(1);
    for job in jobs {
        match job {
            Job::RateTake { key, .. } => {
                if let Some(rate) = budgets.rate.get_mut(&key) {
                    rate.asking = false;
                    for waiter in rate.waiters.drain(..) {
                        let _ = waiter.send(0);
                    }
                }
            }
            Job::PermitsTake { org, .. } => {
                if let Some(permits) = budgets.permits.get_mut(&org) {
                    permits.asking = false;
                    permits.wanted = 0;
                    permits.dirty = true;
                    let share = permits.share(live);
                    let waiting: Vec<_> = permits
                        .in_flight
                        .drain(..)
                        .chain(permits.waiting.drain(..))
                        .collect();
                    for (waiter, want) in waiting {
                        let free = share.saturating_sub(permits.in_use);
                        let given = if free >= want { want } else { 0 };
                        permits.in_use += given;
                        if waiter.send(given).is_err() {
                            permits.in_use -= given;
                        }
                    }
                    // Stated to Redis once it is back, so its count covers these checks.
                    permits.held = permits.held.max(permits.in_use);
                }
            }
            Job::PermitsSet => {}
            Job::RateReturn => {}
        }
    }
    for permits in budgets.permits.values_mut() {
        if permits.held > 0 {
            permits.dirty = true;
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_block_is_a_tenth_of_a_second_within_the_burst() {
        let block = |rate_per_s, burst| node_block(BucketSpec { rate_per_s, burst });
        assert_eq!(block(500, 1000), 50);
        assert_eq!(block(5, 10), 1);
        assert_eq!(block(10_000, 100), 100);
        assert_eq!(block(1, 0), 1);
    }

    #[test]
    fn a_spare_permit_only_while_permits_are_plentiful() {
        assert_eq!(permit_spare(3, 3), 1);
        assert_eq!(permit_spare(2, 3), 0);
        assert_eq!(permit_spare(0, 1), 0);
    }

    #[test]
    fn the_recent_peak_spans_one_or_two_windows() {
        let mut permits = NodePermits {
            in_use: 40,
            ..NodePermits::default()
        };
        permits.note_use(1_000);
        permits.in_use = 5;
        permits.note_use(1_100);
        assert_eq!(permits.recent_peak(), 40);
        // The next window still remembers the last one's peak...
        permits.note_use(1_000 + IDLE_RETURN_MS);
        assert_eq!(permits.recent_peak(), 40);
        // ...and forgets it a window later.
        permits.note_use(1_000 + 2 * IDLE_RETURN_MS);
        assert_eq!(permits.recent_peak(), 5);
        // After a long quiet spell only the present counts.
        permits.in_use = 2;
        permits.note_use(1_000 + 10 * IDLE_RETURN_MS);
        assert_eq!(permits.recent_peak(), 2);
    }
}
