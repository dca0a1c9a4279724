//! The cost of plan limits and of the journal per check.
//!
//! - `limits/admit_finish`: rate token, concurrency permit and quota unit taken and settled
//!   from warm leases, as every check does in the steady state.
//! - `journal/append_{interval,always}`: records appended by 64 concurrent checks on one shard,
//!   group-committed; the time per record is the shard's cost per check (the commit itself
//!   runs on the blocking thread, included here since it shares the core).
//!
//! Before the criterion runs, the latency a journal append adds to one check at rest is
//! printed (p50, p99) for both sync policies.

use std::borrow::Cow;
use std::rc::Rc;
use std::sync::Arc;
use std::time::{Duration, Instant};

use criterion::{criterion_group, criterion_main, Criterion, Throughput};
use glommio::{LocalExecutor, LocalExecutorBuilder};
use modgate::auth::Caller;
use modgate::journal::{Journal, JournalConfig, JournalRecord, SyncPolicy};
use modgate::limits::lease::{LocalLeases, Sources};
use modgate::limits::ShardLimits;
use modgate::metrics::Metrics;
use modgate::store::records::{
    KeyRecord, OrgRecord, PlanLimits, PlanOverrides, Scopes, WorkflowAccess,
};
use modgate::store::view::OrgEntry;

fn caller() -> Caller {
    Caller {
        key: Rc::new(KeyRecord {
            id: "AAAAAAAAAAAA".into(),
            org: "bench".into(),
            key_sha256: [0; 32],
            scopes: Scopes::CHECKS,
            workflows: WorkflowAccess::All,
            created_ms: 0,
            expires_ms: None,
            revoked_ms: None,
            grace_until_ms: None,
            rotated_to: None,
            rotated_from: None,
        }),
        org: Rc::new(OrgEntry {
            record: OrgRecord {
                name: "bench".into(),
                plan: "pro".into(),
                suspended: false,
                overrides: PlanOverrides::default(),
                created_ms: 0,
            },
            limits: PlanLimits {
                text_chars_max: 20_000,
                image_pixels_max: 50_000_000,
                rate_per_s: 1_000_000_000,
                rate_burst: 1_000_000_000,
                concurrent_max: 1_000_000,
                quota_per_month: u64::MAX / 2,
                keys_max: 10,
                paid: true,
                engine_down: Default::default(),
                quota_counts: Default::default(),
            },
        }),
    }
}

fn record(id: &str) -> JournalRecord<'_> {
    JournalRecord {
        request_id: Cow::Borrowed(id),
        unix_ms: 1_795_000_000_000,
        route: "/v1/text".into(),
        kind: "text".into(),
        key_id: Some("AAAAAAAAAAAA".into()),
        org: Some("bench".into()),
        reference: Some("comment-123456".into()),
        workflow: Some("default".into()),
        workflow_version: Some(3),
        status: 200,
        error_type: None,
        action: Some("accept".into()),
        scores: [
            "profanity",
            "pii_email",
            "pii_phone",
            "pii_iban",
            "pii_card",
            "pii_ip",
        ]
        .iter()
        .map(|c| (Cow::Borrowed(*c), 0.01))
        .collect(),
        unchecked: vec![],
        time_ms: 0,
        units: 1,
    }
}

fn executor() -> LocalExecutor {
    LocalExecutorBuilder::default().make().expect("executor")
}

fn limits(c: &mut Criterion) {
    let dir = tempfile::tempdir_in(env!("CARGO_TARGET_TMPDIR")).unwrap();
    let ex = executor();
    let limits = ShardLimits::new(
        Sources::local(Arc::new(LocalLeases::open(dir.path()).unwrap())),
        1,
    );
    let caller = caller();
    let mut group = c.benchmark_group("limits");
    group.throughput(Throughput::Elements(1));
    group.bench_function("admit_finish", |b| {
        b.iter_custom(|iters| {
            ex.run(async {
                let start = Instant::now();
                for _ in 0..iters {
                    let admission = limits.admit(&caller, 1_795_000_000_000).await.unwrap();
                    limits.finish(admission, true, 1_795_000_000_000);
                }
                start.elapsed()
            })
        })
    });
    group.finish();
}

fn journal_config(sync: SyncPolicy) -> JournalConfig {
    JournalConfig {
        sync,
        batch_records_max: 512,
        map_bytes: 64 << 30,
        ship: false,
        staging: None,
    }
}

fn ids(n: u64, from: u64) -> Vec<String> {
    let generator = modgate::request_id::RequestIdGen::new(0, 0);
    (0..n)
        .map(|i| {
            generator
                .next(1_795_000_000_000 + from + i)
                .as_str()
                .to_owned()
        })
        .collect()
}

/// Latency one append adds to a check at rest, p50 and p99 over `n` appends.
fn latency(sync: SyncPolicy, name: &str) {
    let dir = tempfile::tempdir_in(env!("CARGO_TARGET_TMPDIR")).unwrap();
    let ex = executor();
    ex.run(async {
        let journal =
            Journal::start(dir.path(), 0, journal_config(sync), Metrics::new(true)).unwrap();
        let n = 400;
        let mut times: Vec<Duration> = Vec::with_capacity(n);
        for id in ids(n as u64, 0) {
            let start = Instant::now();
            journal.append(&record(&id)).await.unwrap();
            times.push(start.elapsed());
        }
        times.sort();
        println!(
            "journal latency at rest ({name}): p50 {:?}, p99 {:?}, max {:?} over {n} appends",
            times[n / 2],
            times[n * 99 / 100],
            times[n - 1]
        );
    });
}

fn journal(c: &mut Criterion) {
    latency(SyncPolicy::Always, "always");
    latency(
        SyncPolicy::Interval(Duration::from_millis(100)),
        "interval 100 ms",
    );
    let mut group = c.benchmark_group("journal");
    group.sample_size(20);
    for (name, sync) in [
        (
            "append_interval",
            SyncPolicy::Interval(Duration::from_millis(100)),
        ),
        ("append_always", SyncPolicy::Always),
    ] {
        let dir = tempfile::tempdir_in(env!("CARGO_TARGET_TMPDIR")).unwrap();
        let ex = executor();
        let journal = ex.run(async {
            Journal::start(dir.path(), 0, journal_config(sync), Metrics::new(true)).unwrap()
        });
        let mut next = 0u64;
        const CONCURRENT: u64 = 64;
        group.throughput(Throughput::Elements(CONCURRENT));
        group.bench_function(name, |b| {
            b.iter_custom(|iters| {
                ex.run(async {
                    let start = Instant::now();
                    for _ in 0..iters {
                        let batch = ids(CONCURRENT, next);
                        next += CONCURRENT;
                        let tasks: Vec<_> = batch
                            .into_iter()
                            .map(|id| {
                                let journal = journal.clone();
                                glommio::spawn_local(async move {
                                    journal.append(&record(&id)).await.unwrap()
                                })
                            })
                            .collect();
                        for task in tasks {
                            task.await;
                        }
                    }
                    start.elapsed()
                })
            })
        });
    }
    group.finish();
}

criterion_group!(benches, limits, journal);
criterion_main!(benches);
