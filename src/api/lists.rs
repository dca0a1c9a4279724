//! `/v1/lists`: an organization's hash lists (`docs/interface.md#lists`), for keys with the
//! `lists` scope.
//!
//! | method and path | does |
//! |---|---|
//! | `GET /v1/lists` | the organization's lists |
//! | `POST /v1/lists` | creates one: `{"name", "kind": "block"\|"allow", "content": "image"\|"text", "distance"}` |
//! | `GET /v1/lists/{name}` | one list |
//! | `DELETE /v1/lists/{name}` | deletes it and its entries |
//! | `POST /v1/lists/{name}/entries` | adds entries: hashes (JSON), an image (its body), or `url` |
//! | `GET /v1/lists/{name}/entries?after=&limit=` | a page of entries, in the order added |
//! | `DELETE /v1/lists/{name}/entries/{id}` | removes an entry |
//! | `POST /v1/lists/{name}/import` | adds the entries of a CSV body ([`crate::lists::csv`]) |
//! | `GET /v1/lists/{name}/export` | the entries as CSV |
//!
//! Each request takes one rate token of the key; none is a check (no quota, no journal
//! record). Writes go to the store on the shard's blocking threads, never on the reactor, and
//! every shard matches an added entry within the lists follower's poll
//! ([`crate::store::lists_follower`]). In a fleet a write goes to PostgreSQL's list log and
//! is answered once this node has replayed it (a replay that fails then is logged and retried
//! by the follower); the other nodes replay it on the notification ([`crate::fleet::lists`]).
//! Reads answer from this node's store.

use futures_lite::{AsyncRead, AsyncWrite};
use serde::{Deserialize, Serialize};

use super::context::Context;
use super::envelope::json_response;
use super::request::RequestNotes;
use super::text::{parse_object, require_json};
use crate::auth::Caller;
use crate::error::{ApiError, ApiResult, ErrorKind};
use crate::http::conn::Exchange;
use crate::http::head::Method;
use crate::http::query;
use crate::http::response::Response;
use crate::lists::{csv, Entry, EntryHash, ListContent, ListKind, PDQ_DISTANCE_DEFAULT};
use crate::store::lists::{
    Added, ListError, ListRecord, ListWrite, ListWritten, NewEntry, ENTRIES_PAGE_MAX,
};

/// A request body: an image, a CSV import, or JSON entries.
pub const BODY_BYTES_MAX: usize = 16 * 1024 * 1024;
/// Entries one JSON request or one import adds at most (the CLI imports more).
pub const ENTRIES_PER_REQUEST_MAX: usize = 200_000;
/// Entries `GET /v1/lists/{name}/export` writes at most (the CLI exports any list).
pub const EXPORT_ENTRIES_MAX: u64 = 1_000_000;
/// Entries of a page unless `limit` says otherwise.
pub const ENTRIES_PAGE_DEFAULT: usize = 100;

/// What the path names under `/v1/lists`.
#[derive(Debug, PartialEq, Eq)]
enum Target<'p> {
    Lists,
    List(&'p str),
    Entries(&'p str),
    Entry(&'p str, u64),
    Import(&'p str),
    Export(&'p str),
}

fn target(path: &str) -> ApiResult<Target<'_>> {
    let rest = path
        .strip_prefix("/v1/lists")
        .ok_or_else(|| not_found("no such list route"))?;
    let parts: Vec<&str> = rest.split('/').skip(1).collect();
    Ok(match parts.as_slice() {
        [] | [""] => Target::Lists,
        [name] => Target::List(name),
        [name, "entries"] => Target::Entries(name),
        [name, "entries", id] => Target::Entry(
            name,
            id.parse()
                .map_err(|_| not_found("an entry id is a number"))?,
        ),
        [name, "import"] => Target::Import(name),
        [name, "export"] => Target::Export(name),
        _ => return Err(not_found("no such list route")),
    })
}

fn not_found(message: &'static str) -> ApiError {
    ApiError::new(ErrorKind::NotFound, message)
}

pub async fn handle<S: AsyncRead + AsyncWrite + Unpin>(
    cx: &Context,
    exchange: &mut Exchange<'_, S>,
    notes: &mut RequestNotes,
) -> ApiResult<Response> {
    let caller = notes.authenticate(cx, &exchange.head, None)?;
    require_lists_scope(&caller)?;
    cx.limits.take_rate(&caller, notes.at_ms).await?;
    let path = exchange.head.path().to_owned();
    let method = exchange.head.method;
    let org = caller.org.record.name.clone();
    let query = exchange.head.query().to_owned();
    match (method, target(&path)?) {
        (Method::Get | Method::Head, Target::Lists) => {
            let lists = blocking(cx, move |store| store.lists_of(&org)).await?;
            let lists: Vec<ListView> = lists.iter().map(ListView::of).collect();
            Ok(json_response(
                200,
                &Lists {
                    status: "success",
                    lists,
                },
            ))
        }
        (Method::Post, Target::Lists) => create(cx, exchange, &caller).await,
        (Method::Get | Method::Head, Target::List(name)) => {
            let name = name.to_owned();
            let list = blocking(cx, move |store| store.list(&org, &name)).await?;
            Ok(list_answer(200, &list))
        }
        (Method::Delete, Target::List(name)) => {
            let change = ListWrite::Delete { name: name.into() };
            Ok(written_answer(
                write(cx, org, change).await?,
                Skips::default(),
            ))
        }
        (Method::Post, Target::Entries(name)) => add(cx, exchange, &caller, name).await,
        (Method::Get | Method::Head, Target::Entries(name)) => page(cx, &org, name, &query).await,
        (Method::Delete, Target::Entry(name, id)) => {
            let change = ListWrite::Remove {
                name: name.into(),
                id,
            };
            Ok(written_answer(
                write(cx, org, change).await?,
                Skips::default(),
            ))
        }
        (Method::Post, Target::Import(name)) => import(cx, exchange, &caller, name).await,
        (Method::Get | Method::Head, Target::Export(name)) => {
            let name = name.to_owned();
            // Read and written on a blocking thread: up to a million rows, about 100 MB, one
            // import or export a shard at a time.
            let _place = cx.list_file_place()?;
            let body = blocking(cx, move |store| {
                let list = store.list(&org, &name)?;
                if list.entries > EXPORT_ENTRIES_MAX {
                    return Err(ListError::Invalid(format!(
                        "list '{name}' holds {} entries; this route exports at most \
                         {EXPORT_ENTRIES_MAX} (page through /entries, or run `modgate list export`)",
                        list.entries
                    )));
                }
                let (list, entries) = store.list_since(&org, &name, 0)?;
                Ok(csv::export(list.content, &entries).into_bytes())
            })
            .await?;
            Ok(Response::with_content_type(
                200,
                "text/csv; charset=utf-8",
                body,
            ))
        }
        _ => Err(ApiError::method_not_allowed(
            crate::route::Route::Lists.allow(),
        )),
    }
}

/// Runs `op` on the store on the shard's blocking threads.
async fn blocking<T: Send + 'static>(
    cx: &Context,
    op: impl FnOnce(&crate::store::Store) -> Result<T, ListError> + Send + 'static,
) -> ApiResult<T> {
    let store = cx.store().clone();
    glommio::executor()
        .spawn_blocking(move || op(&store))
        .await
        .map_err(list_error)
}

/// Carries out `change` to the lists of `org` with the node's writer (the store, or the
/// fleet's list log), on the shard's blocking threads.
async fn write(cx: &Context, org: String, change: ListWrite) -> ApiResult<ListWritten> {
    let writer = cx.list_writer().clone();
    blocking(cx, move |store| writer.write(store, &org, &change)).await
}

/// The rows of an import that were not entries: the first [`csv::SKIPPED_REPORTED_MAX`], and
/// how many in all.
#[derive(Default)]
struct Skips {
    reported: Vec<csv::Skipped>,
    count: usize,
}

/// The answer to a write: the list (created, 201, or deleted), the entries added (with the
/// rows of an import skipped), or the entry removed.
fn written_answer(written: ListWritten, skipped: Skips) -> Response {
    match written {
        ListWritten::Created(list) => list_answer(201, &list),
        ListWritten::Deleted(list) => list_answer(200, &list),
        ListWritten::Added(added) => added_answer(&added, skipped),
        ListWritten::Removed(entry) => json_response(
            200,
            &Removed {
                status: "success",
                removed: EntryView::of(&entry),
            },
        ),
    }
}

fn list_error(error: ListError) -> ApiError {
    match error {
        ListError::NotFound(why) => ApiError::new(ErrorKind::NotFound, why),
        ListError::Exists(why) => ApiError::new(ErrorKind::Conflict, why),
        ListError::Invalid(why) => ApiError::bad_request(why),
        ListError::Unavailable(why) => ApiError::new(ErrorKind::Busy, why).with_retry_after(1),
        ListError::Store(error) => {
            tracing::error!(error = format!("{error:#}"), "a list operation failed");
            ApiError::internal("the list store could not be written")
        }
    }
}

async fn read_body<S: AsyncRead + AsyncWrite + Unpin>(
    cx: &Context,
    exchange: &mut Exchange<'_, S>,
) -> ApiResult<Vec<u8>> {
    let mut body = Vec::new();
    let deadline = cx.body_deadline();
    exchange
        .read_body(&mut body, BODY_BYTES_MAX, deadline)
        .await?;
    Ok(body)
}

#[derive(Deserialize)]
#[serde(deny_unknown_fields)]
struct CreateRequest {
    name: String,
    kind: String,
    /// `image` (the default) or `text`.
    content: Option<String>,
    distance: Option<u32>,
}

async fn create<S: AsyncRead + AsyncWrite + Unpin>(
    cx: &Context,
    exchange: &mut Exchange<'_, S>,
    caller: &Caller,
) -> ApiResult<Response> {
    require_json(exchange.head.content_type())?;
    let mut body = read_body(cx, exchange).await?;
    let request: CreateRequest = parse_object(
        &cx.json_buffers,
        &mut body,
        16,
        "the body is {\"name\": string, \"kind\": \"block\" or \"allow\", \"content\": \"image\" or \"text\" (optional), \"distance\": number (optional)}",
    )?;
    let kind = ListKind::parse(&request.kind)
        .ok_or_else(|| ApiError::bad_request("`kind` is \"block\" or \"allow\""))?;
    let content = match request.content.as_deref() {
        None => ListContent::Image,
        Some(content) => ListContent::parse(content)
            .ok_or_else(|| ApiError::bad_request("`content` is \"image\" or \"text\""))?,
    };
    let distance = request.distance.unwrap_or(PDQ_DISTANCE_DEFAULT);
    let change = ListWrite::create(&request.name, kind, content, distance, cx.now_ms())
        .map_err(list_error)?;
    let org = caller.org.record.name.clone();
    Ok(written_answer(
        write(cx, org, change).await?,
        Skips::default(),
    ))
}

#[derive(Deserialize)]
#[serde(deny_unknown_fields)]
struct AddRequest {
    #[serde(deserialize_with = "entries_over_the_limit_skipped")]
    entries: Vec<AddEntry>,
}

/// `entries`, keeping one past [`ENTRIES_PER_REQUEST_MAX`] at most and only counting the rest:
/// enough for the refusal that follows, without making hundreds of thousands of entries first
/// (a body of empty objects would, within the body's limits).
fn entries_over_the_limit_skipped<'de, D: serde::Deserializer<'de>>(
    deserializer: D,
) -> Result<Vec<AddEntry>, D::Error> {
    struct Bounded;
    impl<'de> serde::de::Visitor<'de> for Bounded {
        type Value = Vec<AddEntry>;

        fn expecting(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
            f.write_str("an array of entries")
        }

        fn visit_seq<A: serde::de::SeqAccess<'de>>(
            self,
            mut seq: A,
        ) -> Result<Vec<AddEntry>, A::Error> {
            let mut entries = Vec::new();
            while entries.len() <= ENTRIES_PER_REQUEST_MAX {
                match seq.next_element()? {
                    Some(entry) => entries.push(entry),
                    None => return Ok(entries),
                }
            }
            while seq.next_element::<serde::de::IgnoredAny>()?.is_some() {}
            Ok(entries)
        }
    }
    deserializer.deserialize_seq(Bounded)
}

#[derive(Deserialize)]
#[serde(deny_unknown_fields)]
struct AddEntry {
    hash_type: Option<String>,
    hash: Option<String>,
    /// A text list's word or phrase.
    term: Option<String>,
    label: Option<String>,
    id: Option<String>,
}

impl AddEntry {
    fn hash(&self) -> Result<EntryHash, String> {
        match (&self.hash_type, &self.hash, &self.term) {
            (Some(kind), Some(hash), None) => EntryHash::parse(kind, hash),
            (None, None, Some(term)) => EntryHash::term(term),
            _ => Err("an entry is `hash_type` and `hash`, or `term`".into()),
        }
    }
}

/// The query of an image entry: `label`, `id` and `url`.
#[derive(Default)]
struct EntryQuery {
    label: Option<String>,
    id: Option<String>,
    url: Option<String>,
}

impl EntryQuery {
    fn parse(raw: &str) -> ApiResult<EntryQuery> {
        let mut parsed = EntryQuery::default();
        query::fill(raw, &mut parsed, |parsed, name| match name {
            "label" => Some(&mut parsed.label),
            "id" => Some(&mut parsed.id),
            "url" => Some(&mut parsed.url),
            _ => None,
        })
        .map_err(ApiError::bad_request)?;
        Ok(parsed)
    }
}

/// Adds JSON hashes (`Content-Type: application/json`), or the hashes of an image: its body,
/// or `url` with an empty body.
async fn add<S: AsyncRead + AsyncWrite + Unpin>(
    cx: &Context,
    exchange: &mut Exchange<'_, S>,
    caller: &Caller,
    name: &str,
) -> ApiResult<Response> {
    let json = exchange
        .head
        .content_type()
        .and_then(|value| value.split(';').next())
        .is_some_and(|media| media.trim().eq_ignore_ascii_case("application/json"));
    let new = if json {
        let mut body = read_body(cx, exchange).await?;
        let request: AddRequest = parse_object(
            &cx.json_buffers,
            &mut body,
            ENTRIES_PER_REQUEST_MAX * 4,
            "the body is {\"entries\": [{\"hash_type\": \"pdq\"|\"md5\"|\"sha256\", \"hash\": hex, \"label\": string, \"id\": string}]}, or with \"term\": string in place of hash_type and hash",
        )?;
        if request.entries.len() > ENTRIES_PER_REQUEST_MAX {
            return Err(ApiError::bad_request(format!(
                "at most {ENTRIES_PER_REQUEST_MAX} entries a request"
            )));
        }
        request
            .entries
            .into_iter()
            .enumerate()
            .map(|(at, entry)| {
                let hash = entry
                    .hash()
                    .map_err(|why| ApiError::bad_request(format!("entries[{at}]: {why}")))?;
                Ok(NewEntry {
                    hash,
                    label: entry.label,
                    caller_id: entry.id,
                })
            })
            .collect::<ApiResult<Vec<_>>>()?
    } else {
        image_entries(cx, exchange, caller).await?
    };
    add_entries(cx, caller, name, new, Skips::default()).await
}

/// Adds `new` to the caller's list `name` (on a blocking thread); the answer reports
/// `skipped` too.
async fn add_entries(
    cx: &Context,
    caller: &Caller,
    name: &str,
    new: Vec<NewEntry>,
    skipped: Skips,
) -> ApiResult<Response> {
    let change = ListWrite::Add {
        name: name.into(),
        entries: new,
        added_ms: cx.now_ms(),
    };
    let org = caller.org.record.name.clone();
    Ok(written_answer(write(cx, org, change).await?, skipped))
}

/// The entries of one image: its PDQ hash (if it has enough detail), MD5 and SHA-256, made
/// on the model worker as a check makes them.
async fn image_entries<S: AsyncRead + AsyncWrite + Unpin>(
    cx: &Context,
    exchange: &mut Exchange<'_, S>,
    caller: &Caller,
) -> ApiResult<Vec<NewEntry>> {
    let query = EntryQuery::parse(exchange.head.query())?;
    // Hashing an image decodes it as a check does: the key must be one that may check images.
    caller.require_scope(crate::content::ContentKind::Image)?;
    let bytes = super::image::read_image(cx, exchange, caller, query.url.as_deref()).await?;
    if bytes.is_empty() {
        return Err(ApiError::bad_request(
            "send hashes as JSON, an image as the body, or a `url`",
        ));
    }
    let checks = [crate::checks::registry::HASHLIST.name.to_owned()];
    let board = super::image::score_image_with(cx, caller, &checks, &[], bytes).await?;
    let hashes = board
        .measured
        .hashes
        .ok_or_else(|| ApiError::internal("the image was not hashed"))?;
    Ok(crate::lists::image_entry_hashes(&hashes)
        .into_iter()
        .map(|hash| NewEntry {
            hash,
            label: query.label.clone(),
            caller_id: query.id.clone(),
        })
        .collect())
}

async fn import<S: AsyncRead + AsyncWrite + Unpin>(
    cx: &Context,
    exchange: &mut Exchange<'_, S>,
    caller: &Caller,
    name: &str,
) -> ApiResult<Response> {
    let body = read_body(cx, exchange).await?;
    // Parsed on a blocking thread with the list's kind: up to 200,000 rows (a text list's
    // terms each normalised) would hold the shard's other requests for a good part of a second;
    // one import or export a shard at a time, so that they leave the journal's commits the
    // other blocking threads.
    let _place = cx.list_file_place()?;
    let (org, name_owned) = (caller.org.record.name.clone(), name.to_owned());
    let parsed = blocking(cx, move |store| {
        let text = std::str::from_utf8(&body)
            .map_err(|_| ListError::Invalid("the CSV body is not UTF-8".into()))?;
        let list = store.list(&org, &name_owned)?;
        match list.content {
            ListContent::Image => csv::parse(text, ENTRIES_PER_REQUEST_MAX),
            ListContent::Text => csv::parse_terms(text, ENTRIES_PER_REQUEST_MAX),
        }
        .map_err(ListError::Invalid)
    })
    .await?;
    let skipped = Skips {
        reported: parsed.skipped,
        count: parsed.skipped_count,
    };
    add_entries(cx, caller, name, parsed.entries, skipped).await
}

async fn page(cx: &Context, org: &str, name: &str, raw: &str) -> ApiResult<Response> {
    let mut after = 0u64;
    let mut limit = ENTRIES_PAGE_DEFAULT;
    for pair in query::pairs(raw) {
        let (key, value) = pair.map_err(ApiError::bad_request)?;
        match key.as_ref() {
            "after" => {
                after = value
                    .parse()
                    .map_err(|_| ApiError::bad_request("`after` is an entry id"))?
            }
            "limit" => {
                limit = value
                    .parse()
                    .ok()
                    .filter(|n| (1..=ENTRIES_PAGE_MAX).contains(n))
                    .ok_or_else(|| {
                        ApiError::bad_request(format!("`limit` is 1 to {ENTRIES_PAGE_MAX}"))
                    })?
            }
            _ => {}
        }
    }
    let (org, name) = (org.to_owned(), name.to_owned());
    let (list, entries) =
        blocking(cx, move |store| store.entries(&org, &name, after, limit)).await?;
    let next_after = (entries.len() == limit)
        .then(|| entries.last().map(|entry| entry.id))
        .flatten();
    Ok(json_response(
        200,
        &Page {
            status: "success",
            list: ListView::of(&list),
            entries: entries.iter().map(EntryView::of).collect(),
            next_after,
        },
    ))
}

#[derive(Serialize)]
struct ListView<'a> {
    name: &'a str,
    kind: &'static str,
    content: &'static str,
    distance: u32,
    entries: u64,
    created: String,
}

impl ListView<'_> {
    fn of(record: &ListRecord) -> ListView<'_> {
        ListView {
            name: &record.name,
            kind: record.kind.as_str(),
            content: record.content.as_str(),
            distance: record.distance_max,
            entries: record.entries,
            created: crate::clock::rfc3339(record.created_ms),
        }
    }
}

#[derive(Serialize)]
struct EntryView<'a> {
    entry_id: u64,
    hash_type: &'static str,
    /// Hex; absent for a term.
    #[serde(skip_serializing_if = "Option::is_none")]
    hash: Option<String>,
    /// A text list's word or phrase.
    #[serde(skip_serializing_if = "Option::is_none")]
    term: Option<&'a str>,
    label: Option<&'a str>,
    id: Option<&'a str>,
    added: String,
}

impl EntryView<'_> {
    fn of(entry: &Entry) -> EntryView<'_> {
        EntryView {
            entry_id: entry.id,
            hash_type: entry.hash.kind(),
            hash: match &entry.hash {
                EntryHash::Term(_) => None,
                hash => Some(hash.value()),
            },
            term: match &entry.hash {
                EntryHash::Term(term) => Some(term),
                _ => None,
            },
            label: entry.label.as_deref(),
            id: entry.caller_id.as_deref(),
            added: crate::clock::rfc3339(entry.added_ms),
        }
    }
}

#[derive(Serialize)]
struct Lists<'a> {
    status: &'static str,
    lists: Vec<ListView<'a>>,
}

#[derive(Serialize)]
struct OneList<'a> {
    status: &'static str,
    list: ListView<'a>,
}

fn list_answer(status: u16, record: &ListRecord) -> Response {
    json_response(
        status,
        &OneList {
            status: "success",
            list: ListView::of(record),
        },
    )
}

#[derive(Serialize)]
struct Page<'a> {
    status: &'static str,
    list: ListView<'a>,
    entries: Vec<EntryView<'a>>,
    /// The `after` of the next page; absent on the last.
    #[serde(skip_serializing_if = "Option::is_none")]
    next_after: Option<u64>,
}

#[derive(Serialize)]
struct Removed<'a> {
    status: &'static str,
    removed: EntryView<'a>,
}

/// Entries added: the new ones with their ids, and the ids that already held a hash given
/// (on `/v1/lists/{name}/entries`, and in `/1.0/check.json`'s `added_to_list`).
#[derive(Serialize)]
pub(super) struct AddedView<'a> {
    added: Vec<EntryView<'a>>,
    existing: &'a [u64],
}

impl AddedView<'_> {
    pub(super) fn of(added: &Added) -> AddedView<'_> {
        AddedView {
            added: added.added.iter().map(EntryView::of).collect(),
            existing: &added.existing,
        }
    }
}

#[derive(Serialize)]
struct AddedAnswer<'a> {
    status: &'static str,
    #[serde(flatten)]
    added: AddedView<'a>,
    /// Rows of an import that were not entries (an unknown kind, a NEGATIVE_CLASS signal):
    /// the first [`csv::SKIPPED_REPORTED_MAX`].
    skipped: Vec<csv::Skipped>,
    /// Such rows in all.
    skipped_count: usize,
}

fn added_answer(added: &Added, skipped: Skips) -> Response {
    json_response(
        201,
        &AddedAnswer {
            status: "success",
            added: AddedView::of(added),
            skipped: skipped.reported,
            skipped_count: skipped.count,
        },
    )
}

/// Adds the entries of one image's hashes to the caller's list `name` (the key needs the
/// `lists` scope): `/1.0/check.json`'s `add_to_list`.
pub(super) async fn add_image_hashes(
    cx: &Context,
    caller: &Caller,
    name: &str,
    hashes: &crate::image::hashes::ImageHashes,
    caller_id: Option<String>,
) -> ApiResult<Added> {
    let entries = crate::lists::image_entry_hashes(hashes)
        .into_iter()
        .map(|hash| NewEntry {
            hash,
            label: None,
            caller_id: caller_id.clone(),
        })
        .collect();
    let change = ListWrite::Add {
        name: name.into(),
        entries,
        added_ms: cx.now_ms(),
    };
    match write(cx, caller.org.record.name.clone(), change).await? {
        ListWritten::Added(added) => Ok(added),
        other => Err(ApiError::internal(format!(
            "adding to a list answered {other:?}"
        ))),
    }
}

/// Refuses a key without the `lists` scope.
pub(super) fn require_lists_scope(caller: &Caller) -> ApiResult<()> {
    if caller.key.scopes.lists {
        Ok(())
    } else {
        Err(ApiError::forbidden(
            "this key has no `lists` scope (create one with --scopes lists)",
        ))
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn entries_past_the_limit_are_counted_not_kept() {
        let buffers = super::super::buffers::JsonBuffers::default();
        let mut body = format!(
            r#"{{"entries": [{}{{"term": "last"}}]}}"#,
            "{},".repeat(ENTRIES_PER_REQUEST_MAX + 10)
        )
        .into_bytes();
        let request: AddRequest =
            parse_object(&buffers, &mut body, ENTRIES_PER_REQUEST_MAX * 4, "shape").unwrap();
        assert_eq!(request.entries.len(), ENTRIES_PER_REQUEST_MAX + 1);
        let mut body =
            br#"{"entries": [{"term": "a"}, {"hash_type": "md5", "hash": "00"}]}"#.to_vec();
        let request: AddRequest = parse_object(&buffers, &mut body, 100, "shape").unwrap();
        assert_eq!(request.entries.len(), 2);
        assert_eq!(request.entries[0].term.as_deref(), Some("a"));
        let mut body = br#"{"entries": {}}"#.to_vec();
        assert!(parse_object::<AddRequest>(&buffers, &mut body, 100, "shape").is_err());
    }

    #[test]
    fn paths_name_their_targets() {
        assert_eq!(target("/v1/lists").unwrap(), Target::Lists);
        assert_eq!(target("/v1/lists/").unwrap(), Target::Lists);
        assert_eq!(target("/v1/lists/known").unwrap(), Target::List("known"));
        assert_eq!(
            target("/v1/lists/known/entries").unwrap(),
            Target::Entries("known")
        );
        assert_eq!(
            target("/v1/lists/known/entries/42").unwrap(),
            Target::Entry("known", 42)
        );
        assert_eq!(
            target("/v1/lists/known/export").unwrap(),
            Target::Export("known")
        );
        for bad in [
            "/v1/lists/known/entries/x",
            "/v1/lists/known/other",
            "/v1/lists/a/entries/1/2",
            "/v1/lists/known/entries/-1",
        ] {
            assert!(target(bad).is_err(), "{bad}");
        }
    }
}
