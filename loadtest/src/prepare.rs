//! Renders a scenario into the exact bytes of each request, once, before the run.
//!
//! The key goes into `X-Api-Key` (or `api_secret` on the compatible routes); `url` requests
//! point at the tool's own image server ([`crate::image_server`]). Bodies are built here
//! with their `Content-Length`, so sending a request is one write of one buffer.

use std::collections::BTreeMap;
use std::net::SocketAddr;
use std::sync::Arc;

use anyhow::{anyhow, bail, Context};

use crate::scenario::{content_type_of, Kind, RequestSpec, Scenario, Synthetic, FILE_BYTES_MAX};

/// The photo synthetic JPEGs are upscaled from (a committed test image, scikit-image's
/// "astronaut", public domain).
pub const SYNTHETIC_SOURCE: &str = concat!(
    env!("CARGO_MANIFEST_DIR"),
    "/../models/image/testimages/jpeg_baseline_astronaut_512x384.jpg"
);
/// A well-formed key that no server has issued.
pub const UNKNOWN_KEY: &str = "mg_live_AAAAAAAAAAAA_AAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAA";
const BOUNDARY: &str = "modgate-load-7d1f3a";

/// One request, ready to send.
#[derive(Clone, Debug)]
pub struct Prepared {
    pub name: String,
    pub kind: Kind,
    pub weight: u32,
    /// The route's path, as the server journals it.
    pub route: &'static str,
    pub bytes: Arc<Vec<u8>>,
    /// Where in `bytes` a new stamp is written before each sending ([`stamp`]), for a
    /// `fresh` request; empty otherwise.
    pub stamps: Vec<usize>,
}

/// The words a stamp is written in: 64 common English words of five letters, so that every
/// stamp has one length (a request's `Content-Length` stays) and is made of words the text
/// models know. tox-block drops the words it does not know, so a stamp of made-up words would
/// leave its windows, and a server's kept results for them, unchanged.
const STAMP_WORDS: [&[u8; 5]; 64] = [
    b"about", b"above", b"after", b"again", b"agree", b"along", b"among", b"apple", b"beach",
    b"began", b"below", b"board", b"bread", b"bring", b"brown", b"build", b"chair", b"child",
    b"chose", b"class", b"clean", b"clock", b"cloud", b"cover", b"dance", b"drink", b"earth",
    b"field", b"floor", b"fresh", b"fruit", b"glass", b"grass", b"green", b"heard", b"horse",
    b"house", b"large", b"later", b"learn", b"level", b"light", b"lunch", b"music", b"night",
    b"north", b"ocean", b"often", b"order", b"paper", b"party", b"peace", b"phone", b"piano",
    b"place", b"plant", b"point", b"radio", b"river", b"round", b"small", b"sound", b"south",
    b"space",
];
/// Words in a stamp, six bits each: 2^36 stamps before one comes again.
const STAMP_WORD_COUNT: usize = 6;
/// The bytes of a stamp: its words and the spaces between them.
pub const STAMP_LEN: usize = STAMP_WORD_COUNT * 6 - 1;
/// How many stamps there are.
pub const STAMP_VALUES: u64 = 1 << (6 * STAMP_WORD_COUNT);
/// A fresh text gets a stamp before its first word, another after every this many words and
/// one at its end. tox-block scores windows of 100 known words: with a whole stamp at most
/// 50 words and a stamp apart, every window of a text holds one, except a first window
/// (aligned to the text's end, it holds what is left over) of fewer words than a stamp.
pub const STAMP_EVERY_WORDS: usize = 50;
/// Where a stamp goes, as rendered; no stamp can be mistaken for it ("qxqxq" is no stamp
/// word).
const STAMP_PLACEHOLDER: &[u8; STAMP_LEN] = b"qxqxq qxqxq qxqxq qxqxq qxqxq qxqxq";

/// Writes the stamp of `value` (taken modulo [`STAMP_VALUES`]) into `out`'s first
/// [`STAMP_LEN`] bytes: each distinct value gives other bytes.
pub fn stamp(value: u64, out: &mut [u8]) {
    for (i, chunk) in out[..STAMP_LEN].chunks_mut(6).enumerate() {
        let word = STAMP_WORDS[((value >> (6 * i)) & 63) as usize];
        chunk[..5].copy_from_slice(word);
        if let Some(space) = chunk.get_mut(5) {
            *space = b' ';
        }
    }
}

/// Where a text's words end as tox-block reads them: a space or one of the 33 characters its
/// tokenizer (Keras's) turns into spaces (`models/text/toxblock_tokenizer.json`). Any other
/// character, other whitespace included, is part of a word.
fn ends_words(c: char) -> bool {
    c == ' ' || "!\"#$%&()*+,-./:;<=>?@[\\]^_`{|}~\t\n".contains(c)
}

/// `text` with a stamp's placeholder before its first word, after every
/// [`STAMP_EVERY_WORDS`] words and at its end, always with a space after (and at the end
/// before) it; the other bytes as they were. Words are counted as tox-block splits them
/// ([`ends_words`]), so "a/b" is two and "a\rb" one, and each is one id at most.
fn stamped_text(text: &str) -> (String, usize) {
    let placeholder = std::str::from_utf8(STAMP_PLACEHOLDER).unwrap_or_default();
    let mut out = String::with_capacity(text.len() + 4 * STAMP_LEN);
    let (mut words, mut stamps, mut in_word) = (0, 0, false);
    for c in text.chars() {
        let starts_word = !in_word && !ends_words(c);
        in_word = !ends_words(c);
        if starts_word {
            if words % STAMP_EVERY_WORDS == 0 {
                out.push_str(placeholder);
                out.push(' ');
                stamps += 1;
            }
            words += 1;
        }
        out.push(c);
    }
    out.push(' ');
    out.push_str(placeholder);
    (out, stamps + 1)
}

/// A JPEG with a comment segment holding a stamp's placeholder, right after its start marker:
/// other bytes, the same pixels.
fn stamped_jpeg(image: &[u8]) -> anyhow::Result<Vec<u8>> {
    let Some(rest) = image.strip_prefix(&[0xFF, 0xD8]) else {
        bail!("`fresh` images are JPEG (a stamp goes in a comment segment)");
    };
    let mut out = Vec::with_capacity(image.len() + 4 + STAMP_LEN);
    out.extend_from_slice(&[0xFF, 0xD8, 0xFF, 0xFE]);
    // The segment's length counts its two length bytes.
    out.extend_from_slice(&((STAMP_LEN + 2) as u16).to_be_bytes());
    out.extend_from_slice(STAMP_PLACEHOLDER);
    out.extend_from_slice(rest);
    Ok(out)
}

/// The offsets of the `expected` placeholders in a rendered request.
fn stamp_offsets(bytes: &[u8], expected: usize) -> anyhow::Result<Vec<usize>> {
    let offsets: Vec<usize> = bytes
        .windows(STAMP_LEN)
        .enumerate()
        .filter(|(_, window)| *window == STAMP_PLACEHOLDER)
        .map(|(at, _)| at)
        .collect();
    if offsets.len() != expected {
        bail!(
            "the request holds {} stamp places where {expected} were put",
            offsets.len()
        );
    }
    Ok(offsets)
}

/// Files the image server serves: name to (content type, bytes).
pub type ServedImages = BTreeMap<String, (&'static str, Arc<Vec<u8>>)>;

/// What [`prepare`] needs besides the scenario.
pub struct Target<'a> {
    /// `Host` header value.
    pub host: &'a str,
    pub key: &'a str,
    /// The tool's image server, for `url` requests.
    pub image_server: Option<SocketAddr>,
}

/// The images `url` requests of `scenario` will ask the image server for.
pub fn images_to_serve(scenario: &Scenario) -> anyhow::Result<ServedImages> {
    let mut served = ServedImages::new();
    for request in scenario
        .requests
        .iter()
        .filter(|r| matches!(r.kind, Kind::Url | Kind::CompatUrl))
    {
        let (bytes, content_type, _) = image_of(scenario, request)?;
        served.insert(request.name.clone(), (content_type, Arc::new(bytes)));
    }
    Ok(served)
}

/// Renders every request of `scenario`.
pub fn prepare(scenario: &Scenario, target: &Target<'_>) -> anyhow::Result<Vec<Prepared>> {
    scenario
        .requests
        .iter()
        .map(|request| {
            let (bytes, stamps) = render(scenario, request, target)
                .with_context(|| format!("request '{}'", request.name))?;
            Ok(Prepared {
                name: request.name.clone(),
                kind: request.kind,
                weight: request.weight,
                route: route_of(request.shape()),
                bytes: Arc::new(bytes),
                stamps,
            })
        })
        .collect()
}

/// The route of a request sent the way `shape` sends them ([`RequestSpec::shape`]).
pub fn route_of(shape: Kind) -> &'static str {
    match shape {
        Kind::Text | Kind::BadKey | Kind::Malformed => "/v1/text",
        Kind::Image | Kind::Url => "/v1/image",
        Kind::CompatText => "/1.0/text/check-workflow.json",
        Kind::CompatImage | Kind::CompatUrl => "/1.0/check-workflow.json",
        Kind::Health => "/health",
    }
}

/// The request's bytes, and where its stamps go (`fresh` requests).
fn render(
    scenario: &Scenario,
    request: &RequestSpec,
    target: &Target<'_>,
) -> anyhow::Result<(Vec<u8>, Vec<usize>)> {
    let mut stamps = 0;
    let bytes = render_bytes(scenario, request, target, &mut stamps)?;
    let offsets = match request.fresh {
        true => stamp_offsets(&bytes, stamps)?,
        false => Vec::new(),
    };
    Ok((bytes, offsets))
}

/// The request's bytes; a `fresh` one's with stamp placeholders, counted in `stamps`.
fn render_bytes(
    scenario: &Scenario,
    request: &RequestSpec,
    target: &Target<'_>,
    stamps: &mut usize,
) -> anyhow::Result<Vec<u8>> {
    let text = |stamps: &mut usize| -> anyhow::Result<String> {
        let text = text_of(scenario, request)?;
        if !request.fresh {
            return Ok(text);
        }
        let (text, count) = stamped_text(&text);
        *stamps = count;
        Ok(text)
    };
    let image = |stamps: &mut usize| -> anyhow::Result<(Vec<u8>, &'static str, String)> {
        let (image, content_type, name) = image_of(scenario, request)?;
        if !request.fresh {
            return Ok((image, content_type, name));
        }
        *stamps = 1;
        Ok((stamped_jpeg(&image)?, content_type, name))
    };
    let workflow = request.workflow.as_deref().unwrap_or(&scenario.workflow);
    let host = target.host;
    let key = target.key;
    let image_url = || -> anyhow::Result<String> {
        let server = target
            .image_server
            .ok_or_else(|| anyhow!("url requests need the image server"))?;
        Ok(format!("http://{server}/{}", request.name))
    };
    // A bad key or a malformed body is sent the way its `on` kind sends requests.
    let key = if request.kind == Kind::BadKey {
        UNKNOWN_KEY
    } else {
        key
    };
    let malformed = request.kind == Kind::Malformed;
    Ok(match request.shape() {
        Kind::Text | Kind::BadKey | Kind::Malformed => {
            let text = text(stamps)?;
            let mut body = serde_json::json!({ "text": text, "workflow": workflow }).to_string();
            if malformed {
                body.truncate(body.len() / 2);
            }
            with_body(
                &format!("POST /v1/text HTTP/1.1\r\nHost: {host}\r\nX-Api-Key: {key}\r\nContent-Type: application/json\r\n"),
                body.as_bytes(),
            )
        }
        Kind::Image => {
            let (mut image, _, _) = image(stamps)?;
            if malformed {
                image.truncate(image.len() / 2);
            }
            with_body(
                &format!("POST /v1/image?workflow={} HTTP/1.1\r\nHost: {host}\r\nX-Api-Key: {key}\r\nContent-Type: application/octet-stream\r\n", percent(workflow)),
                &image,
            )
        }
        Kind::Url => with_body(
            &format!(
                "POST /v1/image?workflow={}&url={} HTTP/1.1\r\nHost: {host}\r\nX-Api-Key: {key}\r\n",
                percent(workflow),
                percent(&image_url()?)
            ),
            b"",
        ),
        Kind::CompatUrl => format!(
            "GET /1.0/check-workflow.json?workflow={}&api_secret={key}&url={} HTTP/1.1\r\nHost: {host}\r\n\r\n",
            percent(workflow),
            percent(&image_url()?)
        )
        .into_bytes(),
        Kind::CompatText => {
            let text = text(stamps)?;
            let mut body = form(&[("api_secret", key.as_bytes()), ("workflow", workflow.as_bytes())], ("text", None, text.as_bytes()));
            if malformed {
                cut_closing_boundary(&mut body);
            }
            with_body(
                &format!("POST /1.0/text/check-workflow.json HTTP/1.1\r\nHost: {host}\r\nContent-Type: multipart/form-data; boundary={BOUNDARY}\r\n"),
                &body,
            )
        }
        Kind::CompatImage => {
            let (image, content_type, file_name) = image(stamps)?;
            let mut body = form(
                &[("api_secret", key.as_bytes()), ("api_user", b"load"), ("workflow", workflow.as_bytes())],
                ("media", Some((&file_name, content_type)), &image),
            );
            if malformed {
                cut_closing_boundary(&mut body);
            }
            with_body(
                &format!("POST /1.0/check-workflow.json HTTP/1.1\r\nHost: {host}\r\nContent-Type: multipart/form-data; boundary={BOUNDARY}\r\n"),
                &body,
            )
        }
        Kind::Health => format!("GET /health HTTP/1.1\r\nHost: {host}\r\n\r\n").into_bytes(),
    })
}

/// Drops a form's closing boundary: its last part never ends (400).
fn cut_closing_boundary(body: &mut Vec<u8>) {
    let closing = format!("\r\n--{BOUNDARY}--\r\n");
    body.truncate(body.len().saturating_sub(closing.len()));
}

fn with_body(head: &str, body: &[u8]) -> Vec<u8> {
    let mut bytes = Vec::with_capacity(head.len() + body.len() + 32);
    bytes.extend_from_slice(head.as_bytes());
    bytes.extend_from_slice(format!("Content-Length: {}\r\n\r\n", body.len()).as_bytes());
    bytes.extend_from_slice(body);
    bytes
}

/// A multipart form: plain fields, then the payload field (with a file name and type for
/// files).
fn form(fields: &[(&str, &[u8])], payload: (&str, Option<(&str, &str)>, &[u8])) -> Vec<u8> {
    let mut body = Vec::new();
    for (name, value) in fields {
        body.extend_from_slice(
            format!("--{BOUNDARY}\r\nContent-Disposition: form-data; name=\"{name}\"\r\n\r\n")
                .as_bytes(),
        );
        body.extend_from_slice(value);
        body.extend_from_slice(b"\r\n");
    }
    let (name, file, bytes) = payload;
    let disposition = match file {
        Some((file_name, content_type)) => format!(
            "Content-Disposition: form-data; name=\"{name}\"; filename=\"{file_name}\"\r\nContent-Type: {content_type}"
        ),
        None => format!("Content-Disposition: form-data; name=\"{name}\""),
    };
    body.extend_from_slice(format!("--{BOUNDARY}\r\n{disposition}\r\n\r\n").as_bytes());
    body.extend_from_slice(bytes);
    body.extend_from_slice(format!("\r\n--{BOUNDARY}--\r\n").as_bytes());
    body
}

fn text_of(scenario: &Scenario, request: &RequestSpec) -> anyhow::Result<String> {
    match (&request.text, &request.text_file) {
        (Some(text), _) => Ok(text.clone()),
        (None, Some(path)) => {
            let path = scenario.resolve(path);
            std::fs::read_to_string(&path).with_context(|| format!("reading {}", path.display()))
        }
        (None, None) => bail!("no text"),
    }
}

/// The image bytes, their content type and a file name.
fn image_of(
    scenario: &Scenario,
    request: &RequestSpec,
) -> anyhow::Result<(Vec<u8>, &'static str, String)> {
    if let Some(synthetic) = request.synthetic {
        let bytes = synthetic_jpeg(synthetic)?;
        return Ok((bytes, "image/jpeg", format!("{}.jpg", request.name)));
    }
    let path = scenario.resolve(
        request
            .image
            .as_deref()
            .ok_or_else(|| anyhow!("no image"))?,
    );
    let bytes = std::fs::read(&path).with_context(|| format!("reading {}", path.display()))?;
    if bytes.len() > FILE_BYTES_MAX {
        bail!("{} is over {FILE_BYTES_MAX} bytes", path.display());
    }
    let content_type = content_type_of(&path);
    let file_name = path
        .file_name()
        .map_or_else(|| "image".to_owned(), |n| n.to_string_lossy().into_owned());
    Ok((bytes, content_type, file_name))
}

/// A JPEG of the requested size: [`SYNTHETIC_SOURCE`] upscaled (bilinear) and encoded with
/// libjpeg-turbo (4:2:0). The same bytes every time.
pub fn synthetic_jpeg(spec: Synthetic) -> anyhow::Result<Vec<u8>> {
    let source = std::fs::read(SYNTHETIC_SOURCE).context("reading the synthetic source photo")?;
    std::panic::catch_unwind(|| -> std::io::Result<Vec<u8>> {
        let decompress = mozjpeg::Decompress::new_mem(&source)?;
        let mut started = decompress.rgb()?;
        let (width, height) = (started.width(), started.height());
        let pixels: Vec<u8> = started.read_scanlines()?;
        started.finish()?;
        let large = upscale(
            &pixels,
            width,
            height,
            spec.width as usize,
            spec.height as usize,
        );
        let mut compress = mozjpeg::Compress::new(mozjpeg::ColorSpace::JCS_RGB);
        compress.set_size(spec.width as usize, spec.height as usize);
        compress.set_fastest_defaults();
        compress.set_quality(f32::from(spec.quality));
        compress.set_chroma_sampling_pixel_sizes((2, 2), (2, 2));
        let mut started = compress.start_compress(Vec::new())?;
        started.write_scanlines(&large)?;
        started.finish()
    })
    .map_err(|_| anyhow!("libjpeg failed on the synthetic image"))?
    .context("making the synthetic image")
}

/// Bilinear resampling of RGB pixels (centre-aligned).
fn upscale(
    pixels: &[u8],
    width: usize,
    height: usize,
    to_width: usize,
    to_height: usize,
) -> Vec<u8> {
    let mut out = vec![0u8; to_width * to_height * 3];
    let scale_x = width as f32 / to_width as f32;
    let scale_y = height as f32 / to_height as f32;
    for y in 0..to_height {
        let sy = ((y as f32 + 0.5) * scale_y - 0.5).clamp(0.0, (height - 1) as f32);
        let (y0, fy) = (sy as usize, sy.fract());
        let y1 = (y0 + 1).min(height - 1);
        for x in 0..to_width {
            let sx = ((x as f32 + 0.5) * scale_x - 0.5).clamp(0.0, (width - 1) as f32);
            let (x0, fx) = (sx as usize, sx.fract());
            let x1 = (x0 + 1).min(width - 1);
            for c in 0..3 {
                let at = |xx: usize, yy: usize| f32::from(pixels[(yy * width + xx) * 3 + c]);
                let top = at(x0, y0) * (1.0 - fx) + at(x1, y0) * fx;
                let bottom = at(x0, y1) * (1.0 - fx) + at(x1, y1) * fx;
                out[(y * to_width + x) * 3 + c] = (top * (1.0 - fy) + bottom * fy).round() as u8;
            }
        }
    }
    out
}

/// Percent-encoding of a query value.
pub fn percent(value: &str) -> String {
    value
        .bytes()
        .map(|b| {
            if b.is_ascii_alphanumeric() || b"-._~".contains(&b) {
                (b as char).to_string()
            } else {
                format!("%{b:02X}")
            }
        })
        .collect()
}

#[cfg(test)]
mod tests {
    use super::*;
    use std::path::Path;

    fn scenario(requests: &str) -> Scenario {
        let base = Path::new(concat!(env!("CARGO_MANIFEST_DIR"), "/scenarios"));
        Scenario::parse(&format!("name = \"t\"\n{requests}"), base).unwrap()
    }

    #[test]
    fn requests_are_whole_http_messages() {
        let s = scenario("[[requests]]\nname = \"t\"\nkind = \"text\"\nweight = 1\ntext = \"a \\\"q\\\"\"\n[[requests]]\nname = \"m\"\nkind = \"malformed\"\nweight = 1\ntext = \"hello there\"\n[[requests]]\nname = \"u\"\nkind = \"url\"\nweight = 1\nimage = \"../../models/image/testimages/png_rgb_coffee_16x12.png\"\n");
        let target = Target {
            host: "h",
            key: "mg_live_k",
            image_server: Some("127.0.0.1:9".parse().unwrap()),
        };
        let prepared = prepare(&s, &target).unwrap();
        let text = String::from_utf8(prepared[0].bytes.to_vec()).unwrap();
        assert!(text.starts_with("POST /v1/text HTTP/1.1\r\nHost: h\r\nX-Api-Key: mg_live_k\r\n"));
        assert!(text.ends_with("\r\n\r\n{\"text\":\"a \\\"q\\\"\",\"workflow\":\"default\"}"));
        let length: usize = text
            .split("Content-Length: ")
            .nth(1)
            .unwrap()
            .split("\r\n")
            .next()
            .unwrap()
            .parse()
            .unwrap();
        assert_eq!(length, text.split("\r\n\r\n").nth(1).unwrap().len());
        let malformed = String::from_utf8(prepared[1].bytes.to_vec()).unwrap();
        assert!(!malformed.ends_with('}'));
        let url = String::from_utf8(prepared[2].bytes.to_vec()).unwrap();
        assert!(url.starts_with(
            "POST /v1/image?workflow=default&url=http%3A%2F%2F127.0.0.1%3A9%2Fu HTTP/1.1"
        ));
        assert_eq!(images_to_serve(&s).unwrap()["u"].0, "image/png");
    }

    #[test]
    fn synthetic_images_have_their_size_and_are_deterministic() {
        let spec = Synthetic {
            width: 640,
            height: 480,
            quality: 80,
        };
        let a = synthetic_jpeg(spec).unwrap();
        assert_eq!(a, synthetic_jpeg(spec).unwrap());
        assert_eq!(&a[..2], &[0xFF, 0xD8]);
        let decompress = mozjpeg::Decompress::new_mem(&a).unwrap();
        assert_eq!((decompress.width(), decompress.height()), (640, 480));
    }

    #[test]
    fn stamps_differ_and_keep_their_length() {
        let mut seen = std::collections::HashSet::new();
        for value in (0..5000).chain([STAMP_VALUES - 1]) {
            let mut out = [0u8; STAMP_LEN + 1];
            stamp(value, &mut out);
            assert_eq!(out[STAMP_LEN], 0, "nothing written past the stamp");
            let words: Vec<&[u8]> = out[..STAMP_LEN].split(|&b| b == b' ').collect();
            assert_eq!(words.len(), STAMP_WORD_COUNT);
            assert!(words
                .iter()
                .all(|w| STAMP_WORDS.contains(&<&[u8; 5]>::try_from(*w).unwrap())));
            assert!(seen.insert(out), "value {value}");
        }
        // Taken modulo STAMP_VALUES.
        let (mut last, mut wrapped) = ([0u8; STAMP_LEN], [0u8; STAMP_LEN]);
        stamp(STAMP_VALUES - 1, &mut last);
        stamp(u64::MAX, &mut wrapped);
        assert_eq!(last, wrapped);
        let mut sorted = STAMP_WORDS.to_vec();
        sorted.sort_unstable();
        sorted.dedup();
        assert_eq!(sorted.len(), 64, "64 distinct words");
    }

    #[test]
    fn a_fresh_text_holds_a_stamp_in_every_window_of_words() {
        let words: Vec<String> = (0..230).map(|i| format!("w{i}")).collect();
        let text = format!("{}\n{}", words[..100].join(" "), words[100..].join("  "));
        let (stamped, count) = stamped_text(&text);
        // Before the first word, after every 50 words (at 50, 100, 150 and 200) and at the end.
        assert_eq!(count, 6);
        let placeholder = std::str::from_utf8(STAMP_PLACEHOLDER).unwrap();
        assert_eq!(stamped.matches(placeholder).count(), 6);
        assert_eq!(
            stamped.replace(&format!("{placeholder} "), ""),
            format!("{text} {placeholder}")
        );
        // No run of more than 50 of the text's words without a whole stamp, the words split
        // as tox-block splits them.
        let runs = |stamped: &str| {
            let (mut run, mut longest) = (0, 0);
            for word in stamped.split(ends_words).filter(|w| !w.is_empty()) {
                run = if word == "qxqxq" { 0 } else { run + 1 };
                longest = longest.max(run);
            }
            longest
        };
        assert_eq!(runs(&stamped), STAMP_EVERY_WORDS);
        assert!(stamped.ends_with(&format!(" {placeholder}")));
        assert_eq!(stamped_text("").1, 1);

        // Words tox-block splits apart count one each; a stamp never touches a word it does
        // not split from (after a carriage return or a no-break space).
        let joined = (0..120)
            .map(|i| format!("w{i}"))
            .collect::<Vec<_>>()
            .join("/");
        let (stamped, count) = stamped_text(&joined);
        assert_eq!((count, runs(&stamped)), (4, STAMP_EVERY_WORDS));
        let (stamped, _) = stamped_text("one\rtwo\u{a0}three four\r");
        assert_eq!(
            stamped,
            format!("{placeholder} one\rtwo\u{a0}three four\r {placeholder}")
        );
    }

    #[test]
    fn fresh_requests_get_new_content_of_one_length() {
        let s = scenario(concat!(
            "[[requests]]\nname = \"t\"\nkind = \"text\"\nweight = 1\nfresh = true\ntext = \"hello there\"\n",
            "[[requests]]\nname = \"i\"\nkind = \"compat_image\"\nweight = 1\nfresh = true\nimage = \"../../models/image/testimages/jpeg_baseline_chelsea_64x48.jpg\"\n",
            "[[requests]]\nname = \"p\"\nkind = \"image\"\nweight = 1\nimage = \"../../models/image/testimages/png_rgb_coffee_16x12.png\"\n",
        ));
        let target = Target {
            host: "h",
            key: "mg_live_k",
            image_server: None,
        };
        let prepared = prepare(&s, &target).unwrap();
        assert_eq!(prepared[0].stamps.len(), 2);
        assert_eq!(prepared[1].stamps.len(), 1);
        assert!(prepared[2].stamps.is_empty());
        let text = String::from_utf8(prepared[0].bytes.to_vec()).unwrap();
        assert!(text.ends_with(r#"{"text":"qxqxq qxqxq qxqxq qxqxq qxqxq qxqxq hello there qxqxq qxqxq qxqxq qxqxq qxqxq qxqxq","workflow":"default"}"#), "{text}");
        // The JPEG's comment segment follows its start marker.
        let image = &prepared[1].bytes;
        let at = prepared[1].stamps[0];
        assert_eq!(
            &image[at - 6..at],
            &[0xFF, 0xD8, 0xFF, 0xFE, 0, STAMP_LEN as u8 + 2]
        );
        let mut first = image.to_vec();
        stamp(7, &mut first[at..]);
        let mut second = image.to_vec();
        stamp(8, &mut second[at..]);
        assert_ne!(first, second);
        assert_eq!(first.len(), image.len());

        let png = scenario("[[requests]]\nname = \"p\"\nkind = \"image\"\nweight = 1\nfresh = true\nimage = \"../../models/image/testimages/png_rgb_coffee_16x12.png\"\n");
        assert!(
            prepare(&png, &target).is_err(),
            "only JPEG images are stamped"
        );
        let clash = scenario("[[requests]]\nname = \"t\"\nkind = \"text\"\nweight = 1\nfresh = true\ntext = \"qxqxq qxqxq qxqxq qxqxq qxqxq qxqxq\"\n");
        assert!(
            prepare(&clash, &target).is_err(),
            "a text holding the placeholder"
        );
    }
}
