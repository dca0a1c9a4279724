//! The compatible routes' forms (`docs/interface.md#routes`): multipart, read with
//! [`crate::http::multipart`], or URL-encoded (`application/x-www-form-urlencoded`, what
//! `requests.post(url, data=...)` and most HTTP clients send for a dict of fields), read whole
//! and decoded with [`crate::http::query`].
//!
//! One field is the payload (`text` or `media`): its bytes go straight into the buffer the
//! check will read, with no second copy. Every other field holds at most
//! `limits.form_field_bytes_max` (64 KiB) and is kept only if a route knows it
//! ([`KNOWN_FIELDS`]); unknown fields are read and dropped. A known
//! field sent twice is refused: a form that names two keys or two workflows is ambiguous.
//!
//! The whole form must arrive within `limits.form_timeout_ms` (10 s): the key is inside it, so
//! nothing about the caller is known until it is all read. Uploads in progress are capped per
//! shard ([`super::context::Context::upload_place`]), taken once a key in a header is admitted;
//! forms without one hold at most a client's share of the places and of the bytes budget
//! ([`super::context::UNAUTHENTICATED_SHARE_PER_CLIENT`]).

use std::time::{Duration, Instant};

use futures_lite::{AsyncRead, AsyncWrite};

use super::context::Context;
use crate::error::{ApiError, ApiResult, ErrorKind};
use crate::http::conn::{Deadline, Exchange};
use crate::http::head::Framing;
use crate::http::multipart::{
    boundary_of, ContentTypeError, FeedError, MultipartParser, PartInfo, PartSink,
};

/// Small fields the compatible routes read.
pub const KNOWN_FIELDS: &[&str] = &[
    "api_secret",
    "api_user",
    "workflow",
    "url",
    "models",
    "mode",
    "lang",
    "categories",
    "opt_countries",
    "lists",
    "add_to_list",
    "custom_id",
];

/// The fields of `/1.0/check.json` about the organization's lists, in a form or a query:
/// `lists` (modgate's: list names to consult) and Sightengine's `add_to_list` and `custom_id`.
#[derive(Debug, Default, Clone, PartialEq, Eq)]
pub struct ListFields {
    pub lists: Option<String>,
    pub add_to_list: Option<String>,
    pub custom_id: Option<String>,
}

/// The small fields of a form, and whether the payload field was present.
#[derive(Debug, Default)]
pub struct Form {
    pub api_secret: Option<String>,
    pub workflow: Option<String>,
    pub url: Option<String>,
    /// Sightengine's `models` (on `/1.0/check.json` and `/1.0/text/check.json`).
    pub models: Option<String>,
    /// Sightengine's text fields (on `/1.0/text/check.json`).
    pub mode: Option<String>,
    pub lang: Option<String>,
    pub categories: Option<String>,
    pub opt_countries: Option<String>,
    /// `/1.0/check.json`'s list fields ([`ListFields`]).
    pub list_fields: ListFields,
    pub payload_present: bool,
    /// The payload part's declared content type and file name (informational only).
    pub payload_info: Option<PartInfo>,
}

enum Current {
    Payload,
    Small { name: String, value: Vec<u8> },
    Ignored { name: String, bytes: usize },
}

struct FormSink<'b> {
    payload_field: &'static str,
    payload_bytes_max: usize,
    payload: &'b mut Vec<u8>,
    field_bytes_max: usize,
    current: Option<Current>,
    form: Form,
}

fn field_too_large(name: &str, max: usize) -> ApiError {
    ApiError::new(
        ErrorKind::BodyTooLarge,
        format!("form field `{}` is over {max} bytes", truncate(name)),
    )
}

fn truncate(text: &str) -> &str {
    crate::text::first_chars(text, 40)
}

impl PartSink for FormSink<'_> {
    type Error = ApiError;

    fn part_start(&mut self, part: &PartInfo) -> ApiResult<()> {
        self.current = Some(if part.name == self.payload_field {
            if self.form.payload_present {
                return Err(ApiError::bad_request(format!(
                    "form field `{}` sent twice",
                    self.payload_field
                )));
            }
            self.form.payload_present = true;
            self.form.payload_info = Some(part.clone());
            Current::Payload
        } else if KNOWN_FIELDS.contains(&part.name.as_str()) {
            Current::Small {
                name: part.name.clone(),
                value: Vec::new(),
            }
        } else {
            Current::Ignored {
                name: part.name.clone(),
                bytes: 0,
            }
        });
        Ok(())
    }

    fn part_data(&mut self, data: &[u8]) -> ApiResult<()> {
        match &mut self.current {
            Some(Current::Payload) => {
                if self.payload.len() + data.len() > self.payload_bytes_max {
                    return Err(field_too_large(self.payload_field, self.payload_bytes_max));
                }
                self.payload.extend_from_slice(data);
            }
            Some(Current::Small { name, value }) => {
                if value.len() + data.len() > self.field_bytes_max {
                    return Err(field_too_large(name, self.field_bytes_max));
                }
                value.extend_from_slice(data);
            }
            Some(Current::Ignored { name, bytes }) => {
                *bytes += data.len();
                if *bytes > self.field_bytes_max {
                    return Err(field_too_large(name, self.field_bytes_max));
                }
            }
            None => {}
        }
        Ok(())
    }

    fn part_end(&mut self) -> ApiResult<()> {
        if let Some(Current::Small { name, value }) = self.current.take() {
            let value = String::from_utf8(value)
                .map_err(|_| ApiError::bad_request(format!("form field `{name}` is not UTF-8")))?;
            let slot = match name.as_str() {
                "api_secret" => &mut self.form.api_secret,
                "workflow" => &mut self.form.workflow,
                "url" => &mut self.form.url,
                "models" => &mut self.form.models,
                "mode" => &mut self.form.mode,
                "lang" => &mut self.form.lang,
                "categories" => &mut self.form.categories,
                "opt_countries" => &mut self.form.opt_countries,
                "lists" => &mut self.form.list_fields.lists,
                "add_to_list" => &mut self.form.list_fields.add_to_list,
                "custom_id" => &mut self.form.list_fields.custom_id,
                _ => return Ok(()), // api_user: accepted and ignored
            };
            if slot.is_some() {
                return Err(ApiError::bad_request(format!(
                    "form field `{name}` sent twice"
                )));
            }
            *slot = Some(value);
        }
        Ok(())
    }
}

/// How a route reads its form.
pub struct FormSpec {
    pub payload_field: &'static str,
    pub payload_bytes_max: usize,
    pub body_bytes_max: usize,
    /// The status for a body that is not a form: 415 on the image route, 400 on the text
    /// route (whose statuses have no 415).
    pub not_multipart: ErrorKind,
}

/// How a form's body is read.
enum FormParser {
    Multipart(Box<MultipartParser>),
    /// URL-encoded: the body, decoded once it is all here.
    UrlEncoded(Vec<u8>),
}

/// Whether `content_type` is `application/x-www-form-urlencoded` (parameters allowed).
fn is_urlencoded(content_type: &str) -> bool {
    content_type.split(';').next().is_some_and(|media| {
        media
            .trim()
            .eq_ignore_ascii_case("application/x-www-form-urlencoded")
    })
}

/// Reads the whole form within the form timeout; the payload goes into `payload`.
pub async fn read_form<S: AsyncRead + AsyncWrite + Unpin>(
    cx: &Context,
    exchange: &mut Exchange<'_, S>,
    spec: &FormSpec,
    payload: &mut Vec<u8>,
) -> ApiResult<Form> {
    let limits = &cx.request_limits;
    let content_type = exchange.head.content_type().unwrap_or("");
    let mut parser = if is_urlencoded(content_type) {
        FormParser::UrlEncoded(Vec::new())
    } else {
        let boundary = boundary_of(content_type).map_err(|error| {
            let kind = match error {
                ContentTypeError::NotMultipart => spec.not_multipart,
                ContentTypeError::NoBoundary | ContentTypeError::BadBoundary => {
                    ErrorKind::BadRequest
                }
            };
            ApiError::new(kind, error.message())
        })?;
        FormParser::Multipart(Box::new(MultipartParser::new(&boundary)))
    };
    if let Framing::Length(n) = exchange.framing() {
        if n > spec.body_bytes_max as u64 {
            return Err(ApiError::new(
                ErrorKind::BodyTooLarge,
                format!(
                    "request body over the limit of {} bytes for this route",
                    spec.body_bytes_max
                ),
            ));
        }
    }
    // From the end of the head, as the interface bounds it.
    let mut deadline = Deadline::At(Instant::now() + Duration::from_millis(limits.form_timeout_ms));
    let mut sink = FormSink {
        payload_field: spec.payload_field,
        payload_bytes_max: spec.payload_bytes_max,
        payload,
        field_bytes_max: limits.form_field_bytes_max,
        current: None,
        form: Form::default(),
    };
    let mut received = 0usize;
    loop {
        let piece = exchange.body_piece(&mut deadline).await.map_err(|error| {
            if error.kind == ErrorKind::RequestTimeout {
                ApiError::new(
                    ErrorKind::RequestTimeout,
                    format!(
                        "the form was not received within {} ms",
                        limits.form_timeout_ms
                    ),
                )
            } else {
                error
            }
        })?;
        let Some(piece) = piece else { break };
        received += piece.len();
        if received > spec.body_bytes_max {
            return Err(ApiError::new(
                ErrorKind::BodyTooLarge,
                format!(
                    "request body over the limit of {} bytes for this route",
                    spec.body_bytes_max
                ),
            ));
        }
        match &mut parser {
            FormParser::Multipart(parser) => {
                parser.feed(piece, &mut sink).map_err(|error| match error {
                    FeedError::Multipart(error) => ApiError::bad_request(error.to_string()),
                    FeedError::Sink(error) => error,
                })?
            }
            FormParser::UrlEncoded(body) => body.extend_from_slice(piece),
        }
    }
    match parser {
        FormParser::Multipart(parser) => parser
            .finish()
            .map_err(|error| ApiError::bad_request(error.to_string()))?,
        FormParser::UrlEncoded(body) => read_urlencoded(&body, &mut sink)?,
    }
    Ok(sink.form)
}

/// The fields of a URL-encoded body, into `sink` as if each were a part.
fn read_urlencoded(body: &[u8], sink: &mut FormSink<'_>) -> ApiResult<()> {
    let body = std::str::from_utf8(body)
        .map_err(|_| ApiError::bad_request("the URL-encoded form is not UTF-8"))?;
    for pair in crate::http::query::pairs(body) {
        let (name, value) = pair.map_err(|message| {
            ApiError::bad_request(message.replace("query parameter", "form field"))
        })?;
        sink.part_start(&PartInfo {
            name: name.into_owned(),
            filename: None,
            content_type: None,
        })?;
        sink.part_data(value.as_bytes())?;
        sink.part_end()?;
    }
    Ok(())
}

/// Reads a compatible form and admits its caller. With a key in a header, the key comes first:
/// nothing is held for a caller who has not shown one (not even a place among the uploads),
/// and a key also sent in the form must be the same (401). Without, the form is read within
/// the shard's budget for unauthenticated uploads and its client's share of it and of the
/// upload places (503 `busy` past either), then the key inside it is checked.
pub async fn read_form_and_admit<S: AsyncRead + AsyncWrite + Unpin>(
    cx: &Context,
    exchange: &mut Exchange<'_, S>,
    notes: &mut super::request::RequestNotes,
    spec: &FormSpec,
    payload: &mut Vec<u8>,
    kind: crate::content::ContentKind,
) -> ApiResult<(Form, crate::auth::Caller)> {
    let head = &exchange.head;
    if head.authorization().is_some() || head.api_key().is_some() {
        let caller = notes.admit_check(cx, head, None, kind).await?;
        let _place = cx.upload_place()?;
        let form = read_form(cx, exchange, spec, payload).await?;
        crate::auth::presented_key(&exchange.head, form.api_secret.as_deref(), true)?;
        return Ok((form, caller));
    }
    let body = match exchange.framing() {
        Framing::Length(n) => (n as usize).min(spec.body_bytes_max),
        Framing::Chunked => spec.body_bytes_max,
        Framing::Empty => 0,
    };
    // A URL-encoded body is held whole while its fields are decoded next to it.
    let urlencoded = is_urlencoded(head.content_type().unwrap_or(""));
    let reserved = if urlencoded { body * 2 } else { body };
    let _reservation = cx.reserve_unauthenticated(reserved, exchange.client)?;
    let form = read_form(cx, exchange, spec, payload).await?;
    let caller = notes
        .admit_check(cx, &exchange.head, form.api_secret.as_deref(), kind)
        .await?;
    Ok((form, caller))
}

#[cfg(test)]
mod tests {
    use super::*;
    use proptest::prelude::*;

    fn sink(payload: &mut Vec<u8>) -> FormSink<'_> {
        FormSink {
            payload_field: "text",
            payload_bytes_max: 256,
            payload,
            field_bytes_max: 64,
            current: None,
            form: Form::default(),
        }
    }

    #[test]
    fn known_fields_are_kept_and_refused_twice() {
        let mut payload = Vec::new();
        let mut form = sink(&mut payload);
        let part = |name: &str| PartInfo {
            name: name.into(),
            filename: None,
            content_type: None,
        };
        form.part_start(&part("api_secret")).unwrap();
        form.part_data("mg_live_é".as_bytes()).unwrap();
        form.part_end().unwrap();
        assert_eq!(form.form.api_secret.as_deref(), Some("mg_live_é"));
        form.part_start(&part("api_secret")).unwrap();
        form.part_data(b"x").unwrap();
        assert_eq!(form.part_end().unwrap_err().kind, ErrorKind::BadRequest);
        form.part_start(&part("workflow")).unwrap();
        form.part_data(b"\xff\xfe").unwrap();
        assert_eq!(form.part_end().unwrap_err().kind, ErrorKind::BadRequest);
        form.part_start(&part(&"é".repeat(100))).unwrap();
        let error = form.part_data(&[b'a'; 65]).unwrap_err();
        assert_eq!(error.kind, ErrorKind::BodyTooLarge);
        assert!(error.message.chars().count() < 100, "{}", error.message);
    }

    #[test]
    fn urlencoded_fields_are_read_as_parts() {
        let mut payload = Vec::new();
        let mut form = sink(&mut payload);
        read_urlencoded(
            b"text=you+%24h1t&api_secret=k%C3%A9y&mode=rules&opt_countries=us%2Cfr&other=1",
            &mut form,
        )
        .unwrap();
        assert_eq!(form.form.api_secret.as_deref(), Some("kéy"));
        assert_eq!(form.form.mode.as_deref(), Some("rules"));
        assert_eq!(form.form.opt_countries.as_deref(), Some("us,fr"));
        assert!(form.form.payload_present);
        assert_eq!(payload, b"you $h1t");
        let refused = |body: &[u8]| {
            let mut payload = Vec::new();
            read_urlencoded(body, &mut sink(&mut payload)).unwrap_err()
        };
        assert!(refused(b"text=%ff").message.contains("form field 'text'"));
        assert!(refused(b"text=a&text=b").message.contains("sent twice"));
        assert!(refused(b"\xff=1").message.contains("not UTF-8"));
        let long = [b"text=".as_slice(), &[b'a'; 300]].concat();
        assert_eq!(refused(&long).kind, ErrorKind::BodyTooLarge);
    }

    #[test]
    fn urlencoded_content_types() {
        assert!(is_urlencoded("application/x-www-form-urlencoded"));
        assert!(is_urlencoded(
            "Application/X-WWW-Form-URLEncoded; charset=utf-8"
        ));
        assert!(!is_urlencoded("multipart/form-data; boundary=x"));
        assert!(!is_urlencoded(""));
    }

    proptest! {
        #[test]
        fn any_urlencoded_body_is_read_or_refused(body in proptest::collection::vec(any::<u8>(), 0..300)) {
            let mut payload = Vec::new();
            let mut form = sink(&mut payload);
            let _ = read_urlencoded(&body, &mut form);
            prop_assert!(form.payload.len() <= 256);
        }

        /// Any field name and any bytes in any field: kept, dropped or refused, never a panic,
        /// and never more than the field limits held.
        #[test]
        fn any_fields_are_read_or_refused(
            fields in proptest::collection::vec(
                (prop_oneof![
                    Just("api_secret".to_owned()), Just("workflow".to_owned()),
                    Just("url".to_owned()), Just("text".to_owned()), "\\PC{0,80}",
                ], proptest::collection::vec(proptest::collection::vec(any::<u8>(), 0..40), 0..4)),
                0..8,
            ),
        ) {
            let mut payload = Vec::new();
            let mut form = sink(&mut payload);
            'fields: for (name, pieces) in &fields {
                let part = PartInfo { name: name.clone(), filename: None, content_type: None };
                if form.part_start(&part).is_err() {
                    break;
                }
                for piece in pieces {
                    if form.part_data(piece).is_err() {
                        break 'fields;
                    }
                }
                if form.part_end().is_err() {
                    break;
                }
            }
            for value in [&form.form.api_secret, &form.form.workflow, &form.form.url].into_iter().flatten() {
                prop_assert!(value.len() <= 64);
            }
            prop_assert!(form.payload.len() <= 256);
        }
    }
}
