//! Hash lists as CSV: what `import` reads and `export` writes.
//!
//! **Export** writes a header and one row per entry: `signal_type,signal,label,id`, the
//! column names and type names (`pdq`, `md5`) of HMA's banks and ThreatExchange's signal
//! types (SHA-256 as `sha256`), so an export can be fed to the other side's importers.
//!
//! **Import** reads that, and the shapes lists usually come in:
//! - with a header naming its columns: the hash in `signal`, `hash`, `signal_value`, or a
//!   column named by the hash's type (`pdq`, `md5`, `sha256`, then no type column is needed);
//!   the type in `signal_type`, `hash_type`, `type` or `kind`; the label in `label`, `tags`
//!   or `description`; the caller's id in `id`, `content_id` or `external_id`; other columns
//!   are ignored;
//! - ThreatExchange's `threatexchange dataset --csv` (`signal_type,signal_str,collab,category,
//!   tags`; `NEGATIVE_CLASS` rows are skipped);
//! - without a header: `type,hash[,label[,id]]`, or a hash alone (32 hex digits are MD5, 64
//!   are PDQ: a SHA-256 list must say `sha256`), or PDQ tools' `[hash=]hash,quality[,name]`
//!   (the quality is dropped, the name becomes the label);
//! - threatexchange's local files: `type signal`, one per line, space-separated.
//!
//! Fields are comma-separated (tab-separated if the first row has tabs and no comma, split at
//! the first space if it has neither), with RFC 4180 quotes, at most [`FIELDS_PER_LINE_MAX`] a
//! line; blank lines and lines starting with `#` are skipped, and so is a byte order mark at the
//! start (spreadsheets save "CSV UTF-8" with one). A row of a type this
//! server does not match (`video_md5`, `url`...) is skipped and reported; a row whose hash is
//! not its type's hex, or that has no hash, refuses the whole import with its line number.

use serde::Serialize;

use super::{validate_entry_text, EntryHash, ListContent, NewEntry};

/// Skipped rows reported at most (the count goes on).
pub const SKIPPED_REPORTED_MAX: usize = 100;
/// Fields one line may have: every shape read here has six or fewer, and a line of commas
/// must not become millions of fields before it is refused.
pub const FIELDS_PER_LINE_MAX: usize = 64;

/// A row that was not imported, and why.
#[derive(Clone, Debug, PartialEq, Eq, Serialize)]
pub struct Skipped {
    pub line: usize,
    pub reason: String,
}

#[derive(Debug, Default, PartialEq, Eq)]
pub struct Parsed {
    pub entries: Vec<NewEntry>,
    pub skipped: Vec<Skipped>,
    /// Rows skipped, reported or not.
    pub skipped_count: usize,
}

/// Every column name a header may use.
const COLUMN_NAMES: &[&str] = &[
    "signal",
    "signal_str",
    "hash",
    "signal_value",
    "pdq",
    "md5",
    "sha256",
    "signal_type",
    "hash_type",
    "type",
    "kind",
    "label",
    "tags",
    "description",
    "id",
    "content_id",
    "external_id",
    "category",
    "collab",
    "quality",
];

/// Which field holds what.
#[derive(Clone, Copy, Debug, Default)]
struct Columns {
    hash: usize,
    /// `None` when the hash column's name is its type.
    kind: Option<usize>,
    implied_kind: Option<&'static str>,
    label: Option<usize>,
    id: Option<usize>,
    /// ThreatExchange's `category`: rows of `NEGATIVE_CLASS` are skipped.
    category: Option<usize>,
}

fn header_columns(fields: &[String]) -> Option<Columns> {
    // A row holding a hash is data, whatever its other fields say; so is `type,value` unless
    // the value is a column name (`pdq,label`).
    if fields
        .iter()
        .any(|field| kind_by_length(field.trim()).is_some())
    {
        return None;
    }
    let column_name = |field: &String| {
        let lower = field.trim().to_ascii_lowercase();
        COLUMN_NAMES.contains(&lower.as_str())
    };
    if fields.len() >= 2 && known_kind(fields[0].trim()).is_some() && !column_name(&fields[1]) {
        return None;
    }
    let find = |names: &[&str]| {
        fields
            .iter()
            .position(|field| names.contains(&field.trim().to_ascii_lowercase().as_str()))
    };
    let label = find(&["label", "tags", "description"]);
    let id = find(&["id", "content_id", "external_id"]);
    let category = find(&["category"]);
    if let Some(hash) = find(&["signal", "signal_str", "hash", "signal_value"]) {
        let kind = find(&["signal_type", "hash_type", "type", "kind"]);
        return Some(Columns {
            hash,
            kind,
            implied_kind: None,
            label,
            id,
            category,
        });
    }
    for kind in ["pdq", "md5", "sha256"] {
        if let Some(hash) = find(&[kind]) {
            return Some(Columns {
                hash,
                kind: None,
                implied_kind: Some(kind),
                label,
                id,
                category,
            });
        }
    }
    None
}

/// The lines of `text` that hold something, with their numbers (from 1): not blank, not a
/// `#` comment; `\n` or `\r\n` ends a line.
fn content_lines(text: &str) -> impl Iterator<Item = (usize, &str)> {
    without_bom(text)
        .split('\n')
        .enumerate()
        .map(|(at, line)| (at + 1, line.strip_suffix('\r').unwrap_or(line)))
        .filter(|(_, line)| !line.trim().is_empty() && !line.trim_start().starts_with('#'))
}

/// Reads `text`; more than `entries_max` entries refuse it.
pub fn parse(text: &str, entries_max: usize) -> Result<Parsed, String> {
    let mut out = Parsed::default();
    let mut columns: Option<Columns> = None;
    let mut separator: Option<char> = None;
    let mut first = true;
    for (number, line) in content_lines(text) {
        let separator = *separator.get_or_insert(if line.contains(',') {
            ','
        } else if line.contains('\t') {
            '\t'
        } else {
            ' '
        });
        let fields = if separator == ' ' {
            // threatexchange's local files: `type signal`, split at the first space.
            line.trim()
                .splitn(2, ' ')
                .map(|field| field.trim().to_owned())
                .collect()
        } else {
            split(line, separator).map_err(|why| format!("line {number}: {why}"))?
        };
        if first {
            first = false;
            if let Some(found) = header_columns(&fields) {
                columns = Some(found);
                continue;
            }
        }
        let row = match columns {
            Some(columns) => with_header(&fields, columns),
            None => headerless(&fields),
        };
        match row.map_err(|why| format!("line {number}: {why}"))? {
            Row::Entry(entry) => {
                if out.entries.len() == entries_max {
                    return Err(format!("more than {entries_max} entries"));
                }
                out.entries.push(entry);
            }
            Row::Skip(reason) => {
                out.skipped_count += 1;
                if out.skipped.len() < SKIPPED_REPORTED_MAX {
                    out.skipped.push(Skipped {
                        line: number,
                        reason,
                    });
                }
            }
        }
    }
    Ok(out)
}

enum Row {
    Entry(NewEntry),
    Skip(String),
}

fn optional(fields: &[String], at: Option<usize>) -> Option<String> {
    at.and_then(|at| fields.get(at))
        .map(|field| field.trim())
        .filter(|field| !field.is_empty())
        .map(str::to_owned)
}

fn with_header(fields: &[String], columns: Columns) -> Result<Row, String> {
    if optional(fields, columns.category).as_deref() == Some("NEGATIVE_CLASS") {
        return Ok(Row::Skip(
            "a NEGATIVE_CLASS signal (known not to be harmful)".into(),
        ));
    }
    let hash = fields
        .get(columns.hash)
        .map(|field| field.trim())
        .filter(|field| !field.is_empty())
        .ok_or("no hash")?;
    let kind = match (columns.kind, columns.implied_kind) {
        (Some(at), _) => fields.get(at).map(|field| field.trim()).unwrap_or(""),
        (None, Some(kind)) => kind,
        (None, None) => kind_by_length(hash).ok_or("no hash type, and the length says none")?,
    };
    entry(
        kind,
        hash,
        optional(fields, columns.label),
        optional(fields, columns.id),
    )
}

fn headerless(fields: &[String]) -> Result<Row, String> {
    // PDQ's C++ tools may write `hash=` before the hash.
    let first = fields[0].trim();
    let first = first.strip_prefix("hash=").unwrap_or(first);
    if let Some(kind) = known_kind(first).or_else(|| other_kind(first).then_some(first)) {
        let hash = fields.get(1).map(|field| field.trim()).ok_or("no hash")?;
        return entry(
            kind,
            hash,
            optional(fields, Some(2)),
            optional(fields, Some(3)),
        );
    }
    let kind = kind_by_length(first).ok_or_else(|| {
        format!(
            "{} is neither a hash type nor a hash (MD5 or PDQ in hex)",
            super::shown(first)
        )
    })?;
    // PDQ tools write `hash,quality,name`.
    let quality = fields
        .get(1)
        .and_then(|field| field.trim().parse::<u8>().ok())
        .filter(|quality| *quality <= 100);
    let (label, id) = match quality {
        Some(_) => (optional(fields, Some(2)), None),
        None => (optional(fields, Some(1)), optional(fields, Some(2))),
    };
    entry(kind, first, label, id)
}

fn known_kind(text: &str) -> Option<&'static str> {
    let lower = text.to_ascii_lowercase();
    ["pdq", "md5", "sha256"]
        .into_iter()
        .find(|kind| *kind == lower || (*kind == "sha256" && lower == "sha-256"))
}

/// Type names of other hash and signal kinds (HMA's and ThreatExchange's): rows of them are
/// skipped, not refused.
fn other_kind(text: &str) -> bool {
    !text.is_empty()
        && text.len() <= 32
        && text
            .bytes()
            .all(|b| b.is_ascii_alphanumeric() || b == b'_' || b == b'-')
        && text
            .bytes()
            .any(|b| b == b'_' || b.is_ascii_alphabetic() && !b.is_ascii_hexdigit())
}

fn kind_by_length(hash: &str) -> Option<&'static str> {
    if !hash.bytes().all(|b| b.is_ascii_hexdigit()) {
        return None;
    }
    match hash.len() {
        32 => Some("md5"),
        64 => Some("pdq"),
        _ => None,
    }
}

fn entry(
    kind: &str,
    hash: &str,
    label: Option<String>,
    caller_id: Option<String>,
) -> Result<Row, String> {
    let Some(kind) = known_kind(kind) else {
        return Ok(Row::Skip(format!(
            "signal type {} is not matched here (pdq, md5, sha256)",
            super::shown(kind)
        )));
    };
    let hash = EntryHash::parse(kind, hash)?;
    validate_entry_text("label", &label)?;
    validate_entry_text("id", &caller_id)?;
    Ok(Row::Entry(NewEntry {
        hash,
        label,
        caller_id,
    }))
}

/// `text` without the UTF-8 byte order mark it may start with (U+FEFF, which `trim` keeps: left
/// in, it would be part of the first header's name, or of the first term).
fn without_bom(text: &str) -> &str {
    text.strip_prefix('\u{feff}').unwrap_or(text)
}

/// The fields of one line: `separator`-separated, RFC 4180 quotes, at most
/// [`FIELDS_PER_LINE_MAX`].
fn split(line: &str, separator: char) -> Result<Vec<String>, String> {
    let mut fields = Vec::new();
    let mut field = String::new();
    let mut chars = line.chars().peekable();
    let mut quoted = false;
    let mut started = true; // at the start of a field
    while let Some(c) = chars.next() {
        if quoted {
            match c {
                '"' if chars.peek() == Some(&'"') => {
                    chars.next();
                    field.push('"');
                }
                '"' => {
                    quoted = false;
                    match chars.peek() {
                        None => {}
                        Some(&next) if next == separator => {}
                        Some(_) => return Err("text after a closing quote".into()),
                    }
                }
                other => field.push(other),
            }
            continue;
        }
        match c {
            '"' if started => {
                quoted = true;
                started = false;
            }
            c if c == separator => {
                if fields.len() + 1 == FIELDS_PER_LINE_MAX {
                    return Err(format!("more than {FIELDS_PER_LINE_MAX} fields"));
                }
                fields.push(std::mem::take(&mut field));
                started = true;
            }
            other => {
                field.push(other);
                started = false;
            }
        }
    }
    if quoted {
        return Err("a quote is not closed (quoted fields are on one line)".into());
    }
    fields.push(field);
    Ok(fields)
}

/// The terms of a text list's import: one per line (blank lines and lines starting with `#`
/// skipped), or CSV whose header names a `term` column and another (`label`, `id`, as
/// [`export`] writes them; then every line is a row, `#` or not). A term that is not one
/// ([`EntryHash::term`]) refuses the import with its line.
pub fn parse_terms(text: &str, entries_max: usize) -> Result<Parsed, String> {
    let mut out = Parsed::default();
    let mut lines = without_bom(text)
        .split('\n')
        .enumerate()
        .map(|(at, line)| (at + 1, line.strip_suffix('\r').unwrap_or(line)))
        .filter(|(_, line)| !line.trim().is_empty())
        .peekable();
    // The export's header: `term` and at least one other column. With it, every line is a
    // row (a term may start with `#`); without it, `#` lines are comments.
    let header = lines.peek().and_then(|(_, line)| {
        let fields = split(line, ',').ok()?;
        let find = |name: &str| {
            fields
                .iter()
                .position(|field| field.trim().eq_ignore_ascii_case(name))
        };
        let term = find("term")?;
        (fields.len() >= 2).then(|| (term, find("label"), find("id")))
    });
    if header.is_some() {
        lines.next();
    }
    for (number, line) in lines {
        let (term, label, caller_id) = match header {
            None if line.trim_start().starts_with('#') => continue,
            None => (line.trim().to_owned(), None, None),
            Some((term, label, id)) => {
                let fields = split(line, ',').map_err(|why| format!("line {number}: {why}"))?;
                let term = fields.get(term).cloned().unwrap_or_default();
                (term, optional(&fields, label), optional(&fields, id))
            }
        };
        let hash = EntryHash::term(&term).map_err(|why| format!("line {number}: {why}"))?;
        validate_entry_text("label", &label).map_err(|why| format!("line {number}: {why}"))?;
        validate_entry_text("id", &caller_id).map_err(|why| format!("line {number}: {why}"))?;
        if out.entries.len() == entries_max {
            return Err(format!("more than {entries_max} entries"));
        }
        out.entries.push(NewEntry {
            hash,
            label,
            caller_id,
        });
    }
    Ok(out)
}

/// One field for a CSV row: quoted if it holds a comma, a quote or a line break.
fn field(text: &str) -> String {
    if text.contains([',', '"', '\n', '\r']) {
        format!("\"{}\"", text.replace('"', "\"\""))
    } else {
        text.to_owned()
    }
}

/// The entries as CSV: `signal_type,signal,label,id` for an image list, `term,label,id` for
/// a text list.
pub fn export(content: ListContent, entries: &[super::Entry]) -> String {
    let mut out = String::with_capacity(32 + entries.len() * 100);
    out.push_str(match content {
        ListContent::Image => "signal_type,signal,label,id\n",
        ListContent::Text => "term,label,id\n",
    });
    for entry in entries {
        if content == ListContent::Image {
            out.push_str(entry.hash.kind());
            out.push(',');
        }
        out.push_str(&field(&entry.hash.value()));
        out.push(',');
        out.push_str(&field(entry.label.as_deref().unwrap_or("")));
        out.push(',');
        out.push_str(&field(entry.caller_id.as_deref().unwrap_or("")));
        out.push('\n');
    }
    out
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::image::hashes::Pdq;
    use crate::lists::Entry;
    use proptest::prelude::*;

    const PDQ: &str = "f8f8f0cee0f4a84f06370a22038f63f0b36e2ed596621e1d33e6b39c4e9c9b22";
    const MD5: &str = "900150983cd24fb0d6963f7d28e17f72";

    fn kinds(parsed: &Parsed) -> Vec<&'static str> {
        parsed.entries.iter().map(|e| e.hash.kind()).collect()
    }

    #[test]
    fn header_rows_name_their_columns() {
        let text = format!(
            "signal_type,signal,label,id\npdq,{PDQ},meme 1,c-1\nmd5,{MD5},,\nvideo_md5,{MD5},x,y\n"
        );
        let parsed = parse(&text, 10).unwrap();
        assert_eq!(kinds(&parsed), ["pdq", "md5"]);
        assert_eq!(parsed.entries[0].label.as_deref(), Some("meme 1"));
        assert_eq!(parsed.entries[0].caller_id.as_deref(), Some("c-1"));
        assert_eq!(parsed.entries[1].label, None);
        assert_eq!(parsed.skipped.len(), 1);
        assert_eq!(parsed.skipped[0].line, 4);
        // Columns in another order, extra columns, a column named by its type.
        let text = format!("tags,extra,pdq\r\n\"a, b\",zz,{PDQ}\r\n");
        let parsed = parse(&text, 10).unwrap();
        assert_eq!(kinds(&parsed), ["pdq"]);
        assert_eq!(parsed.entries[0].label.as_deref(), Some("a, b"));
    }

    #[test]
    fn headerless_rows() {
        let text = format!(
            "# a comment\n\npdq,{PDQ},label\n{MD5}\n{PDQ},100,photo.jpg\nSHA256,{}\n",
            "ab".repeat(32)
        );
        let parsed = parse(&text, 10).unwrap();
        assert_eq!(kinds(&parsed), ["pdq", "md5", "pdq", "sha256"]);
        assert_eq!(parsed.entries[2].label.as_deref(), Some("photo.jpg"));
        let tabs = format!("pdq\t{PDQ}\tx\n");
        assert_eq!(kinds(&parse(&tabs, 10).unwrap()), ["pdq"]);
        let local_file = format!("pdq {PDQ}\nmd5 {MD5}\n");
        assert_eq!(kinds(&parse(&local_file, 10).unwrap()), ["pdq", "md5"]);
        let hasher = format!("hash={PDQ},90,a.jpg\n");
        assert_eq!(kinds(&parse(&hasher, 10).unwrap()), ["pdq"]);
        let dataset = format!(
            "signal_type,signal_str,collab,category,tags\npdq,{PDQ},c,POSITIVE_CLASS,a b\npdq,{PDQ},c,NEGATIVE_CLASS,\n"
        );
        let parsed = parse(&dataset, 10).unwrap();
        assert_eq!(kinds(&parsed), ["pdq"]);
        assert_eq!(parsed.entries[0].label.as_deref(), Some("a b"));
        assert_eq!(parsed.skipped_count, 1);
    }

    #[test]
    fn bad_rows_refuse_with_their_line() {
        for (text, line) in [
            (format!("pdq,{PDQ}\npdq,{}\n", &PDQ[1..]), "line 2"),
            ("abc123,x\n".to_owned(), "line 1"),
            ("pdq,zz\n".to_owned(), "line 1"),
            (format!("pdq,\"{PDQ}\n"), "line 1"),
            ("signal_type,signal\npdq,\n".to_owned(), "line 2"),
            (format!("pdq,{PDQ},\"a\"b\n"), "line 1"),
        ] {
            let error = parse(&text, 10).unwrap_err();
            assert!(error.starts_with(line), "{text:?}: {error}");
        }
        let many = format!("pdq,{PDQ}\n").repeat(3);
        assert!(parse(&many, 2).is_err());
    }

    #[test]
    fn export_reads_back() {
        let entries = vec![
            Entry {
                id: 1,
                hash: EntryHash::Pdq(Pdq::from_hex(PDQ).unwrap()),
                label: Some("with, comma \"and quote\"".into()),
                caller_id: None,
                added_ms: 0,
            },
            Entry {
                id: 2,
                hash: EntryHash::Md5([7; 16]),
                label: None,
                caller_id: Some("c".into()),
                added_ms: 0,
            },
        ];
        let text = export(ListContent::Image, &entries);
        assert!(text.starts_with("signal_type,signal,label,id\npdq,f8f8"));
        let parsed = parse(&text, 10).unwrap();
        assert_eq!(parsed.entries.len(), 2);
        for (read, entry) in parsed.entries.iter().zip(&entries) {
            assert_eq!(read.hash, entry.hash);
            assert_eq!(read.label, entry.label);
            assert_eq!(read.caller_id, entry.caller_id);
        }
    }

    #[test]
    fn terms_read_as_lines_or_as_their_export() {
        let parsed = parse_terms("# slang\ngrapefruit\n\n  two words  \r\n", 10).unwrap();
        let terms: Vec<String> = parsed.entries.iter().map(|e| e.hash.value()).collect();
        assert_eq!(terms, ["grapefruit", "two words"]);
        let entries: Vec<Entry> = parsed
            .entries
            .into_iter()
            .enumerate()
            .map(|(at, new)| Entry {
                id: at as u64 + 1,
                hash: new.hash,
                label: Some("with, comma".into()),
                caller_id: None,
                added_ms: 0,
            })
            .collect();
        let text = export(ListContent::Text, &entries);
        assert!(text.starts_with("term,label,id\ngrapefruit,\"with, comma\",\n"));
        let again = parse_terms(&text, 10).unwrap();
        assert_eq!(again.entries.len(), 2);
        assert_eq!(again.entries[0].label.as_deref(), Some("with, comma"));
        assert!(parse_terms("ok\n...\n", 10)
            .unwrap_err()
            .starts_with("line 2"));
        assert!(parse_terms("a\nb\nc\n", 2).is_err());
    }

    #[test]
    fn a_byte_order_mark_is_not_part_of_the_first_field() {
        let text = format!(
            "\u{feff}signal_type,signal,label,id\r\nsha256,{},a,b\r\n",
            "ab".repeat(32)
        );
        let parsed = parse(&text, 10).unwrap();
        assert_eq!(kinds(&parsed), ["sha256"]);
        assert_eq!(parsed.entries[0].label.as_deref(), Some("a"));
        let bytes = b"\xef\xbb\xbfgrapefruit\nlime\n";
        let parsed = parse_terms(std::str::from_utf8(bytes).unwrap(), 10).unwrap();
        let terms: Vec<String> = parsed.entries.iter().map(|e| e.hash.value()).collect();
        assert_eq!(terms, ["grapefruit", "lime"]);
        let bytes = b"\xef\xbb\xbfterm,label,id\ngrapefruit,fruit,\n";
        let parsed = parse_terms(std::str::from_utf8(bytes).unwrap(), 10).unwrap();
        assert_eq!(parsed.entries.len(), 1);
        assert_eq!(parsed.entries[0].label.as_deref(), Some("fruit"));
    }

    #[test]
    fn a_line_of_too_many_fields_is_refused_as_it_is_read() {
        let most = ",".repeat(FIELDS_PER_LINE_MAX - 1);
        assert_eq!(split(&most, ',').unwrap().len(), FIELDS_PER_LINE_MAX);
        let one_more = ",".repeat(FIELDS_PER_LINE_MAX);
        assert_eq!(split(&one_more, ','), Err("more than 64 fields".to_owned()));
        let flood = format!("pdq,{PDQ}\n{}\n", ",".repeat(1 << 20));
        assert_eq!(
            parse(&flood, 10).unwrap_err(),
            "line 2: more than 64 fields"
        );
        assert!(parse_terms(&format!("term,label\n{}", ",".repeat(1 << 20)), 10).is_err());
    }

    proptest! {
        #[test]
        fn never_panics(text in ".{0,400}") {
            let _ = parse(&text, 50);
            let _ = parse_terms(&text, 50);
        }

        #[test]
        fn fields_round_trip(values in proptest::collection::vec("[^\r\n]{0,20}", 1..6)) {
            let line: Vec<String> = values.iter().map(|v| field(v)).collect();
            prop_assert_eq!(split(&line.join(","), ',').unwrap(), values);
        }
    }
}
