//! Request heads: bytes in, a validated [`RequestHead`] out.
//!
//! [`parse_head`] does no I/O. It returns `Ok(None)` while the head is incomplete and within
//! limits, `Ok(Some((head, len)))` once the blank line has arrived, or a [`HeadError`] that the
//! connection answers and then closes on. httparse checks the grammar; this module adds the
//! limits and the framing rules that defend against request smuggling:
//!
//! - `Content-Length` together with `Transfer-Encoding`: refused.
//! - `Content-Length` repeated (even with equal values), signed, empty, not decimal or over
//!   `u64`: refused.
//! - `Transfer-Encoding` other than exactly one `chunked` coding, or on an HTTP/1.0 request:
//!   refused.
//! - HTTP/1.1 without exactly one `Host`: refused (RFC 9112 section 3.2).
//!
//! Only the fields the server uses are kept; everything else is validated by httparse and
//! dropped. The values kept are copied out of the read buffer into one string, so the buffer
//! can be reused for the body while the handler runs.

use std::fmt;

/// httparse needs a fixed array; more fields than this is a 431.
pub const HEADER_COUNT_MAX: usize = 64;

/// Limits of a head that are configurable (`[server]` in the configuration).
#[derive(Clone, Copy, Debug)]
pub struct HeadLimits {
    /// Bytes from the request line to the blank line, both included.
    pub head_bytes_max: usize,
    /// Bytes of the request target (path and query).
    pub uri_bytes_max: usize,
}

impl Default for HeadLimits {
    fn default() -> Self {
        HeadLimits {
            head_bytes_max: 16 * 1024,
            uri_bytes_max: 8 * 1024,
        }
    }
}

#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Method {
    Get,
    Head,
    Post,
    Delete,
    /// Any other method: routes answer it with 405.
    Other,
}

impl Method {
    /// The method as it is written on the wire (`OTHER` for the ones no route takes).
    pub fn as_str(self) -> &'static str {
        match self {
            Method::Get => "GET",
            Method::Head => "HEAD",
            Method::Post => "POST",
            Method::Delete => "DELETE",
            Method::Other => "OTHER",
        }
    }
}

#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Version {
    Http10,
    Http11,
}

/// How the body of a request is delimited.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Framing {
    /// No body (no `Content-Length`, no `Transfer-Encoding`, or `Content-Length: 0`).
    Empty,
    /// `Content-Length: n`, n > 0.
    Length(u64),
    /// `Transfer-Encoding: chunked`.
    Chunked,
}

/// The parts of a request head the server acts on. The values it keeps (path, query and four
/// fields) are copied one after another into one string, which a connection hands back for
/// its next head ([`RequestHead::into_text`], [`parse_head_into`]): a head allocates nothing
/// once its connection has served one.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct RequestHead {
    pub method: Method,
    pub version: Version,
    pub framing: Framing,
    /// Whether the client wants the connection kept after this request.
    pub keep_alive: bool,
    /// `Expect: 100-continue` was sent: send `100 Continue` before reading the body.
    pub expect_continue: bool,
    /// A field only browsers send was present (`Origin`, or Fetch Metadata's `Sec-Fetch-*`),
    /// whatever its value: browsers are refused (a key in a browser's request is a key leaked).
    pub has_origin: bool,
    /// The kept values, where the spans below point.
    text: String,
    path: Span,
    query: Span,
    authorization: Option<Span>,
    api_key: Option<Span>,
    content_type: Option<Span>,
    host: Option<Span>,
}

/// Where a kept value sits in [`RequestHead::text`].
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
struct Span {
    start: usize,
    end: usize,
}

impl Span {
    /// Appends `value` to `text`; its span there.
    fn push(text: &mut String, value: &str) -> Span {
        let start = text.len();
        text.push_str(value);
        Span {
            start,
            end: text.len(),
        }
    }
}

impl RequestHead {
    /// The path of the target as sent (origin-form), without the query.
    pub fn path(&self) -> &str {
        self.at(self.path)
    }

    /// The raw query after `?`, empty when there is none.
    pub fn query(&self) -> &str {
        self.at(self.query)
    }

    /// Value of `Authorization`, if sent once.
    pub fn authorization(&self) -> Option<&str> {
        self.authorization.map(|span| self.at(span))
    }

    /// Value of `X-Api-Key` (or Google's `X-Goog-Api-Key`), if sent once.
    pub fn api_key(&self) -> Option<&str> {
        self.api_key.map(|span| self.at(span))
    }

    /// Value of `Content-Type`, if sent once.
    pub fn content_type(&self) -> Option<&str> {
        self.content_type.map(|span| self.at(span))
    }

    /// Value of `Host` (exactly one on HTTP/1.1; at most one on HTTP/1.0).
    pub fn host(&self) -> Option<&str> {
        self.host.map(|span| self.at(span))
    }

    /// The head's string, emptied, for the connection's next head.
    pub fn into_text(self) -> String {
        let mut text = self.text;
        text.clear();
        text
    }

    fn at(&self, span: Span) -> &str {
        self.text.get(span.start..span.end).unwrap_or_default()
    }
}

/// Why a head was refused. The connection is closed after the answer.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum HeadError {
    /// Over `head_bytes_max` (431).
    TooLarge,
    /// Over [`HEADER_COUNT_MAX`] fields (431).
    TooManyHeaders,
    /// Target over `uri_bytes_max` (414).
    UriTooLong,
    /// Not HTTP/1.x grammar, or a field the server cannot accept (400).
    Malformed(&'static str),
    /// A framing rule above was broken (400).
    Framing(&'static str),
    /// `Expect` with something other than `100-continue` (417).
    UnsupportedExpectation,
    /// A head that would be refused for its framing also carried `Origin`: browsers are
    /// refused first, whatever else is wrong (403).
    Origin,
}

impl fmt::Display for HeadError {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self {
            HeadError::TooLarge => f.write_str("request head too large"),
            HeadError::TooManyHeaders => f.write_str("too many header fields"),
            HeadError::UriTooLong => f.write_str("request target too long"),
            HeadError::Malformed(what) => write!(f, "malformed request: {what}"),
            HeadError::Framing(what) => write!(f, "refused message framing: {what}"),
            HeadError::UnsupportedExpectation => {
                f.write_str("only 'Expect: 100-continue' is supported")
            }
            HeadError::Origin => f.write_str(
                "requests from browsers (with an Origin or Sec-Fetch-* header) are refused; call from your servers",
            ),
        }
    }
}

/// Parses one request head at the start of `buf`.
///
/// `Ok(None)` means "need more bytes"; it is only returned while `buf` is shorter than
/// `head_bytes_max`, so a caller that reads at most that much never buffers more.
///
/// A head refused for any reason that also carries an `Origin` line is refused as a
/// browser's (403) instead: browsers are turned away before anything else is said to them.
pub fn parse_head(
    buf: &[u8],
    limits: &HeadLimits,
) -> Result<Option<(RequestHead, usize)>, HeadError> {
    parse_head_into(buf, limits, &mut String::new())
}

/// [`parse_head`], keeping the values in `text` (empty; a previous head's
/// [`RequestHead::into_text`]), which the head takes when it is complete.
pub fn parse_head_into(
    buf: &[u8],
    limits: &HeadLimits,
    text: &mut String,
) -> Result<Option<(RequestHead, usize)>, HeadError> {
    text.clear();
    parse_head_fields(buf, limits, text).map_err(|error| {
        if error != HeadError::Origin && has_origin_line(buf) {
            HeadError::Origin
        } else {
            error
        }
    })
}

/// Fields only browsers send: `Origin`, and the Fetch Metadata a browser sends on every
/// request, `<img src>` included, which has no `Origin` (`Sec-Fetch-Site`, `-Dest`, `-User`).
/// `Sec-Fetch-Mode` alone is not a browser's: Node's built-in `fetch` (undici) sends
/// `Sec-Fetch-Mode: cors` from servers, OpenAI's Node SDK among them.
fn is_browser_field(name: &[u8]) -> bool {
    const FIELDS: [&[u8]; 4] = [
        b"origin",
        b"sec-fetch-site",
        b"sec-fetch-dest",
        b"sec-fetch-user",
    ];
    FIELDS.iter().any(|field| name.eq_ignore_ascii_case(field))
}

/// Whether the head at the start of `buf` has a line that names a browser's field, read
/// from the raw bytes (the head may be too large, too long or malformed for httparse). Only
/// the head counts: bytes after the blank line that ends it belong to a body.
fn has_origin_line(buf: &[u8]) -> bool {
    // Blank lines before the request line are allowed (RFC 9112 2.2); the head starts after.
    let start = buf
        .iter()
        .position(|&b| b != b'\r' && b != b'\n')
        .unwrap_or(buf.len());
    let buf = &buf[start..];
    let blank_line_at =
        |i: usize| buf[i] == b'\n' && matches!(&buf[i + 1..], [b'\n', ..] | [b'\r', b'\n', ..]);
    let head_end = (0..buf.len())
        .find(|&i| blank_line_at(i))
        .unwrap_or(buf.len());
    // Field lines follow a line feed: the request line is skipped. The name may be followed
    // by spaces before its colon (malformed, but a browser's all the same).
    buf[..head_end].split(|&b| b == b'\n').skip(1).any(|line| {
        let Some(colon) = line.iter().position(|&b| b == b':') else {
            return false;
        };
        let name = &line[..colon];
        let name_end = name
            .iter()
            .rposition(|&b| b != b' ' && b != b'\t')
            .map_or(0, |last| last + 1);
        is_browser_field(&name[..name_end])
    })
}

fn parse_head_fields(
    buf: &[u8],
    limits: &HeadLimits,
    text: &mut String,
) -> Result<Option<(RequestHead, usize)>, HeadError> {
    let mut fields = [httparse::EMPTY_HEADER; HEADER_COUNT_MAX];
    let mut request = httparse::Request::new(&mut fields);
    let status = match request.parse(buf) {
        Ok(status) => status,
        Err(httparse::Error::TooManyHeaders) => return Err(HeadError::TooManyHeaders),
        Err(httparse::Error::Version) => {
            return Err(HeadError::Malformed("unsupported HTTP version"))
        }
        Err(error) => return Err(HeadError::Malformed(httparse_reason(error))),
    };
    let head_len = match status {
        httparse::Status::Complete(len) => len,
        httparse::Status::Partial => return incomplete(buf, limits),
    };
    if head_len > limits.head_bytes_max {
        return Err(HeadError::TooLarge);
    }
    if has_bare_lf(&buf[..head_len]) {
        return Err(HeadError::Malformed(
            "a line of the head ends in LF without CR",
        ));
    }
    let target = request
        .path
        .ok_or(HeadError::Malformed("no request target"))?;
    if target.len() > limits.uri_bytes_max {
        return Err(HeadError::UriTooLong);
    }
    let version = match request.version {
        Some(0) => Version::Http10,
        Some(1) => Version::Http11,
        _ => return Err(HeadError::Malformed("unsupported HTTP version")),
    };
    let method = match request.method {
        Some("GET") => Method::Get,
        Some("HEAD") => Method::Head,
        Some("POST") => Method::Post,
        Some("DELETE") => Method::Delete,
        Some(_) => Method::Other,
        None => return Err(HeadError::Malformed("no method")),
    };
    let (path, query) = split_target(target)?;
    let path = Span::push(text, path);
    let query = Span::push(text, query);
    let fields = collect_fields(request.headers, version, text).map_err(|error| {
        let browser = request
            .headers
            .iter()
            .any(|header| is_browser_field(header.name.as_bytes()));
        if browser {
            HeadError::Origin
        } else {
            error
        }
    })?;
    Ok(Some((
        RequestHead {
            method,
            version,
            framing: fields.framing,
            keep_alive: fields.keep_alive,
            expect_continue: fields.expect_continue,
            has_origin: fields.has_origin,
            text: std::mem::take(text),
            path,
            query,
            authorization: fields.authorization,
            api_key: fields.api_key,
            content_type: fields.content_type,
            host: fields.host,
        },
        head_len,
    )))
}

/// Decides between "need more" and a limit for an incomplete head.
fn incomplete(buf: &[u8], limits: &HeadLimits) -> Result<Option<(RequestHead, usize)>, HeadError> {
    // The target is the second word of the first non-empty line; if that line alone is past
    // the target limit, the answer is 414 whether or not the rest of the head would fit.
    let start = buf
        .iter()
        .position(|&b| b != b'\r' && b != b'\n')
        .unwrap_or(buf.len());
    let line = &buf[start..];
    let line_end = memchr_byte(b'\n', line).unwrap_or(line.len());
    let target_len = line[..line_end]
        .splitn(3, |&b| b == b' ')
        .nth(1)
        .map_or(0, <[u8]>::len);
    if target_len > limits.uri_bytes_max {
        return Err(HeadError::UriTooLong);
    }
    if buf.len() >= limits.head_bytes_max {
        return Err(HeadError::TooLarge);
    }
    Ok(None)
}

/// Whether a line of `head` ends in a bare LF. httparse takes one for a line's end; a proxy in
/// front may not (it may keep it inside a field's value), and then the two would frame the
/// requests differently: the shape of request smuggling. Refused, as the trailers' is.
fn has_bare_lf(head: &[u8]) -> bool {
    memchr::memchr_iter(b'\n', head).any(|at| at == 0 || head[at - 1] != b'\r')
}

fn memchr_byte(needle: u8, haystack: &[u8]) -> Option<usize> {
    haystack.iter().position(|&b| b == needle)
}

/// Splits an origin-form or absolute-form target into path and query.
fn split_target(target: &str) -> Result<(&str, &str), HeadError> {
    let origin_form = if let Some(rest) = target
        .strip_prefix("http://")
        .or_else(|| target.strip_prefix("https://"))
    {
        // Absolute form (RFC 9112 section 3.2.2): the server must accept it; the authority
        // is ignored, the path is what routes.
        match rest.find(['/', '?']) {
            Some(i) if rest.as_bytes()[i] == b'/' => &rest[i..],
            _ => "/",
        }
    } else {
        target
    };
    if !origin_form.starts_with('/') {
        // Asterisk form and authority form name no resource of ours.
        return Ok((origin_form, ""));
    }
    Ok(match origin_form.split_once('?') {
        Some((path, query)) => (path, query),
        None => (origin_form, ""),
    })
}

struct Fields {
    framing: Framing,
    keep_alive: bool,
    expect_continue: bool,
    has_origin: bool,
    authorization: Option<Span>,
    api_key: Option<Span>,
    content_type: Option<Span>,
    host: Option<Span>,
}

/// The fields the server acts on; the values it keeps are appended to `text`.
fn collect_fields(
    headers: &[httparse::Header<'_>],
    version: Version,
    text: &mut String,
) -> Result<Fields, HeadError> {
    let mut content_length: Option<u64> = None;
    let mut transfer_encoding = false;
    let mut hosts = 0usize;
    let mut connection_close = false;
    let mut connection_keep_alive = false;
    let mut out = Fields {
        framing: Framing::Empty,
        keep_alive: false,
        expect_continue: false,
        has_origin: false,
        authorization: None,
        api_key: None,
        content_type: None,
        host: None,
    };
    for header in headers {
        let name = header.name;
        let value = header.value;
        if name.eq_ignore_ascii_case("content-length") {
            if content_length.is_some() {
                return Err(HeadError::Framing("repeated Content-Length"));
            }
            content_length = Some(parse_content_length(value)?);
        } else if name.eq_ignore_ascii_case("transfer-encoding") {
            if transfer_encoding {
                return Err(HeadError::Framing("repeated Transfer-Encoding"));
            }
            let coding = std::str::from_utf8(value)
                .map_err(|_| HeadError::Framing("unknown transfer coding"))?
                .trim_matches([' ', '\t']);
            if !coding.eq_ignore_ascii_case("chunked") {
                return Err(HeadError::Framing("unknown transfer coding"));
            }
            transfer_encoding = true;
        } else if name.eq_ignore_ascii_case("host") {
            hosts += 1;
            if hosts == 1 {
                out.host = std::str::from_utf8(value)
                    .ok()
                    .map(|host| Span::push(text, host));
            }
        } else if name.eq_ignore_ascii_case("connection") {
            for token in value.split(|&b| b == b',') {
                let token = trim_ascii(token);
                if token.eq_ignore_ascii_case(b"close") {
                    connection_close = true;
                } else if token.eq_ignore_ascii_case(b"keep-alive") {
                    connection_keep_alive = true;
                }
            }
        } else if name.eq_ignore_ascii_case("expect") {
            if !trim_ascii(value).eq_ignore_ascii_case(b"100-continue") {
                return Err(HeadError::UnsupportedExpectation);
            }
            out.expect_continue = true;
        } else if is_browser_field(name.as_bytes()) {
            out.has_origin = true;
        } else if name.eq_ignore_ascii_case("authorization") {
            set_once(
                text,
                &mut out.authorization,
                value,
                "repeated Authorization",
            )?;
        } else if name.eq_ignore_ascii_case("x-api-key") {
            set_once(
                text,
                &mut out.api_key,
                value,
                "X-Api-Key with another X-Api-Key or X-Goog-Api-Key",
            )?;
        } else if name.eq_ignore_ascii_case("x-goog-api-key") {
            // Google's header for an API key, which Perspective's callers may send instead of
            // `?key=`: the same key field, so one of the two at most.
            set_once(
                text,
                &mut out.api_key,
                value,
                "X-Goog-Api-Key with another X-Goog-Api-Key or X-Api-Key",
            )?;
        } else if name.eq_ignore_ascii_case("content-type") {
            set_once(text, &mut out.content_type, value, "repeated Content-Type")?;
        }
    }
    if transfer_encoding && content_length.is_some() {
        return Err(HeadError::Framing(
            "both Content-Length and Transfer-Encoding",
        ));
    }
    if transfer_encoding && version == Version::Http10 {
        return Err(HeadError::Framing(
            "Transfer-Encoding on an HTTP/1.0 request",
        ));
    }
    if version == Version::Http11 && hosts != 1 {
        return Err(HeadError::Malformed(
            "an HTTP/1.1 request needs exactly one Host",
        ));
    }
    if hosts > 1 {
        // RFC 9112 3.2: more than one Host is a 400 whatever the version.
        return Err(HeadError::Malformed("more than one Host"));
    }
    out.framing = match (transfer_encoding, content_length) {
        (true, _) => Framing::Chunked,
        (false, Some(0) | None) => Framing::Empty,
        (false, Some(n)) => Framing::Length(n),
    };
    out.keep_alive = match version {
        Version::Http11 => !connection_close,
        Version::Http10 => connection_keep_alive && !connection_close,
    };
    Ok(out)
}

fn set_once(
    text: &mut String,
    slot: &mut Option<Span>,
    value: &[u8],
    repeated: &'static str,
) -> Result<(), HeadError> {
    if slot.is_some() {
        return Err(HeadError::Malformed(repeated));
    }
    let value = std::str::from_utf8(value)
        .map_err(|_| HeadError::Malformed("header value is not UTF-8"))?;
    *slot = Some(Span::push(text, value.trim_matches([' ', '\t'])));
    Ok(())
}

/// `Content-Length` is 1*DIGIT (RFC 9110 section 8.6); a list, a sign or spaces inside are refused.
fn parse_content_length(value: &[u8]) -> Result<u64, HeadError> {
    let digits = trim_ascii(value);
    if digits.is_empty() || digits.len() > 19 || !digits.iter().all(u8::is_ascii_digit) {
        return Err(HeadError::Framing("invalid Content-Length"));
    }
    Ok(digits
        .iter()
        .fold(0u64, |n, &d| n * 10 + u64::from(d - b'0')))
}

fn trim_ascii(bytes: &[u8]) -> &[u8] {
    let start = bytes
        .iter()
        .position(|&b| b != b' ' && b != b'\t')
        .unwrap_or(bytes.len());
    let end = bytes
        .iter()
        .rposition(|&b| b != b' ' && b != b'\t')
        .map_or(start, |i| i + 1);
    &bytes[start..end]
}

fn httparse_reason(error: httparse::Error) -> &'static str {
    match error {
        httparse::Error::HeaderName => "invalid header name",
        httparse::Error::HeaderValue => "invalid header value",
        httparse::Error::NewLine => "invalid line ending",
        httparse::Error::Status => "invalid status",
        httparse::Error::Token => "invalid token in request line",
        httparse::Error::TooManyHeaders => "too many header fields",
        httparse::Error::Version => "unsupported HTTP version",
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use proptest::prelude::*;

    fn parse(bytes: &[u8]) -> Result<Option<(RequestHead, usize)>, HeadError> {
        parse_head(bytes, &HeadLimits::default())
    }

    fn complete(bytes: &[u8]) -> RequestHead {
        let (head, len) = parse(bytes).expect("valid").expect("complete");
        assert_eq!(len, bytes.len());
        head
    }

    #[test]
    fn simple_get() {
        let head = complete(b"GET /v1/workflows?x=1 HTTP/1.1\r\nHost: a\r\nX-Api-Key: k\r\n\r\n");
        assert_eq!(head.method, Method::Get);
        assert_eq!(head.version, Version::Http11);
        assert_eq!(head.path(), "/v1/workflows");
        assert_eq!(head.query(), "x=1");
        assert_eq!(head.framing, Framing::Empty);
        assert!(head.keep_alive);
        assert_eq!(head.api_key(), Some("k"));
        assert!(!head.has_origin);
    }

    #[test]
    fn googles_key_header_is_the_api_key_and_goes_alone() {
        let head = complete(
            b"POST /v1alpha1/comments:analyze HTTP/1.1\r\nHost: a\r\nx-goog-api-key:  k \r\n\r\n",
        );
        assert_eq!(head.api_key(), Some("k"));
        for both in [
            &b"GET / HTTP/1.1\r\nHost: a\r\nX-Goog-Api-Key: k\r\nX-Api-Key: k\r\n\r\n"[..],
            b"GET / HTTP/1.1\r\nHost: a\r\nX-Api-Key: k\r\nX-Goog-Api-Key: k\r\n\r\n",
            b"GET / HTTP/1.1\r\nHost: a\r\nX-Goog-Api-Key: k\r\nX-Goog-Api-Key: k\r\n\r\n",
        ] {
            assert!(
                matches!(parse(both), Err(HeadError::Malformed(_))),
                "{}",
                String::from_utf8_lossy(both)
            );
        }
    }

    #[test]
    fn incomplete_heads_ask_for_more() {
        let full = b"POST /v1/text HTTP/1.1\r\nHost: a\r\nContent-Length: 3\r\n\r\n";
        for cut in 0..full.len() {
            assert_eq!(parse(&full[..cut]), Ok(None), "cut at {cut}");
        }
    }

    #[test]
    fn pipelined_bytes_after_the_head_are_left_alone() {
        let bytes = b"GET /health HTTP/1.1\r\nHost: a\r\n\r\nGET /health HTTP/1.1\r\n";
        let (_, len) = parse(bytes).unwrap().unwrap();
        assert_eq!(&bytes[len..], b"GET /health HTTP/1.1\r\n");
    }

    #[test]
    fn http10_closes_unless_keep_alive() {
        assert!(!complete(b"GET / HTTP/1.0\r\n\r\n").keep_alive);
        assert!(complete(b"GET / HTTP/1.0\r\nConnection: keep-alive\r\n\r\n").keep_alive);
        assert!(!complete(b"GET / HTTP/1.1\r\nHost: a\r\nConnection: close\r\n\r\n").keep_alive);
        assert!(
            !complete(b"GET / HTTP/1.1\r\nHost: a\r\nConnection: Upgrade, CLOSE\r\n\r\n")
                .keep_alive
        );
    }

    #[test]
    fn content_length_and_chunked() {
        let head = complete(b"POST / HTTP/1.1\r\nHost: a\r\nContent-Length: 42\r\n\r\n");
        assert_eq!(head.framing, Framing::Length(42));
        let head = complete(b"POST / HTTP/1.1\r\nHost: a\r\nContent-Length: 0\r\n\r\n");
        assert_eq!(head.framing, Framing::Empty);
        let head = complete(b"POST / HTTP/1.1\r\nHost: a\r\nTransfer-Encoding: Chunked\r\n\r\n");
        assert_eq!(head.framing, Framing::Chunked);
    }

    #[test]
    fn smuggling_shapes_are_refused() {
        let cases: &[&[u8]] = &[
            b"POST / HTTP/1.1\r\nHost: a\r\nContent-Length: 5\r\nTransfer-Encoding: chunked\r\n\r\n",
            b"POST / HTTP/1.1\r\nHost: a\r\nTransfer-Encoding: chunked\r\nContent-Length: 5\r\n\r\n",
            b"POST / HTTP/1.1\r\nHost: a\r\nContent-Length: 5\r\nContent-Length: 5\r\n\r\n",
            b"POST / HTTP/1.1\r\nHost: a\r\nContent-Length: 5, 5\r\n\r\n",
            b"POST / HTTP/1.1\r\nHost: a\r\nContent-Length: +5\r\n\r\n",
            b"POST / HTTP/1.1\r\nHost: a\r\nContent-Length: -1\r\n\r\n",
            b"POST / HTTP/1.1\r\nHost: a\r\nContent-Length: 0x10\r\n\r\n",
            b"POST / HTTP/1.1\r\nHost: a\r\nContent-Length: \r\n\r\n",
            b"POST / HTTP/1.1\r\nHost: a\r\nContent-Length: 99999999999999999999\r\n\r\n",
            b"POST / HTTP/1.1\r\nHost: a\r\nTransfer-Encoding: gzip, chunked\r\n\r\n",
            b"POST / HTTP/1.1\r\nHost: a\r\nTransfer-Encoding: identity\r\n\r\n",
            b"POST / HTTP/1.1\r\nHost: a\r\nTransfer-Encoding: chunked\r\nTransfer-Encoding: chunked\r\n\r\n",
            b"POST / HTTP/1.1\r\nHost: a\r\nTransfer-Encoding: xchunked\r\n\r\n",
            b"POST / HTTP/1.0\r\nTransfer-Encoding: chunked\r\n\r\n",
        ];
        for case in cases {
            match parse(case) {
                Err(HeadError::Framing(_)) => {}
                other => panic!("{:?} gave {other:?}", String::from_utf8_lossy(case)),
            }
        }
    }

    #[test]
    fn whitespace_before_colon_and_obs_fold_are_refused() {
        assert!(matches!(
            parse(b"POST / HTTP/1.1\r\nHost: a\r\nContent-Length : 5\r\n\r\n"),
            Err(HeadError::Malformed(_))
        ));
        assert!(matches!(
            parse(b"POST / HTTP/1.1\r\nHost: a\r\nX-A: b\r\n c\r\n\r\n"),
            Err(HeadError::Malformed(_))
        ));
    }

    #[test]
    fn host_is_required_once_on_http11() {
        assert!(matches!(
            parse(b"GET / HTTP/1.1\r\n\r\n"),
            Err(HeadError::Malformed(_))
        ));
        assert!(matches!(
            parse(b"GET / HTTP/1.1\r\nHost: a\r\nHost: b\r\n\r\n"),
            Err(HeadError::Malformed(_))
        ));
        assert!(parse(b"GET / HTTP/1.0\r\n\r\n").unwrap().is_some());
        assert!(matches!(
            parse(b"GET / HTTP/1.0\r\nHost: a\r\nHost: b\r\n\r\n"),
            Err(HeadError::Malformed(_))
        ));
    }

    #[test]
    fn expect() {
        assert!(
            complete(
                b"POST / HTTP/1.1\r\nHost: a\r\nExpect: 100-Continue\r\nContent-Length: 1\r\n\r\n"
            )
            .expect_continue
        );
        assert_eq!(
            parse(b"POST / HTTP/1.1\r\nHost: a\r\nExpect: 200-ok\r\n\r\n"),
            Err(HeadError::UnsupportedExpectation)
        );
    }

    /// Issue 14: an `<img src>` of the compatible GET route sends Fetch Metadata and no
    /// `Origin`; a key in such a URL is leaked, so it is refused like an `Origin`.
    #[test]
    fn fetch_metadata_is_a_browser() {
        for field in [
            "Sec-Fetch-Site: cross-site",
            "Sec-Fetch-Dest : image",
            "sec-fetch-user: ?1",
        ] {
            let request = format!(
                "GET /1.0/check-workflow.json?url=x HTTP/1.1\r\nHost: a\r\n{field}\r\n\r\n"
            );
            match parse(request.as_bytes()) {
                Ok(Some((head, _))) => assert!(head.has_origin, "{field}"),
                Err(error) => assert_eq!(error, HeadError::Origin, "{field}"),
                Ok(None) => panic!("{field}: a whole head"),
            }
            assert!(has_origin_line(request.as_bytes()), "{field}");
        }
        let (head, _) = parse(b"GET / HTTP/1.1\r\nHost: a\r\nSec-Fetch-Nope: x\r\n\r\n")
            .unwrap()
            .unwrap();
        assert!(!head.has_origin);
        // Node's built-in fetch sends `Sec-Fetch-Mode: cors` alone, from servers.
        let request = b"POST /v1/moderations HTTP/1.1\r\nHost: a\r\nsec-fetch-mode: cors\r\n\r\n";
        let (head, _) = parse(request).unwrap().unwrap();
        assert!(!head.has_origin);
        assert!(!has_origin_line(request));
        assert_eq!(head.host(), Some("a"), "the Host is kept");
    }

    #[test]
    fn origin_wins_over_framing_errors() {
        assert_eq!(
            parse(b"POST / HTTP/1.1\r\nHost: a\r\nOrigin: x\r\nContent-Length: 1\r\nContent-Length: 1\r\n\r\n"),
            Err(HeadError::Origin)
        );
        assert_eq!(
            parse(b"GET / HTTP/1.1\r\nOrigin: x\r\nExpect: nope\r\nHost: a\r\n\r\n"),
            Err(HeadError::Origin)
        );
    }

    #[test]
    fn origin_wins_over_limits_and_grammar() {
        let limits = HeadLimits {
            head_bytes_max: 256,
            uri_bytes_max: 32,
        };
        let long_target = format!(
            "GET /{} HTTP/1.1\r\nOrigin: x\r\nHost: a\r\n\r\n",
            "a".repeat(64)
        );
        assert_eq!(
            parse_head(long_target.as_bytes(), &limits),
            Err(HeadError::Origin)
        );
        let huge = format!(
            "GET / HTTP/1.1\r\norigin: x\r\nX: {}\r\n\r\n",
            "b".repeat(300)
        );
        assert_eq!(parse_head(huge.as_bytes(), &limits), Err(HeadError::Origin));
        let many: String = (0..HEADER_COUNT_MAX + 1)
            .map(|i| format!("X-{i}: 1\r\n"))
            .collect();
        let many = format!("GET / HTTP/1.1\r\nORIGIN: x\r\n{many}\r\n");
        let big = HeadLimits {
            head_bytes_max: 1 << 20,
            uri_bytes_max: 32,
        };
        assert_eq!(parse_head(many.as_bytes(), &big), Err(HeadError::Origin));
        assert_eq!(
            parse_head(
                b"GET / HTTP/1.1\r\nOrigin: x\r\nBad Name: 1\r\n\r\n",
                &limits
            ),
            Err(HeadError::Origin)
        );
        // An Origin line after the head is a body's bytes, not a field.
        assert_eq!(
            parse_head(
                b"GET / HTTP/1.1\r\nBad Name: 1\r\n\r\nOrigin: x\r\n",
                &limits
            ),
            Err(HeadError::Malformed("invalid header name"))
        );
        // Blank lines before the request line, a space before the colon: still a browser.
        assert_eq!(
            parse_head(
                b"\r\n\r\nGET / HTTP/1.1\r\nOrigin: x\r\nBad Name: 1\r\n\r\n",
                &limits
            ),
            Err(HeadError::Origin)
        );
        assert_eq!(
            parse_head(b"GET / HTTP/1.1\r\nHost: a\r\nOrigin : x\r\n\r\n", &limits),
            Err(HeadError::Origin)
        );
        // Not a field named Origin.
        assert_eq!(
            parse_head(
                b"GET / HTTP/1.1\r\nX-Origin: x\r\nBad Name: 1\r\n\r\n",
                &limits
            ),
            Err(HeadError::Malformed("invalid header name"))
        );
    }

    #[test]
    fn origin_is_noticed_even_empty() {
        assert!(complete(b"GET / HTTP/1.1\r\nHost: a\r\nOrigin: \r\n\r\n").has_origin);
        assert!(complete(b"GET / HTTP/1.1\r\nHost: a\r\norigin: https://x\r\n\r\n").has_origin);
    }

    #[test]
    fn absolute_form_routes_by_path() {
        let head = complete(b"GET http://example.com/v1/workflows?a=b HTTP/1.1\r\nHost: a\r\n\r\n");
        assert_eq!(head.path(), "/v1/workflows");
        assert_eq!(head.query(), "a=b");
        assert_eq!(
            complete(b"GET http://example.com HTTP/1.1\r\nHost: a\r\n\r\n").path(),
            "/"
        );
    }

    #[test]
    fn limits() {
        let limits = HeadLimits {
            head_bytes_max: 128,
            uri_bytes_max: 32,
        };
        let long_uri = format!("GET /{} HTTP/1.1\r\nHost: a\r\n\r\n", "a".repeat(40));
        assert_eq!(
            parse_head(long_uri.as_bytes(), &limits),
            Err(HeadError::UriTooLong)
        );
        // The request line alone shows the target is too long, before the head completes.
        let partial = format!("GET /{}", "a".repeat(40));
        assert_eq!(
            parse_head(partial.as_bytes(), &limits),
            Err(HeadError::UriTooLong)
        );
        let big = format!(
            "GET / HTTP/1.1\r\nHost: a\r\nX: {}\r\n\r\n",
            "b".repeat(200)
        );
        assert_eq!(
            parse_head(big.as_bytes(), &limits),
            Err(HeadError::TooLarge)
        );
        assert_eq!(
            parse_head(&big.as_bytes()[..150], &limits),
            Err(HeadError::TooLarge)
        );
        let mut many = String::from("GET / HTTP/1.1\r\nHost: a\r\n");
        for i in 0..HEADER_COUNT_MAX {
            many.push_str(&format!("X-{i}: v\r\n"));
        }
        many.push_str("\r\n");
        assert_eq!(parse(many.as_bytes()), Err(HeadError::TooManyHeaders));
    }

    #[test]
    fn a_line_ending_in_lf_alone_is_refused() {
        for case in [
            &b"GET / HTTP/1.1\nHost: a\r\n\r\n"[..],
            b"GET / HTTP/1.1\r\nHost: a\n\r\n",
            b"GET / HTTP/1.1\r\nHost: a\r\n\n",
            b"GET / HTTP/1.1\nHost: a\n\n",
            b"POST /v1/text HTTP/1.1\r\nHost: a\r\nX: 1\nContent-Length: 38\r\n\r\n",
        ] {
            assert_eq!(
                parse(case),
                Err(HeadError::Malformed(
                    "a line of the head ends in LF without CR"
                )),
                "{:?}",
                String::from_utf8_lossy(case)
            );
        }
        // A bare LF in what follows the head is the body's business.
        let (_, len) = parse(b"POST / HTTP/1.1\r\nHost: a\r\nContent-Length: 2\r\n\r\n\n\n")
            .unwrap()
            .unwrap();
        assert_eq!(len, 47);
    }

    #[test]
    fn garbage_is_malformed() {
        assert!(matches!(
            parse(b"\x00\x01\x02 / HTTP/1.1\r\n\r\n"),
            Err(HeadError::Malformed(_))
        ));
        assert!(matches!(
            parse(b"GET / HTTP/2.0\r\n\r\n"),
            Err(HeadError::Malformed(_))
        ));
        assert!(matches!(
            parse(b"GET / FTP/1.1\r\n\r\n"),
            Err(HeadError::Malformed(_))
        ));
    }

    /// A connection's heads share one string: each is what a fresh parse gives, whatever
    /// heads (complete, cut short, refused) went through the string before.
    #[test]
    fn a_reused_string_gives_the_heads_of_fresh_ones() {
        let heads: [&[u8]; 5] = [
            b"POST /v1/text?x=1 HTTP/1.1\r\nHost: a\r\nAuthorization: Bearer k\r\nContent-Type: application/json\r\nContent-Length: 2\r\n\r\n",
            b"GET /v1/workflows HTTP/1.1\r\nHost: b\r\nX-Api-Key: other\r\n\r\n",
            b"GET /v1/workflows HTTP/1.1\r\nHost: b\r\nX-Api",
            b"GET / HTTP/1.1\r\nHost: a\r\nHost: b\r\n\r\n",
            b"GET /health HTTP/1.0\r\n\r\n",
        ];
        let limits = HeadLimits::default();
        let mut text = String::new();
        for round in 0..2 {
            for head in heads {
                let reused = parse_head_into(head, &limits, &mut text);
                assert_eq!(reused, parse(head), "round {round}");
                if let Ok(Some((head, _))) = reused {
                    text = head.into_text();
                    assert!(text.is_empty());
                }
            }
        }
    }

    proptest! {
        #[test]
        fn random_bytes_never_panic(bytes in proptest::collection::vec(any::<u8>(), 0..2048)) {
            let limits = HeadLimits { head_bytes_max: 1024, uri_bytes_max: 256 };
            match parse_head(&bytes, &limits) {
                Ok(Some((head, len))) => {
                    prop_assert!(len <= bytes.len());
                    prop_assert!(len <= limits.head_bytes_max);
                    prop_assert!(head.path().len() + head.query().len() <= limits.uri_bytes_max);
                }
                // "Need more" only below the limit: the caller's buffer stays bounded.
                Ok(None) => prop_assert!(bytes.len() < limits.head_bytes_max),
                Err(_) => {}
            }
        }

        /// Issue 14, defect 1: any UTF-8 (and any byte) in the key headers is parsed or
        /// refused, never a panic; a value that parses is the bytes sent, trimmed.
        #[test]
        fn any_text_in_key_headers_parses_or_is_refused(
            value in "\\PC{0,90}",
            raw in proptest::collection::vec(any::<u8>(), 0..90),
            name in prop_oneof![Just("Authorization"), Just("X-Api-Key"), Just("Content-Type")],
        ) {
            let limits = HeadLimits { head_bytes_max: 1024, uri_bytes_max: 256 };
            for bytes in [value.as_bytes(), raw.as_slice()] {
                let mut head = format!("GET /v1/workflows HTTP/1.1\r\nHost: h\r\n{name}: ").into_bytes();
                head.extend_from_slice(bytes);
                head.extend_from_slice(b"\r\n\r\n");
                if let Ok(Some((parsed, _))) = parse_head(&head, &limits) {
                    let got = match name {
                        "Authorization" => parsed.authorization(),
                        "X-Api-Key" => parsed.api_key(),
                        _ => parsed.content_type(),
                    };
                    // The value is what was sent up to the end of its line, trimmed: a run of
                    // the bytes sent (which may go on, past a line feed, with bytes that are
                    // not UTF-8).
                    if let Some(got) = got {
                        let got = got.as_bytes();
                        prop_assert!(got.is_empty() || bytes.windows(got.len()).any(|run| run == got));
                    }
                }
            }
        }

        #[test]
        fn valid_heads_with_random_fields_parse(
            names in proptest::collection::vec("[A-Za-z][A-Za-z0-9-]{0,15}", 0..20),
            value in "[ -~]{0,40}",
            split in 0usize..200,
        ) {
            let mut text = String::from("GET /health HTTP/1.1\r\nHost: h\r\n");
            for name in &names {
                let lower = name.to_ascii_lowercase();
                if ["host", "content-length", "transfer-encoding", "expect", "authorization",
                    "x-api-key", "x-goog-api-key", "content-type", "connection"].contains(&lower.as_str()) {
                    continue;
                }
                text.push_str(&format!("{name}: {}\r\n", value.trim()));
            }
            text.push_str("\r\n");
            let bytes = text.as_bytes();
            let cut = split.min(bytes.len());
            if cut < bytes.len() {
                prop_assert_eq!(parse(&bytes[..cut]), Ok(None));
            }
            let (head, len) = parse(bytes).unwrap().unwrap();
            prop_assert_eq!(len, bytes.len());
            prop_assert_eq!(head.path(), "/health");
        }
    }
}
