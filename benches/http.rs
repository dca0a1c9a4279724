//! Hot paths of the HTTP layer: head parsing and chunked decoding.

use criterion::{criterion_group, criterion_main, Criterion, Throughput};
use modgate::http::chunked::ChunkedDecoder;
use modgate::http::head::{parse_head, HeadLimits};

fn head_parsing(c: &mut Criterion) {
    let head = b"GET /v1/workflows HTTP/1.1\r\nHost: localhost:8080\r\nUser-Agent: bench/1.0\r\nAccept: */*\r\nAuthorization: Bearer mg_live_AAAAAAAAAAAA_BBBBBBBBBBBBBBBBBBBBBBBBBBBBBBBB\r\n\r\n";
    let limits = HeadLimits::default();
    let mut group = c.benchmark_group("head");
    group.throughput(Throughput::Bytes(head.len() as u64));
    group.bench_function("parse_get_with_key", |b| {
        b.iter(|| parse_head(std::hint::black_box(head), &limits))
    });
    group.finish();
}

fn chunked(c: &mut Criterion) {
    let mut body = Vec::new();
    for _ in 0..64 {
        body.extend_from_slice(b"4000\r\n");
        body.extend(std::iter::repeat_n(b'x', 0x4000));
        body.extend_from_slice(b"\r\n");
    }
    body.extend_from_slice(b"0\r\n\r\n");
    let mut group = c.benchmark_group("chunked");
    group.throughput(Throughput::Bytes(body.len() as u64));
    group.bench_function("decode_1MiB_in_16KiB_chunks", |b| {
        b.iter(|| {
            let mut decoder = ChunkedDecoder::new();
            let mut at = 0;
            let mut data = 0;
            while let Ok((used, step)) = decoder.step(&body[at..]) {
                if let modgate::http::chunked::Step::Data { start, end } = step {
                    data += end - start;
                }
                at += used;
                if decoder.is_done() || used == 0 {
                    break;
                }
            }
            data
        })
    });
    group.finish();
}

/// What a request adds to its shard's metrics: one answer (route, status, time) and one check.
fn metrics_per_request(c: &mut Criterion) {
    use modgate::api::Route;
    use modgate::error::ErrorKind;
    use modgate::metrics::Metrics;
    let metrics = Metrics::new(true);
    let mut group = c.benchmark_group("metrics");
    group.throughput(Throughput::Elements(1));
    group.bench_function("answer_and_check", |b| {
        b.iter(|| {
            metrics.request(Some(Route::Text), 200, None, std::hint::black_box(850));
            metrics.check("default", "text", "accept");
        })
    });
    group.bench_function("refusal", |b| {
        b.iter(|| {
            metrics.request(
                Some(Route::Image),
                429,
                Some(ErrorKind::RateLimited),
                std::hint::black_box(40),
            )
        })
    });
    let off = Metrics::new(false);
    group.bench_function("answer_and_check_off", |b| {
        b.iter(|| {
            off.request(Some(Route::Text), 200, None, std::hint::black_box(850));
            off.check("default", "text", "accept");
        })
    });
    group.finish();
}

criterion_group!(benches, head_parsing, chunked, metrics_per_request);
criterion_main!(benches);
