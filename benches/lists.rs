//! Hash lists: a lookup in a compiled list of 10,000, 100,000 and 1,000,000 PDQ hashes within
//! PDQ's match distance (31), compiling such a list from its entries (at start, and once per
//! 4,096 changes), and removing one entry (the rest of the time). Text lists: a list of
//! 100,000 terms (`TEXT_LIST_ENTRIES_MAX`) compiled, one term added to it or removed, and one
//! added once 4,000 were added since it was compiled.
//!
//! The hashes are random, so every bucket of the index is as full as a uniform list makes it;
//! queries are a listed hash with 20 bits changed (a match) and a random hash (no match,
//! the common case). Real PDQ hashes cluster, which fills some buckets more.

use std::hint::black_box;

use criterion::{criterion_group, criterion_main, BatchSize, Criterion};
use modgate::image::hashes::{ImageHashes, Pdq};
use modgate::lists::{CompiledList, Entry, EntryHash, ListKind};

fn random_pdq(rng: &mut fastrand::Rng) -> Pdq {
    let mut bytes = [0u8; 32];
    rng.fill(&mut bytes);
    Pdq(bytes)
}

fn entries(n: usize, rng: &mut fastrand::Rng) -> Vec<Entry> {
    (0..n)
        .map(|at| Entry {
            id: at as u64 + 1,
            hash: EntryHash::Pdq(random_pdq(rng)),
            label: Some(format!("label {at}")),
            caller_id: None,
            added_ms: 0,
        })
        .collect()
}

fn query(pdq: Pdq) -> ImageHashes {
    ImageHashes {
        pdq: Some((pdq, 100)),
        pdq_tool: None,
        md5: [0; 16],
        sha256: [0; 32],
    }
}

fn lookups(c: &mut Criterion) {
    let mut group = c.benchmark_group("lists/lookup");
    let mut rng = fastrand::Rng::with_seed(17);
    for n in [10_000, 100_000, 1_000_000] {
        let listed = entries(n, &mut rng);
        let EntryHash::Pdq(target) = listed[n / 2].hash else {
            unreachable!()
        };
        let mut near = target;
        for bit in (0..20).map(|i| i * 12) {
            near.0[bit / 8] ^= 1 << (bit % 8);
        }
        let list = CompiledList::new("bench", ListKind::Block, 31, listed);
        eprintln!(
            "{n} hashes: PDQ index {} bytes ({} a hash)",
            list.index_bytes(),
            list.index_bytes() / n
        );
        let matching = query(near);
        assert_eq!(list.lookup(&matching).map(|m| m.distance), Some(20));
        group.bench_function(format!("match/{n}"), |b| {
            b.iter(|| list.lookup(black_box(&matching)))
        });
        let strangers: Vec<ImageHashes> = (0..64).map(|_| query(random_pdq(&mut rng))).collect();
        let mut at = 0;
        group.bench_function(format!("no_match/{n}"), |b| {
            b.iter(|| {
                at = (at + 1) % strangers.len();
                list.lookup(black_box(&strangers[at]))
            })
        });
    }
    group.finish();
}

fn compiling(c: &mut Criterion) {
    let mut group = c.benchmark_group("lists/compile");
    group.sample_size(10);
    let mut rng = fastrand::Rng::with_seed(3);
    for n in [100_000, 1_000_000] {
        let listed = entries(n, &mut rng);
        group.bench_function(format!("{n}"), |b| {
            b.iter_batched(
                || listed.clone(),
                |listed| CompiledList::new("bench", ListKind::Block, 31, listed),
                BatchSize::LargeInput,
            )
        });
        // What a removal costs the follower until DELTA_MAX of them make a rebuild.
        let list = CompiledList::new("bench", ListKind::Block, 31, listed);
        group.bench_function(format!("remove_one/{n}"), |b| {
            b.iter(|| list.without(black_box(&[n as u64 / 2])))
        });
    }
    group.finish();
}

/// A term of two to four random lowercase words.
fn random_term(rng: &mut fastrand::Rng) -> String {
    let words: Vec<String> = (0..rng.usize(2..=4))
        .map(|_| (0..rng.usize(3..=9)).map(|_| rng.lowercase()).collect())
        .collect();
    words.join(" ")
}

fn compiling_terms(c: &mut Criterion) {
    let mut group = c.benchmark_group("lists/compile_terms");
    group.sample_size(10);
    let mut rng = fastrand::Rng::with_seed(5);
    let n = 100_000;
    let term = |id: u64, rng: &mut fastrand::Rng| Entry {
        id,
        hash: EntryHash::term(&random_term(rng)).expect("a valid term"),
        label: None,
        caller_id: None,
        added_ms: 0,
    };
    let listed: Vec<Entry> = (1..=n).map(|id| term(id, &mut rng)).collect();
    group.bench_function(format!("{n}"), |b| {
        b.iter_batched(
            || listed.clone(),
            |listed| CompiledList::new("bench", ListKind::Block, 0, listed),
            BatchSize::LargeInput,
        )
    });
    // What one change costs the lists follower.
    let list = CompiledList::new("bench", ListKind::Block, 0, listed);
    let added = term(n + 1, &mut rng);
    group.bench_function(format!("add_one/{n}"), |b| {
        b.iter(|| list.appended(black_box(vec![added.clone()])))
    });
    group.bench_function(format!("remove_one/{n}"), |b| {
        b.iter(|| list.without(black_box(&[n / 2])))
    });
    // The same once 4,000 terms were added since the list was compiled: each change
    // compiles the terms added since again (the base is compiled anew after 4,096).
    let since: Vec<Entry> = (n + 2..n + 4002).map(|id| term(id, &mut rng)).collect();
    let list = list.appended(since);
    let added = term(n + 4002, &mut rng);
    group.bench_function(format!("add_one_after_4000/{n}"), |b| {
        b.iter(|| list.appended(black_box(vec![added.clone()])))
    });
    group.finish();
}

criterion_group!(benches, lookups, compiling, compiling_terms);
criterion_main!(benches);
