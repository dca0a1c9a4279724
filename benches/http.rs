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
    use modgate::error::ErrorKind;
    use modgate::metrics::Metrics;
    use modgate::route::Route;
    let metrics = Metrics::new(true);
    let mut group = c.benchmark_group("metrics");
    group.throughput(Throughput::Elements(1));
    group.bench_function("answer_and_check", |b| {
        b.iter(|| {
            metrics.request(Some(Route::Text), 200, None, std::hint::black_box(850));
            metrics.check("default", modgate::content::ContentKind::Text, "accept");
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
            off.check("default", modgate::content::ContentKind::Text, "accept");
        })
    });
    group.finish();
}

/// Routing a parsed path: a hit and a miss.
fn routing(c: &mut Criterion) {
    use modgate::route::Route;
    let mut group = c.benchmark_group("route");
    group.bench_function("find_v1_text", |b| {
        b.iter(|| Route::find(std::hint::black_box("/v1/text")))
    });
    group.bench_function("find_unknown", |b| {
        b.iter(|| Route::find(std::hint::black_box("/v2/unknown/path")))
    });
    group.finish();
}

/// The streaming multipart parser over a compatible image form with a 1 MB `media` part,
/// fed in 16 KiB pieces as a socket delivers it.
fn multipart_per_mb(c: &mut Criterion) {
    use modgate::http::multipart::{MultipartParser, PartInfo, PartSink};
    struct Count(usize);
    impl PartSink for Count {
        type Error = ();
        fn part_start(&mut self, _: &PartInfo) -> Result<(), ()> {
            Ok(())
        }
        fn part_data(&mut self, data: &[u8]) -> Result<(), ()> {
            self.0 += data.len();
            Ok(())
        }
        fn part_end(&mut self) -> Result<(), ()> {
            Ok(())
        }
    }
    let boundary = "----modgateBenchBoundary7MA4YWxkTrZu0gW";
    let mut form = Vec::new();
    for (name, value) in [("api_secret", "mg_live_x"), ("workflow", "default")] {
        form.extend_from_slice(
            format!("--{boundary}\r\nContent-Disposition: form-data; name=\"{name}\"\r\n\r\n{value}\r\n")
                .as_bytes(),
        );
    }
    form.extend_from_slice(format!("--{boundary}\r\nContent-Disposition: form-data; name=\"media\"; filename=\"a.jpg\"\r\nContent-Type: image/jpeg\r\n\r\n").as_bytes());
    // Pseudo-random bytes: a JPEG body has no long runs of the boundary's first byte.
    let mut state = 0x2545_f491_u32;
    form.extend((0..1_000_000).map(|_| {
        state ^= state << 13;
        state ^= state >> 17;
        state ^= state << 5;
        state as u8
    }));
    form.extend_from_slice(format!("\r\n--{boundary}--\r\n").as_bytes());
    let mut group = c.benchmark_group("multipart");
    group.throughput(Throughput::Bytes(form.len() as u64));
    group.bench_function("image_form_1MB_in_16KiB_pieces", |b| {
        b.iter(|| {
            let mut parser = MultipartParser::new(boundary);
            let mut sink = Count(0);
            for piece in form.chunks(16 * 1024) {
                parser.feed(piece, &mut sink).unwrap();
            }
            assert!(parser.is_done());
            sink.0
        })
    });
    group.finish();
}

/// Deciding and writing the JSON answer of a text check on the `default` workflow.
fn json_answers(c: &mut Criterion) {
    use modgate::api::answer::{check_answer, CheckAnswer, Shape};
    use modgate::checks::board::ScoreBoard;
    use modgate::decision::decide;
    use modgate::store::records::WorkflowRecord;
    let definitions =
        modgate::workflow::parse_workflows(modgate::workflow::SHIPPED_WORKFLOWS).unwrap();
    let workflow = WorkflowRecord {
        name: "default".into(),
        version: 3,
        digest: [0; 32],
        definition: definitions["default"].clone(),
        updated_ms: 0,
    };
    let mut board = ScoreBoard::default();
    board.add("profanity", 0.97, "profanity_svm");
    board.add("pii_email", 0.95, "pii");
    for category in ["pii_phone", "pii_ip", "pii_iban", "pii_card"] {
        board.add(category, 0.0, "pii");
    }
    let mut group = c.benchmark_group("answer");
    group.bench_function("decide_and_write_json", |b| {
        b.iter(|| {
            let decision = decide(&workflow.definition, std::hint::black_box(&board));
            check_answer(&CheckAnswer {
                workflow: &workflow,
                decision: &decision,
                request_id: "01M7ZY37ZS047V43HTWPZ50NGE",
                reference: Some("comment-42"),
                time_ms: 0,
                shape: Shape::Native,
                properties: None,
                qr_codes: None,
                faces: None,
                text_lines: None,
                language: None,
                list_matches: None,
                image_hashes: None,
            })
        })
    });
    group.finish();
}

criterion_group!(
    benches,
    head_parsing,
    routing,
    chunked,
    multipart_per_mb,
    json_answers,
    metrics_per_request
);
criterion_main!(benches);
