//! Image checks end to end: POST /v1/image, POST and GET /1.0/check-workflow.json, downloads
//! by `url` from a local image server, and the SSRF refusal with default settings.

mod common;

use std::time::{Duration, Instant};

use common::*;
use serde_json::{json, Value};

const FORMATS: &[&str] = &[
    "jpeg_baseline_chelsea_451x300.jpg",
    "jpeg_progressive_coffee_600x400.jpg",
    "jpeg_gray_camera_512x512.jpg",
    "jpeg_baseline_retina_1152x864_1mp.jpg",
    "png_rgba_chelsea_300x200.png",
    "png_palette_coffee_300x200.png",
    "png_gray_alpha_camera_160x120.png",
    "webp_lossy_rocket_640x427.webp",
    "webp_lossless_rgba_chelsea_150x100.webp",
    "webp_animated_2frames_coffee_320x240.webp",
    "gif_animated_2frames_chelsea_200x150.gif",
    "gif_transparent_coffee_120x90.gif",
];

/// A server whose downloads may reach 127.0.0.1 (test-only setting), with a pro key.
fn server_for_downloads() -> (Server, String) {
    let server = Server::start_with(Options {
        config: "[testing]\nallow_private_urls = true\n".into(),
        ..Options::default()
    });
    let key = server.new_key("acme", "pro", &[]).0;
    (server, key)
}

fn image(server: &Server, key: &str, query: &str, body: &[u8]) -> (u16, Value) {
    let (status, headers, answer) = post_image(server, key, query, body);
    if status == 200 {
        assert_schema("Answer", &answer);
        assert_eq!(answer["request_id"], headers.get("x-request-id").unwrap());
    }
    (status, answer)
}

fn compat_form(
    server: &Server,
    fields: &[(&str, &str)],
    media: Option<(&str, &str, &[u8])>,
) -> (u16, Value) {
    let (content_type, body) = form_with_media(fields, media);
    let (status, _, answer) = post(
        &server.url("/1.0/check-workflow.json"),
        &[("Content-Type", &content_type)],
        &body,
    );
    let schema = if status == 200 {
        "CompatAnswer"
    } else {
        "CompatErrorEnvelope"
    };
    assert_schema(schema, &answer);
    (status, answer)
}

#[test]
fn every_format_is_accepted_with_the_image_categories() {
    let server = Server::start();
    let key = server.demo_key.clone().unwrap();
    for name in FORMATS {
        let (status, answer) = image(&server, &key, "?ref=img-1", &testimage(name));
        assert_eq!(status, 200, "{name}: {answer}");
        assert_eq!(answer["summary"]["action"], "accept", "{name}: {answer}");
        assert_eq!(answer["ref"], "img-1");
        for category in ["nudity", "suggestive", "drawn_nudity"] {
            let score = answer["scores"][category]
                .as_f64()
                .unwrap_or_else(|| panic!("{name}: {category}"));
            assert!((0.0..=1.0).contains(&score));
        }
        assert!(answer.get("unchecked").is_none());
    }
}

#[test]
fn names_and_content_types_do_not_decide_the_format() {
    let server = Server::start();
    let key = server.demo_key.clone().unwrap();
    // A PNG that claims to be a JPEG, in a field named cat.jpg: it is a PNG, and it passes.
    let png = testimage("png_rgb_hubble_320x240.png");
    let (status, answer) = compat_form(
        &server,
        &[("api_secret", &key)],
        Some(("cat.jpg", "image/jpeg", &png)),
    );
    assert_eq!(status, 200, "{answer}");
    // Text that claims to be a PNG: 415.
    let (status, answer) = compat_form(
        &server,
        &[("api_secret", &key)],
        Some(("cat.png", "image/png", b"just text")),
    );
    assert_error(status, &answer, 415, "unsupported_media", true);
    // BMP, TIFF and an empty body on the native route.
    for body in [
        &b"BM\x36\x00\x00\x00\x00\x00"[..],
        b"II*\x00\x08\x00\x00\x00",
        b"",
    ] {
        let (status, answer) = image(&server, &key, "", body);
        assert_error(status, &answer, 415, "unsupported_media", false);
    }
}

#[test]
fn corrupt_and_truncated_images_are_400() {
    let server = Server::start();
    let key = server.demo_key.clone().unwrap();
    for name in [
        "png_rgb_hubble_320x240.png",
        "webp_lossy_rocket_640x427.webp",
        "gif_animated_2frames_chelsea_200x150.gif",
        // JPEG decoders fill a cut scan with grey: the missing end-of-image marker tells.
        "jpeg_baseline_chelsea_451x300.jpg",
        "jpeg_progressive_coffee_600x400.jpg",
        // Decoded at a reduced scale (libjpeg's DCT scaling), the other JPEG path.
        "jpeg_baseline_retina_1152x864_1mp.jpg",
    ] {
        let bytes = testimage(name);
        let (status, answer) = image(&server, &key, "", &bytes[..bytes.len() / 2]);
        assert_error(status, &answer, 400, "corrupt_media", false);
        // The whole file is fine.
        let (status, _) = image(&server, &key, "", &bytes);
        assert_eq!(status, 200, "{name}");
    }
    // A JPEG signature followed by garbage, and a PNG whose IHDR is cut.
    let (status, answer) = image(
        &server,
        &key,
        "",
        b"\xFF\xD8\xFF\xE0\x00\x10JFIF garbage garbage garbage",
    );
    assert_error(status, &answer, 400, "corrupt_media", false);
    let (status, answer) = image(&server, &key, "", b"\x89PNG\r\n\x1a\n\x00\x00\x00\x0dIHD");
    assert_error(status, &answer, 400, "corrupt_media", false);
}

/// A PNG header claiming `width` x `height`, no pixels.
fn png_claiming(width: u32, height: u32) -> Vec<u8> {
    let mut out = b"\x89PNG\r\n\x1a\n\x00\x00\x00\x0dIHDR".to_vec();
    out.extend_from_slice(&width.to_be_bytes());
    out.extend_from_slice(&height.to_be_bytes());
    out.extend_from_slice(&[8, 2, 0, 0, 0, 0x8d, 0x4b, 0x2f, 0x2e]);
    out
}

#[test]
fn decompression_bombs_are_refused_from_their_headers() {
    let server = Server::start();
    let free = server.demo_key.clone().unwrap();
    let (pro, _) = server.new_key("acme", "pro", &[]);
    let started = Instant::now();
    let mut gif = b"GIF89a".to_vec();
    gif.extend_from_slice(&60_000u16.to_le_bytes());
    gif.extend_from_slice(&60_000u16.to_le_bytes());
    gif.extend_from_slice(&[0, 0, 0, 0x3b]);
    let mut webp = b"RIFF\x00\x00\x00\x00WEBPVP8X\x0a\x00\x00\x00\x10\x00\x00\x00".to_vec();
    webp.extend_from_slice(&[0x5F, 0xEA, 0x00, 0x5F, 0xEA, 0x00]);
    for bomb in [png_claiming(60_000, 60_000), gif, webp] {
        assert!(bomb.len() < 100);
        let (status, answer) = image(&server, &pro, "", &bomb);
        assert_error(status, &answer, 413, "image_too_large", false);
    }
    assert!(started.elapsed() < Duration::from_secs(5));
    // The plan's pixels: 14 MP is over the free plan's 12 MP, within pro's 50 MP (where the
    // header passes and the missing pixels make it corrupt).
    let (status, answer) = image(&server, &free, "", &png_claiming(4000, 3500));
    let message = assert_error(status, &answer, 413, "image_too_large", false);
    assert!(message.contains("12000000"), "{message}");
    let (status, answer) = image(&server, &pro, "", &png_claiming(4000, 3500));
    assert_error(status, &answer, 400, "corrupt_media", false);
    // A side over 16,384 px, whatever the pixel count.
    let (status, answer) = image(&server, &pro, "", &png_claiming(20_000, 10));
    assert_error(status, &answer, 413, "image_too_large", false);
}

#[test]
fn body_limits_and_parameters() {
    let server = Server::start();
    let key = server.demo_key.clone().unwrap();
    // Over 15 MB by Content-Length: refused before the body is read, and the connection closed.
    let mut conn = RawConn::connect(server.addr);
    conn.send(format!("POST /v1/image HTTP/1.1\r\nHost: t\r\nX-Api-Key: {key}\r\nContent-Length: 15000001\r\n\r\n").as_bytes());
    let response = conn.read_response().unwrap();
    assert_error(
        response.status,
        &response.json(),
        413,
        "body_too_large",
        false,
    );
    assert_eq!(response.header("connection"), Some("close"));
    // ref rules, unknown workflow, url with a body.
    let jpeg = testimage("jpeg_baseline_chelsea_64x48.jpg");
    let (status, answer) = image(&server, &key, &format!("?ref={}", "r".repeat(129)), &jpeg);
    assert_error(status, &answer, 400, "bad_request", false);
    let (status, answer) = image(&server, &key, "?workflow=nope", &jpeg);
    assert_error(status, &answer, 400, "unknown_workflow", false);
    let (status, answer) = image(
        &server,
        &key,
        "?url=http%3A%2F%2Fexample.com%2Fa.jpg",
        &jpeg,
    );
    assert_error(status, &answer, 400, "bad_request", false);
    // A key limited to texts may not check images.
    let (text_only, _) = server.new_key("demo", "free", &["--scopes", "text"]);
    let (status, answer) = image(&server, &text_only, "", &jpeg);
    assert_error(status, &answer, 403, "forbidden", false);
}

#[test]
fn compatible_post_form_rules() {
    let server = Server::start();
    let key = server.demo_key.clone().unwrap();
    let jpeg = testimage("jpeg_baseline_chelsea_64x48.jpg");
    let (status, answer) = compat_form(
        &server,
        &[
            ("api_secret", &key),
            ("workflow", "default"),
            ("api_user", "x"),
        ],
        Some(("a.jpg", "image/jpeg", &jpeg)),
    );
    assert_eq!(status, 200, "{answer}");
    assert_eq!(answer["workflow"]["id"], "default");
    assert_eq!(answer["request"]["operations"], 1);
    let (status, answer) = compat_form(
        &server,
        &[("api_secret", &key), ("url", "http://example.com/a.jpg")],
        Some(("a.jpg", "image/jpeg", &jpeg)),
    );
    assert_error(status, &answer, 400, "bad_request", true);
    let (status, answer) = compat_form(&server, &[("api_secret", &key)], None);
    assert_error(status, &answer, 400, "bad_request", true);
    let (status, answer) = compat_form(
        &server,
        &[("api_secret", &key)],
        Some(("a.jpg", "image/jpeg", b"")),
    );
    assert_error(status, &answer, 415, "unsupported_media", true);
    let (status, answer) = compat_form(
        &server,
        &[("api_secret", &key), ("workflow", &"w".repeat(70_000))],
        Some(("a.jpg", "image/jpeg", &jpeg)),
    );
    assert_error(status, &answer, 413, "body_too_large", true);
    let (status, answer) = compat_form(&server, &[], Some(("a.jpg", "image/jpeg", &jpeg)));
    let message = assert_error(status, &answer, 401, "unauthorized", true);
    assert!(message.contains("api_secret"), "{message}");
    // Not a multipart body: 415 on this route; a form without a usable boundary: 400.
    let (status, _, answer) = post(
        &server.url("/1.0/check-workflow.json"),
        &[("Content-Type", "image/jpeg"), ("X-Api-Key", &key)],
        &jpeg,
    );
    assert_error(status, &answer, 415, "unsupported_media", true);
    for content_type in ["multipart/form-data", "multipart/form-data; boundary=\"\""] {
        let (status, _, answer) = post(
            &server.url("/1.0/check-workflow.json"),
            &[("Content-Type", content_type), ("X-Api-Key", &key)],
            &jpeg,
        );
        let message = assert_error(status, &answer, 400, "bad_request", true);
        assert!(message.contains("boundary"), "{content_type}: {message}");
    }
}

#[test]
fn compatible_get_needs_a_url() {
    let server = Server::start();
    let key = server.demo_key.clone().unwrap();
    let (status, _, answer) = get(
        &server.url(&format!("/1.0/check-workflow.json?api_secret={key}")),
        &[],
    );
    assert_error(status, &answer, 400, "bad_request", true);
    let (status, _, answer) = get(
        &server.url(&format!(
            "/1.0/check-workflow.json?api_secret={key}&media=abc"
        )),
        &[],
    );
    assert_error(status, &answer, 400, "bad_request", true);
    // The key is checked before the url.
    let (status, _, answer) = get(
        &server.url("/1.0/check-workflow.json?url=http%3A%2F%2F127.0.0.1%2F"),
        &[],
    );
    assert_error(status, &answer, 401, "unauthorized", true);
}

#[test]
fn with_default_settings_loopback_urls_are_refused() {
    let images = ImageServer::start();
    let server = Server::start();
    let key = server.demo_key.clone().unwrap();
    for url in [
        images.url("/img/png_rgb_coffee_16x12.png"),
        format!(
            "http://2130706433:{}/img/png_rgb_coffee_16x12.png",
            images.addr.port()
        ),
        format!(
            "http://localhost:{}/img/png_rgb_coffee_16x12.png",
            images.addr.port()
        ),
        "http://[::1]/x.png".to_owned(),
        "http://169.254.169.254/latest/meta-data/".to_owned(),
    ] {
        let (status, _, answer) = get(
            &server.url(&format!(
                "/1.0/check-workflow.json?api_secret={key}&url={}",
                encode(&url)
            )),
            &[],
        );
        let message = assert_error(status, &answer, 400, "url_refused", true);
        assert!(message.contains("address"), "{url}: {message}");
    }
    for url in ["ftp://example.com/a.png", "file:///etc/passwd", "not a url"] {
        let (status, answer) = image(&server, &key, &format!("?url={}", encode(url)), b"");
        assert_error(status, &answer, 400, "url_refused", false);
    }
}

/// A query value, percent-encoded (the load tool's encoder).
fn encode(text: &str) -> String {
    modgate_load::prepare::percent(text)
}

#[test]
fn downloads_follow_three_redirects_and_keep_every_rule() {
    let images = ImageServer::start();
    let (server, key) = server_for_downloads();
    let check = |path: &str| {
        image(
            &server,
            &key,
            &format!("?url={}", encode(&images.url(path))),
            b"",
        )
    };
    let (status, answer) = check("/img/jpeg_baseline_chelsea_451x300.jpg");
    assert_eq!(status, 200, "{answer}");
    let (status, answer) = check("/chunked/webp_lossy_rocket_640x427.webp");
    assert_eq!(status, 200, "{answer}");
    let (status, answer) = check("/redirect/3/png_rgb_coffee_16x12.png");
    assert_eq!(status, 200, "3 redirects are followed: {answer}");
    let (status, answer) = check("/redirect/4/png_rgb_coffee_16x12.png");
    let message = assert_error(status, &answer, 400, "url_refused", false);
    assert!(message.contains("redirects"), "{message}");
    let (status, answer) = check("/text");
    let message = assert_error(status, &answer, 400, "url_refused", false);
    assert!(message.contains("text/html"), "{message}");
    let (status, answer) = check("/missing");
    assert_error(status, &answer, 400, "url_refused", false);
    let started = Instant::now();
    let (status, answer) = check("/big");
    assert_error(status, &answer, 400, "url_refused", false);
    assert!(
        started.elapsed() < Duration::from_secs(5),
        "refused from Content-Length"
    );
    let (status, answer) = check("/big-unsized");
    let message = assert_error(status, &answer, 400, "url_refused", false);
    assert!(message.contains("15000000"), "{message}");
    // The compatible GET route downloads too.
    let url = encode(&images.url("/img/gif_transparent_coffee_120x90.gif"));
    let (status, _, answer) = get(
        &server.url(&format!(
            "/1.0/check-workflow.json?api_secret={key}&url={url}"
        )),
        &[],
    );
    assert_eq!(status, 200, "{answer}");
    assert_schema("CompatAnswer", &answer);
}

#[test]
fn https_downloads_verify_the_certificate() {
    // A test authority and a certificate for localhost signed by it.
    let mut params = rcgen::CertificateParams::new(Vec::new()).unwrap();
    params.is_ca = rcgen::IsCa::Ca(rcgen::BasicConstraints::Unconstrained);
    let authority =
        rcgen::CertifiedIssuer::self_signed(params, rcgen::KeyPair::generate().unwrap()).unwrap();
    let leaf_key = rcgen::KeyPair::generate().unwrap();
    let leaf = rcgen::CertificateParams::new(vec!["localhost".to_owned()])
        .unwrap()
        .signed_by(&leaf_key, &authority)
        .unwrap();
    let images = ImageServer::start_tls(
        leaf.der().clone(),
        rustls::pki_types::PrivateKeyDer::try_from(leaf_key.serialize_der()).unwrap(),
    );
    let url = format!(
        "?url={}",
        encode(&format!(
            "https://localhost:{}/img/png_rgb_coffee_16x12.png",
            images.addr.port()
        ))
    );

    // Trusting the test authority (a test-only setting), the download goes through.
    let dir = tempfile::tempdir().unwrap();
    let roots = dir.path().join("test-ca.pem");
    std::fs::write(&roots, authority.pem()).unwrap();
    let server = Server::start_with(Options {
        config: format!(
            "[testing]\nallow_private_urls = true\ndownload_extra_roots = \"{}\"\n",
            roots.display()
        ),
        ..Options::default()
    });
    let key = server.new_key("acme", "pro", &[]).0;
    let (status, answer) = image(&server, &key, &url, b"");
    assert_eq!(status, 200, "{answer}");
    // A body of unannounced length ends where the connection does: over plain HTTP that is
    // the end, over TLS only if the server said so (close_notify); else it may be cut off.
    let plain = ImageServer::start();
    let abrupt = plain.url("/abrupt/png_rgb_coffee_16x12.png");
    let (status, answer) = image(&server, &key, &format!("?url={}", encode(&abrupt)), b"");
    assert_eq!(status, 200, "{answer}");
    let abrupt = format!(
        "https://localhost:{}/abrupt/png_rgb_coffee_16x12.png",
        images.addr.port()
    );
    let (status, answer) = image(&server, &key, &format!("?url={}", encode(&abrupt)), b"");
    let message = assert_error(status, &answer, 400, "url_refused", false);
    assert!(message.contains("close_notify"), "{message}");
    drop(server);

    // Without it, the same server's certificate is refused.
    let (server, key) = server_for_downloads();
    let (status, answer) = image(&server, &key, &url, b"");
    let message = assert_error(status, &answer, 400, "url_refused", false);
    assert!(message.to_lowercase().contains("tls"), "{message}");
}

#[test]
fn slow_downloads_are_cut_at_ten_seconds() {
    let images = ImageServer::start();
    let (server, key) = server_for_downloads();
    let started = Instant::now();
    let (status, answer) = image(
        &server,
        &key,
        &format!("?url={}", encode(&images.url("/slow"))),
        b"",
    );
    let elapsed = started.elapsed();
    let message = assert_error(status, &answer, 400, "url_refused", false);
    assert!(message.contains("10 s"), "{message}");
    assert!(
        elapsed >= Duration::from_secs(9) && elapsed < Duration::from_secs(12),
        "{elapsed:?}"
    );
}

#[test]
fn image_checks_are_journaled() {
    let server = Server::start();
    let key = server.demo_key.clone().unwrap();
    let (status, _) = image(
        &server,
        &key,
        "?ref=photo-9",
        &testimage("png_rgb_coffee_16x12.png"),
    );
    assert_eq!(status, 200);
    let output = server.admin(&["journal", "--json", "--ref", "photo-9"]);
    let line = String::from_utf8(output.stdout).unwrap();
    let record: Value = serde_json::from_str(line.trim()).unwrap();
    assert_eq!(record["kind"], "image");
    assert_eq!(record["route"], "/v1/image");
    assert_eq!(record["action"], "accept");
}

#[test]
fn a_workflow_naming_properties_answers_the_images_properties() {
    let server = Server::start();
    let key = server.demo_key.clone().unwrap();
    server.import_workflows(
        "[workflows.quality]\ndescription = \"Nudity and the image's properties.\"\nimage_checks = [\"nsfwjs\", \"properties\"]\n[workflows.quality.categories]\nnudity = { review = 0.5, reject = 0.9 }\nillustration = { review = 0.8, reject = 1.0 }\n",
    );
    let photo = testimage("jpeg_baseline_chelsea_451x300.jpg");
    let (status, answer) = image(&server, &key, "?workflow=quality", &photo);
    assert_eq!(status, 200, "{answer}");
    assert_schema("Answer", &answer);
    let properties = &answer["properties"];
    assert!(properties["sharpness"].as_f64().unwrap() > 0.85, "{answer}");
    let brightness = properties["brightness"].as_f64().unwrap();
    assert!((0.3..0.7).contains(&brightness), "{answer}");
    assert_eq!(properties["colors"]["dominant"]["hex"], "#926c50");
    // nsfwjs's drawing classes take this cat photo for a drawing (0.77 in its reference
    // pipeline), and the coffee photo for what it is.
    let illustration = answer["scores"]["illustration"].as_f64().unwrap();
    assert!((illustration - 0.77).abs() < 0.05, "{answer}");
    let coffee = testimage("jpeg_baseline_coffee_256x256.jpg");
    let (status, answer) = image(&server, &key, "?workflow=quality", &coffee);
    assert_eq!(status, 200, "{answer}");
    assert!(
        answer["scores"]["illustration"].as_f64().unwrap() < 0.05,
        "{answer}"
    );
    // A flat image: no contrast, no sharpness, its colour dominant.
    let flat = testimage("png_synthetic_solid_320x240.png");
    let (status, answer) = image(&server, &key, "?workflow=quality", &flat);
    assert_eq!(status, 200, "{answer}");
    assert_eq!(answer["properties"]["contrast"], 0.0);
    assert_eq!(answer["properties"]["sharpness"], 0.0);
    // The default workflow does not measure.
    let (status, answer) = image(&server, &key, "", &photo);
    assert_eq!(status, 200, "{answer}");
    assert!(answer.get("properties").is_none(), "{answer}");
}

#[test]
fn a_workflow_naming_qr_reads_the_codes_and_checks_what_they_carry() {
    let server = Server::start();
    let key = server.demo_key.clone().unwrap();
    server.import_workflows(
        "[workflows.codes]\ndescription = \"QR codes and what they carry.\"\nimage_checks = [\"qr\"]\n[workflows.codes.categories]\nqr_link = { review = 0.5, reject = 1.0 }\npii_email = { review = 0.9, reject = 1.0 }\nprofanity = { review = 0.7, reject = 0.9 }\n",
    );
    let (status, answer) = image(
        &server,
        &key,
        "?workflow=codes",
        &qr_webp("https://win-a-prize.example/claim"),
    );
    assert_eq!(status, 200, "{answer}");
    assert_eq!(
        answer["qr_codes"][0]["payload"],
        "https://win-a-prize.example/claim"
    );
    assert!(
        answer["qr_codes"][0]["x1"].as_f64().unwrap() > 0.05,
        "{answer}"
    );
    assert_eq!(answer["summary"]["action"], "review");
    let reason = &answer["summary"]["review_reason"][0];
    assert_eq!(
        (&reason["id"], &reason["source"]),
        (&json!("qr_link"), &json!("qr+links"))
    );
    // An e-mail address and a swear word in a code: the text checks' categories, the QR as source.
    let (status, answer) = image(
        &server,
        &key,
        "?workflow=codes",
        &qr_webp("shit, mail jane@example.com"),
    );
    assert_eq!(status, 200, "{answer}");
    let sources: Vec<(&str, &str)> = answer["summary"]["review_reason"]
        .as_array()
        .unwrap()
        .iter()
        .map(|r| (r["id"].as_str().unwrap(), r["source"].as_str().unwrap()))
        .collect();
    assert_eq!(
        sources,
        [("pii_email", "qr+pii"), ("profanity", "qr+wordlist")],
        "{answer}"
    );
    // No code: checked, nothing found.
    let (status, answer) = image(
        &server,
        &key,
        "?workflow=codes",
        &testimage("jpeg_baseline_chelsea_451x300.jpg"),
    );
    assert_eq!(status, 200, "{answer}");
    assert_eq!(answer["qr_codes"], json!([]));
    assert_eq!(answer["scores"]["qr_link"], 0.0);
    assert_eq!(answer["summary"]["action"], "accept");
}

/// Hardening round 3, item 4: a QR code for a payment link was rejected alone and accepted
/// beside 70 finder patterns, with no QR score and no `unchecked`: the reader's guard against
/// tilings of finder patterns left the image unread and the check scored nothing, silently.
/// An image the reader does not read now has the QR check's categories in `unchecked`, on
/// both native routes (`/1.0/check.json` refuses it: its `qr-content` has no such field).
#[test]
fn an_image_whose_qr_codes_are_not_read_reports_them_unchecked() {
    let server = Server::start();
    let key = server.demo_key.clone().unwrap();
    server.import_workflows(
        "[workflows.payments]\ndescription = \"QR codes to payment links.\"\nimage_checks = [\"qr\"]\n[workflows.payments.categories]\nqr_code = { review = 1.0, reject = 1.0 }\nqr_link = { review = 0.3, reject = 0.5 }\n",
    );
    let link = "https://pay.example/invoice/4711?amount=250";
    let (status, answer) = image(&server, &key, "?workflow=payments", &qr_webp(link));
    assert_eq!(status, 200, "{answer}");
    assert_eq!(answer["summary"]["action"], "reject", "{answer}");
    assert_eq!(answer["qr_codes"][0]["payload"], link);
    assert!(answer.get("unchecked").is_none(), "{answer}");
    // A few patterns beside the code: still read.
    let (status, answer) = image(
        &server,
        &key,
        "?workflow=payments",
        &qr_with_finder_patterns_webp(link, 10),
    );
    assert_eq!(status, 200, "{answer}");
    assert_eq!(answer["summary"]["action"], "reject", "{answer}");
    // 70 more: not read, and said so.
    let unread = qr_with_finder_patterns_webp(link, 70);
    let (status, answer) = image(&server, &key, "?workflow=payments", &unread);
    assert_eq!(status, 200, "{answer}");
    assert_eq!(
        answer["unchecked"],
        json!(["qr_code", "qr_link"]),
        "{answer}"
    );
    assert!(answer["scores"].get("qr_link").is_none(), "{answer}");
    assert!(answer.get("qr_codes").is_none(), "{answer}");
    let (status, answer) = compat_form(
        &server,
        &[("api_secret", &key), ("workflow", "payments")],
        Some(("pay.webp", "image/webp", &unread)),
    );
    assert_eq!(status, 200, "{answer}");
    assert_eq!(
        answer["unchecked"],
        json!(["qr_code", "qr_link"]),
        "{answer}"
    );
}

/// Probe finding 3: targets with a thin outer ring (runs 1:3:5:3:1) passed the reader's test
/// and not the guard's, so 784 of them in 420 px held the worker for 108 s. The guard counts
/// as the reader does: the image is not read, its QR categories are unchecked, at once.
/// (Without it this test's request times out.)
#[test]
fn an_image_tiled_with_thin_ringed_targets_is_not_read() {
    let server = Server::start();
    let key = server.demo_key.clone().unwrap();
    server.import_workflows(
        "[workflows.payments]\ndescription = \"QR codes to payment links.\"\nimage_checks = [\"qr\"]\n[workflows.payments.categories]\nqr_code = { review = 1.0, reject = 1.0 }\nqr_link = { review = 0.3, reject = 0.5 }\n",
    );
    let (status, answer) = image(
        &server,
        &key,
        "?workflow=payments",
        &thin_ringed_targets_webp(28),
    );
    assert_eq!(status, 200, "{answer}");
    assert_eq!(
        answer["unchecked"],
        json!(["qr_code", "qr_link"]),
        "{answer}"
    );
    // 36 of them are few enough to read (and hold no code).
    let (status, answer) = image(
        &server,
        &key,
        "?workflow=payments",
        &thin_ringed_targets_webp(6),
    );
    assert_eq!(status, 200, "{answer}");
    assert!(answer.get("unchecked").is_none(), "{answer}");
    assert_eq!(answer["qr_codes"], json!([]), "{answer}");
}

#[test]
fn a_workflow_naming_ocr_reads_the_text_in_the_image_and_checks_it() {
    let server = Server::start();
    let key = server.demo_key.clone().unwrap();
    server.import_workflows(
        "[workflows.overlays]\ndescription = \"Text written in pictures.\"\nimage_checks = [\"ocr\"]\n[workflows.overlays.categories]\npii_email = { review = 0.5, reject = 0.9 }\nprofanity = { review = 0.4, reject = 0.7 }\nlink = { review = 0.5, reject = 1.0 }\nimage_text = { review = 0.95, reject = 1.0 }\n",
    );
    let (status, answer) = image(
        &server,
        &key,
        "?workflow=overlays",
        &text_webp(&[
            "Write to jane.doe@example.com",
            "or visit www.example.org now",
        ]),
    );
    assert_eq!(status, 200, "{answer}");
    let lines = answer["text_lines"].as_array().unwrap();
    let texts: Vec<&str> = lines.iter().map(|l| l["text"].as_str().unwrap()).collect();
    assert_eq!(
        texts,
        [
            "Write to jane.doe@example.com",
            "or visit www.example.org now"
        ],
        "{answer}"
    );
    // Boxes in fractions: the first line starts near (30, 30) of 640 x 300.
    let first = &lines[0]["box"];
    let (x, y) = (first[0][0].as_f64().unwrap(), first[0][1].as_f64().unwrap());
    assert!(
        (x * 640.0 - 30.0).abs() < 12.0 && (y * 300.0 - 35.0).abs() < 15.0,
        "{answer}"
    );
    assert!(lines[0]["score"].as_f64().unwrap() > 0.9, "{answer}");
    assert!(
        answer["scores"]["image_text"].as_f64().unwrap() > 0.9,
        "{answer}"
    );
    assert_eq!(answer["summary"]["action"], "reject", "{answer}");
    let reasons = answer["summary"]["reject_reason"].as_array().unwrap();
    assert!(
        reasons
            .iter()
            .any(|r| r["id"] == "pii_email" && r["source"] == "ocr+pii"),
        "{answer}"
    );
    assert!(
        answer["summary"]["review_reason"]
            .as_array()
            .unwrap()
            .iter()
            .any(|r| r["id"] == "link" && r["source"] == "ocr+links"),
        "{answer}"
    );
    // Profanity written in the picture is told from nudity by its source.
    let (_, answer) = image(
        &server,
        &key,
        "?workflow=overlays",
        &text_webp(&["what the fuck"]),
    );
    assert_eq!(answer["summary"]["action"], "reject", "{answer}");
    let reason = &answer["summary"]["reject_reason"][0];
    assert_eq!(reason["id"], "profanity", "{answer}");
    let source = reason["source"].as_str().unwrap();
    assert!(
        ["ocr+wordlist", "ocr+profanity_svm"].contains(&source),
        "{answer}"
    );
    // No text: checked, every category 0.
    let (_, answer) = image(&server, &key, "?workflow=overlays", &text_webp(&[]));
    assert_eq!(answer["text_lines"], json!([]), "{answer}");
    assert_eq!(answer["scores"]["image_text"], 0.0);
    assert_eq!(answer["summary"]["action"], "accept");
    // Workflows that do not name the check say nothing of text.
    let (_, answer) = image(&server, &key, "", &text_webp(&["hello"]));
    assert!(answer.get("text_lines").is_none(), "{answer}");
}

#[test]
fn a_workflow_naming_faces_answers_the_faces_with_their_landmarks() {
    let server = Server::start();
    let key = server.demo_key.clone().unwrap();
    server.import_workflows(
        "[workflows.no-faces]\ndescription = \"Profile pictures without people.\"\nimage_checks = [\"faces\"]\n[workflows.no-faces.categories]\nface = { review = 0.9, reject = 1.0 }\n",
    );
    let (status, answer) = image(
        &server,
        &key,
        "?workflow=no-faces",
        &testimage("png_rgb_astronaut_224x224.png"),
    );
    assert_eq!(status, 200, "{answer}");
    assert_eq!(answer["face_count"], 1, "{answer}");
    let face = &answer["faces"][0];
    assert!(face["score"].as_f64().unwrap() > 0.99, "{answer}");
    // The reference box of this image (models/image/faces_reference.json), in fractions of
    // its 224 px sides: (79.3, 28.0) to (118.1, 75.7).
    for (field, pixels) in [("x1", 79.3), ("y1", 28.0), ("x2", 118.1), ("y2", 75.7)] {
        let got = face[field].as_f64().unwrap() * 224.0;
        assert!((got - pixels).abs() < 1.0, "{field}: {got} px: {answer}");
    }
    let features = &face["features"];
    let (left, right) = (&features["left_eye"], &features["right_eye"]);
    assert!(left["x"].as_f64() < right["x"].as_f64(), "{answer}");
    assert!(
        features["nose_tip"]["y"].as_f64() > left["y"].as_f64(),
        "{answer}"
    );
    assert!(features["left_mouth_corner"]["y"].as_f64() > features["nose_tip"]["y"].as_f64());
    assert_eq!(answer["summary"]["action"], "review");
    let reason = &answer["summary"]["review_reason"][0];
    assert_eq!(
        (&reason["id"], &reason["source"]),
        (&json!("face"), &json!("faces"))
    );
    // A cat: checked, no face.
    let (status, answer) = image(
        &server,
        &key,
        "?workflow=no-faces",
        &testimage("jpeg_baseline_chelsea_451x300.jpg"),
    );
    assert_eq!(status, 200, "{answer}");
    assert_eq!(
        (&answer["face_count"], &answer["faces"]),
        (&json!(0), &json!([]))
    );
    assert_eq!(answer["scores"]["face"], 0.0);
    assert_eq!(answer["summary"]["action"], "accept");
    // Workflows that do not name the check say nothing of faces.
    let (_, answer) = image(
        &server,
        &key,
        "",
        &testimage("png_rgb_astronaut_224x224.png"),
    );
    assert!(answer.get("faces").is_none() && answer.get("face_count").is_none());
}

#[test]
fn a_workflow_can_name_the_stronger_inception_nudity_model() {
    let server = Server::start();
    let key = server.demo_key.clone().unwrap();
    server.import_workflows(
        "[workflows.strong]\ndescription = \"nsfwjs's InceptionV3 alone.\"\nimage_checks = [\"nsfwjs_inception\"]\n[workflows.strong.categories]\nnudity = { review = 0.75, reject = 0.9 }\nillustration = { review = 0.5, reject = 1.0 }\n",
    );
    let reference: Value = serde_json::from_str(
        &std::fs::read_to_string(concat!(
            env!("CARGO_MANIFEST_DIR"),
            "/models/image/reference_scores_inception_v3.json"
        ))
        .unwrap(),
    )
    .unwrap();
    for file in [
        "png_rgba_chelsea_300x200.png",
        "gif_transparent_coffee_120x90.gif",
    ] {
        let (status, answer) = image(&server, &key, "?workflow=strong", &testimage(file));
        assert_eq!(status, 200, "{answer}");
        let expected = &reference[file];
        let drawn = expected["drawing"].as_f64().unwrap() + expected["hentai"].as_f64().unwrap();
        let porn = expected["porn"].as_f64().unwrap();
        let scores = &answer["scores"];
        assert!(
            (scores["nudity"].as_f64().unwrap() - porn).abs() < 1e-3,
            "{file}: {answer}"
        );
        assert!(
            (scores["illustration"].as_f64().unwrap() - drawn).abs() < 1e-3,
            "{answer}"
        );
        assert!(answer.get("unchecked").is_none(), "{answer}");
    }
}
