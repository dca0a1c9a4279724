//! Bring-your-own image classifiers (`[[models.custom]]`, issue 17) through the real server:
//! a model declared in the configuration becomes a check a workflow names, scored on the model
//! worker with the declared input recipe and label map; a declaration its model does not
//! match stops the start with the field named.
//!
//! The classifier is made in the set-up from a shipped model under another label set: the
//! nsfwjs network copied as `classifier.onnx`, its five outputs declared as `sketch`, `anime`,
//! `plain`, `explicit` and `racy`. Its scores are then compared with the shipped `nsfwjs`
//! check's on the same images: only the resizing differs (the declared recipe resizes with
//! Pillow's bilinear filter, the shipped one as TensorFlow does). open-NSFW is declared too,
//! as a Caffe-style model (BGR, means subtracted, no scaling) whose `nsfw` label scores the
//! shipped `nudity`, and compared with the shipped check (its recipe also crops and
//! re-encodes).

mod common;

use std::io::Read;
use std::path::Path;
use std::process::{Command, Stdio};
use std::time::{Duration, Instant};

use common::*;
use serde_json::Value;

/// The sha256 of `models/image/nsfwjs_mid.onnx` (as `src/checks/nsfwjs.rs` pins it).
const NSFWJS_SHA256: &str = "7db379eeb4c5c42fd428055ce4abbd9b80036c1a6c3f1fa3375ee9a41d622cb0";
/// The sha256 of `models/cache/open-nsfw.onnx` (as `src/checks/open_nsfw.rs` pins it).
const OPEN_NSFW_SHA256: &str = "864bb37bf8863564b87eb330ab8c785a79a773f4e7c43cb96db52ed8611305fa";

const IMAGES: &[&str] = &[
    "jpeg_baseline_astronaut_512x384.jpg",
    "jpeg_baseline_chelsea_451x300.jpg",
    "jpeg_444_rocket_640x427.jpg",
    "png_synthetic_solid_320x240.png",
    "png_gray_camera_256x192.png",
    "jpeg_baseline_coffee_256x256.jpg",
];

const WORKFLOWS: &str = r#"
[workflows.own]
description = "The operator's classifier only."
image_checks = ["classifier"]
[workflows.own.categories.artwork]
review = 0.0
reject = 1.0
[workflows.own.categories.explicit]
review = 0.5
reject = 0.9
[workflows.own.categories.racy]
review = 0.5
reject = 0.9

[workflows.own_bgr]
description = "open-NSFW declared as a Caffe model: BGR, means subtracted."
image_checks = ["caffe_style"]
[workflows.own_bgr.categories.nudity]
review = 0.5
reject = 0.9

[workflows.shipped_open]
description = "The shipped open-NSFW."
image_checks = ["open_nsfw"]
[workflows.shipped_open.categories.nudity]
review = 0.5
reject = 0.9

[workflows.shipped]
description = "The shipped network it was made from."
image_checks = ["nsfwjs"]
[workflows.shipped.categories.illustration]
review = 0.5
reject = 1.0
[workflows.shipped.categories.nudity]
review = 0.5
reject = 0.9
[workflows.shipped.categories.suggestive]
review = 0.5
reject = 0.9
"#;

/// A `[[models.custom]]` table for the copied network; `extra` lines override or add fields.
fn declaration(file: &Path, extra: &str) -> String {
    let mut fields = vec![
        ("name", "\"classifier\"".to_owned()),
        ("file", format!("{:?}", file.to_str().expect("UTF-8 path"))),
        ("sha256", format!("\"{NSFWJS_SHA256}\"")),
        ("input_size", "[224, 224]".to_owned()),
        (
            "labels",
            r#"["sketch", "anime", "plain", "explicit", "racy"]"#.to_owned(),
        ),
        (
            "categories",
            r#"{ sketch = "artwork", anime = "artwork", explicit = "explicit", racy = "racy" }"#
                .to_owned(),
        ),
    ];
    for line in extra.lines().filter(|line| !line.trim().is_empty()) {
        let (name, value) = line.split_once('=').expect("name = value");
        let name = name.trim();
        fields.retain(|(known, _)| *known != name);
        fields.push((name, value.trim().to_owned()));
    }
    let mut table = "\n[[models.custom]]\n".to_owned();
    for (name, value) in fields {
        table.push_str(&format!("{name} = {value}\n"));
    }
    table
}

/// The nsfwjs network copied into `dir`: the operator's model.
fn classifier_in(dir: &Path) -> std::path::PathBuf {
    let file = dir.join("classifier.onnx");
    std::fs::copy(format!("{MODELS}/image/nsfwjs_mid.onnx"), &file).expect("copy the model");
    file
}

fn check(server: &Server, key: &str, workflow: &str, file: &str) -> Value {
    let (status, _, answer) = post_image(
        server,
        key,
        &format!("?workflow={workflow}"),
        &testimage(file),
    );
    assert_eq!(status, 200, "{file}: {answer}");
    assert_schema("Answer", &answer);
    answer
}

#[test]
fn a_declared_model_is_a_check_workflows_name() {
    let dir = tempfile::tempdir().expect("tempdir");
    let file = classifier_in(dir.path());
    let data = dir.path().join("data");
    std::fs::create_dir(&data).expect("data directory");
    // open-NSFW too, declared with the other recipe options: BGR, means subtracted, no
    // scaling, and its `nsfw` label scoring the shipped `nudity`.
    let caffe = dir.path().join("caffe_style.onnx");
    std::fs::copy(format!("{MODELS}/cache/open-nsfw.onnx"), &caffe).expect("copy the model");
    let caffe_declaration = format!(
        "\n[[models.custom]]\nname = \"caffe_style\"\nfile = {:?}\nsha256 = \"{OPEN_NSFW_SHA256}\"\n\
         input_size = [224, 224]\ncolour = \"bgr\"\nmean = [104.0, 117.0, 123.0]\n\
         scale = [1.0, 1.0, 1.0]\nlabels = [\"sfw\", \"nsfw\"]\ncategories = {{ nsfw = \"nudity\" }}\n",
        caffe.to_str().expect("UTF-8 path")
    );
    // Sightengine's check.json answers it as a model of its own (a stand-in name: the
    // copied network knows drawings, not weapons).
    let answers_sightengine = r#"sightengine = { model = "artwork", fields = { "classes.drawing" = "artwork", "explicit" = "explicit" } }"#;
    let server = Server::start_with(Options {
        config: declaration(&file, answers_sightengine) + &caffe_declaration,
        data: Some(data.clone()),
        ..Options::default()
    });
    // `workflow import` reads the configuration's models (here the server's own file).
    let workflows = server.data.join("own-workflows.toml");
    std::fs::write(&workflows, WORKFLOWS).expect("workflow file");
    let config = server.config_path.to_str().expect("UTF-8 path").to_owned();
    server.admin_ok(&[
        "workflow",
        "import",
        workflows.to_str().expect("UTF-8 path"),
        "--config",
        &config,
    ]);
    let key = server.new_key("acme", "pro", &["--scopes", "image"]).0;

    let mut artwork_scores = Vec::new();
    // The largest difference seen, per comparison (printed: the figures the README quotes).
    let mut largest = std::collections::BTreeMap::<&str, f64>::new();
    for image in IMAGES {
        let own = check(&server, &key, "own", image);
        let shipped = check(&server, &key, "shipped", image);
        assert!(own.get("unchecked").is_none(), "{own}");
        let score = |answer: &Value, category: &str| {
            answer["scores"][category]
                .as_f64()
                .unwrap_or_else(|| panic!("{image}: no {category} in {answer}"))
        };
        // The declared labels add up: sketch + anime is the shipped illustration (drawing +
        // hentai), explicit its porn class (nudity, nsfwjs being the only nudity model), racy
        // its sexy class (suggestive).
        for (ours, theirs) in [
            ("artwork", "illustration"),
            ("explicit", "nudity"),
            ("racy", "suggestive"),
        ] {
            let (a, b) = (score(&own, ours), score(&shipped, theirs));
            assert!((a - b).abs() < 0.1, "{image}: {ours} {a}, {theirs} {b}");
            let seen = largest.entry(ours).or_default();
            *seen = seen.max((a - b).abs());
        }
        let artwork = score(&own, "artwork");
        artwork_scores.push(artwork);
        // The same scores through Sightengine's route, where the declaration put them.
        let (content_type, body) = form_with_media(
            &[
                ("models", "artwork,nudity"),
                ("api_user", "u"),
                ("api_secret", &key),
            ],
            Some(("upload.bin", "application/octet-stream", &testimage(image))),
        );
        let (status, _, sightengine) = post(
            &server.url("/1.0/check.json"),
            &[("Content-Type", &content_type)],
            &body,
        );
        assert_eq!(status, 200, "{sightengine}");
        assert_schema("SightengineAnswer", &sightengine);
        assert_eq!(sightengine["request"]["operations"], 2);
        let drawing = sightengine["artwork"]["classes"]["drawing"].as_f64();
        assert!(
            drawing.is_some_and(|d| (d - artwork).abs() < 1e-9),
            "{sightengine}"
        );
        let explicit = sightengine["artwork"]["explicit"].as_f64();
        assert!(
            explicit.is_some_and(|e| (e - score(&own, "explicit")).abs() < 1e-9),
            "{sightengine}"
        );
        let caffe = check(&server, &key, "own_bgr", image);
        let open = check(&server, &key, "shipped_open", image);
        let (a, b) = (score(&caffe, "nudity"), score(&open, "nudity"));
        assert!(
            (a - b).abs() < 0.1,
            "{image}: caffe_style {a}, open_nsfw {b}"
        );
        let seen = largest.entry("caffe_style nudity").or_default();
        *seen = seen.max((a - b).abs());

        // Review at 0 puts `artwork` among the reasons: its title and message come from the
        // declaration, its source is the declared check.
        let reason = own["summary"]["review_reason"]
            .as_array()
            .expect("reasons")
            .iter()
            .chain(own["summary"]["reject_reason"].as_array().expect("reasons"))
            .find(|reason| reason["id"] == "artwork")
            .unwrap_or_else(|| panic!("{image}: no artwork reason in {own}"))
            .clone();
        assert_eq!(reason["text"], "Artwork");
        assert_eq!(reason["source"], "classifier");
        assert_eq!(
            reason["message"],
            "This image was rated artwork by the classifier model of this service."
        );
    }
    eprintln!("largest differences from the shipped checks: {largest:?}");
    // The model reads the images: they do not all score alike.
    let (low, high) = artwork_scores
        .iter()
        .fold((f64::MAX, f64::MIN), |(lo, hi), &s| (lo.min(s), hi.max(s)));
    assert!(high - low > 0.05, "{artwork_scores:?}");

    // The declared check counts in the metrics like a shipped model.
    let exposition = server.scrape();
    let runs = exposition.value(
        "modgate_model_duration_seconds_count",
        &[("model", "classifier")],
    );
    assert!(
        runs.is_some_and(|runs| runs >= IMAGES.len() as f64),
        "runs of the declared model: {runs:?}"
    );

    // The same store on a server without the declaration (a fleet node whose configuration
    // lacks it): the workflow that names the check is refused, not decided without it.
    drop(server);
    let bare = Server::start_with(Options {
        data: Some(data),
        ..Options::default()
    });
    let (status, _, answer) = post_image(&bare, &key, "?workflow=own", &testimage(IMAGES[0]));
    assert_eq!(status, 503, "{answer}");
    assert_eq!(answer["error"]["type"], "workflow_unavailable", "{answer}");
    assert!(
        answer["error"]["message"]
            .as_str()
            .is_some_and(|message| message.contains("'classifier'")),
        "{answer}"
    );
    assert_eq!(
        check(&bare, &key, "shipped", IMAGES[0])["status"],
        "success"
    );
}

/// Starts `modgate serve` on `config` and expects it to refuse within a minute: its stderr.
fn refused_start(dir: &Path, config: &str) -> String {
    let path = dir.join("modgate.toml");
    std::fs::write(&path, config).expect("config");
    let mut child = Command::new(BIN)
        .args([
            "serve",
            "--listen",
            "127.0.0.1:0",
            "--cores",
            "1",
            "--config",
        ])
        .arg(&path)
        .arg("--data")
        .arg(dir.join("data"))
        .arg("--models")
        .arg(MODELS)
        .env("RUST_LOG", "warn")
        .stdout(Stdio::null())
        .stderr(Stdio::piped())
        .spawn()
        .expect("run modgate");
    let mut pipe = child.stderr.take().expect("stderr");
    let reader = std::thread::spawn(move || {
        let mut text = String::new();
        let _ = pipe.read_to_string(&mut text);
        text
    });
    let deadline = Instant::now() + Duration::from_secs(60);
    let status = loop {
        if let Some(status) = child.try_wait().expect("wait") {
            break status;
        }
        if Instant::now() > deadline {
            let _ = child.kill();
            panic!("the server started (or hung) instead of refusing");
        }
        std::thread::sleep(Duration::from_millis(50));
    };
    let stderr = reader.join().expect("stderr reader");
    assert!(!status.success(), "started: {stderr}");
    stderr
}

#[test]
fn a_model_that_does_not_match_its_declaration_stops_the_start() {
    let dir = tempfile::tempdir().expect("tempdir");
    let file = classifier_in(dir.path());
    // The input is 224 x 224 x 3, NHWC.
    let stderr = refused_start(dir.path(), &declaration(&file, "input_size = [299, 299]"));
    assert!(stderr.contains("input_size [299, 299]"), "{stderr}");
    assert!(stderr.contains("classifier"), "{stderr}");
    let stderr = refused_start(dir.path(), &declaration(&file, "layout = \"nchw\""));
    assert!(stderr.contains("layout nchw"), "{stderr}");
    // Five outputs, six labels.
    let stderr = refused_start(
        dir.path(),
        &declaration(
            &file,
            r#"labels = ["sketch", "anime", "plain", "explicit", "racy", "extra"]"#,
        ),
    );
    assert!(stderr.contains("labels: 6 declared"), "{stderr}");
    // Names the model does not have.
    let stderr = refused_start(dir.path(), &declaration(&file, "output_name = \"logits\""));
    assert!(stderr.contains("output_name"), "{stderr}");
    // Another file than the one declared.
    let stderr = refused_start(
        dir.path(),
        &declaration(&file, &format!("sha256 = \"{}\"", "0".repeat(64))),
    );
    assert!(stderr.contains("sha256"), "{stderr}");
    // A Sightengine model this server answers itself, or a field of no category of the model.
    let stderr = refused_start(
        dir.path(),
        &declaration(
            &file,
            r#"sightengine = { model = "nudity", fields = { "raw" = "explicit" } }"#,
        ),
    );
    assert!(stderr.contains("sightengine model 'nudity'"), "{stderr}");
    let stderr = refused_start(
        dir.path(),
        &declaration(
            &file,
            r#"sightengine = { model = "weapon", fields = { "classes.knife" = "knife" } }"#,
        ),
    );
    assert!(stderr.contains("models.custom[0].sightengine"), "{stderr}");
    // A category of another kind of check.
    let stderr = refused_start(
        dir.path(),
        &declaration(&file, r#"categories = { explicit = "known_image" }"#),
    );
    assert!(stderr.contains("models.custom[0].categories"), "{stderr}");
    // Missing, even with `models.required = false`: it was asked for by name.
    let stderr = refused_start(
        dir.path(),
        &format!(
            "[models]\nrequired = false\n{}",
            declaration(&dir.path().join("absent.onnx"), "")
        ),
    );
    assert!(stderr.contains("absent.onnx"), "{stderr}");
    // A declaration that is wrong in itself names its field before any model is read.
    let stderr = refused_start(
        dir.path(),
        &declaration(&file, r#"categories = { sword = "weapon" }"#),
    );
    assert!(stderr.contains("models.custom[0].categories"), "{stderr}");
}
