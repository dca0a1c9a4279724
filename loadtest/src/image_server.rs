//! The tool's own image server, for `url` requests: a plain HTTP/1.1 server on 127.0.0.1 that
//! serves each `url` request's image at `/<request name>`.
//!
//! A server under test refuses loopback addresses unless it runs with the test-only setting
//! `testing.allow_private_urls = true` (see loadtest/README.md).

use std::io::{Read, Write};
use std::net::{SocketAddr, TcpListener, TcpStream};
use std::sync::Arc;
use std::time::Duration;

use crate::prepare::ServedImages;

/// A request head longer than this is dropped.
pub const HEAD_BYTES_MAX: usize = 8 * 1024;
/// How long a client may take to send its head or read the image.
pub const CLIENT_TIMEOUT: Duration = Duration::from_secs(10);

/// Starts the server on a free port; it runs until the process ends.
pub fn start(images: ServedImages) -> std::io::Result<SocketAddr> {
    let listener = TcpListener::bind("127.0.0.1:0")?;
    let addr = listener.local_addr()?;
    let images = Arc::new(images);
    std::thread::Builder::new()
        .name("load-image-server".into())
        .spawn(move || {
            for stream in listener.incoming().flatten() {
                let images = images.clone();
                let _ = std::thread::Builder::new()
                    .name("load-image-conn".into())
                    .spawn(move || serve(stream, &images));
            }
        })?;
    Ok(addr)
}

fn serve(mut stream: TcpStream, images: &ServedImages) {
    let _ = stream.set_read_timeout(Some(CLIENT_TIMEOUT));
    let _ = stream.set_write_timeout(Some(CLIENT_TIMEOUT));
    let _ = stream.set_nodelay(true);
    let mut head = Vec::with_capacity(512);
    let mut chunk = [0u8; 1024];
    // One request per connection: the downloader sends `Connection: close`.
    while !head.windows(4).any(|w| w == b"\r\n\r\n") {
        if head.len() > HEAD_BYTES_MAX {
            return;
        }
        match stream.read(&mut chunk) {
            Ok(0) | Err(_) => return,
            Ok(n) => head.extend_from_slice(&chunk[..n]),
        }
    }
    let mut fields = [httparse::EMPTY_HEADER; 32];
    let mut request = httparse::Request::new(&mut fields);
    let path = match request.parse(&head) {
        Ok(httparse::Status::Complete(_)) => request.path.unwrap_or("/").to_owned(),
        _ => return,
    };
    let name = path.trim_start_matches('/');
    let written = match images.get(name) {
        Some((content_type, bytes)) => stream
            .write_all(
                format!(
                    "HTTP/1.1 200 OK\r\nContent-Type: {content_type}\r\nContent-Length: {}\r\nConnection: close\r\n\r\n",
                    bytes.len()
                )
                .as_bytes(),
            )
            .and_then(|_| stream.write_all(bytes)),
        None => stream.write_all(
            b"HTTP/1.1 404 Not Found\r\nContent-Length: 0\r\nConnection: close\r\n\r\n",
        ),
    };
    let _ = written;
}
