//! A keep-alive HTTP/1.1 client connection on glommio, just enough for modgate's answers:
//! write one request, read one answer (`Content-Length` framing), keep the status and, for
//! refusals, the `error.type`.
//!
//! [`parse_head`] does no I/O: `Ok(None)` means "need more bytes".

use std::io;
use std::net::SocketAddr;
use std::time::Duration;

use futures_lite::{AsyncReadExt, AsyncWriteExt};
use glommio::net::TcpStream;

/// A response head longer than this is an error.
pub const HEAD_BYTES_MAX: usize = 64 * 1024;
/// An answer body longer than this is an error (modgate's answers are a few KiB).
pub const BODY_BYTES_MAX: usize = 4 << 20;
/// Connect timeout.
pub const CONNECT_TIMEOUT: Duration = Duration::from_secs(5);

/// What the generator keeps of an answer.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct Answer {
    pub status: u16,
    /// `error.type` of a refusal.
    pub error_type: Option<String>,
    /// The server will close the connection.
    pub close: bool,
}

/// The parts of a response head the client needs.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct Head {
    pub status: u16,
    pub head_len: usize,
    pub content_length: usize,
    pub close: bool,
}

/// Parses a response head at the start of `buf`.
pub fn parse_head(buf: &[u8]) -> Result<Option<Head>, String> {
    let mut fields = [httparse::EMPTY_HEADER; 64];
    let mut response = httparse::Response::new(&mut fields);
    let head_len = match response.parse(buf) {
        Ok(httparse::Status::Complete(len)) => len,
        Ok(httparse::Status::Partial) if buf.len() < HEAD_BYTES_MAX => return Ok(None),
        Ok(httparse::Status::Partial) => return Err("response head too large".into()),
        Err(error) => return Err(format!("malformed response head: {error}")),
    };
    let status = response.code.ok_or("no status")?;
    let mut content_length = None;
    let mut close = response.version == Some(0);
    for field in response.headers.iter() {
        let value = std::str::from_utf8(field.value)
            .map_err(|_| "header not UTF-8")?
            .trim();
        if field.name.eq_ignore_ascii_case("content-length") {
            let length: usize = value.parse().map_err(|_| "bad Content-Length")?;
            if length > BODY_BYTES_MAX {
                return Err("answer body too large".into());
            }
            content_length = Some(length);
        } else if field.name.eq_ignore_ascii_case("transfer-encoding") {
            return Err("chunked answers are not expected from modgate".into());
        } else if field.name.eq_ignore_ascii_case("connection") {
            close = value.eq_ignore_ascii_case("close");
        }
    }
    let content_length = content_length.ok_or("answer without Content-Length")?;
    Ok(Some(Head {
        status,
        head_len,
        content_length,
        close,
    }))
}

/// `error.type` from an error envelope, without a JSON parser: the value after the first
/// `"type":"`.
pub fn error_type(body: &[u8]) -> Option<String> {
    let at = memchr::memmem::find(body, b"\"type\":\"")? + 8;
    let end = memchr::memchr(b'"', &body[at..])?;
    std::str::from_utf8(&body[at..at + end])
        .ok()
        .filter(|t| t.len() <= 64)
        .map(str::to_owned)
}

/// One connection to the server.
pub struct Connection {
    stream: TcpStream,
    buf: Vec<u8>,
}

impl Connection {
    pub async fn connect(addr: SocketAddr) -> io::Result<Connection> {
        let stream = TcpStream::connect_timeout(addr, CONNECT_TIMEOUT).await?;
        stream.set_nodelay(true)?;
        Ok(Connection {
            stream,
            buf: Vec::with_capacity(16 * 1024),
        })
    }

    /// Sends `request` and reads its answer.
    pub async fn exchange(&mut self, request: &[u8]) -> io::Result<Answer> {
        self.stream.write_all(request).await?;
        self.buf.clear();
        let mut chunk = [0u8; 16 * 1024];
        let head = loop {
            match parse_head(&self.buf) {
                Ok(Some(head)) => break head,
                Ok(None) => {}
                Err(problem) => return Err(io::Error::new(io::ErrorKind::InvalidData, problem)),
            }
            let n = self.stream.read(&mut chunk).await?;
            if n == 0 {
                return Err(io::ErrorKind::UnexpectedEof.into());
            }
            self.buf.extend_from_slice(&chunk[..n]);
        };
        let total = head.head_len + head.content_length;
        while self.buf.len() < total {
            let n = self.stream.read(&mut chunk).await?;
            if n == 0 {
                return Err(io::ErrorKind::UnexpectedEof.into());
            }
            self.buf.extend_from_slice(&chunk[..n]);
        }
        let error_type = if head.status >= 300 {
            error_type(&self.buf[head.head_len..total])
        } else {
            None
        };
        Ok(Answer {
            status: head.status,
            error_type,
            close: head.close,
        })
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn heads_and_error_types() {
        let answer = b"HTTP/1.1 429 Too Many Requests\r\ncontent-length: 77\r\nretry-after: 1\r\n\r\n{\"status\":\"failure\",\"error\":{\"type\":\"rate_limited\",\"code\":429,\"message\":\"m\"}}";
        let head = parse_head(answer).unwrap().unwrap();
        assert_eq!(head.status, 429);
        assert_eq!(head.content_length, 77);
        assert!(!head.close);
        assert_eq!(
            error_type(&answer[head.head_len..]).as_deref(),
            Some("rate_limited")
        );
        assert_eq!(parse_head(b"HTTP/1.1 200 OK\r\ncontent-le"), Ok(None));
        let close = parse_head(b"HTTP/1.1 503 x\r\nConnection: close\r\nContent-Length: 0\r\n\r\n")
            .unwrap()
            .unwrap();
        assert!(close.close);
        assert!(parse_head(b"HTTP/1.1 200 OK\r\n\r\n").is_err());
        assert!(parse_head(b"HTTP/1.1 200 OK\r\nTransfer-Encoding: chunked\r\n\r\n").is_err());
        assert!(parse_head(b"SMTP nope\r\n\r\n").is_err());
        assert!(parse_head(b"HTTP/1.1 200 OK\r\nContent-Length: 99999999999\r\n\r\n").is_err());
        assert_eq!(error_type(b"{\"status\":\"success\"}"), None);
    }

    proptest::proptest! {
        #[test]
        fn random_bytes_never_panic(bytes in proptest::collection::vec(proptest::num::u8::ANY, 0..2048)) {
            let _ = parse_head(&bytes);
            let _ = error_type(&bytes);
        }
    }
}
