//! Regression tests of issue 14 ("Hardening") through the real server, named after the
//! defects they pin. Defect 1 (a non-ASCII key) is in `tests/keys.rs`.

mod common;

use common::*;

/// Defect 5: `0\r\n\nGET /smuggled ...` was swallowed as trailers and the connection stayed
/// open. Trailers now follow the header grammar: 400 and close.
#[test]
fn chunked_trailers_with_a_bare_lf_are_refused_and_close_the_connection() {
    let server = Server::start();
    let key = server.demo_key.clone().unwrap();
    let mut conn = RawConn::connect(server.addr);
    conn.send(
        format!(
            "POST /v1/text HTTP/1.1\r\nHost: t\r\nX-Api-Key: {key}\r\nContent-Type: application/json\r\nTransfer-Encoding: chunked\r\n\r\nd\r\n{{\"text\":\"hi\"}}\r\n0\r\n\nGET /smuggled HTTP/1.1\r\nHost: x\r\n\r\n"
        )
        .as_bytes(),
    );
    let response = conn.read_response().expect("an answer");
    assert_error(response.status, &response.json(), 400, "bad_request", false);
    assert!(
        conn.is_closed(),
        "the connection is closed after a bad trailer"
    );
}

/// Defect 5: a `Content_Length` field is not `Content-Length`: the body it announces is not
/// read as this request's body.
#[test]
fn an_underscore_content_length_is_not_a_content_length() {
    let server = Server::start();
    let key = server.demo_key.clone().unwrap();
    let body = r#"{"text":"hi"}"#;
    let mut conn = RawConn::connect(server.addr);
    conn.send(
        format!(
            "POST /v1/text HTTP/1.1\r\nHost: t\r\nX-Api-Key: {key}\r\nContent-Type: application/json\r\nContent_Length: {}\r\n\r\n{body}",
            body.len()
        )
        .as_bytes(),
    );
    let response = conn.read_response().expect("an answer");
    assert_error(response.status, &response.json(), 400, "bad_request", false);
}

/// Also: an `<img src>` of the compatible GET route sends Fetch Metadata and no `Origin`.
#[test]
fn fetch_metadata_of_a_browser_is_forbidden() {
    let server = Server::start();
    let key = server.demo_key.clone().unwrap();
    let path =
        format!("/1.0/check-workflow.json?url=https%3A%2F%2Fexample.com%2Fa.jpg&api_secret={key}");
    let (status, _, body) = get(
        &server.url(&path),
        &[
            ("Sec-Fetch-Site", "cross-site"),
            ("Sec-Fetch-Mode", "no-cors"),
            ("Sec-Fetch-Dest", "image"),
        ],
    );
    assert_error(status, &body, 403, "forbidden", true);
    let (status, _, body) = get(
        &server.url("/v1/workflows"),
        &[("X-Api-Key", &key), ("Sec-Fetch-Site", "same-site")],
    );
    assert_error(status, &body, 403, "forbidden", false);
}

/// Also: every 401 names the schemes a key can be sent with.
#[test]
fn every_401_carries_www_authenticate() {
    let server = Server::start();
    let (status, headers, _) = get(&server.url("/v1/workflows"), &[]);
    assert_eq!(status, 401);
    let challenge = headers.get("www-authenticate").expect("WWW-Authenticate");
    assert!(challenge.starts_with("Bearer "), "{challenge}");
    let (status, headers, _) = get(
        &server.url("/1.0/check-workflow.json?url=x&api_secret=nope"),
        &[],
    );
    assert_eq!(status, 401);
    assert!(headers.get("www-authenticate").is_some());
    let (status, headers, _) = get(&server.url("/health"), &[]);
    assert_eq!(status, 200);
    assert!(headers.get("www-authenticate").is_none());
}

/// Defect 6: a journal that cannot commit (here its map is full, as a full disk would do)
/// answered 500 while `/health` said ok. Now: 503 `busy` with `Retry-After`, `/health` 503, and
/// both recover by themselves once the journal can commit again.
#[test]
fn a_journal_that_cannot_commit_answers_503_and_health_follows_until_it_recovers() {
    let server = Server::start_with(Options {
        cores: Some(1),
        config: "[journal]\nmap_bytes = 1048576\n".into(),
        ..Options::default()
    });
    let key = server.demo_key.clone().unwrap();
    let reference = "r".repeat(128);
    let body = format!(r#"{{"text":"hello","ref":"{reference}"}}"#);
    let request = format!(
        "POST /v1/text HTTP/1.1\r\nHost: t\r\nX-Api-Key: {key}\r\nContent-Type: application/json\r\nContent-Length: {}\r\n\r\n{body}",
        body.len()
    );
    let mut conn = RawConn::connect(server.addr);
    let mut refused = None;
    for _ in 0..20_000 {
        conn.send(request.as_bytes());
        let response = conn.read_response().expect("an answer");
        if response.status != 200 {
            refused = Some(response);
            break;
        }
    }
    let refused = refused.expect("the 1 MiB journal filled up");
    assert_error(refused.status, &refused.json(), 503, "busy", false);
    assert!(refused.header("retry-after").is_some());
    let (status, _, _) = get(&server.url("/health"), &[]);
    assert_eq!(status, 503, "/health follows the journal");
    // Room again (what an operator does by pruning, or what freeing the disk does).
    server.admin_ok(&["journal", "prune", "--before", "2100-01-01T00:00:00Z"]);
    let deadline = std::time::Instant::now() + std::time::Duration::from_secs(10);
    while get(&server.url("/health"), &[]).0 != 200 {
        assert!(
            std::time::Instant::now() < deadline,
            "/health did not recover"
        );
        std::thread::sleep(std::time::Duration::from_millis(100));
    }
    let (status, _, _) = post(
        &server.url("/v1/text"),
        &[("X-Api-Key", &key), ("Content-Type", "application/json")],
        br#"{"text":"hello again"}"#,
    );
    assert_eq!(status, 200);
}
