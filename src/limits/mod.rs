//! Plan limits per shard: rate (per key), concurrency (per organization) and the monthly
//! quota (per organization), counted locally from leases.
//!
//! Each shard holds small leases taken from the process-wide [`LeaseSource`]: a handful of
//! rate tokens, a spare concurrency permit or two, a block of quota units. A request spends
//! from its shard's leases; only when a lease runs dry does the shard go back to the source.
//! In the steady state a check touches no shared memory.
//!
//! Guarantees (the tolerance the tests check):
//! - Rate: tokens are taken from the key's one bucket before they are spent, so over any
//!   window T a key gets at most `burst + rate_per_s × T` checks, whichever shards serve it.
//!   Leases cannot add to that; tokens idle in one shard's lease can only make the limit
//!   stricter elsewhere, for at most [`IDLE_RETURN_MS`] before they go back.
//! - Concurrency: permits are conserved: an organization never has more than
//!   `concurrent_max` checks in progress. A shard keeps a spare permit after a check only
//!   when, at its last grant (less than [`IDLE_RETURN_MS`] ago), at least one permit per
//!   shard was still free; so a spare on another shard can make a 429 come early only while
//!   the organization was far from its cap moments before, and for at most
//!   [`IDLE_RETURN_MS`]. An organization near its cap (or with a cap below the shard count)
//!   gets every permit back at once.
//! - Quota: units are counted in the ledger when leased, so the quota is never exceeded.
//!   Leases grow with an organization's pace ([`QUOTA_LEASE_MAX`]) and shrink as the quota
//!   nears its end (a quarter of what is left, shared by the shards), and below
//!   [`QUOTA_REFILL_AT`] units are taken only when a check needs one, so near the end no
//!   shard holds units ahead of need. Near the end (if every shard held what
//!   one holds, the ledger would be empty), units left idle on a shard for
//!   [`QUOTA_IDLE_RETURN_MS`] go back to the ledger, and that shard's next check waits for
//!   them to be in before it leases again; a graceful stop gives them all back; a crash
//!   loses the units leased and not spent (at most one lease per shard and organization).
//!   A check refused while units are leased that no check is known to have spent is told to
//!   come back in 2 s, then in longer waits as such refusals go on, not next month
//!   (`QuotaLease::refusal`).
//!
//! One keep-alive connection can use a key's whole rate: its shard simply leases again.
//!
//! No check waits for the quota ledger's disk. A single node's ledger grants from memory at
//! once ([`QuotaSource::try_take_quota`]; it writes and fsyncs on a thread of its own, and the
//! journals make the count exact after a crash), so a shard refills its lease on the spot,
//! whatever an fsync costs meanwhile. A source that cannot answer at once (a fleet's
//! PostgreSQL ledger, or a single node before its start-up reconciliation) is asked in the
//! background when a lease falls to a quarter of its last grant, one refill per organization
//! and shard at a time; checks that find the lease empty then wait for that refill instead of
//! each asking the ledger, but take from a source that can answer at once first.

pub mod bucket;
pub mod lease;

use std::cell::{Cell, RefCell};
use std::rc::Rc;
use std::sync::Arc;
use std::task::{Poll, Waker};

use bucket::BucketState;
use lease::{AwaitedGrant, BucketSpec, LeaseSource, PermitGrant, QuotaGrant, QuotaSource, Sources};

use crate::auth::Caller;
use crate::clock::{month_of, ms_until_next_month};
use crate::error::{ApiError, ApiResult, ErrorKind};
use crate::hash::{value_of, FastMap};
use crate::http::response::{HeaderValue, Response};
use crate::store::records::{EngineDown, PlanLimits};

/// `Retry-After` of a check refused because the fleet's budget engine cannot be reached.
pub const ENGINE_DOWN_RETRY_AFTER_S: u32 = 2;
/// Rate tokens and spare permits idle for this long go back to the source.
pub const IDLE_RETURN_MS: i64 = 200;
/// Quota units idle on a shard for this long go back to the ledger (a durable write, so
/// less eagerly than rate tokens).
pub const QUOTA_IDLE_RETURN_MS: i64 = 1_000;
/// `Retry-After` of a first 429 `quota_exceeded` while units of the quota are leased and not
/// spent yet: an idle shard near the end of the quota gives them back within
/// [`QUOTA_IDLE_RETURN_MS`] and a janitor tick (`QuotaLease::refusal`).
pub const QUOTA_HELD_RETRY_AFTER_S: u32 = 2;
/// Refusals for held units more than this long after the last one's `Retry-After` ended are
/// a new run of them: their `Retry-After` starts again from [`QUOTA_HELD_RETRY_AFTER_S`].
pub const QUOTA_HELD_GAP_MS: i64 = 10_000;
/// A shard's first quota lease of an organization, at most.
pub const QUOTA_LEASE_BASE: u64 = 1000;
/// The largest quota lease: the base, doubled while leases last less than
/// [`QUOTA_LEASE_FAST_MS`] (a busy organization asks the ledger a few times a second, not
/// once per thousand checks: at 20,000 checks a second a fleet node's ledger thread woke 270
/// times a second), halved again when one lasts over four times that.
pub const QUOTA_LEASE_MAX: u64 = 32 * QUOTA_LEASE_BASE;
/// A lease that lasted less than this makes the next one twice as large.
pub const QUOTA_LEASE_FAST_MS: i64 = 500;
/// Leases kept per shard before the idle ones are dropped (bounds memory).
pub const LEASES_MAX: usize = 100_000;

struct RateLease {
    tokens: u32,
    bucket: BucketSpec,
    /// The bucket as the source last saw it (after that lease).
    seen: BucketState,
    touched_ms: i64,
}

#[derive(Default)]
struct PermitLease {
    held: u32,
    in_use: u32,
    touched_ms: i64,
    /// At the last grant, at least one permit per shard was still free: keeping a spare here
    /// cannot starve another shard.
    keep_spare: bool,
    /// When the source last granted a permit: that view of the organization is trusted for
    /// [`IDLE_RETURN_MS`], after which a spare goes back and the next check asks again.
    granted_ms: i64,
}

struct QuotaLease {
    month: u32,
    units: u64,
    /// The ledger's count after the last grant.
    ledger_used: u64,
    /// The organization's checks spent on all shards, as of the last report to the source.
    spent_synced: u64,
    /// Checks spent on this shard since that report.
    spent_unsynced: u64,
    /// Units of the last grant: a refill starts when `units` falls to a quarter of it.
    last_grant: u64,
    /// The next lease's size before the quota's own bound (see [`QUOTA_LEASE_MAX`]).
    pace: u64,
    /// When the last lease was asked for (0: never).
    asked_ms: i64,
    /// The refill in flight, if any (at most one per organization and shard).
    refill: Option<Rc<Refill>>,
    /// Idle units on their way back to the ledger: a check that finds the lease empty waits
    /// for them to be in before it leases, or it could be refused for units in transit.
    returning: Option<Rc<Refill>>,
    /// The organization's quota as of the last grant.
    limit: u64,
    touched_ms: i64,
    /// When this shard first refused a check, in the refusals going on now, while units were
    /// held unspent elsewhere (0: none going on): see [`QuotaLease::refusal`].
    held_since_ms: i64,
    /// When the `Retry-After` of the last such refusal ends.
    held_until_ms: i64,
}

impl QuotaLease {
    fn new(month: u32, now_ms: i64) -> QuotaLease {
        QuotaLease {
            month,
            units: 0,
            ledger_used: 0,
            spent_synced: 0,
            spent_unsynced: 0,
            last_grant: 0,
            pace: QUOTA_LEASE_BASE,
            asked_ms: 0,
            refill: None,
            returning: None,
            limit: 0,
            touched_ms: now_ms,
            held_since_ms: 0,
            held_until_ms: 0,
        }
    }

    /// Whether the quota is near its end: if every shard held what this one holds, the
    /// ledger would have nothing left. Idle units go back only then; otherwise they wait for
    /// this shard's next checks (or the graceful stop), with no ledger write for nothing.
    /// What other shards spent is known from their reports (`spent_synced`, refreshed every
    /// janitor tick), since this lease's own view of the ledger dates from its last grant.
    fn near_the_end(&self, shards: u32) -> bool {
        let used = self
            .ledger_used
            .max(self.spent_synced + self.spent_unsynced);
        used.saturating_add(u64::from(shards).saturating_mul(self.units)) >= self.limit
    }

    /// The 429 `quota_exceeded` of a check that found the ledger empty, holding `reserved`
    /// units of the `cost` it needs (a plan counting operations reserves them one at a time).
    ///
    /// Units the ledger counts as leased that no check is known to have spent (idle in other
    /// shards' or nodes' leases, or reserved by other checks in progress) may come back: an
    /// idle shard near the end of the quota returns them after [`QUOTA_IDLE_RETURN_MS`]. While
    /// some are, and the check would fit in what is not spent, the refusal says to retry in
    /// [`QUOTA_HELD_RETRY_AFTER_S`]; as such refusals go on (each within
    /// [`QUOTA_HELD_GAP_MS`] of the last one's `Retry-After`), in as long as they have gone on
    /// on this shard, at most until the month ends. Units a crashed fleet node held come back
    /// only when it starts again, and a fleet's counts of spent checks lag their shipping:
    /// retries stay few, and a client that obeys `Retry-After` never waits a month for units
    /// that came back in a second. Otherwise, the next month.
    fn refusal(&mut self, limits: &PlanLimits, now_ms: i64, reserved: u32, cost: u32) -> ApiError {
        let spent = self.spent_synced + self.spent_unsynced;
        let held = self
            .ledger_used
            .saturating_sub(spent)
            .saturating_sub(u64::from(reserved));
        if held == 0 {
            (self.held_since_ms, self.held_until_ms) = (0, 0);
            return quota_used_up(limits, now_ms);
        }
        if limits.quota_per_month.saturating_sub(spent) < u64::from(cost) {
            // This check could never fit, whatever comes back (the refusals of cheaper
            // checks meanwhile go on as they were).
            return quota_used_up(limits, now_ms);
        }
        if self.held_since_ms == 0 || now_ms > self.held_until_ms + QUOTA_HELD_GAP_MS {
            (self.held_since_ms, self.held_until_ms) = (now_ms, 0);
        }
        let waited_s = (now_ms - self.held_since_ms) / 1000;
        let month_s = (ms_until_next_month(now_ms) + 999) / 1000;
        let retry_s = waited_s
            .max(i64::from(QUOTA_HELD_RETRY_AFTER_S))
            .min(month_s)
            .clamp(1, i64::from(u32::MAX));
        // `now_ms` was read before the check waited for a refill: never move the end back.
        self.held_until_ms = self.held_until_ms.max(now_ms + retry_s * 1000);
        let (limit, unit) = (limits.quota_per_month, limits.quota_counts.unit_name());
        ApiError::new(
            ErrorKind::QuotaExceeded,
            format!(
                "the monthly quota of {limit} {unit} is all leased: {held} of them are held by \
                 other shards, nodes or checks in progress and not spent yet; retry once \
                 Retry-After has passed"
            ),
        )
        .with_retry_after(retry_s as u32)
    }

    /// Adds a grant from the ledger (of `org`'s quota of `limit`) to the lease.
    fn add_grant(&mut self, grant: &QuotaGrant, limit: u64) {
        if grant.units > 0 {
            // Units came: whatever was held is moving.
            (self.held_since_ms, self.held_until_ms) = (0, 0);
        }
        self.units += grant.units;
        self.ledger_used = grant.used;
        self.spent_synced = self.spent_synced.max(grant.spent);
        self.last_grant = grant.units;
        self.limit = limit;
    }

    /// The size a lease asked for at `now_ms` may have, before the quota's own bound: twice
    /// the last after a lease that lasted less than [`QUOTA_LEASE_FAST_MS`], half after one
    /// that lasted over four times that.
    fn pace_at(&self, now_ms: i64) -> u64 {
        let lasted = now_ms - self.asked_ms;
        if self.asked_ms != 0 && lasted < QUOTA_LEASE_FAST_MS {
            (self.pace * 2).min(QUOTA_LEASE_MAX)
        } else if lasted > 4 * QUOTA_LEASE_FAST_MS {
            (self.pace / 2).max(QUOTA_LEASE_BASE)
        } else {
            self.pace
        }
    }

    /// Notes a lease asked for at `now_ms` (granted at once, or a refill started).
    fn asked(&mut self, now_ms: i64) {
        self.pace = self.pace_at(now_ms);
        self.asked_ms = now_ms;
    }

    /// Whether to take the next lease before this one runs dry. Only for leases of at least
    /// [`QUOTA_REFILL_AT`] units: smaller ones mean the quota is nearly used up, and a lease
    /// taken ahead of need would hold units another shard may be refused for.
    fn wants_refill(&self) -> bool {
        self.refill.is_none()
            && self.last_grant >= QUOTA_REFILL_AT
            && self.units <= self.last_grant / QUOTA_REFILL_AT
    }
}

/// What [`ShardLimits::refill_now`] did.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
enum RefillNow {
    Granted,
    /// The source granted nothing: the quota is used up.
    QuotaUsedUp,
    Failed,
    /// The source cannot grant without blocking.
    NotNow,
}

/// 429 `quota_exceeded`, with `Retry-After` until the next month.
fn quota_used_up(limits: &PlanLimits, now_ms: i64) -> ApiError {
    let (limit, unit) = (limits.quota_per_month, limits.quota_counts.unit_name());
    let retry_s = (ms_until_next_month(now_ms) + 999) / 1000;
    ApiError::new(
        ErrorKind::QuotaExceeded,
        format!("the monthly quota of {limit} {unit} is used up"),
    )
    .with_retry_after(retry_s.clamp(1, i64::from(u32::MAX)) as u32)
}

/// A quota refill in flight, and the checks waiting for it.
#[derive(Default)]
struct Refill {
    /// Units granted, or `Err` if the ledger could not be written; `None` while in flight.
    outcome: Cell<Option<Result<u64, ()>>>,
    waiters: RefCell<Vec<Waker>>,
}

impl Refill {
    fn finish(&self, outcome: Result<u64, ()>) {
        self.outcome.set(Some(outcome));
        for waker in self.waiters.borrow_mut().drain(..) {
            waker.wake();
        }
    }

    async fn wait(&self) -> Result<u64, ()> {
        std::future::poll_fn(|cx| match self.outcome.get() {
            Some(outcome) => Poll::Ready(outcome),
            None => {
                let mut waiters = self.waiters.borrow_mut();
                if !waiters.iter().any(|w| w.will_wake(cx.waker())) {
                    waiters.push(cx.waker().clone());
                }
                Poll::Pending
            }
        })
        .await
    }
}

/// Permits on their way to a check that waits for them. A check dropped while it waits (its
/// connection closed) gives back what was handed to it meanwhile.
struct PermitsArriving<'a> {
    receiver: futures_channel::oneshot::Receiver<u32>,
    source: &'a dyn LeaseSource,
    org: &'a str,
}

impl Drop for PermitsArriving<'_> {
    fn drop(&mut self) {
        if let Ok(Some(handed)) = self.receiver.try_recv() {
            if handed > 0 {
                self.source.return_permits(self.org, handed);
            }
        }
    }
}

/// A lease is refilled in the background once its units fall to `1 / QUOTA_REFILL_AT` of its
/// last grant (leases smaller than this are refilled only when empty).
pub const QUOTA_REFILL_AT: u64 = 4;

/// The limit headers of an authenticated answer (`docs/interface.md#decisions`, limit headers).
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub struct LimitHeaders {
    pub limit: u32,
    pub remaining: u32,
    pub reset_s: u32,
    pub quota_used: u64,
    pub quota_limit: u64,
}

impl LimitHeaders {
    pub fn apply(&self, response: &mut Response) {
        response.headers.extend([
            ("ratelimit-limit", HeaderValue::Int(u64::from(self.limit))),
            (
                "ratelimit-remaining",
                HeaderValue::Int(u64::from(self.remaining)),
            ),
            ("ratelimit-reset", HeaderValue::Int(u64::from(self.reset_s))),
            ("x-quota-used", HeaderValue::Int(self.quota_used)),
            ("x-quota-limit", HeaderValue::Int(self.quota_limit)),
        ]);
    }
}

/// What a check holds while it runs: a permit and its quota units (one, and more once
/// [`ShardLimits::reserve_more`] took them), given back or spent by [`ShardLimits::finish`].
/// An admission dropped without `finish` (its request's task panicked or was cancelled)
/// gives them all back, as a refusal does: nothing leaks.
#[must_use]
pub struct Admission {
    org: String,
    month: u32,
    admitted_ms: i64,
    /// Quota units reserved.
    units: u32,
    /// Quota units the check costs (more than `units` while [`ShardLimits::reserve_more`]
    /// has not reserved them all, or after it was refused).
    cost: u32,
    /// The shard's limits until the admission is settled.
    unsettled: Option<ShardLimits>,
}

impl Admission {
    /// When the check was admitted: its quota unit was reserved in this time's month, so its
    /// journal record carries this time and is charged to the same month (a check admitted
    /// before midnight UTC on a month's last day and answered after it belongs to that month).
    pub fn admitted_ms(&self) -> i64 {
        self.admitted_ms
    }

    /// The quota units reserved: what the check is charged if it runs.
    pub fn units(&self) -> u32 {
        self.units
    }

    /// The quota units the check costs under its plan: what it was charged if it ran, what
    /// it would have been if it was refused.
    pub fn cost(&self) -> u32 {
        self.cost
    }
}

impl Drop for Admission {
    fn drop(&mut self) {
        if let Some(limits) = self.unsettled.take() {
            limits.settle(&self.org, self.month, false, self.units, self.admitted_ms);
        }
    }
}

#[derive(Clone)]
pub struct ShardLimits {
    source: Arc<dyn LeaseSource>,
    quota: Arc<dyn QuotaSource>,
    shards: u32,
    inner: Rc<Leases>,
}

#[derive(Default)]
struct Leases {
    rate: RefCell<FastMap<String, RateLease>>,
    permits: RefCell<FastMap<String, PermitLease>>,
    quota: RefCell<FastMap<String, QuotaLease>>,
}

fn bucket_of(caller: &Caller) -> BucketSpec {
    BucketSpec {
        rate_per_s: caller.org.limits.rate_per_s,
        burst: caller.org.limits.rate_burst,
    }
}

impl ShardLimits {
    pub fn new(sources: Sources, shards: usize) -> ShardLimits {
        ShardLimits {
            source: sources.budgets,
            quota: sources.quota,
            shards: shards.max(1) as u32,
            inner: Rc::default(),
        }
    }

    fn rate_lease_size(&self, bucket: BucketSpec) -> u32 {
        (bucket.burst / (4 * self.shards))
            .min(bucket.rate_per_s / 20)
            .max(1)
    }

    /// A quota lease: at most a quarter of what is left, shared by the shards, and at most
    /// `pace` ([`QuotaLease::asking`]).
    fn quota_lease_size(&self, limit: u64, ledger_used: u64, pace: u64) -> u64 {
        (limit.saturating_sub(ledger_used) / u64::from(4 * self.shards)).clamp(1, pace)
    }

    /// Spends one rate token of the caller's key: 429 `rate_limited` when the bucket is dry.
    /// Waits only when the shard's lease is dry and the source's refill is on its way (a
    /// fleet node's first checks of a key, beyond what it may lend).
    pub async fn take_rate(&self, caller: &Caller, now_ms: i64) -> ApiResult<()> {
        let bucket = bucket_of(caller);
        let key = &caller.key.id;
        if let Some(lease) = self.inner.rate.borrow_mut().get_mut(key.as_str()) {
            if lease.tokens > 0 {
                lease.tokens -= 1;
                lease.touched_ms = now_ms;
                return Ok(());
            }
        }
        self.refuse_if_engine_down(caller)?;
        let want = self.rate_lease_size(bucket);
        let (mut granted, mut seen) = self.source.take_rate(key, bucket, want, now_ms);
        if granted == 0 {
            // A refill on its way is waited for; one that came in since the take above is
            // found by taking again either way.
            if let Some(arriving) = self.source.rate_arriving(key) {
                let _ = arriving.await;
            }
            (granted, seen) = self.source.take_rate(key, bucket, want, now_ms);
        }
        let mut leases = self.inner.rate.borrow_mut();
        if leases.len() >= LEASES_MAX {
            leases.retain(|_, lease| lease.tokens > 0);
        }
        let lease = leases.entry(key.clone()).or_insert(RateLease {
            tokens: 0,
            bucket,
            seen,
            touched_ms: now_ms,
        });
        lease.bucket = bucket;
        lease.seen = seen;
        lease.touched_ms = now_ms;
        if granted == 0 {
            return Err(ApiError::new(
                ErrorKind::RateLimited,
                format!(
                    "rate limit reached: {} checks per second, at most {} at once, for this key",
                    bucket.rate_per_s, bucket.burst
                ),
            )
            .with_retry_after(seen.retry_after_s.max(1)));
        }
        // Added, not set: other checks of this shard may have leased while this one waited.
        lease.tokens += granted - 1;
        Ok(())
    }

    /// Admits a check: a rate token, a concurrency permit and a reserved quota unit, in that
    /// order (429 `rate_limited`, `too_many_concurrent`, `quota_exceeded`).
    pub async fn admit(&self, caller: &Caller, now_ms: i64) -> ApiResult<Admission> {
        self.take_rate(caller, now_ms).await?;
        let org = caller.org.record.name.clone();
        self.take_permit(caller, &org, now_ms).await?;
        let month = month_of(now_ms);
        if let Err(error) = self
            .reserve_quota(&org, month, &caller.org.limits, now_ms, (0, 1))
            .await
        {
            self.release_permit(&org, now_ms);
            return Err(error);
        }
        Ok(Admission {
            org,
            month,
            admitted_ms: now_ms,
            units: 1,
            cost: 1,
            unsettled: Some(self.clone()),
        })
    }

    /// Reserves quota units beyond an admission's one, for a check that costs `units` under
    /// its plan (a plan counting operations): in the admission's month, one at a time as
    /// [`Self::admit`] reserves its one, so the same leases, refills and bounds hold. On 429
    /// `quota_exceeded` the units reserved so far stay with the admission and go back with
    /// it when the refusal settles it. A check admitted in a month that has ended since
    /// (milliseconds before midnight UTC) keeps its one unit: that month's lease is gone.
    pub async fn reserve_more(
        &self,
        admission: &mut Admission,
        limits: &PlanLimits,
        units: u32,
        now_ms: i64,
    ) -> ApiResult<()> {
        admission.cost = units.max(1);
        if month_of(now_ms) != admission.month {
            admission.cost = admission.units;
            return Ok(());
        }
        while admission.units < units {
            let need = (admission.units, units);
            self.reserve_quota(&admission.org, admission.month, limits, now_ms, need)
                .await?;
            admission.units += 1;
        }
        Ok(())
    }

    async fn take_permit(&self, caller: &Caller, org: &str, now_ms: i64) -> ApiResult<()> {
        let max = caller.org.limits.concurrent_max;
        {
            let mut permits = self.inner.permits.borrow_mut();
            let lease = value_of(&mut permits, org, PermitLease::default);
            lease.touched_ms = now_ms;
            if lease.in_use < lease.held {
                lease.in_use += 1;
                return Ok(());
            }
        }
        self.refuse_if_engine_down(caller)?;
        let grant = match self.source.take_permits_or_wait(org, max, 1) {
            Ok(grant) => grant,
            Err(arriving) => {
                // The node asked the fleet's engine for permits: this check waits for that
                // one round (bounded by the engine's timeouts), its shard does not.
                let mut arriving = PermitsArriving {
                    receiver: arriving,
                    source: &*self.source,
                    org,
                };
                PermitGrant {
                    granted: (&mut arriving.receiver).await.unwrap_or(0),
                    free: 0,
                }
            }
        };
        let mut permits = self.inner.permits.borrow_mut();
        let lease = value_of(&mut permits, org, PermitLease::default);
        if grant.granted == 1 {
            lease.held += 1;
            lease.in_use += 1;
            lease.keep_spare = grant.free >= self.shards;
            lease.granted_ms = now_ms;
            return Ok(());
        }
        Err(ApiError::new(
            ErrorKind::TooManyConcurrent,
            format!("the organization already has {max} checks in progress"),
        )
        .with_retry_after(1))
    }

    /// 503 `busy` when the fleet's budget engine cannot be reached and the caller's plan
    /// says `engine_down = "closed"`.
    fn refuse_if_engine_down(&self, caller: &Caller) -> ApiResult<()> {
        if caller.org.limits.engine_down == EngineDown::Closed && self.source.engine_down() {
            return Err(ApiError::new(
                ErrorKind::Busy,
                "the fleet's budget engine cannot be reached and this plan refuses checks meanwhile: retry shortly",
            )
            .with_retry_after(ENGINE_DOWN_RETRY_AFTER_S));
        }
        Ok(())
    }

    fn release_permit(&self, org: &str, now_ms: i64) {
        let mut permits = self.inner.permits.borrow_mut();
        if let Some(lease) = permits.get_mut(org) {
            lease.in_use = lease.in_use.saturating_sub(1);
            lease.touched_ms = now_ms;
            // Keep one spare for the next check of this organization while permits are
            // plentiful (see the module's guarantees); the rest go back at once.
            let spare = lease.held - lease.in_use;
            let fresh = now_ms - lease.granted_ms < IDLE_RETURN_MS;
            let keep = u32::from(lease.keep_spare && fresh);
            if spare > keep {
                self.source.return_permits(org, spare - keep);
                lease.held -= spare - keep;
            }
        }
    }

    /// Reserves one quota unit of `org` for a check that holds `reserved` units of the `cost`
    /// it needs (`need`; `(0, 1)` for an admission).
    async fn reserve_quota(
        &self,
        org: &str,
        month: u32,
        limits: &PlanLimits,
        now_ms: i64,
        need: (u32, u32),
    ) -> ApiResult<()> {
        let (reserved, cost) = need;
        loop {
            // What to wait for: a refill, or (`true`) units on their way back to the ledger.
            let (refill, returning) = {
                let mut quota = self.inner.quota.borrow_mut();
                let lease = value_of(&mut quota, org, || QuotaLease::new(month, now_ms));
                if lease.month != month {
                    // Units of a past month are not worth returning: that month is over.
                    *lease = QuotaLease::new(month, now_ms);
                }
                lease.touched_ms = now_ms;
                if lease.units > 0 {
                    lease.units -= 1;
                    if lease.wants_refill() {
                        // Ahead of need: no check waits for this one.
                        if self.refill_now(lease, org, month, limits, now_ms) == RefillNow::NotNow {
                            lease.refill =
                                Some(self.start_refill(lease, org, month, limits, now_ms));
                        }
                    }
                    return Ok(());
                }
                // Empty. A source that can grant at once does, even with a refill in flight.
                if lease.returning.is_none() {
                    match self.refill_now(lease, org, month, limits, now_ms) {
                        RefillNow::Granted => continue,
                        RefillNow::QuotaUsedUp => {
                            return Err(lease.refusal(limits, now_ms, reserved, cost))
                        }
                        RefillNow::Failed => {
                            return Err(ApiError::internal("the quota ledger could not be updated"))
                        }
                        RefillNow::NotNow => {}
                    }
                }
                match (&lease.refill, &lease.returning) {
                    (Some(refill), _) => (refill.clone(), false),
                    (None, Some(returning)) => (returning.clone(), true),
                    (None, None) => {
                        let refill = self.start_refill(lease, org, month, limits, now_ms);
                        lease.refill = Some(refill.clone());
                        (refill, false)
                    }
                }
            };
            if returning {
                // Whatever the return's outcome, lease as usual once it is in.
                let _ = refill.wait().await;
                continue;
            }
            match refill.wait().await {
                Ok(0) => {
                    let mut quota = self.inner.quota.borrow_mut();
                    return Err(match quota.get_mut(org).filter(|l| l.month == month) {
                        Some(lease) => lease.refusal(limits, now_ms, reserved, cost),
                        None => quota_used_up(limits, now_ms),
                    });
                }
                Ok(_) => {} // units arrived: take one (unless others took them all first)
                Err(()) if self.quota.quota_ledger_down() => {
                    // A fleet's ledger (PostgreSQL) cannot be reached, and the plan refuses
                    // meanwhile or this node's share is spent: passing, so 503.
                    return Err(ApiError::new(
                        ErrorKind::Busy,
                        "the quota ledger cannot be reached: retry shortly",
                    )
                    .with_retry_after(ENGINE_DOWN_RETRY_AFTER_S));
                }
                Err(()) => return Err(ApiError::internal("the quota ledger could not be updated")),
            }
        }
    }

    /// Refills `lease` from a source that can grant at once; [`RefillNow::NotNow`] when it
    /// cannot (then [`Self::start_refill`]).
    fn refill_now(
        &self,
        lease: &mut QuotaLease,
        org: &str,
        month: u32,
        limits: &PlanLimits,
        now_ms: i64,
    ) -> RefillNow {
        let limit = limits.quota_per_month;
        let want = self.quota_lease_size(limit, lease.ledger_used, lease.pace_at(now_ms));
        match self.quota.try_take_quota(org, month, limit, want) {
            None => RefillNow::NotNow,
            Some(Ok(grant)) => {
                lease.asked(now_ms);
                lease.add_grant(&grant, limit);
                if grant.units == 0 {
                    RefillNow::QuotaUsedUp
                } else {
                    RefillNow::Granted
                }
            }
            Some(Err(error)) => {
                tracing::error!(%error, "quota ledger grant failed");
                RefillNow::Failed
            }
        }
    }

    /// Takes a quota lease for `org` in the background (awaited from a source that answers
    /// from its own thread, else on the shard's blocking threads: the source may block); the
    /// returned [`Refill`] says when it is in.
    fn start_refill(
        &self,
        lease: &mut QuotaLease,
        org: &str,
        month: u32,
        limits: &PlanLimits,
        now_ms: i64,
    ) -> Rc<Refill> {
        let (limit, engine_down) = (limits.quota_per_month, limits.engine_down);
        let refill = Rc::new(Refill::default());
        lease.asked(now_ms);
        let want = self.quota_lease_size(limit, lease.ledger_used, lease.pace);
        let (source, inner, owned_org, task_refill) = (
            self.quota.clone(),
            self.inner.clone(),
            org.to_owned(),
            refill.clone(),
        );
        glommio::spawn_local(async move {
            // glommio runs a task it spawns at once, inside the caller, which holds the
            // shard's quota leases: an answer already in would borrow them again below.
            glommio::executor().yield_now().await;
            let ledger_org = owned_org.clone();
            let grant = match source.send_take_quota(&ledger_org, month, limit, want) {
                // A fleet's ledger answers from its own thread: awaited, no blocking thread
                // of the shard (which its journal shares) waits on PostgreSQL.
                Some(AwaitedGrant { mut answer, wait }) => {
                    let answered =
                        futures_lite::future::or(async { Some((&mut answer).await) }, async {
                            glommio::timer::sleep(wait).await;
                            None
                        })
                        .await;
                    let answer = match answered {
                        Some(answer) => answer.unwrap_or_else(|_| {
                            Err(anyhow::anyhow!("the quota thread has stopped"))
                        }),
                        None => {
                            // Closed, then a last look: a grant sent meanwhile goes back
                            // instead of staying counted as leased until the next start.
                            answer.close();
                            if let Ok(Some(Ok(late))) = answer.try_recv() {
                                let _ = source.return_quota(&ledger_org, month, late.units);
                            }
                            Err(anyhow::anyhow!("the quota ledger did not answer in time"))
                        }
                    };
                    source.settle_take_quota(&ledger_org, month, limit, want, engine_down, answer)
                }
                None => {
                    glommio::executor()
                        .spawn_blocking(move || {
                            source.take_quota(&ledger_org, month, limit, want, engine_down)
                        })
                        .await
                }
            };
            let mut quota = inner.quota.borrow_mut();
            let lease = quota.get_mut(&owned_org);
            let outcome = match grant {
                Ok(grant) => {
                    if let Some(lease) = lease.filter(|lease| lease.month == month) {
                        lease.add_grant(&grant, limit);
                        lease.refill = None;
                    }
                    Ok(grant.units)
                }
                Err(error) => {
                    tracing::error!(%error, "quota ledger write failed");
                    // Only this month's: a lease that moved to the next month meanwhile may
                    // have a refill of its own in flight.
                    if let Some(lease) = lease.filter(|lease| lease.month == month) {
                        lease.refill = None;
                    }
                    Err(())
                }
            };
            drop(quota);
            task_refill.finish(outcome);
        })
        .detach();
        refill
    }

    /// Ends a check: the permit goes back; the quota units are spent if the check ran, else
    /// they return to the lease (refusals do not count).
    pub fn finish(&self, mut admission: Admission, ran: bool, now_ms: i64) {
        admission.unsettled = None;
        self.settle(
            &admission.org,
            admission.month,
            ran,
            admission.units,
            now_ms,
        );
    }

    fn settle(&self, org: &str, month: u32, ran: bool, units: u32, now_ms: i64) {
        self.release_permit(org, now_ms);
        if let Some(lease) = self.inner.quota.borrow_mut().get_mut(org) {
            if lease.month == month {
                lease.touched_ms = now_ms;
                if ran {
                    lease.spent_unsynced += u64::from(units);
                } else {
                    lease.units += u64::from(units);
                }
            }
        }
    }

    /// The headers for an answer to `caller` (estimates within the leases of other shards).
    pub fn headers(&self, caller: &Caller, now_ms: i64) -> LimitHeaders {
        let bucket = bucket_of(caller);
        let (remaining, reset_s) = match self.inner.rate.borrow().get(caller.key.id.as_str()) {
            Some(lease) => {
                let remaining = lease
                    .seen
                    .remaining
                    .saturating_add(lease.tokens)
                    .min(bucket.burst);
                let missing = bucket.burst - remaining;
                (remaining, missing.div_ceil(bucket.rate_per_s.max(1)))
            }
            None => (bucket.burst, 0),
        };
        let quota_used = self.quota_spent(&caller.org.record.name, month_of(now_ms), now_ms);
        LimitHeaders {
            limit: bucket.burst,
            remaining,
            reset_s,
            quota_used,
            quota_limit: caller.org.limits.quota_per_month,
        }
    }

    /// `org`'s checks this month as this shard knows them: its own, and the others' as of
    /// their last report. A shard that has not served `org` yet asks the source (which read
    /// the ledger once), and keeps the answer for the next time.
    fn quota_spent(&self, org: &str, month: u32, now_ms: i64) -> u64 {
        let mut quota = self.inner.quota.borrow_mut();
        if let Some(lease) = quota.get(org).filter(|lease| lease.month == month) {
            return lease.spent_synced + lease.spent_unsynced;
        }
        let spent = self.quota.quota_spent(org, month);
        if quota.len() >= LEASES_MAX {
            // Only leases with nothing in them: no units, nothing in flight, nothing unreported,
            // no check in progress that could hand a unit back (those touched it recently).
            quota.retain(|_, lease| {
                lease.units > 0
                    || lease.refill.is_some()
                    || lease.returning.is_some()
                    || lease.spent_unsynced > 0
                    || now_ms - lease.touched_ms < QUOTA_IDLE_RETURN_MS
            });
        }
        let mut lease = QuotaLease::new(month, now_ms);
        lease.spent_synced = spent;
        quota.insert(org.to_owned(), lease);
        spent
    }

    /// Gives back rate tokens and spare permits idle for [`IDLE_RETURN_MS`] and quota units
    /// idle for [`QUOTA_IDLE_RETURN_MS`], and reports the checks spent since the last tick
    /// (so that every shard's `X-Quota-Used` counts the others'). Run every
    /// [`IDLE_RETURN_MS`] by the shard.
    pub fn return_idle(&self, now_ms: i64) {
        let month = month_of(now_ms);
        let mut quota = self.inner.quota.borrow_mut();
        for (org, lease) in quota.iter_mut() {
            if lease.month != month {
                continue;
            }
            // The source's count never goes down (nor below what its grants said).
            lease.spent_synced = self.quota.report_spent(org, month, lease.spent_unsynced);
            lease.spent_unsynced = 0;
            if lease.units > 0
                && lease.refill.is_none()
                && lease.returning.is_none()
                && now_ms - lease.touched_ms >= QUOTA_IDLE_RETURN_MS
                && lease.near_the_end(self.shards)
            {
                lease.returning = self.start_return(org, month, lease.units);
                lease.units = 0;
                lease.last_grant = 0;
            }
        }
        drop(quota);
        let mut rate = self.inner.rate.borrow_mut();
        rate.retain(|key, lease| {
            if now_ms - lease.touched_ms < IDLE_RETURN_MS {
                return true;
            }
            if lease.tokens > 0 {
                self.source.return_rate(key, lease.bucket, lease.tokens);
            }
            false
        });
        let mut permits = self.inner.permits.borrow_mut();
        permits.retain(|org, lease| {
            if now_ms - lease.touched_ms < IDLE_RETURN_MS {
                return true;
            }
            let spare = lease.held - lease.in_use;
            if spare > 0 {
                self.source.return_permits(org, spare);
                lease.held -= spare;
            }
            lease.in_use > 0
        });
    }

    /// Gives `units` of `org`'s lease back to the ledger: at once where the source can (then
    /// `None`), else in the background, and the returned [`Refill`] says when they are in
    /// (checks of this shard wait for it before leasing).
    fn start_return(&self, org: &str, month: u32, units: u64) -> Option<Rc<Refill>> {
        match self.quota.try_return_quota(org, month, units) {
            Some(Ok(())) => return None,
            Some(Err(error)) => {
                // The units stay counted as used: the quota can only come out stricter.
                tracing::warn!(%error, "could not return idle quota units");
                return None;
            }
            None => {}
        }
        let done = Rc::new(Refill::default());
        let (source, inner, owned_org, task_done) = (
            self.quota.clone(),
            self.inner.clone(),
            org.to_owned(),
            done.clone(),
        );
        glommio::spawn_local(async move {
            let ledger_org = owned_org.clone();
            let returned = glommio::executor()
                .spawn_blocking(move || source.return_quota(&ledger_org, month, units))
                .await;
            if let Err(error) = &returned {
                // The units stay counted as used: the quota can only come out stricter.
                tracing::warn!(%error, "could not return idle quota units");
            }
            if let Some(lease) = inner.quota.borrow_mut().get_mut(&owned_org) {
                lease.returning = None;
            }
            task_done.finish(returned.map(|()| units).map_err(|_| ()));
        })
        .detach();
        Some(done)
    }

    /// At a graceful stop: unspent quota units go back to the ledger, spare permits and rate
    /// tokens to the source (blocking).
    pub fn give_back_blocking(&self) {
        for (org, lease) in self.inner.quota.borrow_mut().drain() {
            if lease.units > 0 {
                if let Err(error) = self.quota.return_quota(&org, lease.month, lease.units) {
                    tracing::warn!(%error, "could not return quota units at stop");
                }
            }
        }
        for (org, lease) in self.inner.permits.borrow_mut().drain() {
            if lease.held > 0 {
                self.source.return_permits(&org, lease.held);
            }
        }
        for (key, lease) in self.inner.rate.borrow_mut().drain() {
            if lease.tokens > 0 {
                self.source.return_rate(&key, lease.bucket, lease.tokens);
            }
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn plan(quota_per_month: u64) -> PlanLimits {
        PlanLimits {
            text_chars_max: 1_000,
            image_pixels_max: 1_000_000,
            rate_per_s: 10,
            rate_burst: 10,
            concurrent_max: 10,
            quota_per_month,
            keys_max: 10,
            paid: false,
            engine_down: EngineDown::Open,
            quota_counts: Default::default(),
        }
    }

    #[test]
    fn a_refusal_says_next_month_only_once_no_unit_can_come_back() {
        let limits = plan(100);
        // 2026-11-10: the month ends in about 20 days.
        let now = 1_794_268_800_000;
        let month_s = ((ms_until_next_month(now) + 999) / 1000) as u32;
        let mut lease = QuotaLease::new(month_of(now), now);
        lease.add_grant(
            &QuotaGrant {
                units: 0,
                used: 100,
                spent: 90,
            },
            100,
        );
        // 10 units leased and not spent: 2 s, then, to a client that obeys, waits as long as
        // the refusals have gone on.
        let first = lease.refusal(&limits, now, 0, 1);
        assert_eq!(first.kind, ErrorKind::QuotaExceeded);
        assert!(
            first.message.contains("10 of them are held"),
            "{}",
            first.message
        );
        let mut at = now;
        let mut waits = Vec::new();
        for _ in 0..6 {
            let wait = lease.refusal(&limits, at, 0, 1).retry_after_s.unwrap();
            waits.push(wait);
            at += i64::from(wait) * 1000;
        }
        assert_eq!(waits, [2, 2, 4, 8, 16, 32]);
        // A check that could never fit is told next month, and the run goes on for the rest.
        assert_eq!(
            lease.refusal(&limits, at, 0, 11).retry_after_s,
            Some(month_s - 64)
        );
        assert_eq!(lease.refusal(&limits, at, 0, 1).retry_after_s, Some(64));
        // The check's own reserved units are not held elsewhere: next month, and the run ends.
        assert_eq!(
            lease.refusal(&limits, at, 10, 11).retry_after_s,
            Some(month_s - 64)
        );
        assert_eq!(lease.refusal(&limits, at, 0, 1).retry_after_s, Some(2));
        // A refusal long after the last one's wait ended starts a new run.
        let later = at + 2_000 + QUOTA_HELD_GAP_MS + 1;
        assert_eq!(lease.refusal(&limits, later, 0, 1).retry_after_s, Some(2));
        // Units granted: the next run starts from 2 s too.
        assert_eq!(
            lease.refusal(&limits, later + 2_000, 0, 1).retry_after_s,
            Some(2)
        );
        assert_eq!(
            lease.refusal(&limits, later + 4_000, 0, 1).retry_after_s,
            Some(4)
        );
        lease.add_grant(
            &QuotaGrant {
                units: 1,
                used: 100,
                spent: 90,
            },
            100,
        );
        lease.units = 0;
        assert_eq!(
            lease.refusal(&limits, later + 5_000, 0, 1).retry_after_s,
            Some(2)
        );
        // Every unit spent: the next month.
        lease.spent_synced = 100;
        let spent = lease.refusal(&limits, now + 120_000, 0, 1);
        assert_eq!(spent.retry_after_s, Some(month_s - 120));
        assert!(spent.message.contains("used up"), "{}", spent.message);
        // Waits never pass the month's end: a run of an hour, 5 s before it.
        lease.spent_synced = 90;
        let end = now + ms_until_next_month(now) - 5_000;
        (lease.held_since_ms, lease.held_until_ms) = (end - 3_600_000, end);
        assert_eq!(lease.refusal(&limits, end, 0, 1).retry_after_s, Some(5));
    }

    #[test]
    fn a_quota_lease_grows_while_leases_go_fast_and_shrinks_when_they_last() {
        let mut lease = QuotaLease::new(1, 0);
        // The first lease is the base, whenever it is asked for.
        assert_eq!(lease.pace_at(1_000), QUOTA_LEASE_BASE);
        lease.asked(1_000);
        // Spent in 100 ms: twice as large, up to the largest.
        let mut now = 1_000;
        let mut sizes = Vec::new();
        for _ in 0..8 {
            now += 100;
            lease.asked(now);
            sizes.push(lease.pace);
        }
        assert_eq!(
            sizes,
            [2, 4, 8, 16, 32, 32, 32, 32].map(|n| n * QUOTA_LEASE_BASE)
        );
        // A lease that lasted between the two bounds keeps the size.
        assert_eq!(lease.pace_at(now + QUOTA_LEASE_FAST_MS), QUOTA_LEASE_MAX);
        // One that lasted long halves it, down to the base.
        now += 4 * QUOTA_LEASE_FAST_MS + 1;
        lease.asked(now);
        assert_eq!(lease.pace, QUOTA_LEASE_MAX / 2);
        for _ in 0..10 {
            now += 60_000;
            lease.asked(now);
        }
        assert_eq!(lease.pace, QUOTA_LEASE_BASE);
    }

    #[test]
    fn a_quota_lease_is_at_most_a_quarter_of_what_is_left_per_shard() {
        let dir = tempfile::tempdir().unwrap();
        let leases = std::sync::Arc::new(lease::LocalLeases::open(dir.path()).unwrap());
        let limits = ShardLimits::new(Sources::local(leases), 2);
        // 1,000,000 left, 2 shards: the pace bounds it.
        assert_eq!(
            limits.quota_lease_size(1_000_000, 0, QUOTA_LEASE_MAX),
            QUOTA_LEASE_MAX
        );
        // 80,000 left: 10,000 (a quarter, halved between two shards).
        assert_eq!(
            limits.quota_lease_size(100_000, 20_000, QUOTA_LEASE_MAX),
            10_000
        );
        // Nothing left: one unit is asked for (and refused by the ledger).
        assert_eq!(limits.quota_lease_size(100, 100, QUOTA_LEASE_MAX), 1);
    }
}
