//! Renders a scenario into the exact bytes of each request, once, before the run.
//!
//! The key goes into `X-Api-Key` (or `api_secret` on the compatible routes); `url` requests
//! point at the tool's own image server ([`crate::image_server`]). Bodies are built here
//! with their `Content-Length`, so sending a request is one write of one buffer.

use std::collections::BTreeMap;
use std::net::SocketAddr;
use std::sync::Arc;

use anyhow::{anyhow, bail, Context};

use crate::scenario::{Kind, RequestSpec, Scenario, Synthetic, FILE_BYTES_MAX};

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
            let bytes = render(scenario, request, target)
                .with_context(|| format!("request '{}'", request.name))?;
            Ok(Prepared {
                name: request.name.clone(),
                kind: request.kind,
                weight: request.weight,
                route: route_of(request.shape()),
                bytes: Arc::new(bytes),
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

fn render(
    scenario: &Scenario,
    request: &RequestSpec,
    target: &Target<'_>,
) -> anyhow::Result<Vec<u8>> {
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
            let text = text_of(scenario, request)?;
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
            let (mut image, _, _) = image_of(scenario, request)?;
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
            let text = text_of(scenario, request)?;
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
            let (image, content_type, file_name) = image_of(scenario, request)?;
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
    let content_type = match path.extension().and_then(|e| e.to_str()) {
        Some("jpg" | "jpeg") => "image/jpeg",
        Some("png") => "image/png",
        Some("webp") => "image/webp",
        Some("gif") => "image/gif",
        _ => "application/octet-stream",
    };
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
}
