//! The wire fuzzer of issue 14: mutated requests over raw TCP against the real server, on every
//! route, from valid seeds (heads, keys in each place a key goes, queries, chunked bodies,
//! compatible forms, JSON and image bytes, and the image families of the hardening rounds:
//! compressed PNG metadata, many-scan JPEGs, tilings of finder patterns). The server must answer each one with a well-formed
//! response that is not a 500, or close the connection, within a bound; never panic (the
//! `modgate_panics_total` counter stays 0); keep answering `/health`; and stay under a stated
//! memory bound.
//!
//! The suite's run is short (`MODGATE_FUZZ_REQUESTS`, default 3,000). The long one:
//! `MODGATE_FUZZ_REQUESTS=200000 cargo test --release --test wire_fuzz -- --nocapture`;
//! `MODGATE_FUZZ_SEED=N` repeats a run (the seed is printed).

mod common;

use std::io::{Read, Write};
use std::net::{Shutdown, SocketAddr, TcpStream};
use std::sync::atomic::{AtomicBool, AtomicU64, Ordering};
use std::sync::{Arc, Mutex};
use std::time::{Duration, Instant};

use common::*;

/// Client threads sending at once.
const CLIENTS: u64 = 6;
/// An answer (or the close) must come within this: longer is a hang.
const ANSWER_WITHIN: Duration = Duration::from_secs(20);
/// Growth of resident memory over the warmed-up baseline the server must stay under: one
/// shard's buffers and what in-flight requests hold (the unauthenticated budget is lowered to
/// 32 MB for the run).
const MEMORY_GROWTH_MAX: u64 = 160 << 20;

/// Bytes that parsers treat specially, inserted by the mutator.
const TOKENS: &[&[u8]] = &[
    b"\r\n",
    b"\n",
    b"\r",
    b"\r\n\r\n",
    b":",
    b" ",
    b"\t",
    b"\0",
    b"\xff",
    "é".as_bytes(),
    "\u{202e}".as_bytes(),
    b"-1",
    b"0",
    b"18446744073709551616",
    b"99999999999",
    b"chunked",
    b"Transfer-Encoding: chunked\r\n",
    b"Content-Length: 7\r\n",
    b"Content-Length: 0\r\n",
    b"Expect: 100-continue\r\n",
    b"Connection: close\r\n",
    b"X-Api-Key: mg_live_AAAAAAAAAAA\xc3\xa9BBBBBBBBBBBBBBBBBBBBBBBBBBBBBBBB\r\n",
    b"Authorization: Bearer \r\n",
    b"%",
    b"%zz",
    b"%00",
    b"%c3%a9",
    b"&",
    b"=",
    b"?",
    b"+",
    b"\"",
    b"\\u0000",
    b"\\ud800",
    b"{",
    b"}",
    b"[",
    b"]",
    b"1e999",
    b"null",
    b"--",
    b"--boundary--\r\n",
    b"0\r\n\r\n",
    b"ffffffffffffffff\r\n",
    b"\xff\xd8\xff\xe0",
    b"\x89PNG\r\n\x1a\n",
    b"GIF89a",
    b"RIFF\0\0\0\0WEBPVP8 ",
];

/// Valid requests of every kind, the starting points of the mutations.
fn seeds(key: &str, addr: SocketAddr) -> Vec<Vec<u8>> {
    let jpeg = testimage("jpeg_baseline_chelsea_64x48.jpg");
    let text_json = r#"{"text":"call me at 555-0100, you idiot","workflow":"default","ref":"r-1","context":"a reply"}"#;
    let mut seeds = vec![
        b"GET /health HTTP/1.1\r\nHost: t\r\n\r\n".to_vec(),
        format!("GET /v1/workflows HTTP/1.1\r\nHost: t\r\nAuthorization: Bearer {key}\r\n\r\n")
            .into_bytes(),
        text_request(key, text_json),
        format!(
            "GET /1.0/check-workflow.json?workflow=default&url=http%3A%2F%2F{addr}%2Fhealth&api_user=u&api_secret={key} HTTP/1.1\r\nHost: t\r\n\r\n"
        )
        .into_bytes(),
        format!(
            "POST /v1/text?ref=q HTTP/1.1\r\nHost: t\r\nX-Api-Key: {key}\r\nContent-Type: application/json\r\nTransfer-Encoding: chunked\r\n\r\n"
        )
        .into_bytes()
        .into_iter()
        .chain(chunked(text_json.as_bytes(), 17))
        .collect(),
    ];
    let mut image = format!(
        "POST /v1/image?workflow=default HTTP/1.1\r\nHost: t\r\nX-Api-Key: {key}\r\nContent-Type: image/jpeg\r\nContent-Length: {}\r\n\r\n",
        jpeg.len()
    )
    .into_bytes();
    image.extend_from_slice(&jpeg);
    seeds.push(image);
    let (content_type, body) = form(&[
        ("api_user", "u"),
        ("api_secret", key),
        ("workflow", "default"),
        ("text", "hello, write to me at a@b.example"),
    ]);
    let mut text_form = format!(
        "POST /1.0/text/check-workflow.json HTTP/1.1\r\nHost: t\r\nContent-Type: {content_type}\r\nContent-Length: {}\r\n\r\n",
        body.len()
    )
    .into_bytes();
    text_form.extend_from_slice(&body);
    seeds.push(text_form);
    let boundary = "fuzzb";
    let mut body = format!(
        "--{boundary}\r\nContent-Disposition: form-data; name=\"api_secret\"\r\n\r\n{key}\r\n--{boundary}\r\nContent-Disposition: form-data; name=\"media\"; filename=\"a.jpg\"\r\nContent-Type: image/jpeg\r\n\r\n"
    )
    .into_bytes();
    body.extend_from_slice(&jpeg);
    body.extend_from_slice(format!("\r\n--{boundary}--\r\n").as_bytes());
    let mut image_form = format!(
        "POST /1.0/check-workflow.json HTTP/1.1\r\nHost: t\r\nContent-Type: multipart/form-data; boundary={boundary}\r\nContent-Length: {}\r\n\r\n",
        body.len()
    )
    .into_bytes();
    image_form.extend_from_slice(&body);
    seeds.push(image_form);
    // The image families of the hardening rounds, mutated like the rest: a PNG of compressed
    // metadata chunks that inflate to 24 MB, a progressive JPEG of many scans, an image tiled
    // with thin-ringed finder patterns on a workflow that reads QR codes.
    let luma: Vec<u8> = (0..64 * 48).map(|i| (i % 251) as u8).collect();
    let png = common::images::grey_png(&luma, 64, 48);
    let chunks: Vec<Vec<u8>> = [b"zTXt", b"iCCP", b"iTXt"]
        .iter()
        .map(|kind| common::images::png_metadata_chunk(kind, &common::images::zlib_zeros(8 << 20)))
        .collect();
    let families = [
        ("default", common::images::png_with_chunks(&png, 0, &chunks)),
        (
            "default",
            common::images::progressive_grey_jpeg(640, 480, 90),
        ),
        ("codes", thin_ringed_targets_webp(28)),
    ];
    for (workflow, file) in families {
        let mut request = format!(
            "POST /v1/image?workflow={workflow} HTTP/1.1\r\nHost: t\r\nX-Api-Key: {key}\r\nContent-Type: application/octet-stream\r\nContent-Length: {}\r\n\r\n",
            file.len()
        )
        .into_bytes();
        request.extend_from_slice(&file);
        seeds.push(request);
    }
    seeds
}

/// The workflow the image families' QR seed names.
const CODES_WORKFLOW: &str = "[workflows.codes]\ndescription = \"QR codes and what they carry.\"\nimage_checks = [\"qr\"]\n[workflows.codes.categories]\nqr_link = { review = 0.5, reject = 1.0 }\n";

/// One to four random edits of `bytes`.
fn mutate(rng: &mut fastrand::Rng, mut bytes: Vec<u8>) -> Vec<u8> {
    for _ in 0..rng.usize(1..=4) {
        let at = rng.usize(0..=bytes.len());
        match rng.u8(0..8) {
            0 if at < bytes.len() => bytes[at] = rng.u8(..),
            1 => {
                let token = TOKENS[rng.usize(..TOKENS.len())];
                bytes.splice(at..at, token.iter().copied());
            }
            2 => {
                let end = (at + rng.usize(0..64)).min(bytes.len());
                bytes.drain(at..end);
            }
            3 => {
                let end = (at + rng.usize(0..64)).min(bytes.len());
                let copy = bytes[at..end].to_vec();
                bytes.splice(at..at, copy);
            }
            4 => bytes.truncate(at),
            5 => {
                // A random key, of any bytes, wherever a key goes.
                let key: Vec<u8> = (0..rng.usize(0..80)).map(|_| rng.u8(..)).collect();
                let mut line = b"X-Api-Key: ".to_vec();
                line.extend_from_slice(&key);
                line.extend_from_slice(b"\r\n");
                let head_end = find(&bytes, b"\r\n").map_or(0, |i| i + 2);
                bytes.splice(head_end..head_end, line);
            }
            6 => {
                // A run of random bytes (image and JSON bodies, chunk sizes, headers).
                let run: Vec<u8> = (0..rng.usize(1..32)).map(|_| rng.u8(..)).collect();
                bytes.splice(at..at, run);
            }
            _ => {
                // Repeat a line: duplicate headers, fields, chunks.
                if let Some(start) = bytes[..at].iter().rposition(|b| *b == b'\n') {
                    if let Some(len) = find(&bytes[start + 1..], b"\n") {
                        let line = bytes[start + 1..start + 2 + len].to_vec();
                        bytes.splice(start + 1..start + 1, line);
                    }
                }
            }
        }
    }
    bytes
}

fn find(haystack: &[u8], needle: &[u8]) -> Option<usize> {
    haystack.windows(needle.len()).position(|w| w == needle)
}

/// What the server did with one request.
#[derive(Debug, Clone, Copy, PartialEq, Eq, PartialOrd, Ord)]
enum Outcome {
    Status(u16),
    /// Closed without an answer (a request cut short, or refused at the socket).
    Closed,
}

/// Sends `request`, half-closes, and reads until the server closes (a keep-alive answer is
/// followed by the server's idle close, so the first status line is what is kept).
fn exchange(addr: SocketAddr, request: &[u8]) -> Result<Outcome, String> {
    let mut stream = TcpStream::connect(addr).map_err(|e| format!("connect: {e}"))?;
    stream.set_read_timeout(Some(ANSWER_WITHIN)).unwrap();
    let _ = stream.write_all(request);
    let _ = stream.shutdown(Shutdown::Write);
    let started = Instant::now();
    let mut answer = Vec::new();
    let mut buf = [0u8; 16 << 10];
    loop {
        match stream.read(&mut buf) {
            Ok(0) => break,
            Ok(n) => {
                answer.extend_from_slice(&buf[..n]);
                // A status line and the head's end are enough.
                if find(&answer, b"\r\n\r\n").is_some() {
                    break;
                }
            }
            Err(e) if e.kind() == std::io::ErrorKind::ConnectionReset => break,
            Err(e) => {
                return Err(format!(
                    "no answer nor close within {:?} ({e})",
                    started.elapsed()
                ))
            }
        }
    }
    if answer.is_empty() {
        return Ok(Outcome::Closed);
    }
    let head = String::from_utf8_lossy(&answer);
    let status = head
        .strip_prefix("HTTP/1.1 ")
        .and_then(|rest| rest.get(..3))
        .and_then(|code| code.parse::<u16>().ok())
        .ok_or_else(|| format!("not an HTTP/1.1 answer: {:?}", &head[..head.len().min(80)]))?;
    Ok(Outcome::Status(status))
}

fn resident_bytes(pid: u32) -> u64 {
    let status = std::fs::read_to_string(format!("/proc/{pid}/status")).expect("proc status");
    status
        .lines()
        .find_map(|line| line.strip_prefix("VmRSS:"))
        .and_then(|rest| rest.split_whitespace().next())
        .and_then(|n| n.parse::<u64>().ok())
        .expect("VmRSS")
        * 1024
}

fn health(addr: SocketAddr) -> Option<u16> {
    raw_request(
        addr,
        b"GET /health HTTP/1.1\r\nHost: t\r\nConnection: close\r\n\r\n",
    )
    .ok()
    .map(|response| response.status)
}

#[test]
fn mutated_requests_never_panic_hang_or_grow_the_server() {
    let requests: u64 = std::env::var("MODGATE_FUZZ_REQUESTS")
        .ok()
        .and_then(|n| n.parse().ok())
        .unwrap_or(3_000);
    let seed: u64 = std::env::var("MODGATE_FUZZ_SEED")
        .ok()
        .and_then(|n| n.parse().ok())
        .unwrap_or_else(|| fastrand::u64(..));
    eprintln!("wire fuzz: {requests} requests, MODGATE_FUZZ_SEED={seed}");
    let server = Server::start_with(Options {
        cores: Some(1),
        config: "[limits]\nunauthenticated_upload_bytes_max = 33554432\nform_timeout_ms = 3000\nbody_read_timeout_ms = 3000\n".into(),
        ..Options::default()
    });
    let (key, _) = server.new_key("fuzz", "pro", &[]);
    server.import_workflows(CODES_WORKFLOW);
    let seeds = Arc::new(seeds(&key, server.addr));
    // Warm up on the seeds themselves: each is a valid request the server answers.
    for seed_request in seeds.iter() {
        let outcome = exchange(server.addr, seed_request).expect("a seed is answered");
        assert!(
            matches!(outcome, Outcome::Status(s) if s < 500),
            "seed answered {outcome:?}: {}",
            String::from_utf8_lossy(&seed_request[..seed_request.len().min(120)])
        );
    }
    std::thread::sleep(Duration::from_millis(300));
    let baseline = resident_bytes(server.pid());

    let peak = Arc::new(AtomicU64::new(baseline));
    let running = Arc::new(AtomicBool::new(true));
    let sampler = {
        let (peak, running, pid) = (peak.clone(), running.clone(), server.pid());
        std::thread::spawn(move || {
            while running.load(Ordering::Relaxed) {
                peak.fetch_max(resident_bytes(pid), Ordering::Relaxed);
                std::thread::sleep(Duration::from_millis(20));
            }
        })
    };
    let outcomes = Arc::new(Mutex::new(std::collections::BTreeMap::<Outcome, u64>::new()));
    let failures = Arc::new(Mutex::new(Vec::<String>::new()));
    let clients: Vec<_> = (0..CLIENTS)
        .map(|client| {
            let (seeds, outcomes, failures, addr, pid) = (
                seeds.clone(),
                outcomes.clone(),
                failures.clone(),
                server.addr,
                server.pid(),
            );
            std::thread::spawn(move || {
                let mut rng = fastrand::Rng::with_seed(seed ^ client.wrapping_mul(0x9e37_79b9));
                for n in 0..requests / CLIENTS {
                    let original = &seeds[rng.usize(..seeds.len())];
                    let request = mutate(&mut rng, original.clone());
                    let outcome = exchange(addr, &request);
                    let bad = match &outcome {
                        Ok(Outcome::Status(500)) => Some("500".to_owned()),
                        Ok(_) => None,
                        Err(problem) => Some(problem.clone()),
                    };
                    if let Some(problem) = bad {
                        failures.lock().unwrap().push(format!(
                            "{problem} for {:?}",
                            String::from_utf8_lossy(&request[..request.len().min(400)])
                        ));
                    }
                    if let Ok(outcome) = outcome {
                        *outcomes.lock().unwrap().entry(outcome).or_default() += 1;
                    }
                    if client == 0 && n % 2_000 == 1_999 {
                        eprintln!(
                            "wire fuzz: {} requests sent, resident memory {} MiB",
                            (n + 1) * CLIENTS,
                            resident_bytes(pid) >> 20
                        );
                    }
                    if n % 100 == 99 && health(addr) != Some(200) {
                        failures
                            .lock()
                            .unwrap()
                            .push(format!("/health not 200 after {n} requests"));
                    }
                }
            })
        })
        .collect();
    for client in clients {
        client.join().unwrap();
    }
    running.store(false, Ordering::Relaxed);
    sampler.join().unwrap();
    let grown = peak.load(Ordering::Relaxed).saturating_sub(baseline);
    eprintln!(
        "wire fuzz: answers {:?}; resident memory {} MiB at the start, at most {} MiB more",
        outcomes.lock().unwrap(),
        baseline >> 20,
        grown >> 20
    );
    let failures = failures.lock().unwrap();
    assert!(
        failures.is_empty(),
        "{} failures (seed {seed}), the first: {:?}",
        failures.len(),
        &failures[..failures.len().min(5)]
    );
    assert_eq!(health(server.addr), Some(200), "the server still answers");
    assert_eq!(
        server.scrape().value("modgate_panics_total", &[]),
        Some(0.0),
        "no request panicked (seed {seed})"
    );
    assert!(
        grown <= MEMORY_GROWTH_MAX,
        "resident memory grew by {} MiB, over the bound of {} MiB (seed {seed})",
        grown >> 20,
        MEMORY_GROWTH_MAX >> 20
    );
    let distinct = outcomes.lock().unwrap().len();
    assert!(
        distinct >= 4,
        "the mutations reach several outcomes, not one refusal: {distinct}"
    );
}
