//! `modgate-baseline`: the floor of an HTTP/1.1 answer on this machine, to measure modgate's
//! HTTP layer against. A raw tokio server (one current-thread runtime, so one core, as one
//! modgate shard) that parses each request head with httparse and answers every complete one
//! with a fixed `200` and `{"status":"ok"}`, keep-alive and pipelining included: no routing, no
//! key, no limits, no metrics. `tuning/http_floor.sh` compares modgate's authenticated
//! `GET /v1/workflows` with it (issue 13's target: at most 1.15 times this server's CPU per
//! request).
//!
//! ```sh
//! taskset -c 0 target/release/modgate-baseline 127.0.0.1:8090
//! ```
//!
//! Limits: a request head of at most [`HEAD_BYTES_MAX`] bytes and [`HEADERS_MAX`] headers (the
//! connection is closed past them); request bodies are not read (send none).

use std::net::SocketAddr;

use tokio::io::{AsyncReadExt, AsyncWriteExt};
use tokio::net::{TcpListener, TcpStream};

/// A request head larger than this closes the connection.
const HEAD_BYTES_MAX: usize = 8 * 1024;
/// Headers parsed per request at most.
const HEADERS_MAX: usize = 32;
const ANSWER: &[u8] =
    b"HTTP/1.1 200 OK\r\nContent-Type: application/json\r\nContent-Length: 15\r\n\r\n{\"status\":\"ok\"}";

fn main() -> anyhow::Result<()> {
    let address: SocketAddr = std::env::args()
        .nth(1)
        .unwrap_or_else(|| "127.0.0.1:8090".to_owned())
        .parse()?;
    let runtime = tokio::runtime::Builder::new_current_thread()
        .enable_io()
        .build()?;
    runtime.block_on(async move {
        let listener = TcpListener::bind(address).await?;
        println!("baseline listening on http://{}", listener.local_addr()?);
        loop {
            let (stream, _) = listener.accept().await?;
            tokio::spawn(async move {
                let _ = serve(stream).await;
            });
        }
    })
}

/// Answers every complete request head on `stream` until the peer closes it.
async fn serve(mut stream: TcpStream) -> anyhow::Result<()> {
    stream.set_nodelay(true)?;
    let mut buffer = vec![0u8; HEAD_BYTES_MAX];
    let mut filled = 0;
    let mut answers = Vec::with_capacity(ANSWER.len() * 4);
    loop {
        let read = stream.read(&mut buffer[filled..]).await?;
        if read == 0 {
            return Ok(());
        }
        filled += read;
        let mut start = 0;
        loop {
            let mut headers = [httparse::EMPTY_HEADER; HEADERS_MAX];
            let mut request = httparse::Request::new(&mut headers);
            match request.parse(&buffer[start..filled])? {
                httparse::Status::Complete(length) => {
                    answers.extend_from_slice(ANSWER);
                    start += length;
                }
                httparse::Status::Partial => break,
            }
        }
        if !answers.is_empty() {
            stream.write_all(&answers).await?;
            answers.clear();
        }
        buffer.copy_within(start..filled, 0);
        filled -= start;
        if filled == buffer.len() {
            anyhow::bail!("a request head over {HEAD_BYTES_MAX} bytes");
        }
    }
}
