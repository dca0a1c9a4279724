//! Answers: a [`Response`] value and its serialisation into the connection's write buffer.
//!
//! Handlers build a `Response`; the connection adds what every answer carries (`Date`,
//! `X-Request-Id`, `Content-Length`, `Connection`) in [`Response::write_to`]. Serialisation
//! appends to a reusable `Vec<u8>`, so pipelined answers leave in one write.

use crate::clock::civil_from_days;
use std::borrow::Cow;
use std::io::Write as _;

/// A header value: most are static strings or integers, so neither allocates.
#[derive(Clone, Debug, PartialEq, Eq)]
pub enum HeaderValue {
    Static(&'static str),
    Int(u64),
    Owned(String),
}

impl HeaderValue {
    fn write_to(&self, out: &mut Vec<u8>) {
        match self {
            HeaderValue::Static(text) => out.extend_from_slice(text.as_bytes()),
            HeaderValue::Int(n) => {
                let mut digits = itoa_buffer();
                out.extend_from_slice(format_u64(*n, &mut digits));
            }
            HeaderValue::Owned(text) => out.extend_from_slice(text.as_bytes()),
        }
    }
}

#[derive(Clone, Debug, PartialEq, Eq)]
pub struct Response {
    pub status: u16,
    pub content_type: Option<&'static str>,
    pub body: Cow<'static, [u8]>,
    /// Headers of this answer beyond the ones every answer carries.
    pub headers: Vec<(&'static str, HeaderValue)>,
    /// Ask the connection to close after this answer.
    pub close: bool,
}

pub const JSON: &str = "application/json";

impl Response {
    pub fn json(status: u16, body: Vec<u8>) -> Self {
        Response {
            status,
            content_type: Some(JSON),
            body: Cow::Owned(body),
            headers: Vec::new(),
            close: false,
        }
    }

    /// A body of another media type (`text/csv; charset=utf-8`).
    pub fn with_content_type(status: u16, content_type: &'static str, body: Vec<u8>) -> Self {
        Response {
            status,
            content_type: Some(content_type),
            body: Cow::Owned(body),
            headers: Vec::new(),
            close: false,
        }
    }

    pub fn static_json(status: u16, body: &'static [u8]) -> Self {
        Response {
            status,
            content_type: Some(JSON),
            body: Cow::Borrowed(body),
            headers: Vec::new(),
            close: false,
        }
    }

    pub fn header(mut self, name: &'static str, value: HeaderValue) -> Self {
        self.headers.push((name, value));
        self
    }

    /// Appends the status line, headers and (unless `head_only`) the body to `out`.
    pub fn write_to(&self, out: &mut Vec<u8>, frame: &Frame<'_>) {
        out.extend_from_slice(b"HTTP/1.1 ");
        let mut digits = itoa_buffer();
        out.extend_from_slice(format_u64(u64::from(self.status), &mut digits));
        out.push(b' ');
        out.extend_from_slice(reason_phrase(self.status).as_bytes());
        out.extend_from_slice(b"\r\ndate: ");
        out.extend_from_slice(frame.date.as_bytes());
        out.extend_from_slice(b"\r\nx-request-id: ");
        out.extend_from_slice(frame.request_id.as_bytes());
        if let Some(content_type) = self.content_type {
            out.extend_from_slice(b"\r\ncontent-type: ");
            out.extend_from_slice(content_type.as_bytes());
        }
        out.extend_from_slice(b"\r\ncontent-length: ");
        out.extend_from_slice(format_u64(self.body.len() as u64, &mut digits));
        for (name, value) in &self.headers {
            out.extend_from_slice(b"\r\n");
            out.extend_from_slice(name.as_bytes());
            out.extend_from_slice(b": ");
            value.write_to(out);
        }
        match frame.connection {
            ConnectionHeader::None => {}
            ConnectionHeader::Close => out.extend_from_slice(b"\r\nconnection: close"),
            ConnectionHeader::KeepAlive => out.extend_from_slice(b"\r\nconnection: keep-alive"),
        }
        out.extend_from_slice(b"\r\n\r\n");
        if !frame.head_only {
            out.extend_from_slice(&self.body);
        }
    }
}

/// What the connection knows about an answer that the handler does not.
pub struct Frame<'a> {
    pub request_id: &'a str,
    pub date: &'a str,
    pub connection: ConnectionHeader,
    /// A `HEAD` request: headers only.
    pub head_only: bool,
}

#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum ConnectionHeader {
    /// HTTP/1.1 keep-alive is the default and needs no header.
    None,
    Close,
    /// An HTTP/1.0 client that asked to keep the connection.
    KeepAlive,
}

pub fn reason_phrase(status: u16) -> &'static str {
    match status {
        100 => "Continue",
        200 => "OK",
        201 => "Created",
        400 => "Bad Request",
        401 => "Unauthorized",
        403 => "Forbidden",
        404 => "Not Found",
        405 => "Method Not Allowed",
        408 => "Request Timeout",
        413 => "Content Too Large",
        414 => "URI Too Long",
        415 => "Unsupported Media Type",
        409 => "Conflict",
        417 => "Expectation Failed",
        429 => "Too Many Requests",
        431 => "Request Header Fields Too Large",
        500 => "Internal Server Error",
        503 => "Service Unavailable",
        _ => "Unknown",
    }
}

fn itoa_buffer() -> [u8; 20] {
    [0; 20]
}

/// Decimal digits of `n`, written from the end of `buf`.
fn format_u64(mut n: u64, buf: &mut [u8; 20]) -> &[u8] {
    let mut at = buf.len();
    loop {
        at -= 1;
        buf[at] = b'0' + (n % 10) as u8;
        n /= 10;
        if n == 0 {
            break;
        }
    }
    &buf[at..]
}

/// `Date` values, formatted once per second per shard (IMF-fixdate, RFC 9110 section 5.6.7).
pub struct DateCache {
    second: std::cell::Cell<u64>,
    text: std::cell::RefCell<String>,
}

impl Default for DateCache {
    fn default() -> Self {
        DateCache {
            second: std::cell::Cell::new(u64::MAX),
            text: std::cell::RefCell::new(String::with_capacity(29)),
        }
    }
}

impl DateCache {
    /// The date for `unix_seconds`, reformatted only when the second changed.
    pub fn get(&self, unix_seconds: u64) -> std::cell::Ref<'_, String> {
        if self.second.get() != unix_seconds {
            let mut text = self.text.borrow_mut();
            text.clear();
            imf_fixdate(unix_seconds, &mut text);
            self.second.set(unix_seconds);
        }
        self.text.borrow()
    }
}

/// Formats `unix_seconds` as `Sun, 06 Nov 1994 08:49:37 GMT`.
pub fn imf_fixdate(unix_seconds: u64, out: &mut String) {
    const DAYS: [&str; 7] = ["Thu", "Fri", "Sat", "Sun", "Mon", "Tue", "Wed"];
    const MONTHS: [&str; 12] = [
        "Jan", "Feb", "Mar", "Apr", "May", "Jun", "Jul", "Aug", "Sep", "Oct", "Nov", "Dec",
    ];
    let days = unix_seconds / 86_400;
    let second_of_day = unix_seconds % 86_400;
    let (year, month, day) = civil_from_days(days as i64);
    let mut bytes = Vec::with_capacity(29);
    let _ = write!(
        bytes,
        "{}, {:02} {} {} {:02}:{:02}:{:02} GMT",
        DAYS[(days % 7) as usize],
        day,
        MONTHS[(month - 1) as usize],
        year,
        second_of_day / 3600,
        second_of_day / 60 % 60,
        second_of_day % 60
    );
    out.push_str(&String::from_utf8_lossy(&bytes));
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn every_status_the_server_sends_has_its_reason() {
        let errors = crate::error::ErrorKind::ALL.map(|kind| kind.wire().0);
        for status in [100, 200, 201].into_iter().chain(errors) {
            assert_ne!(reason_phrase(status), "Unknown", "{status}");
        }
    }

    #[test]
    fn dates() {
        let mut text = String::new();
        imf_fixdate(784_111_777, &mut text);
        assert_eq!(text, "Sun, 06 Nov 1994 08:49:37 GMT");
        text.clear();
        imf_fixdate(0, &mut text);
        assert_eq!(text, "Thu, 01 Jan 1970 00:00:00 GMT");
        text.clear();
        imf_fixdate(1_709_164_800, &mut text); // leap day
        assert_eq!(text, "Thu, 29 Feb 2024 00:00:00 GMT");
    }

    #[test]
    fn serialises_a_response() {
        let response = Response::static_json(405, b"{}")
            .header("allow", HeaderValue::Static("GET, HEAD"))
            .header("retry-after", HeaderValue::Int(7));
        let mut out = Vec::new();
        response.write_to(
            &mut out,
            &Frame {
                request_id: "ID",
                date: "D",
                connection: ConnectionHeader::Close,
                head_only: false,
            },
        );
        assert_eq!(
            String::from_utf8(out).unwrap(),
            "HTTP/1.1 405 Method Not Allowed\r\ndate: D\r\nx-request-id: ID\r\ncontent-type: application/json\r\ncontent-length: 2\r\nallow: GET, HEAD\r\nretry-after: 7\r\nconnection: close\r\n\r\n{}"
        );
    }

    #[test]
    fn head_only_keeps_the_length_and_drops_the_body() {
        let mut out = Vec::new();
        Response::static_json(200, b"{\"a\":1}").write_to(
            &mut out,
            &Frame {
                request_id: "ID",
                date: "D",
                connection: ConnectionHeader::None,
                head_only: true,
            },
        );
        let text = String::from_utf8(out).unwrap();
        assert!(text.ends_with("content-length: 7\r\n\r\n"), "{text}");
    }

    #[test]
    fn integers() {
        let mut buf = itoa_buffer();
        assert_eq!(format_u64(0, &mut buf), b"0");
        assert_eq!(format_u64(u64::MAX, &mut buf), b"18446744073709551615");
    }
}
