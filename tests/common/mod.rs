//! Test harness: the real `modgate` binary on 127.0.0.1 with its own data directory, a real
//! HTTP client (ureq), raw TCP for framing tests, and the server's own OpenAPI document to
//! validate answers against.
#![allow(dead_code)]

pub mod engines;
pub mod fleet;
pub mod images;
pub mod prometheus;

use std::io::{BufRead, BufReader, Read, Write};
use std::net::{SocketAddr, TcpStream};
use std::process::{Child, Command, ExitStatus, Stdio};
use std::sync::OnceLock;
use std::time::{Duration, Instant};

use serde_json::Value;

pub const BIN: &str = env!("CARGO_BIN_EXE_modgate");
pub const MODELS: &str = concat!(env!("CARGO_MANIFEST_DIR"), "/models");

/// Settings for a test server.
#[derive(Clone, Default)]
pub struct Options {
    pub cores: Option<usize>,
    /// Extra configuration (TOML) appended to the test defaults.
    pub config: String,
    pub tls: Option<(std::path::PathBuf, std::path::PathBuf)>,
    /// Reuse this data directory (for restarts) instead of a fresh one.
    pub data: Option<std::path::PathBuf>,
    /// Models directory (default: the repository's `models/`).
    pub models: Option<std::path::PathBuf>,
    /// Keep the server's stderr (in [`Server::output`]) and leave `RUST_LOG` unset, so that
    /// the configuration's `[log]` decides.
    pub capture_logs: bool,
    /// The address to listen on (default `127.0.0.1:0`, a free port).
    pub listen: Option<String>,
}

pub struct Server {
    child: Option<Child>,
    pub addr: SocketAddr,
    /// Keeps the data directory alive as long as the server (unless `Options::data` was given).
    _tempdir: Option<tempfile::TempDir>,
    pub data: std::path::PathBuf,
    /// The key printed on a fresh data directory (organization `demo`, plan `free`).
    pub demo_key: Option<String>,
    pub stdout: Vec<String>,
    /// The `/metrics` listener (tests get one on a free port unless they configure it).
    pub metrics_addr: Option<SocketAddr>,
    /// Lines the server wrote after it started listening (stdout), and its stderr when
    /// [`Options::capture_logs`] is set.
    pub output: std::sync::Arc<std::sync::Mutex<Vec<String>>>,
    pub config_path: std::path::PathBuf,
}

impl Server {
    pub fn start() -> Server {
        Server::start_with(Options::default())
    }

    pub fn start_with(options: Options) -> Server {
        let (tempdir, data) = match &options.data {
            Some(path) => (None, path.clone()),
            None => {
                let dir = tempfile::tempdir().expect("tempdir");
                let path = dir.path().to_owned();
                (Some(dir), path)
            }
        };
        let config_path = data.join("modgate-test.toml");
        // Tests that are not about plan limits must not trip over them: the plans they do not
        // configure themselves get room to spare.
        let mut config = options.config.clone();
        for plan in ["free", "pro"] {
            if !config.contains(&format!("[plans.{plan}]")) {
                config.push_str(&format!(
                    "\n[plans.{plan}]\nrate_per_s = 100000\nrate_burst = 100000\nconcurrent_max = 1000\nquota_per_month = 1000000000\n"
                ));
            }
        }
        if !config.contains("[metrics]") {
            config.push_str("\n[metrics]\nlisten = \"127.0.0.1:0\"\n");
        }
        std::fs::write(&config_path, &config).expect("config");
        let mut command = Command::new(BIN);
        command
            .args([
                "serve",
                "--listen",
                options.listen.as_deref().unwrap_or("127.0.0.1:0"),
                "--data",
            ])
            .arg(&data)
            .arg("--config")
            .arg(&config_path)
            .args(["--cores", &options.cores.unwrap_or(2).to_string()])
            .arg("--models")
            .arg(options.models.clone().unwrap_or_else(|| MODELS.into()))
            .stdout(Stdio::piped());
        if options.capture_logs {
            command.stderr(Stdio::piped()).env_remove("RUST_LOG");
        } else {
            command.stderr(Stdio::inherit()).env("RUST_LOG", "warn");
        }
        if let Some((cert, key)) = &options.tls {
            command
                .arg("--tls-cert")
                .arg(cert)
                .arg("--tls-key")
                .arg(key);
        }
        let mut child = command.spawn().expect("spawn modgate");
        let output = std::sync::Arc::new(std::sync::Mutex::new(Vec::new()));
        if let Some(stderr) = child.stderr.take() {
            let output = output.clone();
            std::thread::spawn(move || {
                for line in BufReader::new(stderr).lines().map_while(Result::ok) {
                    output.lock().unwrap().push(line);
                }
            });
        }
        let stdout = child.stdout.take().expect("stdout");
        let mut lines = BufReader::new(stdout).lines();
        let mut seen = Vec::new();
        let mut demo_key = None;
        let mut metrics_addr = None;
        let addr = loop {
            let line = lines
                .next()
                .unwrap_or_else(|| panic!("server exited before listening; output: {seen:?}"))
                .expect("read stdout");
            if let Some(key) = line.strip_prefix("demo key: ") {
                demo_key = Some(key.to_owned());
            }
            if let Some(rest) = line.strip_prefix("metrics on http://") {
                metrics_addr = rest.trim_end_matches("/metrics").parse().ok();
            }
            if let Some(rest) = line.strip_prefix("modgate listening on ") {
                let url = rest.split_whitespace().next().expect("address");
                let host = url.split("://").nth(1).expect("scheme");
                break host.parse().expect("socket address");
            }
            seen.push(line);
        };
        // Keep the rest of stdout (and never let the server block on a full pipe).
        {
            let output = output.clone();
            std::thread::spawn(move || {
                for line in lines.map_while(Result::ok) {
                    output.lock().unwrap().push(line);
                }
            });
        }
        let server = Server {
            child: Some(child),
            addr,
            _tempdir: tempdir,
            data,
            demo_key,
            stdout: seen,
            metrics_addr,
            output,
            config_path,
        };
        if options.tls.is_none() {
            server.wait_healthy();
        }
        server
    }

    pub fn url(&self, path: &str) -> String {
        format!("http://{}{}", self.addr, path)
    }

    /// `GET /metrics`, checked by the strict reader.
    pub fn scrape(&self) -> prometheus::Exposition {
        let addr = self.metrics_addr.expect("a metrics listener");
        let response = raw_request(
            addr,
            b"GET /metrics HTTP/1.1\r\nHost: t\r\nConnection: close\r\n\r\n",
        )
        .expect("scrape");
        assert_eq!(response.status, 200);
        assert_eq!(
            response.header("content-type"),
            Some("text/plain; version=0.0.4; charset=utf-8")
        );
        let text = String::from_utf8(response.body).expect("UTF-8");
        prometheus::parse(&text).unwrap_or_else(|problem| panic!("{problem}\n{text}"))
    }

    /// Waits up to `timeout` for a line of [`Server::output`] that `matches`.
    pub fn wait_output(&self, timeout: Duration, matches: impl Fn(&str) -> bool) -> Option<String> {
        let deadline = Instant::now() + timeout;
        loop {
            if let Some(line) = self.output.lock().unwrap().iter().find(|l| matches(l)) {
                return Some(line.clone());
            }
            if Instant::now() > deadline {
                return None;
            }
            std::thread::sleep(Duration::from_millis(20));
        }
    }

    pub fn pid(&self) -> u32 {
        self.child.as_ref().expect("running").id()
    }

    pub fn wait_healthy(&self) {
        let deadline = Instant::now() + Duration::from_secs(30);
        loop {
            if let Ok(response) = raw_request(
                self.addr,
                b"GET /health HTTP/1.1\r\nHost: t\r\nConnection: close\r\n\r\n",
            ) {
                if response.status == 200 {
                    return;
                }
            }
            assert!(Instant::now() < deadline, "server never became healthy");
            std::thread::sleep(Duration::from_millis(20));
        }
    }

    /// Runs an admin command against this server's data directory.
    pub fn admin(&self, args: &[&str]) -> std::process::Output {
        admin(&self.data, args)
    }

    /// Imports workflow definitions (TOML, as `modgate workflow import` reads them).
    pub fn import_workflows(&self, toml: &str) {
        let file = self
            .data
            .join(format!("workflows-{}.toml", fastrand::u64(..)));
        std::fs::write(&file, toml).expect("workflow file");
        self.admin_ok(&["workflow", "import", file.to_str().expect("UTF-8 path")]);
    }

    /// Runs an admin command that must succeed; returns its stdout.
    pub fn admin_ok(&self, args: &[&str]) -> String {
        let output = self.admin(args);
        assert!(
            output.status.success(),
            "modgate {args:?} failed: {}",
            String::from_utf8_lossy(&output.stderr)
        );
        String::from_utf8(output.stdout).expect("utf-8")
    }

    /// Creates an organization (ignored if it exists) and a key; returns (key, key id).
    pub fn new_key(&self, org: &str, plan: &str, extra: &[&str]) -> (String, String) {
        let _ = self.admin(&["org", "create", org, "--plan", plan]);
        let mut args = vec!["key", "create", "--org", org];
        args.extend_from_slice(extra);
        let out = self.admin_ok(&args);
        let key = out.lines().next().expect("key line").to_owned();
        let id = key["mg_live_".len().."mg_live_".len() + 12].to_owned();
        (key, id)
    }

    pub fn signal(&self, signal: i32) {
        let status = Command::new("kill")
            .arg(format!("-{signal}"))
            .arg(self.pid().to_string())
            .status()
            .expect("kill");
        assert!(status.success());
    }

    /// Waits for the process to exit (after a signal), at most `timeout`.
    pub fn wait_exit(&mut self, timeout: Duration) -> ExitStatus {
        let child = self.child.as_mut().expect("running");
        let deadline = Instant::now() + timeout;
        loop {
            if let Some(status) = child.try_wait().expect("try_wait") {
                self.child = None;
                return status;
            }
            assert!(
                Instant::now() < deadline,
                "server did not exit in {timeout:?}"
            );
            std::thread::sleep(Duration::from_millis(20));
        }
    }

    pub fn kill(&mut self) {
        if let Some(mut child) = self.child.take() {
            let _ = child.kill();
            let _ = child.wait();
        }
    }
}

impl Drop for Server {
    fn drop(&mut self) {
        self.kill();
        // A killed server leaves its journal's staging on /dev/shm (the next start would move
        // it); with the data directory going too, nothing will.
        if self._tempdir.is_some() {
            if let Ok(staging) = std::fs::read_link(self.data.join("journal").join("staging")) {
                let _ = std::fs::remove_dir_all(staging);
            }
        }
    }
}

pub fn admin(data: &std::path::Path, args: &[&str]) -> std::process::Output {
    Command::new(BIN)
        .args(args)
        .arg("--data")
        .arg(data)
        .env("RUST_LOG", "warn")
        .output()
        .expect("run modgate")
}

/// A ureq agent that returns every status instead of erroring.
pub fn agent() -> ureq::Agent {
    ureq::Agent::config_builder()
        .http_status_as_error(false)
        .timeout_global(Some(Duration::from_secs(30)))
        .build()
        .into()
}

/// An answer read by the raw client.
#[derive(Debug)]
pub struct RawResponse {
    pub status: u16,
    pub headers: Vec<(String, String)>,
    pub body: Vec<u8>,
}

impl RawResponse {
    pub fn header(&self, name: &str) -> Option<&str> {
        self.headers
            .iter()
            .find(|(n, _)| n.eq_ignore_ascii_case(name))
            .map(|(_, v)| v.as_str())
    }

    pub fn json(&self) -> Value {
        serde_json::from_slice(&self.body)
            .unwrap_or_else(|e| panic!("not JSON ({e}): {}", String::from_utf8_lossy(&self.body)))
    }
}

/// A raw TCP connection for framing tests: write bytes, read answers one by one.
pub struct RawConn {
    pub stream: TcpStream,
    buf: Vec<u8>,
}

impl RawConn {
    pub fn connect(addr: SocketAddr) -> RawConn {
        let stream = TcpStream::connect(addr).expect("connect");
        stream
            .set_read_timeout(Some(Duration::from_secs(15)))
            .expect("timeout");
        RawConn {
            stream,
            buf: Vec::new(),
        }
    }

    /// A connection made elsewhere (for example bound to another source address).
    pub fn from_stream(stream: TcpStream) -> RawConn {
        RawConn {
            stream,
            buf: Vec::new(),
        }
    }

    pub fn send(&mut self, bytes: &[u8]) {
        self.stream.write_all(bytes).expect("write");
    }

    /// Reads one answer (head and `content-length` body). Interim 1xx answers are returned too.
    pub fn read_response(&mut self) -> std::io::Result<RawResponse> {
        loop {
            if let Some(end) = find(&self.buf, b"\r\n\r\n") {
                let head = String::from_utf8_lossy(&self.buf[..end]).into_owned();
                let mut lines = head.split("\r\n");
                let status_line = lines.next().unwrap_or_default();
                let status: u16 = status_line
                    .split(' ')
                    .nth(1)
                    .and_then(|s| s.parse().ok())
                    .unwrap_or_else(|| panic!("bad status line {status_line:?}"));
                let headers: Vec<(String, String)> = lines
                    .filter_map(|line| line.split_once(':'))
                    .map(|(n, v)| (n.trim().to_owned(), v.trim().to_owned()))
                    .collect();
                let length: usize = headers
                    .iter()
                    .find(|(n, _)| n.eq_ignore_ascii_case("content-length"))
                    .map_or(0, |(_, v)| v.parse().expect("content-length"));
                let body_start = end + 4;
                while self.buf.len() < body_start + length {
                    self.fill()?;
                }
                let body = self.buf[body_start..body_start + length].to_vec();
                self.buf.drain(..body_start + length);
                return Ok(RawResponse {
                    status,
                    headers,
                    body,
                });
            }
            self.fill()?;
        }
    }

    fn fill(&mut self) -> std::io::Result<()> {
        let mut chunk = [0u8; 65536];
        let n = self.stream.read(&mut chunk)?;
        if n == 0 {
            return Err(std::io::Error::new(
                std::io::ErrorKind::UnexpectedEof,
                "closed",
            ));
        }
        self.buf.extend_from_slice(&chunk[..n]);
        Ok(())
    }

    /// True if the server closed the connection (EOF or reset) within the read timeout.
    pub fn is_closed(&mut self) -> bool {
        let mut chunk = [0u8; 1024];
        match self.stream.read(&mut chunk) {
            Ok(0) => true,
            Ok(_) => false,
            Err(e) => !matches!(
                e.kind(),
                std::io::ErrorKind::WouldBlock | std::io::ErrorKind::TimedOut
            ),
        }
    }
}

fn find(haystack: &[u8], needle: &[u8]) -> Option<usize> {
    haystack.windows(needle.len()).position(|w| w == needle)
}

/// Sends one request on a new connection and reads one answer.
/// A `POST /v1/text` request with `body` (JSON), as raw bytes.
pub fn text_request(key: &str, body: &str) -> Vec<u8> {
    format!(
        "POST /v1/text HTTP/1.1\r\nHost: t\r\nX-Api-Key: {key}\r\nContent-Type: application/json\r\nContent-Length: {}\r\n\r\n{body}",
        body.len()
    )
    .into_bytes()
}

pub fn raw_request(addr: SocketAddr, bytes: &[u8]) -> std::io::Result<RawResponse> {
    let mut conn = RawConn::connect(addr);
    conn.stream.write_all(bytes)?;
    conn.read_response()
}

/// The shard that made a request id (bits 72 to 79 of its 128, SPEC's ULID layout as
/// `src/request_id.rs` writes it).
pub fn shard_of_request_id(id: &str) -> u8 {
    const ALPHABET: &[u8] = b"0123456789ABCDEFGHJKMNPQRSTVWXYZ";
    let bits = id.bytes().fold(0u128, |bits, c| {
        let digit = ALPHABET
            .iter()
            .position(|&a| a == c)
            .expect("a Crockford digit");
        (bits << 5) | digit as u128
    });
    (bits >> 72) as u8
}

/// A keep-alive connection that the kernel handed to shard `shard` (SO_REUSEPORT spreads new
/// connections by hash, so this opens connections until one lands there).
pub fn conn_on_shard(addr: SocketAddr, shard: u8) -> RawConn {
    for _ in 0..200 {
        let mut conn = RawConn::connect(addr);
        conn.send(b"GET /health HTTP/1.1\r\nHost: t\r\n\r\n");
        let response = conn.read_response().expect("an answer to /health");
        let id = response.header("x-request-id").expect("a request id");
        if shard_of_request_id(id) == shard {
            return conn;
        }
    }
    panic!("no connection landed on shard {shard}");
}

/// The OpenAPI document served by the binary under test (the same bytes for every server).
pub fn openapi() -> &'static Value {
    static DOC: OnceLock<Value> = OnceLock::new();
    DOC.get_or_init(|| {
        let text =
            std::fs::read_to_string(concat!(env!("CARGO_MANIFEST_DIR"), "/src/api/openapi.json"))
                .expect("openapi.json");
        serde_json::from_str(&text).expect("openapi.json is JSON")
    })
}

/// Validates `instance` against `#/components/schemas/{name}` of the OpenAPI document.
pub fn assert_schema(name: &str, instance: &Value) {
    let doc = openapi();
    let schema = serde_json::json!({
        "$ref": format!("#/components/schemas/{name}"),
        "components": doc["components"],
    });
    let validator = jsonschema::draft202012::new(&schema).expect("valid schema");
    let errors: Vec<String> = validator
        .iter_errors(instance)
        .map(|e| e.to_string())
        .collect();
    assert!(
        errors.is_empty(),
        "{name} violated by {instance}: {errors:?}"
    );
}

/// Checks an error answer: the envelope of the path, `code` equal to the status, the schema,
/// and the `type`. Returns the message.
pub fn assert_error(
    status: u16,
    body: &Value,
    expected_status: u16,
    expected_type: &str,
    compat: bool,
) -> String {
    let schema = if compat {
        "CompatErrorEnvelope"
    } else {
        "ErrorEnvelope"
    };
    assert_error_in(schema, status, body, expected_status, expected_type)
}

/// [`assert_error`] for the envelope `schema`.
fn assert_error_in(
    schema: &str,
    status: u16,
    body: &Value,
    expected_status: u16,
    expected_type: &str,
) -> String {
    assert_eq!(status, expected_status, "status; body {body}");
    assert_eq!(body["status"], "failure");
    assert_eq!(
        body["error"]["code"],
        u64::from(status),
        "code equals the status: {body}"
    );
    assert_eq!(body["error"]["type"], expected_type, "{body}");
    assert_schema(schema, body);
    body["error"]["message"]
        .as_str()
        .expect("message")
        .to_owned()
}

/// Asserts an error answer of Sightengine's own routes (`/1.0/check.json`,
/// `/1.0/text/check.json`): the status, Sightengine's `error.type`, the envelope's schema.
/// Returns the message.
pub fn assert_sightengine_error(
    status: u16,
    body: &Value,
    expected_status: u16,
    expected_type: &str,
) -> String {
    assert_error_in(
        "SightengineErrorEnvelope",
        status,
        body,
        expected_status,
        expected_type,
    )
}

/// A GET with optional headers through ureq; returns status, headers and JSON body.
pub fn get(url: &str, headers: &[(&str, &str)]) -> (u16, http_headers::Headers, Value) {
    let mut request = agent().get(url);
    for (name, value) in headers {
        request = request.header(*name, *value);
    }
    let mut response = request.call().expect("request");
    let status = response.status().as_u16();
    let headers = http_headers::Headers::from(response.headers());
    let text = response.body_mut().read_to_string().expect("body");
    let body = serde_json::from_str(&text).unwrap_or(Value::Null);
    (status, headers, body)
}

/// A POST through ureq with a body; returns status, headers and JSON body.
pub fn post(
    url: &str,
    headers: &[(&str, &str)],
    body: &[u8],
) -> (u16, http_headers::Headers, Value) {
    let mut request = agent().post(url);
    for (name, value) in headers {
        request = request.header(*name, *value);
    }
    let mut response = request.send(body).expect("request");
    let status = response.status().as_u16();
    let headers = http_headers::Headers::from(response.headers());
    let text = response.body_mut().read_to_string().expect("body");
    let body = serde_json::from_str(&text).unwrap_or(Value::Null);
    (status, headers, body)
}

/// `POST /v1/image{query}` of `body` as the raw file, with `key` in `X-Api-Key`; returns status,
/// headers and JSON body.
pub fn post_image(
    server: &Server,
    key: &str,
    query: &str,
    body: &[u8],
) -> (u16, http_headers::Headers, Value) {
    post(
        &server.url(&format!("/v1/image{query}")),
        &[
            ("X-Api-Key", key),
            ("Content-Type", "application/octet-stream"),
        ],
        body,
    )
}

/// `body` in chunked transfer coding, `piece` bytes per chunk, with the last chunk.
pub fn chunked(body: &[u8], piece: usize) -> Vec<u8> {
    let mut out = Vec::new();
    for part in body.chunks(piece) {
        out.extend_from_slice(format!("{:x}\r\n", part.len()).as_bytes());
        out.extend_from_slice(part);
        out.extend_from_slice(b"\r\n");
    }
    out.extend_from_slice(b"0\r\n\r\n");
    out
}

/// A multipart/form-data body of text fields, with its content type.
pub fn form(fields: &[(&str, &str)]) -> (String, Vec<u8>) {
    form_with_media(fields, None)
}

/// A multipart/form-data body of text fields and, when given, a `media` part (file name,
/// content type, bytes), with its content type.
pub fn form_with_media(
    fields: &[(&str, &str)],
    media: Option<(&str, &str, &[u8])>,
) -> (String, Vec<u8>) {
    let boundary = "----modgateTestBoundary7d1a";
    let mut body = Vec::new();
    for (name, value) in fields {
        body.extend_from_slice(
            format!("--{boundary}\r\nContent-Disposition: form-data; name=\"{name}\"\r\n\r\n")
                .as_bytes(),
        );
        body.extend_from_slice(value.as_bytes());
        body.extend_from_slice(b"\r\n");
    }
    if let Some((filename, content_type, bytes)) = media {
        body.extend_from_slice(
            format!("--{boundary}\r\nContent-Disposition: form-data; name=\"media\"; filename=\"{filename}\"\r\nContent-Type: {content_type}\r\n\r\n")
                .as_bytes(),
        );
        body.extend_from_slice(bytes);
        body.extend_from_slice(b"\r\n");
    }
    body.extend_from_slice(format!("--{boundary}--\r\n").as_bytes());
    (format!("multipart/form-data; boundary={boundary}"), body)
}

pub mod http_headers {
    /// Response headers, lower-cased names.
    #[derive(Debug, Clone)]
    pub struct Headers(pub Vec<(String, String)>);

    impl Headers {
        pub fn get(&self, name: &str) -> Option<&str> {
            self.0
                .iter()
                .find(|(n, _)| n.eq_ignore_ascii_case(name))
                .map(|(_, v)| v.as_str())
        }
    }

    impl From<&ureq::http::HeaderMap> for Headers {
        fn from(map: &ureq::http::HeaderMap) -> Self {
            Headers(
                map.iter()
                    .map(|(n, v)| (n.as_str().to_owned(), v.to_str().unwrap_or("").to_owned()))
                    .collect(),
            )
        }
    }
}

/// Waits until `what` holds: a change to the lists is matched by every shard once the lists
/// follower (polling every 100 ms) has read it, and in a fleet once the node has replayed it;
/// 20 s is a bound for a loaded test machine (each try may be a whole check), not the latency.
pub fn eventually(what: impl Fn() -> bool) {
    let deadline = Instant::now() + Duration::from_secs(20);
    while !what() {
        assert!(Instant::now() < deadline, "not seen within 20 s");
        std::thread::sleep(Duration::from_millis(50));
    }
}

/// The repository's test images (`models/image/testimages`).
pub fn testimage(name: &str) -> Vec<u8> {
    std::fs::read(format!("{MODELS}/image/testimages/{name}"))
        .unwrap_or_else(|e| panic!("{name}: {e}"))
}

/// A local HTTP server for `url` downloads. Paths:
/// `/img/NAME` the test image (its type from the extension), `/abrupt/NAME` the image without
/// a length, ended by closing the connection (over TLS without close_notify), `/redirect/N/NAME` N redirects
/// then the image, `/slow` answers after 12 s, `/big` announces 20 MB, `/big-unsized` sends
/// 16 MB without a length, `/text` an HTML page, `/chunked/NAME` the image chunked.
pub struct ImageServer {
    pub addr: SocketAddr,
}

impl ImageServer {
    pub fn start() -> ImageServer {
        let listener = std::net::TcpListener::bind("127.0.0.1:0").expect("bind");
        let addr = listener.local_addr().unwrap();
        std::thread::spawn(move || {
            for stream in listener.incoming().flatten() {
                std::thread::spawn(move || serve_image_request(stream));
            }
        });
        ImageServer { addr }
    }

    /// The same server over TLS, with a certificate for `localhost` signed by `authority`
    /// (so a client that trusts `authority` can check it).
    pub fn start_tls(
        certificate: rustls::pki_types::CertificateDer<'static>,
        key: rustls::pki_types::PrivateKeyDer<'static>,
    ) -> ImageServer {
        let provider = std::sync::Arc::new(rustls::crypto::ring::default_provider());
        let config = rustls::ServerConfig::builder_with_provider(provider)
            .with_safe_default_protocol_versions()
            .unwrap()
            .with_no_client_auth()
            .with_single_cert(vec![certificate], key)
            .unwrap();
        let config = std::sync::Arc::new(config);
        let listener = std::net::TcpListener::bind("127.0.0.1:0").expect("bind");
        let addr = listener.local_addr().unwrap();
        std::thread::spawn(move || {
            for stream in listener.incoming().flatten() {
                let config = config.clone();
                std::thread::spawn(move || {
                    let Ok(connection) = rustls::ServerConnection::new(config) else {
                        return;
                    };
                    let mut tls = rustls::StreamOwned::new(connection, stream);
                    if serve_image_request(&mut tls) {
                        tls.conn.send_close_notify();
                        let _ = tls.flush();
                    }
                });
            }
        });
        ImageServer { addr }
    }

    pub fn url(&self, path: &str) -> String {
        format!("http://{}{}", self.addr, path)
    }
}

/// Answers one request; false when the connection is to end abruptly (over TLS, without
/// close_notify).
fn serve_image_request<S: Read + Write>(mut stream: S) -> bool {
    let mut head = Vec::new();
    let mut byte = [0u8; 1];
    while !head.ends_with(b"\r\n\r\n") {
        match stream.read(&mut byte) {
            Ok(1) => head.push(byte[0]),
            _ => return true,
        }
    }
    let line = String::from_utf8_lossy(&head)
        .lines()
        .next()
        .unwrap_or("")
        .to_owned();
    let path = line.split(' ').nth(1).unwrap_or("/").to_owned();
    let content_type = |name: &str| match name.rsplit('.').next() {
        Some("jpg") => "image/jpeg",
        Some("png") => "image/png",
        Some("webp") => "image/webp",
        Some("gif") => "image/gif",
        _ => "application/octet-stream",
    };
    if let Some(name) = path.strip_prefix("/abrupt/") {
        let body = testimage(name);
        let _ = stream
            .write_all(
                format!(
                    "HTTP/1.1 200 OK\r\nContent-Type: {}\r\nConnection: close\r\n\r\n",
                    content_type(name)
                )
                .as_bytes(),
            )
            .and_then(|_| stream.write_all(&body))
            .and_then(|_| stream.flush());
        return false;
    }
    let _ = if let Some(name) = path.strip_prefix("/img/") {
        let body = testimage(name);
        stream
            .write_all(format!("HTTP/1.1 200 OK\r\nContent-Type: {}\r\nContent-Length: {}\r\nConnection: close\r\n\r\n", content_type(name), body.len()).as_bytes())
            .and_then(|_| stream.write_all(&body))
    } else if let Some(rest) = path.strip_prefix("/redirect/") {
        let (count, name) = rest.split_once('/').unwrap_or(("0", ""));
        let count: u32 = count.parse().unwrap_or(0);
        let next = if count <= 1 {
            format!("/img/{name}")
        } else {
            format!("/redirect/{}/{name}", count - 1)
        };
        stream.write_all(format!("HTTP/1.1 302 Found\r\nLocation: {next}\r\nContent-Length: 0\r\nConnection: close\r\n\r\n").as_bytes())
    } else if path == "/slow" {
        std::thread::sleep(Duration::from_secs(12));
        let body = testimage("png_rgb_coffee_16x12.png");
        stream
            .write_all(
                format!(
                    "HTTP/1.1 200 OK\r\nContent-Type: image/png\r\nContent-Length: {}\r\n\r\n",
                    body.len()
                )
                .as_bytes(),
            )
            .and_then(|_| stream.write_all(&body))
    } else if path == "/big" {
        stream
            .write_all(
                b"HTTP/1.1 200 OK\r\nContent-Type: image/jpeg\r\nContent-Length: 20000000\r\n\r\n",
            )
            .and_then(|_| stream.write_all(&vec![0u8; 1 << 20]))
    } else if path == "/big-unsized" {
        let mut result = stream.write_all(
            b"HTTP/1.1 200 OK\r\nContent-Type: image/png\r\nConnection: close\r\n\r\n\x89PNG",
        );
        let chunk = vec![7u8; 1 << 20];
        for _ in 0..16 {
            if result.is_err() {
                break;
            }
            result = stream.write_all(&chunk);
        }
        result
    } else if path == "/text" {
        stream.write_all(
            b"HTTP/1.1 200 OK\r\nContent-Type: text/html\r\nContent-Length: 5\r\n\r\nhello",
        )
    } else if let Some(name) = path.strip_prefix("/chunked/") {
        let body = testimage(name);
        stream
            .write_all(
                format!(
                    "HTTP/1.1 200 OK\r\nContent-Type: {}\r\nTransfer-Encoding: chunked\r\n\r\n",
                    content_type(name)
                )
                .as_bytes(),
            )
            .and_then(|_| stream.write_all(&chunked(&body, 1000)))
    } else {
        stream.write_all(b"HTTP/1.1 404 Not Found\r\nContent-Length: 0\r\n\r\n")
    };
    true
}

/// `payload` as a QR code (drawn 6 px per module with a 4-module quiet zone on white, at
/// (40, 30) of a 500 x 360 picture), encoded as a lossless WebP.
pub fn qr_webp(payload: &str) -> Vec<u8> {
    let (width, height) = (500usize, 360usize);
    let mut luma = vec![255u8; width * height];
    draw_qr(&mut luma, width, payload, 6, 40, 30);
    webp_luma(&luma, width, height)
}

/// `payload` as [`qr_webp`] draws it, on a 660 x 360 picture with `patterns` finder patterns
/// (7 x 7 modules of 3 px, a light module between them) tiled to its right, 11 a row: what
/// the QR reader's guard against tilings of finder patterns counts (more than 64 and the
/// image is not read).
pub fn qr_with_finder_patterns_webp(payload: &str, patterns: usize) -> Vec<u8> {
    let (width, height) = (660usize, 360usize);
    let mut luma = vec![255u8; width * height];
    draw_qr(&mut luma, width, payload, 6, 40, 30);
    let (module, cell) = (3, 27);
    assert!(patterns <= 11 * 12, "{patterns} patterns do not fit");
    for n in 0..patterns {
        let (left, top) = (340 + (n % 11) * cell, 20 + (n / 11) * cell);
        for my in 0..7 {
            for mx in 0..7 {
                let ring = mx == 0 || my == 0 || mx == 6 || my == 6;
                let core = (2..=4).contains(&mx) && (2..=4).contains(&my);
                if !(ring || core) {
                    continue;
                }
                for y in 0..module {
                    let start = (top + my * module + y) * width + left + mx * module;
                    luma[start..start + module].fill(0);
                }
            }
        }
    }
    webp_luma(&luma, width, height)
}

/// `n` x `n` finder-like targets on white, encoded as a lossless WebP: squares of 13 px with
/// a light px around each, a dark outer ring 1 px wide, 3 px of light, a dark core of 5 x 5:
/// rows of runs 1:3:5:3:1, which the QR reader takes for finder patterns ("capstones") though
/// the ring is thinner than a finder's. 28 x 28 of them (420 px a side) held a worker for
/// 108 s when the guard counted only 1:1:3:1:1.
pub fn thin_ringed_targets_webp(n: usize) -> Vec<u8> {
    let (span, gap) = (13usize, 1usize);
    let cell = span + 2 * gap;
    let side = n * cell;
    let mut luma = vec![255u8; side * side];
    for y in 0..side {
        for x in 0..side {
            let (u, v) = (x % cell, y % cell);
            if u < gap || v < gap || u >= gap + span || v >= gap + span {
                continue;
            }
            let (u, v) = (u - gap, v - gap);
            let depth = u.min(v).min(span - 1 - u).min(span - 1 - v);
            if !(1..4).contains(&depth) {
                luma[y * side + x] = 0;
            }
        }
    }
    webp_luma(&luma, side, side)
}

/// Draws `payload` as a QR code on `luma` (a grey picture `width` wide), `module` px per
/// module, its 4-module quiet zone's corner at (`left`, `top`).
fn draw_qr(luma: &mut [u8], width: usize, payload: &str, module: usize, left: usize, top: usize) {
    let code = qrcode::QrCode::new(payload.as_bytes()).expect("a QR code");
    let side = code.width();
    for (index, color) in code.to_colors().iter().enumerate() {
        if *color == qrcode::Color::Dark {
            let (mx, my) = (index % side, index / side);
            for y in 0..module {
                let row = (top + (my + 4) * module + y) * width;
                let start = row + left + (mx + 4) * module;
                luma[start..start + module].fill(0);
            }
        }
    }
}

/// The font the OCR tests draw with (Debian's `fonts-dejavu-core`, which `make test` installs).
pub const TEST_FONT: &str = "/usr/share/fonts/truetype/dejavu/DejaVuSans.ttf";

/// `lines` drawn in black DejaVu Sans, 32 px, one under the other from (30, 30) on a pale
/// 640 x 300 picture, encoded as a lossless WebP.
pub fn text_webp(lines: &[&str]) -> Vec<u8> {
    use ab_glyph::{Font, FontRef, PxScale, ScaleFont};
    let bytes = std::fs::read(TEST_FONT)
        .unwrap_or_else(|e| panic!("{TEST_FONT}: {e} (`make engines` installs fonts-dejavu-core)"));
    let font = FontRef::try_from_slice(&bytes).expect("a font");
    let scaled = font.as_scaled(PxScale::from(32.0));
    let (width, height) = (640usize, 300usize);
    let mut luma = vec![235u8; width * height];
    for (row, line) in lines.iter().enumerate() {
        let baseline = 30.0 + scaled.ascent() + row as f32 * 48.0;
        let mut x = 30.0;
        let mut previous = None;
        for c in line.chars() {
            let id = scaled.glyph_id(c);
            if let Some(before) = previous {
                x += scaled.kern(before, id);
            }
            let glyph =
                id.with_scale_and_position(PxScale::from(32.0), ab_glyph::point(x, baseline));
            x += scaled.h_advance(id);
            previous = Some(id);
            let Some(outlined) = font.outline_glyph(glyph) else {
                continue;
            };
            let bounds = outlined.px_bounds();
            outlined.draw(|gx, gy, coverage| {
                let (px, py) = (
                    bounds.min.x as i64 + gx as i64,
                    bounds.min.y as i64 + gy as i64,
                );
                if (0..width as i64).contains(&px) && (0..height as i64).contains(&py) {
                    let at = py as usize * width + px as usize;
                    let ink = (coverage.clamp(0.0, 1.0) * 235.0) as u8;
                    luma[at] = luma[at].saturating_sub(ink);
                }
            });
        }
    }
    webp_luma(&luma, width, height)
}

/// A grey `width` x `height` picture as a lossless WebP.
fn webp_luma(luma: &[u8], width: usize, height: usize) -> Vec<u8> {
    let mut out = Vec::new();
    image_webp::WebPEncoder::new(&mut out)
        .encode(luma, width as u32, height as u32, image_webp::ColorType::L8)
        .expect("WebP encoding");
    out
}

/// This machine's wall clock, in Unix milliseconds.
pub fn now_unix_ms() -> i64 {
    std::time::SystemTime::now()
        .duration_since(std::time::UNIX_EPOCH)
        .unwrap()
        .as_millis() as i64
}

/// Sightengine's documented `nudity-2.1` object: every class, by its dotted path.
pub use modgate::api::dialect::sightengine::NUDITY_2_1_CLASSES as SIGHTENGINE_NUDITY_2_1;

/// Asserts that a `nudity-2.x` object has every class of [`SIGHTENGINE_NUDITY_2_1`], each a
/// number in [0, 1].
pub fn assert_every_nudity_2_1_class(nudity: &Value) {
    for path in SIGHTENGINE_NUDITY_2_1 {
        let value = path.split('.').fold(nudity, |node, key| &node[key]);
        assert!(
            value.as_f64().is_some_and(|n| (0.0..=1.0).contains(&n)),
            "{path}: {nudity}"
        );
    }
}
