//! `POST /v1/text` (`docs/interface.md#routes`): a JSON TextRequest, checked by the workflow's text checks.
//!
//! Order: the key (from the headers), then the content type (415 without JSON), then the body
//! (413 over `limits.text_body_bytes_max`), then its fields: JSON (400 saying where it broke),
//! `ref` (400), `context` (413, every plan), `text` (413 over the plan's characters), the
//! workflow (400 unknown, 403 not allowed), then the checks.
//!
//! The body is parsed in place by simd-json from a per-shard pooled buffer, with the shard's
//! kept simd-json buffers; its strings are unescaped in place and borrowed, not copied.

use futures_lite::{AsyncRead, AsyncWrite};
use serde::Deserialize;

use super::buffers::{BufferPool, JsonBuffers, PooledBuffer};
use super::context::Context;
use super::finish::finish_check;
use super::request::RequestNotes;
use crate::auth::Caller;
use crate::bounds::{CONTEXT_CHARS_MAX, REF_CHARS_MAX};
use crate::content::ContentKind;
use crate::error::{ApiError, ApiResult, ErrorKind};
use crate::http::conn::Exchange;
use crate::http::response::Response;

pub const DEFAULT_WORKFLOW: &str = "default";
/// Nesting of the JSON body (a TextRequest needs 1).
pub const JSON_DEPTH_MAX: usize = 16;

/// The fields borrow from the body: simd-json unescapes every string in place, so a `&str`
/// always borrows (serde's `Cow` in an `Option` would copy each one into a `String`).
#[derive(Deserialize)]
struct TextRequest<'a> {
    #[serde(default)]
    text: Option<&'a str>,
    #[serde(default)]
    workflow: Option<&'a str>,
    #[serde(default, rename = "ref")]
    reference: Option<&'a str>,
    #[serde(default)]
    context: Option<&'a str>,
}

pub async fn check<S: AsyncRead + AsyncWrite + Unpin>(
    cx: &Context,
    exchange: &mut Exchange<'_, S>,
    notes: &mut RequestNotes,
) -> ApiResult<Response> {
    let caller = notes
        .admit_check(cx, &exchange.head, None, ContentKind::Text)
        .await?;
    let mut body = read_json_body(
        cx,
        exchange,
        &cx.text_buffers,
        cx.request_limits.text_body_bytes_max,
    )
    .await?;
    // serde would also read a JSON array into the struct, field by field: only an object
    // is a TextRequest.
    if body.iter().find(|b| !b.is_ascii_whitespace()) != Some(&b'{') {
        return Err(ApiError::bad_request(
            "the body must be a JSON object (a TextRequest)",
        ));
    }
    // The parser recurses per nesting level (to skip unknown fields), so depth is
    // bounded before it runs.
    if nesting_exceeds(&body, JSON_DEPTH_MAX) {
        return Err(ApiError::bad_request(format!(
            "the JSON body nests deeper than {JSON_DEPTH_MAX} levels"
        )));
    }
    let request: TextRequest<'_> = cx
        .json_buffers
        .parse(&mut body)
        .map_err(|error| malformed_json(&error))?;
    let text = request
        .text
        .ok_or_else(|| ApiError::bad_request("`text` is required"))?;
    if let Some(reference) = request.reference {
        validate_ref(reference)?;
        notes.reference = Some(reference.to_owned());
    }
    if let Some(context) = request.context {
        if context.chars().count() > CONTEXT_CHARS_MAX {
            return Err(ApiError::new(
                ErrorKind::TextTooLong,
                format!("`context` is over {CONTEXT_CHARS_MAX} characters"),
            ));
        }
    }
    let workflow = request.workflow.unwrap_or(DEFAULT_WORKFLOW);
    // The free plan ignores `context`; paid plans give it to the models that use it.
    let context = request.context.filter(|_| caller.org.limits.paid);
    check_text(
        cx,
        &caller,
        notes,
        TextCheck {
            workflow,
            text,
            context,
            request_id: exchange.request_id.as_str(),
        },
    )
    .await
}

/// What a text check needs once the request is read, whatever route it came by (the `ref`,
/// when there is one, is in the request's notes).
pub struct TextCheck<'a> {
    pub workflow: &'a str,
    pub text: &'a str,
    pub context: Option<&'a str>,
    pub request_id: &'a str,
}

/// The 400 for a body simd-json refused. Its type errors carry no position (the deserializer
/// does not know one), so they are said in words.
fn malformed_json(error: &simd_json::Error) -> ApiError {
    use simd_json::ErrorType;
    let message = match error.error() {
        ErrorType::ExpectedString
        | ErrorType::ExpectedMap
        | ErrorType::ExpectedArray
        | ErrorType::ExpectedBoolean
        | ErrorType::ExpectedInteger
        | ErrorType::ExpectedUnsigned
        | ErrorType::ExpectedSigned
        | ErrorType::ExpectedFloat
        | ErrorType::ExpectedNumber
        | ErrorType::ExpectedNull
        | ErrorType::Unexpected(..) => "a field of the body has the wrong type: `text`, \
            `workflow`, `ref` and `context` are strings"
            .to_owned(),
        ErrorType::InvalidUtf8 => "the body is not valid UTF-8".to_owned(),
        _ => format!("malformed JSON body: {error}"),
    };
    ApiError::bad_request(message)
}

/// Text limits, the workflow, the checks, the decision and the answer.
pub async fn check_text(
    cx: &Context,
    caller: &Caller,
    notes: &mut RequestNotes,
    check: TextCheck<'_>,
) -> ApiResult<Response> {
    let workflows = cx.workflows()?;
    notes.note_workflow(&workflows, check.workflow);
    let chars_max = caller.org.limits.text_chars_max as usize;
    if check.text.len() > chars_max && check.text.chars().count() > chars_max {
        return Err(ApiError::new(
            ErrorKind::TextTooLong,
            format!("`text` is over the {chars_max} characters of this plan"),
        ));
    }
    let workflow = caller.authorize(ContentKind::Text, check.workflow, &workflows)?;
    if workflow.definition.text_checks.is_empty() {
        return Err(ApiError::bad_request(format!(
            "workflow '{}' has no checks for texts",
            workflow.name
        )));
    }
    let definition = &workflow.definition;
    let lists = cx.lists_of(&caller.org.record.name, &definition.lists);
    let mut board = cx
        .checks
        .check_text(&definition.text_checks, &lists, check.text, check.context)
        .await?;
    cx.checks.add_language(&mut board, check.text);
    Ok(finish_check(cx, notes, workflow, &board, check.request_id))
}

/// A JSON body: `Content-Type: application/json` (415), then the body into a buffer of
/// `pool`, at most `max_bytes` (413) within the body timeout (408).
pub async fn read_json_body<'p, S: AsyncRead + AsyncWrite + Unpin>(
    cx: &Context,
    exchange: &mut Exchange<'_, S>,
    pool: &'p BufferPool,
    max_bytes: usize,
) -> ApiResult<PooledBuffer<'p>> {
    require_json(exchange.head.content_type())?;
    let mut body = pool.take();
    let deadline = cx.body_deadline();
    exchange.read_body(&mut body, max_bytes, deadline).await?;
    Ok(body)
}

/// `Content-Type: application/json`, parameters (such as `charset=utf-8`) allowed.
pub fn require_json(content_type: Option<&str>) -> ApiResult<()> {
    let media = content_type
        .and_then(|value| value.split(';').next())
        .map(str::trim);
    match media {
        Some(media) if media.eq_ignore_ascii_case("application/json") => Ok(()),
        _ => Err(ApiError::new(
            ErrorKind::UnsupportedMedia,
            "send the text as JSON with 'Content-Type: application/json'",
        )),
    }
}

/// A JSON object body of a compatible route, parsed in place: not an object, nested past
/// [`JSON_DEPTH_MAX`] (the parser recurses per level), with more than `values_max` values
/// (commas outside strings: the parser and serde's untagged enums hold tens of bytes per
/// value, so a body of empty strings would cost fifty times its size before any limit of the
/// route's own), or not a `T`: 400, the last saying `shape`.
pub fn parse_object<'b, T: Deserialize<'b>>(
    json: &JsonBuffers,
    body: &'b mut [u8],
    values_max: usize,
    shape: &'static str,
) -> ApiResult<T> {
    if body.iter().find(|b| !b.is_ascii_whitespace()) != Some(&b'{') {
        return Err(ApiError::bad_request("the body must be a JSON object"));
    }
    if nesting_exceeds(body, JSON_DEPTH_MAX) {
        return Err(ApiError::bad_request(format!(
            "the JSON body nests deeper than {JSON_DEPTH_MAX} levels"
        )));
    }
    if commas_outside_strings(body) >= values_max {
        return Err(ApiError::bad_request(format!(
            "the JSON body holds more than {values_max} values"
        )));
    }
    json.parse(body).map_err(|_| ApiError::bad_request(shape))
}

/// The bytes of `json` outside its strings (quotes and string contents left out).
fn outside_strings(json: &[u8]) -> OutsideStrings<'_> {
    OutsideStrings { json, at: 0 }
}

/// See [`outside_strings`]. A string's contents are skipped with `memchr` to its next quote or
/// backslash, so a text costs a few vector compares per 32 bytes instead of a step per byte.
struct OutsideStrings<'a> {
    json: &'a [u8],
    /// The next byte to look at; may pass the end after an escape at the very end.
    at: usize,
}

impl Iterator for OutsideStrings<'_> {
    type Item = u8;

    fn next(&mut self) -> Option<u8> {
        loop {
            let byte = *self.json.get(self.at)?;
            self.at += 1;
            if byte != b'"' {
                return Some(byte);
            }
            // Inside a string: to the byte after its closing quote, or to the end.
            self.at = loop {
                let rest = self.json.get(self.at..).unwrap_or_default();
                match memchr::memchr2(b'"', b'\\', rest) {
                    None => break self.json.len(),
                    Some(found) if rest[found] == b'"' => break self.at + found + 1,
                    // A backslash escapes the byte after it.
                    Some(found) => self.at += found + 2,
                }
            };
        }
    }
}

/// The commas of `json` outside its strings.
fn commas_outside_strings(json: &[u8]) -> usize {
    outside_strings(json).filter(|&byte| byte == b',').count()
}

/// Whether the brackets of `json` (outside strings) nest deeper than `max`.
pub fn nesting_exceeds(json: &[u8], max: usize) -> bool {
    let mut depth = 0usize;
    for byte in outside_strings(json) {
        match byte {
            b'[' | b'{' => {
                depth += 1;
                if depth > max {
                    return true;
                }
            }
            b']' | b'}' => depth = depth.saturating_sub(1),
            _ => {}
        }
    }
    false
}

/// `ref`: 1 to 128 characters, none of them a control character.
pub fn validate_ref(reference: &str) -> ApiResult<()> {
    let count = reference.chars().count();
    if count == 0 || count > REF_CHARS_MAX {
        return Err(ApiError::bad_request(format!(
            "`ref` must be 1 to {REF_CHARS_MAX} characters"
        )));
    }
    if reference.chars().any(char::is_control) {
        return Err(ApiError::bad_request(
            "`ref` must not contain control characters",
        ));
    }
    Ok(())
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn refs() {
        assert!(validate_ref("order-42").is_ok());
        assert!(validate_ref(&"é".repeat(128)).is_ok());
        assert!(validate_ref(&"é".repeat(129)).is_err());
        assert!(validate_ref("").is_err());
        assert!(validate_ref("a\u{7}b").is_err());
        assert!(validate_ref("a\u{85}b").is_err());
    }

    #[test]
    fn nesting() {
        assert!(!nesting_exceeds(br#"{"text":"[[[[[[[[[[[[[[[[[[[[[["}"#, 2));
        assert!(!nesting_exceeds(br#"{"a":{"b":[1]}}"#, 3));
        assert!(nesting_exceeds(br#"{"a":{"b":[1]}}"#, 2));
        assert!(!nesting_exceeds(br#"{"t":"\"[[[["}"#, 1));
        let deep = format!("{{\"x\":{}1{}}}", "[".repeat(100_000), "]".repeat(100_000));
        assert!(nesting_exceeds(deep.as_bytes(), JSON_DEPTH_MAX));
    }

    /// The bytes outside strings, one byte at a time: what [`outside_strings`] must give.
    fn outside_strings_stepwise(json: &[u8]) -> Vec<u8> {
        let (mut in_string, mut escaped) = (false, false);
        let mut outside = Vec::new();
        for &byte in json {
            match (in_string, escaped, byte) {
                (true, true, _) => escaped = false,
                (true, false, b'\\') => escaped = true,
                (true, false, b'"') | (false, _, b'"') => in_string = !in_string,
                (true, false, _) => {}
                (false, _, _) => outside.push(byte),
            }
        }
        outside
    }

    #[test]
    fn strings_are_skipped_up_to_their_closing_quote() {
        let outside = |json: &[u8]| outside_strings(json).collect::<Vec<u8>>();
        assert_eq!(outside(br#"{"a":"x\"y","b":[1]}"#), b"{:,:[1]}");
        assert_eq!(outside(br#"{"a":"\\"}"#), b"{:}");
        assert_eq!(outside(br#"{"a":"unterminated"#), b"{:");
        assert_eq!(outside(br#"{"a":"ends in \"#), b"{:");
        assert_eq!(outside(b""), b"");
    }

    proptest::proptest! {
        #[test]
        fn skipping_strings_matches_stepping_through_them(
            json in proptest::collection::vec(proptest::sample::select(
                b"\"\\[]{},:ax1 ".to_vec()), 0..300)
        ) {
            proptest::prop_assert_eq!(
                outside_strings(&json).collect::<Vec<u8>>(),
                outside_strings_stepwise(&json)
            );
        }
    }

    #[test]
    fn commas_are_counted_outside_strings() {
        assert_eq!(commas_outside_strings(br#"{"a":[1,2],"b":"x,y\",z"}"#), 2);
        assert_eq!(commas_outside_strings(b""), 0);
        let many = format!(r#"{{"input":[{}]}}"#, vec![r#""""#; 1000].join(","));
        let mut body = many.into_bytes();
        let refused: ApiResult<serde::de::IgnoredAny> =
            parse_object(&JsonBuffers::default(), &mut body, 100, "x");
        assert!(refused
            .unwrap_err()
            .message
            .contains("more than 100 values"));
    }

    #[test]
    fn request_strings_are_unescaped_and_borrowed() {
        let json = JsonBuffers::default();
        let mut body =
            br#"{"text":"a \"quoted\"\nline \u00e9\ud83d\ude00","workflow":"default","ref":"r1"}"#
                .to_vec();
        let request: TextRequest<'_> = json.parse(&mut body).expect("a TextRequest");
        assert_eq!(request.text, Some("a \"quoted\"\nline \u{e9}\u{1f600}"));
        assert_eq!(request.workflow, Some("default"));
        assert_eq!(request.reference, Some("r1"));
        assert_eq!(request.context, None);
        let mut wrong = br#"{"text":1}"#.to_vec();
        assert!(json.parse::<TextRequest<'_>>(&mut wrong).is_err());
    }

    proptest::proptest! {
        /// The shard's kept buffers parse each body as fresh buffers do, whatever bodies (small,
        /// over `JSON_BYTES_KEPT`, malformed) came before it.
        #[test]
        fn kept_json_buffers_parse_as_fresh_ones(
            bodies in proptest::collection::vec(
                (proptest::string::string_regex("[a-z \\\\\"\\n]{0,40}").expect("regex"),
                 0usize..3, proptest::bool::ANY),
                1..8)
        ) {
            let kept = JsonBuffers::default();
            for (text, size, broken) in bodies {
                let text = match size {
                    0 => text,
                    1 => text.repeat(50),
                    _ => "x".repeat(super::super::buffers::JSON_BYTES_KEPT + 1),
                };
                let body = serde_json::json!({ "text": text, "workflow": "w" }).to_string();
                let mut body = body.into_bytes();
                if broken {
                    body.truncate(body.len() / 2);
                }
                let mut again = body.clone();
                let with_kept = kept.parse::<TextRequest<'_>>(&mut body).map(|r| r.text.map(str::to_owned));
                let fresh = simd_json::serde::from_slice::<TextRequest<'_>>(&mut again)
                    .map(|r| r.text.map(str::to_owned));
                proptest::prop_assert_eq!(with_kept.is_ok(), fresh.is_ok());
                if let (Ok(a), Ok(b)) = (with_kept, fresh) {
                    proptest::prop_assert_eq!(a, b);
                }
            }
        }
    }

    #[test]
    fn content_types() {
        assert!(require_json(Some("application/json")).is_ok());
        assert!(require_json(Some("Application/JSON; charset=utf-8")).is_ok());
        assert!(require_json(Some("text/plain")).is_err());
        assert!(require_json(None).is_err());
    }
}
