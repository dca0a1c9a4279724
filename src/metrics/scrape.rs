//! The `/metrics` listener and the way a scrape reaches the shards.
//!
//! The listener is a plain thread with a blocking socket (`metrics.listen`, loopback by
//! default, no key): scrapes are rare, and nothing here may take a shard's time. For each
//! scrape it sends every shard a reply channel through the [`MetricsHub`]; each shard answers
//! from its own executor with a [`ShardSnapshot`]. A shard that does not answer within
//! [`SHARD_ANSWER_TIMEOUT`] (stopped, or stopping) is left out, and `modgate_shards_answering`
//! says so.
//!
//! One connection at a time, each closed after its answer; a head must arrive within
//! [`CLIENT_TIMEOUT`] and fit in [`HEAD_BYTES_MAX`].

use std::io::{Read, Write};
use std::net::{TcpListener, TcpStream};
use std::sync::mpsc;
use std::sync::{Arc, Mutex};
use std::time::{Duration, Instant};

use futures_channel::mpsc::{unbounded, UnboundedReceiver, UnboundedSender};
use futures_lite::StreamExt;

use super::exposition::{self, ProcessInfo};
use super::ShardSnapshot;

/// How long a scrape waits for the shards.
pub const SHARD_ANSWER_TIMEOUT: Duration = Duration::from_secs(2);
/// How long a scrape client gets to send its head and read the answer.
pub const CLIENT_TIMEOUT: Duration = Duration::from_secs(5);
/// The longest request head the listener reads.
pub const HEAD_BYTES_MAX: usize = 8 * 1024;

type SnapshotReply = mpsc::Sender<ShardSnapshot>;

/// The shards' mailboxes for scrapes. Touched when a shard starts and when a scrape comes.
#[derive(Default)]
pub struct MetricsHub {
    shards: Mutex<Vec<UnboundedSender<SnapshotReply>>>,
}

impl MetricsHub {
    /// A shard's mailbox; the shard serves it with [`answer_scrapes`].
    pub fn register(&self) -> UnboundedReceiver<SnapshotReply> {
        let (sender, receiver) = unbounded();
        self.shards
            .lock()
            .unwrap_or_else(|poisoned| poisoned.into_inner())
            .push(sender);
        receiver
    }

    /// Every answering shard's snapshot, in shard order.
    pub fn collect(&self) -> Vec<ShardSnapshot> {
        let (reply, replies) = mpsc::channel();
        let asked = self
            .shards
            .lock()
            .unwrap_or_else(|poisoned| poisoned.into_inner())
            .iter()
            .filter(|shard| shard.unbounded_send(reply.clone()).is_ok())
            .count();
        drop(reply);
        let deadline = Instant::now() + SHARD_ANSWER_TIMEOUT;
        let mut snapshots = Vec::with_capacity(asked);
        while snapshots.len() < asked {
            let left = deadline.saturating_duration_since(Instant::now());
            match replies.recv_timeout(left) {
                Ok(snapshot) => snapshots.push(snapshot),
                Err(_) => break,
            }
        }
        snapshots.sort_by_key(|snapshot| snapshot.shard);
        snapshots
    }
}

/// Runs on a shard: answers each scrape with `snapshot()`.
pub async fn answer_scrapes(
    mut mailbox: UnboundedReceiver<SnapshotReply>,
    snapshot: impl Fn() -> ShardSnapshot,
) {
    while let Some(reply) = mailbox.next().await {
        let _ = reply.send(snapshot());
    }
}

/// What the listener needs from the server besides the hub.
pub trait ProcessState: Send + Sync + 'static {
    fn shards(&self) -> usize;
    fn is_ready(&self) -> bool;
    /// In a fleet: the control-plane revision applied and seconds since PostgreSQL last
    /// answered.
    fn control_plane(&self) -> Option<(i64, f64)> {
        None
    }
    /// In a fleet with Redis/Valkey: the budgets' engine.
    fn budgets(&self) -> Option<super::exposition::BudgetFigures> {
        None
    }
    /// In a fleet: the quota ledger (PostgreSQL).
    fn quota_ledger(&self) -> Option<super::exposition::QuotaLedgerFigures> {
        None
    }
}

/// Serves `GET /metrics` on `listener` from a thread of its own.
pub fn spawn_listener(
    listener: TcpListener,
    hub: Arc<MetricsHub>,
    process: Arc<dyn ProcessState>,
) -> std::io::Result<()> {
    std::thread::Builder::new()
        .name("modgate-metrics".into())
        .spawn(move || {
            for stream in listener.incoming() {
                match stream {
                    Ok(stream) => answer(stream, &hub, process.as_ref()),
                    Err(error) => {
                        tracing::warn!(%error, "metrics listener: accept failed");
                        std::thread::sleep(Duration::from_millis(10));
                    }
                }
            }
        })?;
    Ok(())
}

fn answer(mut stream: TcpStream, hub: &MetricsHub, process: &dyn ProcessState) {
    let _ = stream.set_read_timeout(Some(CLIENT_TIMEOUT));
    let _ = stream.set_write_timeout(Some(CLIENT_TIMEOUT));
    let Some(head) = read_head(&mut stream) else {
        return;
    };
    let (status, extra, body) = match route(&head) {
        Ok(head_only) => {
            let snapshots = hub.collect();
            let info = ProcessInfo {
                shards: process.shards(),
                answering: snapshots.len(),
                ready: process.is_ready(),
                control_plane: process.control_plane(),
                budgets: process.budgets(),
                quota_ledger: process.quota_ledger(),
            };
            let text = exposition::render(&snapshots, &info);
            let body = if head_only { String::new() } else { text };
            ("200 OK", String::new(), body)
        }
        Err(refusal) => refusal,
    };
    let content_type = if status.starts_with("200") {
        exposition::CONTENT_TYPE
    } else {
        "text/plain; charset=utf-8"
    };
    let response = format!(
        "HTTP/1.1 {status}\r\nContent-Type: {content_type}\r\nContent-Length: {}\r\n{extra}Connection: close\r\n\r\n{body}",
        body.len()
    );
    let _ = stream.write_all(response.as_bytes());
}

/// Reads a request head; `None` if the client is too slow, too long-winded or gone.
fn read_head(stream: &mut TcpStream) -> Option<Vec<u8>> {
    let mut head = Vec::with_capacity(1024);
    let mut chunk = [0u8; 1024];
    let deadline = Instant::now() + CLIENT_TIMEOUT;
    while !head.windows(4).any(|w| w == b"\r\n\r\n") {
        if head.len() > HEAD_BYTES_MAX || Instant::now() > deadline {
            return None;
        }
        match stream.read(&mut chunk) {
            Ok(0) | Err(_) => return None,
            Ok(n) => head.extend_from_slice(&chunk[..n]),
        }
    }
    Some(head)
}

type Refusal = (&'static str, String, String);

/// `Ok(head_only)` for a scrape; the status, extra headers and body of a refusal otherwise.
fn route(head: &[u8]) -> Result<bool, Refusal> {
    let mut headers = [httparse::EMPTY_HEADER; 32];
    let mut request = httparse::Request::new(&mut headers);
    let bad = || ("400 Bad Request", String::new(), "bad request\n".to_owned());
    match request.parse(head) {
        Ok(httparse::Status::Complete(_)) => {}
        _ => return Err(bad()),
    }
    if request
        .headers
        .iter()
        .any(|h| h.name.eq_ignore_ascii_case("origin"))
    {
        return Err((
            "403 Forbidden",
            String::new(),
            "requests from browsers are refused\n".to_owned(),
        ));
    }
    let path = request.path.unwrap_or("");
    let path = path.split('?').next().unwrap_or("");
    if path != "/metrics" {
        return Err((
            "404 Not Found",
            String::new(),
            "only /metrics is served here\n".to_owned(),
        ));
    }
    match request.method {
        Some("GET") => Ok(false),
        Some("HEAD") => Ok(true),
        _ => Err((
            "405 Method Not Allowed",
            "Allow: GET, HEAD\r\n".to_owned(),
            "GET /metrics\n".to_owned(),
        )),
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn only_get_and_head_of_metrics_are_scrapes() {
        assert_eq!(
            route(b"GET /metrics HTTP/1.1\r\nHost: x\r\n\r\n"),
            Ok(false)
        );
        assert_eq!(route(b"HEAD /metrics?x=1 HTTP/1.0\r\n\r\n"), Ok(true));
        assert_eq!(
            route(b"GET /other HTTP/1.1\r\n\r\n").unwrap_err().0,
            "404 Not Found"
        );
        assert_eq!(
            route(b"POST /metrics HTTP/1.1\r\n\r\n").unwrap_err().0,
            "405 Method Not Allowed"
        );
        assert_eq!(
            route(b"GET /metrics HTTP/1.1\r\nOrigin: https://a\r\n\r\n")
                .unwrap_err()
                .0,
            "403 Forbidden"
        );
        assert_eq!(route(b"\x00\x01\r\n\r\n").unwrap_err().0, "400 Bad Request");
    }

    proptest::proptest! {
        #[test]
        fn any_bytes_get_an_answer_not_a_panic(bytes in proptest::collection::vec(proptest::num::u8::ANY, 0..512)) {
            let _ = route(&bytes);
        }
    }
}
