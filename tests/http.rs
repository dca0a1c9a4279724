//! HTTP/1.1 behaviour of the real server: keep-alive, pipelining, HTTP/1.0, limits, smuggling
//! defences, timeouts, Origin, 404/405, the connection cap, TLS and the graceful stop.

mod common;

use std::collections::HashSet;
use std::time::{Duration, Instant};

use common::*;

fn key_header(server: &Server) -> String {
    format!(
        "Authorization: Bearer {}\r\n",
        server.demo_key.as_deref().expect("demo key")
    )
}

#[test]
fn keep_alive_serves_many_requests_on_one_connection() {
    let server = Server::start();
    let mut conn = RawConn::connect(server.addr);
    let mut ids = HashSet::new();
    for _ in 0..5 {
        conn.send(b"GET /health HTTP/1.1\r\nHost: t\r\n\r\n");
        let response = conn.read_response().unwrap();
        assert_eq!(response.status, 200);
        assert_eq!(response.json()["status"], "ok");
        assert_schema("Health", &response.json());
        assert_eq!(response.header("connection"), None);
        ids.insert(response.header("x-request-id").unwrap().to_owned());
    }
    assert_eq!(ids.len(), 5, "every answer has its own request id");
}

#[test]
fn pipelined_requests_are_answered_in_order() {
    let server = Server::start();
    let key = key_header(&server);
    let mut conn = RawConn::connect(server.addr);
    let batch = format!(
        "GET /health HTTP/1.1\r\nHost: t\r\n\r\nGET /v1/workflows HTTP/1.1\r\nHost: t\r\n{key}\r\nGET /nope HTTP/1.1\r\nHost: t\r\n\r\nGET /health HTTP/1.1\r\nHost: t\r\n\r\n"
    );
    conn.send(batch.as_bytes());
    let statuses: Vec<u16> = (0..4)
        .map(|_| conn.read_response().unwrap().status)
        .collect();
    assert_eq!(statuses, [200, 200, 404, 200]);
}

#[test]
fn http10_clients() {
    let server = Server::start();
    let response = raw_request(server.addr, b"GET /health HTTP/1.0\r\n\r\n").unwrap();
    assert_eq!(response.status, 200);
    assert_eq!(response.header("connection"), Some("close"));

    let mut conn = RawConn::connect(server.addr);
    conn.send(b"GET /health HTTP/1.0\r\nConnection: keep-alive\r\n\r\n");
    let first = conn.read_response().unwrap();
    assert_eq!(first.header("connection"), Some("keep-alive"));
    conn.send(b"GET /health HTTP/1.0\r\n\r\n");
    assert_eq!(conn.read_response().unwrap().status, 200);
    assert!(conn.is_closed());
}

#[test]
fn connection_close_is_honoured() {
    let server = Server::start();
    let mut conn = RawConn::connect(server.addr);
    conn.send(b"GET /health HTTP/1.1\r\nHost: t\r\nConnection: close\r\n\r\n");
    let response = conn.read_response().unwrap();
    assert_eq!(response.header("connection"), Some("close"));
    assert!(conn.is_closed());
}

#[test]
fn head_requests_get_headers_only() {
    let server = Server::start();
    let mut conn = RawConn::connect(server.addr);
    conn.send(b"HEAD /health HTTP/1.1\r\nHost: t\r\n\r\nGET /health HTTP/1.1\r\nHost: t\r\n\r\n");
    // The HEAD answer announces the length of the GET body but carries none: if it did, the
    // next answer would not parse.
    let mut text = Vec::new();
    let deadline = Instant::now() + Duration::from_secs(5);
    while !String::from_utf8_lossy(&text).contains("{\"status\":\"ok\"}") {
        assert!(Instant::now() < deadline);
        let mut chunk = [0u8; 4096];
        let n = std::io::Read::read(&mut conn.stream, &mut chunk).unwrap();
        text.extend_from_slice(&chunk[..n]);
    }
    let text = String::from_utf8(text).unwrap();
    assert_eq!(text.matches("HTTP/1.1 200 OK").count(), 2);
    assert_eq!(text.matches("{\"status\":\"ok\"}").count(), 1, "{text}");
}

/// A HEAD request refused before it reaches a route (its head cannot be read) gets the
/// refusal's status and headers, and no content: its `content-length` is the body a GET
/// would have had.
#[test]
fn a_refused_head_request_gets_no_content() {
    let server = Server::start();
    let mut conn = RawConn::connect(server.addr);
    conn.send(b"HEAD /health HTTP/1.1\r\nHost: t\r\nBad\nField: x\r\n\r\n");
    let mut text = Vec::new();
    let _ = std::io::Read::read_to_end(&mut conn.stream, &mut text);
    let text = String::from_utf8(text).unwrap();
    assert!(text.starts_with("HTTP/1.1 400 "), "{text}");
    let (head, content) = text.split_once("\r\n\r\n").expect("a whole head");
    assert!(head.contains("content-length: "), "{head}");
    assert_eq!(content, "", "no content after the head");
}

/// Each case: request bytes, expected status. The connection must be closed afterwards.
#[test]
fn smuggling_shapes_get_400_and_a_closed_connection() {
    let server = Server::start();
    let cases: &[&[u8]] = &[
        b"POST /v1/workflows HTTP/1.1\r\nHost: t\r\nContent-Length: 5\r\nTransfer-Encoding: chunked\r\n\r\n0\r\n\r\n",
        b"POST /v1/workflows HTTP/1.1\r\nHost: t\r\nTransfer-Encoding: chunked\r\nContent-Length: 5\r\n\r\n0\r\n\r\n",
        b"GET /health HTTP/1.1\r\nHost: t\r\nContent-Length: 0\r\nContent-Length: 0\r\n\r\n",
        b"GET /health HTTP/1.1\r\nHost: t\r\nContent-Length: 1, 1\r\n\r\nx",
        b"GET /health HTTP/1.1\r\nHost: t\r\nContent-Length: -1\r\n\r\n",
        b"GET /health HTTP/1.1\r\nHost: t\r\nContent-Length: abc\r\n\r\n",
        b"GET /health HTTP/1.1\r\nHost: t\r\nTransfer-Encoding: gzip\r\n\r\n",
        b"GET /health HTTP/1.1\r\nHost: t\r\nTransfer-Encoding: chunked, identity\r\n\r\n",
        b"GET /health HTTP/1.1\r\nHost: t\r\nTransfer-Encoding: chunked\r\nTransfer-Encoding: chunked\r\n\r\n",
        b"GET /health HTTP/1.1\r\nHost: t\r\nContent-Length : 0\r\n\r\n",
        b"GET /health HTTP/1.1\r\n\r\n",
        b"GET /health HTTP/1.1\r\nHost: a\r\nHost: b\r\n\r\n",
        b"GET /health HTTP/1.0\r\nTransfer-Encoding: chunked\r\n\r\n0\r\n\r\n",
        // A line ended by LF alone: a proxy that keeps it inside the field would see no body
        // and two requests where this would read one with a body.
        b"POST /v1/workflows HTTP/1.1\r\nHost: t\r\nX: 1\nContent-Length: 38\r\n\r\nGET /v1/workflows HTTP/1.1\r\nHost: t\r\n\r\n",
        b"GET /health HTTP/1.1\nHost: t\n\n",
        b"\x16\x03\x01\x02\x00\x01\x00\x01\xfc\x03\x03\r\n\r\n",
    ];
    for case in cases {
        let mut conn = RawConn::connect(server.addr);
        conn.send(case);
        let response = conn.read_response().unwrap();
        let body = response.json();
        assert_error(response.status, &body, 400, "bad_request", false);
        assert_eq!(
            response.header("connection"),
            Some("close"),
            "{:?}",
            String::from_utf8_lossy(case)
        );
        assert!(response.header("x-request-id").is_some());
        assert!(
            conn.is_closed(),
            "connection left open after {:?}",
            String::from_utf8_lossy(case)
        );
    }
}

#[test]
fn size_limits_of_the_head() {
    let server = Server::start_with(Options {
        config: "[server]\nhead_bytes_max = 4096\nuri_bytes_max = 1024\n".into(),
        ..Options::default()
    });
    let long_uri = format!(
        "GET /health?{} HTTP/1.1\r\nHost: t\r\n\r\n",
        "a".repeat(2000)
    );
    let response = raw_request(server.addr, long_uri.as_bytes()).unwrap();
    assert_error(response.status, &response.json(), 414, "bad_request", false);

    let big_head = format!(
        "GET /health HTTP/1.1\r\nHost: t\r\nX-Big: {}\r\n\r\n",
        "b".repeat(5000)
    );
    let response = raw_request(server.addr, big_head.as_bytes()).unwrap();
    assert_error(response.status, &response.json(), 431, "bad_request", false);

    let mut many = String::from("GET /health HTTP/1.1\r\nHost: t\r\n");
    for i in 0..100 {
        many.push_str(&format!("X-{i}: v\r\n"));
    }
    many.push_str("\r\n");
    let response = raw_request(server.addr, many.as_bytes()).unwrap();
    assert_error(response.status, &response.json(), 431, "bad_request", false);

    // A compatible path gets the compatible envelope even for a head error.
    let long_compat = format!(
        "GET /1.0/check-workflow.json?url={} HTTP/1.1\r\nHost: t\r\n\r\n",
        "a".repeat(2000)
    );
    let response = raw_request(server.addr, long_compat.as_bytes()).unwrap();
    assert_error(response.status, &response.json(), 414, "bad_request", true);
}

#[test]
fn a_body_on_a_route_that_takes_none_is_413() {
    let server = Server::start();
    let mut conn = RawConn::connect(server.addr);
    conn.send(b"GET /health HTTP/1.1\r\nHost: t\r\nContent-Length: 3\r\n\r\nabc");
    let response = conn.read_response().unwrap();
    assert_error(
        response.status,
        &response.json(),
        413,
        "body_too_large",
        false,
    );
    let mut conn = RawConn::connect(server.addr);
    conn.send(b"GET /v1/workflows HTTP/1.1\r\nHost: t\r\nTransfer-Encoding: chunked\r\n\r\n3\r\nabc\r\n0\r\n\r\n");
    let response = conn.read_response().unwrap();
    assert_error(
        response.status,
        &response.json(),
        413,
        "body_too_large",
        false,
    );
}

#[test]
fn unsupported_expectation_is_417() {
    let server = Server::start();
    let response = raw_request(
        server.addr,
        b"GET /health HTTP/1.1\r\nHost: t\r\nExpect: 200-ok\r\n\r\n",
    )
    .unwrap();
    assert_error(response.status, &response.json(), 417, "bad_request", false);
}

#[test]
fn slow_heads_are_cut_off_with_408() {
    let server = Server::start_with(Options {
        config: "[server]\nheader_read_timeout_ms = 500\n".into(),
        ..Options::default()
    });
    let mut conn = RawConn::connect(server.addr);
    let started = Instant::now();
    conn.send(b"GET /health HTTP/1.1\r\nHost: t\r\n");
    std::thread::sleep(Duration::from_millis(200));
    conn.send(b"X-Slow: 1\r\n");
    let response = conn.read_response().unwrap();
    assert!(
        started.elapsed() >= Duration::from_millis(450),
        "{:?}",
        started.elapsed()
    );
    assert_error(
        response.status,
        &response.json(),
        408,
        "request_timeout",
        false,
    );
    assert_eq!(response.header("connection"), Some("close"));
    assert!(conn.is_closed());

    // An empty line after a request (some clients end a body with CRLF) starts no request:
    // the connection waits for the next one as an idle one, not for a head due in 500 ms.
    let mut conn = RawConn::connect(server.addr);
    conn.send(b"GET /health HTTP/1.1\r\nHost: t\r\n\r\n\r\n");
    assert_eq!(conn.read_response().unwrap().status, 200);
    std::thread::sleep(Duration::from_millis(800));
    conn.send(b"GET /health HTTP/1.1\r\nHost: t\r\n\r\n");
    assert_eq!(conn.read_response().unwrap().status, 200);

    // A client that connects and sends nothing is closed too, without an answer.
    let mut silent = RawConn::connect(server.addr);
    let started = Instant::now();
    assert!(silent.is_closed());
    assert!(started.elapsed() < Duration::from_secs(5));
}

#[test]
fn idle_keep_alive_connections_are_closed() {
    let server = Server::start_with(Options {
        config: "[server]\nkeepalive_idle_timeout_ms = 300\n".into(),
        ..Options::default()
    });
    let mut conn = RawConn::connect(server.addr);
    conn.send(b"GET /health HTTP/1.1\r\nHost: t\r\n\r\n");
    assert_eq!(conn.read_response().unwrap().status, 200);
    let started = Instant::now();
    assert!(conn.is_closed());
    let waited = started.elapsed();
    assert!(
        waited >= Duration::from_millis(250) && waited < Duration::from_secs(5),
        "{waited:?}"
    );
}

#[test]
fn unknown_paths_and_wrong_methods() {
    let server = Server::start();
    let (status, _, body) = get(&server.url("/v2/nothing"), &[]);
    assert_error(status, &body, 404, "bad_request", false);
    // Only the compatible routes themselves use the compatible envelope.
    let (status, _, body) = get(&server.url("/1.0/nothing.json"), &[]);
    assert_error(status, &body, 404, "bad_request", false);
    let mut response = agent().post(&server.url("/v1/workflows")).send("").unwrap();
    let status = response.status().as_u16();
    let allow = response
        .headers()
        .get("allow")
        .map(|v| v.to_str().unwrap().to_owned());
    let body: serde_json::Value =
        serde_json::from_str(&response.body_mut().read_to_string().unwrap()).unwrap();
    assert_error(status, &body, 405, "bad_request", false);
    assert_eq!(allow.as_deref(), Some("GET, HEAD"));
    let response = raw_request(server.addr, b"DELETE /health HTTP/1.1\r\nHost: t\r\n\r\n").unwrap();
    assert_error(response.status, &response.json(), 405, "bad_request", false);
    assert_eq!(response.header("allow"), Some("GET, HEAD"));
}

#[test]
fn origin_is_refused_everywhere_first() {
    let server = Server::start();
    for path in ["/health", "/openapi.json", "/v1/workflows", "/nope"] {
        let (status, headers, body) = get(&server.url(path), &[("Origin", "https://example.com")]);
        assert_error(status, &body, 403, "forbidden", false);
        assert!(headers.get("x-request-id").is_some());
    }
    // Before the method check, and in the compatible envelope on a compatible path.
    let response = raw_request(
        server.addr,
        b"DELETE /1.0/check-workflow.json HTTP/1.1\r\nHost: t\r\nOrigin: null\r\n\r\n",
    )
    .unwrap();
    let body = response.json();
    assert_error(response.status, &body, 403, "forbidden", true);
    assert_eq!(body["request"]["operations"], 0);
    assert_eq!(
        body["request"]["id"],
        response.header("x-request-id").unwrap()
    );
}

#[test]
fn health_and_openapi() {
    let server = Server::start();
    let (status, _, body) = get(&server.url("/health"), &[]);
    assert_eq!((status, body["status"].as_str()), (200, Some("ok")));
    let (status, headers, doc) = get(&server.url("/openapi.json"), &[]);
    assert_eq!(status, 200);
    assert_eq!(headers.get("content-type"), Some("application/json"));
    assert_eq!(doc["openapi"], "3.1.0");
    assert_eq!(doc["info"]["version"], "0.1.0");
    for path in [
        "/v1/image",
        "/v1/text",
        "/v1/workflows",
        "/1.0/check-workflow.json",
        "/1.0/text/check-workflow.json",
        "/health",
        "/openapi.json",
        "/v1/moderations",
        "/v1alpha1/comments:analyze",
        "/$discovery/rest",
        "/1.0/check.json",
        "/v1/feedback",
        "/v1/checks/{request_id}",
    ] {
        assert!(doc["paths"][path].is_object(), "{path} missing");
    }
    for scheme in ["bearer", "apiKeyHeader", "apiSecret"] {
        assert!(
            doc["components"]["securitySchemes"][scheme].is_object(),
            "{scheme}"
        );
    }
}

#[test]
fn request_ids_are_unique_across_shards_and_restarts() {
    let data = tempfile::tempdir().unwrap();
    let mut ids = HashSet::new();
    for _ in 0..2 {
        let server = Server::start_with(Options {
            data: Some(data.path().to_owned()),
            ..Options::default()
        });
        // New connections spread over both shards.
        for _ in 0..100 {
            let response =
                raw_request(server.addr, b"GET /health HTTP/1.1\r\nHost: t\r\n\r\n").unwrap();
            let id = response.header("x-request-id").unwrap().to_owned();
            assert_eq!(id.len(), 26);
            assert!(ids.insert(id), "duplicate request id");
        }
    }
}

#[test]
fn connections_over_the_cap_get_503() {
    let server = Server::start_with(Options {
        cores: Some(1),
        config: "[server]\nconnections_per_shard_max = 2\n".into(),
        ..Options::default()
    });
    let mut kept = Vec::new();
    for _ in 0..2 {
        let mut conn = RawConn::connect(server.addr);
        conn.send(b"GET /health HTTP/1.1\r\nHost: t\r\n\r\n");
        assert_eq!(conn.read_response().unwrap().status, 200);
        kept.push(conn);
    }
    let mut third = RawConn::connect(server.addr);
    let response = third.read_response().unwrap();
    assert_error(response.status, &response.json(), 503, "busy", false);
    assert!(response.header("retry-after").is_some());
    assert!(third.is_closed());
    drop(kept);
    // Room again once the others left.
    let deadline = Instant::now() + Duration::from_secs(5);
    loop {
        let response =
            raw_request(server.addr, b"GET /health HTTP/1.1\r\nHost: t\r\n\r\n").unwrap();
        if response.status == 200 {
            break;
        }
        assert!(Instant::now() < deadline, "the cap never freed");
        std::thread::sleep(Duration::from_millis(50));
    }
}

/// A self-signed certificate for `localhost` written to `dir`: its PEM paths and its DER.
fn self_signed(
    dir: &std::path::Path,
) -> (
    std::path::PathBuf,
    std::path::PathBuf,
    rustls::pki_types::CertificateDer<'static>,
) {
    let certified = rcgen::generate_simple_self_signed(vec!["localhost".to_owned()]).unwrap();
    let cert_path = dir.join("cert.pem");
    let key_path = dir.join("key.pem");
    std::fs::write(&cert_path, certified.cert.pem()).unwrap();
    std::fs::write(&key_path, certified.signing_key.serialize_pem()).unwrap();
    (cert_path, key_path, certified.cert.der().clone())
}

/// Issue 14: a TLS connection over the cap was closed without being counted in
/// `modgate_connections_refused_total` (the plain-text one was).
#[test]
fn tls_connections_over_the_cap_are_closed_and_counted() {
    let dir = tempfile::tempdir().unwrap();
    let (cert_path, key_path, _) = self_signed(dir.path());
    let server = Server::start_with(Options {
        cores: Some(1),
        tls: Some((cert_path, key_path)),
        config: "[server]\nconnections_per_shard_max = 2\n".into(),
        ..Options::default()
    });
    let refused = || {
        server
            .scrape()
            .value("modgate_connections_refused_total", &[])
            .unwrap_or(0.0)
    };
    assert_eq!(refused(), 0.0);
    // Two connections that have not finished a handshake hold the cap.
    let kept: Vec<_> = (0..2)
        .map(|_| std::net::TcpStream::connect(server.addr).unwrap())
        .collect();
    std::thread::sleep(Duration::from_millis(200));
    let mut third = std::net::TcpStream::connect(server.addr).unwrap();
    third
        .set_read_timeout(Some(Duration::from_secs(5)))
        .unwrap();
    let mut byte = [0u8; 1];
    let read = std::io::Read::read(&mut third, &mut byte);
    assert!(
        matches!(read, Ok(0))
            || read.is_err_and(|e| e.kind() == std::io::ErrorKind::ConnectionReset),
        "the connection over the cap was not closed"
    );
    assert_eq!(refused(), 1.0);
    drop(kept);
}

#[test]
fn graceful_stop_finishes_requests_in_flight() {
    let mut server = Server::start();
    // An idle keep-alive connection, and one in the middle of a request head.
    let mut idle = RawConn::connect(server.addr);
    idle.send(b"GET /health HTTP/1.1\r\nHost: t\r\n\r\n");
    assert_eq!(idle.read_response().unwrap().status, 200);
    let mut in_flight = RawConn::connect(server.addr);
    in_flight.send(b"GET /health HTTP/1.1\r\nHost: t\r\n");
    std::thread::sleep(Duration::from_millis(100));

    server.signal(15);
    std::thread::sleep(Duration::from_millis(300));
    // The idle connection is closed; the request in flight is answered, with health 503.
    assert!(idle.is_closed());
    in_flight.send(b"\r\n");
    let response = in_flight.read_response().unwrap();
    assert_eq!(response.status, 503);
    assert_eq!(response.json()["status"], "unavailable");
    assert_schema("Health", &response.json());
    assert_eq!(response.header("connection"), Some("close"));
    let status = server.wait_exit(Duration::from_secs(10));
    assert!(status.success(), "exit status {status:?}");
    assert!(
        std::net::TcpStream::connect(server.addr).is_err(),
        "listener still open"
    );
}

#[test]
fn tls_with_alpn_http11() {
    let dir = tempfile::tempdir().unwrap();
    let (cert_path, key_path, cert_der) = self_signed(dir.path());
    let server = Server::start_with(Options {
        tls: Some((cert_path, key_path)),
        ..Options::default()
    });
    let root = ureq::tls::Certificate::from_der(&cert_der).to_owned();
    let agent: ureq::Agent = ureq::Agent::config_builder()
        .http_status_as_error(false)
        .tls_config(
            ureq::tls::TlsConfig::builder()
                .root_certs(ureq::tls::RootCerts::Specific(std::sync::Arc::new(vec![
                    root,
                ])))
                .build(),
        )
        .build()
        .into();
    let url = format!("https://localhost:{}/health", server.addr.port());
    let deadline = Instant::now() + Duration::from_secs(10);
    let mut response = loop {
        match agent.get(&url).call() {
            Ok(response) if response.status() == 200 => break response,
            _ if Instant::now() < deadline => std::thread::sleep(Duration::from_millis(50)),
            other => panic!("no healthy TLS answer: {:?}", other.map(|r| r.status())),
        }
    };
    assert_eq!(
        response.body_mut().read_to_string().unwrap(),
        r#"{"status":"ok"}"#
    );

    // ALPN: a raw rustls client offering h2 and http/1.1 gets http/1.1.
    let mut roots = rustls::RootCertStore::empty();
    roots.add(cert_der.clone()).unwrap();
    let provider = std::sync::Arc::new(rustls::crypto::ring::default_provider());
    let mut config = rustls::ClientConfig::builder_with_provider(provider)
        .with_safe_default_protocol_versions()
        .unwrap()
        .with_root_certificates(roots)
        .with_no_client_auth();
    config.alpn_protocols = vec![b"h2".to_vec(), b"http/1.1".to_vec()];
    let name = rustls::pki_types::ServerName::try_from("localhost").unwrap();
    let mut client = rustls::ClientConnection::new(std::sync::Arc::new(config), name).unwrap();
    let mut socket = std::net::TcpStream::connect(server.addr).unwrap();
    let mut tls = rustls::Stream::new(&mut client, &mut socket);
    std::io::Write::write_all(
        &mut tls,
        b"GET /health HTTP/1.1\r\nHost: localhost\r\nConnection: close\r\n\r\n",
    )
    .unwrap();
    let mut answer = String::new();
    let _ = std::io::Read::read_to_string(&mut tls, &mut answer);
    assert!(answer.starts_with("HTTP/1.1 200"), "{answer}");
    assert_eq!(client.alpn_protocol(), Some(&b"http/1.1"[..]));
}

/// Regression (review): answers to pipelined requests were all buffered before any was sent,
/// so a client that pipelines large answers and never reads could make the server hold
/// gigabytes. The write buffer is now flushed past 64 KiB.
#[test]
fn pipelined_large_answers_to_a_client_that_never_reads_stay_bounded() {
    let server = Server::start_with(Options {
        cores: Some(1),
        config: "[server]\nwrite_timeout_ms = 2000\n".into(),
        ..Options::default()
    });
    let rss_kib = || -> u64 {
        let status = std::fs::read_to_string(format!("/proc/{}/status", server.pid())).unwrap();
        status
            .lines()
            .find(|l| l.starts_with("VmRSS:"))
            .and_then(|l| l.split_whitespace().nth(1))
            .and_then(|v| v.parse().ok())
            .unwrap()
    };
    let before = rss_kib();
    let request = b"GET /openapi.json HTTP/1.1\r\nHost: t\r\n\r\n".repeat(400);
    let conns: Vec<RawConn> = (0..5)
        .map(|_| {
            let mut conn = RawConn::connect(server.addr);
            conn.send(&request);
            conn
        })
        .collect();
    std::thread::sleep(Duration::from_millis(700));
    let grown_mib = rss_kib().saturating_sub(before) / 1024;
    // Unbounded, this was about 70 MB per connection.
    assert!(grown_mib < 50, "the server grew by {grown_mib} MiB");
    drop(conns);
    let (status, _, _) = get(&server.url("/health"), &[]);
    assert_eq!(status, 200);
}

/// Regression (review): Origin is refused before framing errors (DESIGN: Origin first).
#[test]
fn origin_comes_before_framing_errors() {
    let server = Server::start();
    let response = raw_request(
        server.addr,
        b"POST /v1/text HTTP/1.1\r\nHost: t\r\nOrigin: https://x\r\nContent-Length: 1\r\nContent-Length: 2\r\n\r\n",
    )
    .unwrap();
    assert_error(response.status, &response.json(), 403, "forbidden", false);
}

/// Regression (review): Origin is refused before the head's size limits and grammar too.
#[test]
fn origin_comes_before_head_limits_and_grammar() {
    let server = Server::start_with(Options {
        config: "[server]\nhead_bytes_max = 4096\nuri_bytes_max = 1024\n".into(),
        ..Options::default()
    });
    let many_fields: String = (0..100).map(|i| format!("X-F{i}: 1\r\n")).collect();
    let heads = [
        format!("GET /health HTTP/1.1\r\nHost: t\r\nOrigin: x\r\n{many_fields}\r\n"),
        format!(
            "GET /health?{} HTTP/1.1\r\nHost: t\r\nOrigin: x\r\n\r\n",
            "a".repeat(2000)
        ),
        format!(
            "GET /health HTTP/1.1\r\nOrigin: x\r\nX-Big: {}\r\n\r\n",
            "b".repeat(5000)
        ),
        "GET /health HTTP/1.1\r\nHost: t\r\nOrigin: x\r\nBad Name: 1\r\n\r\n".to_owned(),
    ];
    for head in heads {
        let response = raw_request(server.addr, head.as_bytes()).unwrap();
        assert_error(response.status, &response.json(), 403, "forbidden", false);
    }
    // A compatible path: the compatible envelope.
    let long_compat = format!(
        "GET /1.0/check-workflow.json?url={} HTTP/1.1\r\nHost: t\r\nOrigin: x\r\n\r\n",
        "a".repeat(2000)
    );
    let response = raw_request(server.addr, long_compat.as_bytes()).unwrap();
    assert_error(response.status, &response.json(), 403, "forbidden", true);
}
