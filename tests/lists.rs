//! Hash lists end to end: `/v1/lists` through the real server, lists consulted by workflows on
//! `/v1/image` and `/1.0/check-workflow.json`, an allow list's exemption, import and export,
//! and the `lists` scope.

mod common;

use common::*;
use serde_json::{json, Value};

const WORKFLOWS: &str = r#"
[workflows.known]
description = "Known images only."
image_checks = ["hashlist"]
lists = ["banned"]
[workflows.known.categories.known_image]
review = 0.5
reject = 0.9

[workflows.strict]
description = "Everything to review, but what the safe list allows."
image_checks = ["open_nsfw", "hashlist"]
lists = ["banned", "safe"]
[workflows.strict.categories.nudity]
review = 0.0
reject = 1.0
[workflows.strict.categories.known_image]
review = 0.5
reject = 0.9

[workflows.screened]
description = "Nudity models and the banned list."
image_checks = ["open_nsfw", "nsfwjs", "hashlist"]
lists = ["banned"]
[workflows.screened.categories.known_image]
review = 0.5
reject = 0.9

[workflows.chat]
description = "The word list and our own terms."
text_checks = ["wordlist", "termlist"]
lists = ["slang", "local"]
[workflows.chat.categories.profanity]
review = 0.5
reject = 0.9
[workflows.chat.categories.listed_term]
review = 0.5
reject = 0.9

[workflows.text-rules]
description = "Sightengine's rules mode, with this community's words."
text_checks = ["wordlist", "pii", "links", "termlist"]
lists = ["slang", "local"]
[workflows.text-rules.categories.profanity]
review = 0.7
reject = 0.9
[workflows.text-rules.categories.listed_term]
review = 0.5
reject = 0.9
"#;

struct Setup {
    server: Server,
    /// Scopes image and lists.
    key: String,
}

fn setup() -> Setup {
    let server = Server::start();
    server.import_workflows(WORKFLOWS);
    let key = server
        .new_key("acme", "pro", &["--scopes", "image,text,lists"])
        .0;
    Setup { server, key }
}

fn send(setup: &Setup, method: &str, path: &str, content_type: &str, body: &[u8]) -> (u16, Value) {
    let url = setup.server.url(path);
    let agent = agent();
    let mut builder = ureq::http::Request::builder()
        .method(method)
        .uri(&url)
        .header("X-Api-Key", &setup.key);
    if !content_type.is_empty() {
        builder = builder.header("Content-Type", content_type);
    }
    let mut response = agent
        .run(builder.body(body.to_vec()).unwrap())
        .expect("request");
    let status = response.status().as_u16();
    let text = response.body_mut().read_to_string().expect("body");
    let value = serde_json::from_str(&text).unwrap_or(Value::String(text));
    (status, value)
}

fn json_body(value: &Value) -> Vec<u8> {
    serde_json::to_vec(value).unwrap()
}

fn create_list(setup: &Setup, name: &str, kind: &str) {
    create_list_of(setup, name, kind, "image");
}

fn create_list_of(setup: &Setup, name: &str, kind: &str, content: &str) {
    let (status, answer) = send(
        setup,
        "POST",
        "/v1/lists",
        "application/json",
        &json_body(&json!({"name": name, "kind": kind, "content": content})),
    );
    assert_eq!(status, 201, "{answer}");
    assert_schema("ListAnswer", &answer);
    assert_eq!(answer["list"]["distance"], 31);
    assert_eq!(answer["list"]["content"], content);
}

/// The profanity Sightengine's rules mode (`/1.0/text/check.json`) lists in `text`.
fn sightengine_profanity(setup: &Setup, text: &str) -> Vec<String> {
    let body = format!(
        "mode=rules&categories=profanity&lang=en&api_user=u&api_secret={}&text={}",
        setup.key,
        text.replace(' ', "+")
    );
    let (status, answer) = send(
        setup,
        "POST",
        "/1.0/text/check.json",
        "application/x-www-form-urlencoded",
        body.as_bytes(),
    );
    assert_eq!(status, 200, "{answer}");
    assert_schema("SightengineTextRulesAnswer", &answer);
    answer["profanity"]["matches"]
        .as_array()
        .expect("matches")
        .iter()
        .map(|found| found["match"].as_str().expect("match").to_owned())
        .collect()
}

fn check_text(setup: &Setup, text: &str) -> Value {
    let (status, answer) = send(
        setup,
        "POST",
        "/v1/text",
        "application/json",
        &json_body(&json!({"text": text, "workflow": "chat"})),
    );
    assert_eq!(status, 200, "{answer}");
    assert_schema("Answer", &answer);
    answer
}

fn add_image(setup: &Setup, list: &str, file: &str, label: &str) -> Value {
    let (status, answer) = send(
        setup,
        "POST",
        &format!("/v1/lists/{list}/entries?label={label}&id=upload-{file}"),
        "application/octet-stream",
        &testimage(file),
    );
    assert_eq!(status, 201, "{answer}");
    assert_schema("EntriesAdded", &answer);
    answer
}

fn check(setup: &Setup, workflow: &str, file: &str) -> Value {
    let (status, answer) = send(
        setup,
        "POST",
        &format!("/v1/image?workflow={workflow}"),
        "application/octet-stream",
        &testimage(file),
    );
    assert_eq!(status, 200, "{answer}");
    assert_schema("Answer", &answer);
    answer
}

/// The listed photo cropped by 1 % on each side, made smaller and saved as a JPEG of quality
/// 50 (with the `image` crate `pdqhash` brings). PDQ does not survive larger crops
/// (`models/image/PDQ_STATS.md`).
fn altered_copy() -> Vec<u8> {
    use pdqhash::image::{self, GenericImageView};
    let original =
        image::load_from_memory(&testimage("jpeg_baseline_chelsea_451x300.jpg")).expect("decodes");
    let (width, height) = original.dimensions();
    let (dx, dy) = (width / 100, height / 100);
    let cropped = original.crop_imm(dx, dy, width - 2 * dx, height - 2 * dy);
    let small = cropped.resize_exact(300, 200, image::imageops::FilterType::Triangle);
    let mut out = Vec::new();
    image::codecs::jpeg::JpegEncoder::new_with_quality(&mut out, 50)
        .encode_image(&small)
        .expect("encodes");
    out
}

#[test]
fn a_listed_image_and_its_copies_are_rejected_and_others_not() {
    let setup = setup();
    create_list(&setup, "banned", "block");
    let added = add_image(&setup, "banned", "jpeg_baseline_chelsea_451x300.jpg", "cat");
    let types: Vec<&str> = added["added"]
        .as_array()
        .unwrap()
        .iter()
        .map(|entry| entry["hash_type"].as_str().unwrap())
        .collect();
    assert_eq!(types, ["pdq", "md5", "sha256"]);
    // The same file again adds nothing.
    let again = add_image(&setup, "banned", "jpeg_baseline_chelsea_451x300.jpg", "cat");
    assert_eq!(again["added"].as_array().unwrap().len(), 0);
    assert_eq!(again["existing"].as_array().unwrap().len(), 3);

    // The file itself: an exact match. Matched within the follower's poll on every shard.
    eventually(|| {
        check(&setup, "known", "jpeg_baseline_chelsea_451x300.jpg")["summary"]["action"] == "reject"
    });
    let answer = check(&setup, "known", "jpeg_baseline_chelsea_451x300.jpg");
    let reason = &answer["summary"]["reject_reason"][0];
    assert_eq!(reason["id"], "known_image");
    assert_eq!(reason["source"], "hashlist");
    assert_eq!(reason["match"]["list"], "banned");
    assert_eq!(reason["match"]["label"], "cat");
    assert_eq!(reason["match"]["distance"], 0);
    assert_eq!(answer["list_matches"][0]["hash_type"], "sha256");
    // The answer carries the image's hashes: those the list was given for the same file.
    for (at, name) in ["pdq", "md5", "sha256"].into_iter().enumerate() {
        assert_eq!(
            answer["image_hashes"][name], added["added"][at]["hash"],
            "{name}"
        );
    }
    assert_eq!(answer["image_hashes"]["pdq_quality"], 100);

    // Resized and re-encoded copies of the same photo: PDQ within the list's distance.
    let copies = [
        (
            "WebP, 240 x 160",
            testimage("webp_lossless_chelsea_240x160.webp"),
        ),
        ("JPEG q50, 300 x 200, 1 % cropped", altered_copy()),
    ];
    for (copy, bytes) in copies {
        let (status, answer) = send(
            &setup,
            "POST",
            "/v1/image?workflow=known",
            "image/jpeg",
            &bytes,
        );
        assert_eq!(status, 200, "{answer}");
        assert_eq!(answer["summary"]["action"], "reject", "{copy}: {answer}");
        let found = &answer["list_matches"][0];
        assert_eq!(found["hash_type"], "pdq", "{copy}");
        let distance = found["distance"].as_u64().unwrap();
        assert!(distance > 0 && distance <= 31, "{copy}: {distance}");
    }
    // Unrelated photos match nothing.
    for other in [
        "jpeg_progressive_coffee_600x400.jpg",
        "webp_lossy_rocket_640x427.webp",
        "jpeg_gray_camera_512x512.jpg",
    ] {
        let answer = check(&setup, "known", other);
        assert_eq!(answer["summary"]["action"], "accept", "{other}: {answer}");
        assert_eq!(answer["scores"]["known_image"], 0.0);
        assert_eq!(answer["list_matches"], json!([]));
    }

    // The compatible route consults the same lists.
    let (content_type, body) = form_with_media(
        &[("workflow", "known"), ("api_secret", &setup.key)],
        Some((
            "c.webp",
            "image/webp",
            &testimage("webp_lossless_chelsea_240x160.webp"),
        )),
    );
    let (status, _, answer) = post(
        &setup.server.url("/1.0/check-workflow.json"),
        &[("Content-Type", &content_type)],
        &body,
    );
    assert_eq!(status, 200, "{answer}");
    assert_eq!(answer["summary"]["action"], "reject");

    // Removing the PDQ entry: the copies pass, the file itself still matches exactly.
    let pdq_id = added["added"][0]["entry_id"].as_u64().unwrap();
    let (status, removed) = send(
        &setup,
        "DELETE",
        &format!("/v1/lists/banned/entries/{pdq_id}"),
        "",
        b"",
    );
    assert_eq!(status, 200, "{removed}");
    eventually(|| {
        check(&setup, "known", "webp_lossless_chelsea_240x160.webp")["summary"]["action"]
            == "accept"
    });
    assert_eq!(
        check(&setup, "known", "jpeg_baseline_chelsea_451x300.jpg")["summary"]["action"],
        "reject"
    );
    let (status, answer) = send(
        &setup,
        "DELETE",
        &format!("/v1/lists/banned/entries/{pdq_id}"),
        "",
        b"",
    );
    assert_eq!(status, 404, "{answer}");
    assert_error(status, &answer, status, "bad_request", false);
}

#[test]
fn an_allow_list_exempts_what_it_holds() {
    let setup = setup();
    create_list(&setup, "safe", "allow");
    // Everything goes to review in `strict`...
    let answer = check(&setup, "strict", "jpeg_progressive_coffee_600x400.jpg");
    assert_eq!(answer["summary"]["action"], "review", "{answer}");
    // ...but what the safe list holds (by hash, as JSON).
    let (status, _) = send(
        &setup,
        "POST",
        "/v1/lists/safe/entries",
        "application/octet-stream",
        &testimage("jpeg_progressive_coffee_600x400.jpg"),
    );
    assert_eq!(status, 201);
    eventually(|| {
        check(&setup, "strict", "jpeg_progressive_coffee_600x400.jpg")["summary"]["action"]
            == "accept"
    });
    let answer = check(&setup, "strict", "jpeg_progressive_coffee_600x400.jpg");
    assert!(
        answer["scores"]["nudity"].as_f64().is_some(),
        "scores still reported"
    );
    assert_eq!(answer["list_matches"][0]["kind"], "allow");
    assert_eq!(
        check(&setup, "strict", "webp_lossy_rocket_640x427.webp")["summary"]["action"],
        "review"
    );
    // A workflow naming a list the organization does not have: nothing matches.
    let answer = check(&setup, "known", "jpeg_progressive_coffee_600x400.jpg");
    assert_eq!(answer["summary"]["action"], "accept");
}

#[test]
fn routes_page_export_import_and_delete() {
    let setup = setup();
    create_list(&setup, "banned", "block");
    let (status, answer) = send(
        &setup,
        "POST",
        "/v1/lists",
        "application/json",
        &json_body(&json!({"name": "banned", "kind": "block"})),
    );
    assert_eq!(status, 409);
    assert_error(status, &answer, status, "bad_request", false);
    for bad in [
        json!({"name": "Bad", "kind": "block"}),
        json!({"name": "x", "kind": "maybe"}),
        json!({"name": "x", "kind": "block", "distance": 64}),
        json!({"name": "x", "kind": "block", "extra": 1}),
    ] {
        let (status, answer) = send(
            &setup,
            "POST",
            "/v1/lists",
            "application/json",
            &json_body(&bad),
        );
        assert_eq!(status, 400, "{bad}: {answer}");
        assert_error(status, &answer, status, "bad_request", false);
    }
    let pdq = |i: u32| {
        let spread = u128::from(i).wrapping_mul(0x9e37_79b9_7f4a_7c15_f39c_c060_5ced_c835);
        format!("{spread:032x}{:032x}", !spread)
    };
    let entries: Vec<Value> = (1..=250)
        .map(|i| json!({"hash_type": "pdq", "hash": pdq(i), "label": format!("l{i}"), "id": format!("c{i}")}))
        .collect();
    let (status, answer) = send(
        &setup,
        "POST",
        "/v1/lists/banned/entries",
        "application/json",
        &json_body(&json!({"entries": entries})),
    );
    assert_eq!(status, 201, "{answer}");
    assert_eq!(answer["added"].as_array().unwrap().len(), 250);
    let (status, answer) = send(
        &setup,
        "POST",
        "/v1/lists/banned/entries",
        "application/json",
        &json_body(&json!({"entries": [{"hash_type": "pdq", "hash": "abc"}]})),
    );
    assert_eq!(status, 400, "{answer}");

    // Pages of 100 in the order added.
    let mut seen = Vec::new();
    let mut after = 0;
    loop {
        let (status, page) = send(
            &setup,
            "GET",
            &format!("/v1/lists/banned/entries?after={after}&limit=100"),
            "",
            b"",
        );
        assert_eq!(status, 200, "{page}");
        assert_schema("EntriesPage", &page);
        for entry in page["entries"].as_array().unwrap() {
            seen.push(entry["label"].as_str().unwrap().to_owned());
        }
        match page["next_after"].as_u64() {
            Some(next) => after = next,
            None => break,
        }
    }
    assert_eq!(seen.len(), 250);
    assert_eq!(seen[0], "l1");
    assert_eq!(seen[249], "l250");

    // Export, import into a new list, export again: the same rows.
    let (status, exported) = send(&setup, "GET", "/v1/lists/banned/export", "", b"");
    assert_eq!(status, 200);
    let exported = exported.as_str().expect("CSV text").to_owned();
    assert!(exported.starts_with("signal_type,signal,label,id\n"));
    assert_eq!(exported.lines().count(), 251);
    create_list(&setup, "copy", "block");
    // As a spreadsheet saves it ("CSV UTF-8" starts with a byte order mark), with 150 rows of
    // a kind this server does not match: the first 100 are listed, all are counted.
    let mut with_noise = format!("\u{feff}{exported}");
    with_noise.push_str(&"video_md5,0123456789abcdef0123456789abcdef,,\n".repeat(150));
    let (status, answer) = send(
        &setup,
        "POST",
        "/v1/lists/copy/import",
        "text/csv",
        with_noise.as_bytes(),
    );
    assert_eq!(status, 201, "{answer}");
    assert_schema("EntriesAdded", &answer);
    assert_eq!(answer["added"].as_array().unwrap().len(), 250);
    assert_eq!(answer["skipped"][0]["line"], 252);
    assert_eq!(answer["skipped"].as_array().unwrap().len(), 100);
    assert_eq!(answer["skipped_count"], 150);
    let (_, again) = send(&setup, "GET", "/v1/lists/copy/export", "", b"");
    assert_eq!(again.as_str().unwrap(), exported);
    let (status, answer) = send(
        &setup,
        "POST",
        "/v1/lists/copy/import",
        "text/csv",
        b"pdq,zz\n",
    );
    assert_eq!(status, 400);
    assert!(answer["error"]["message"]
        .as_str()
        .unwrap()
        .contains("line 1"));

    let (status, lists) = send(&setup, "GET", "/v1/lists", "", b"");
    assert_eq!(status, 200);
    assert_schema("ListsAnswer", &lists);
    assert_eq!(lists["lists"].as_array().unwrap().len(), 2);
    let (status, _) = send(&setup, "DELETE", "/v1/lists/copy", "", b"");
    assert_eq!(status, 200);
    let (status, answer) = send(&setup, "GET", "/v1/lists/copy", "", b"");
    assert_eq!(status, 404, "{answer}");
    let (status, _) = send(&setup, "PUT", "/v1/lists/banned", "", b"");
    assert_eq!(status, 405);
}

#[test]
fn lists_need_their_scope_and_stay_in_their_organization() {
    let setup = setup();
    create_list(&setup, "banned", "block");
    let (checks_only, _) = setup.server.new_key("acme", "pro", &[]);
    let (status, _, answer) = get(
        &setup.server.url("/v1/lists"),
        &[("X-Api-Key", &checks_only)],
    );
    assert_eq!(status, 403, "{answer}");
    assert_error(status, &answer, status, "forbidden", false);
    let (status, _, answer) = get(&setup.server.url("/v1/lists"), &[]);
    assert_eq!(status, 401, "{answer}");
    // Another organization does not see acme's lists.
    let (other, _) = setup
        .server
        .new_key("globex", "pro", &["--scopes", "image,lists"]);
    let (status, _, answer) = get(&setup.server.url("/v1/lists"), &[("X-Api-Key", &other)]);
    assert_eq!(status, 200);
    assert_eq!(answer["lists"], json!([]));
    let (status, _, _) = get(
        &setup.server.url("/v1/lists/banned"),
        &[("X-Api-Key", &other)],
    );
    assert_eq!(status, 404);
}

#[test]
fn the_cli_manages_lists_the_server_matches() {
    let setup = setup();
    let server = &setup.server;
    server.admin_ok(&[
        "list", "create", "--org", "acme", "banned", "--kind", "block",
    ]);
    let image = format!(
        "{}/models/image/testimages/jpeg_baseline_chelsea_451x300.jpg",
        env!("CARGO_MANIFEST_DIR")
    );
    let out = server.admin_ok(&[
        "list", "add", "--org", "acme", "banned", "--image", &image, "--label", "cat",
    ]);
    assert_eq!(out.lines().count(), 3, "{out}");
    eventually(|| {
        check(&setup, "known", "webp_lossless_chelsea_240x160.webp")["summary"]["action"]
            == "reject"
    });
    let shown = server.admin_ok(&["list", "show", "--org", "acme"]);
    assert!(shown.contains("banned\tblock\t31\t3\t"), "{shown}");
    let exported = server.admin_ok(&["list", "export", "--org", "acme", "banned"]);
    let file = server.data.join("banned.csv");
    std::fs::write(&file, &exported).unwrap();
    server.admin_ok(&["list", "create", "--org", "acme", "copy", "--kind", "allow"]);
    let out = server.admin_ok(&[
        "list",
        "import",
        "--org",
        "acme",
        "copy",
        file.to_str().unwrap(),
    ]);
    assert!(out.starts_with("added 3 entries"), "{out}");
    let entries = server.admin_ok(&["list", "entries", "--org", "acme", "copy"]);
    assert_eq!(entries.lines().count(), 4, "{entries}");
    let bad = server.admin(&["list", "create", "--org", "acme", "x", "--kind", "maybe"]);
    assert!(!bad.status.success());
}

#[test]
fn text_lists_block_their_terms_and_allow_lists_hide_words() {
    let setup = setup();
    create_list_of(&setup, "slang", "block", "text");
    create_list_of(&setup, "local", "allow", "text");
    assert_eq!(
        check_text(&setup, "you are such a gr4pefruit")["summary"]["action"],
        "accept"
    );
    let (status, answer) = send(
        &setup,
        "POST",
        "/v1/lists/slang/entries",
        "application/json",
        &json_body(&json!({"entries": [{"term": "grapefruit", "label": "insult here"}]})),
    );
    assert_eq!(status, 201, "{answer}");
    assert_schema("EntriesAdded", &answer);
    assert_eq!(answer["added"][0]["term"], "grapefruit");
    // Disguised (leetspeak, spacing) it is still the term; inside another word it is not.
    eventually(|| check_text(&setup, "you are such a gr4pefruit")["summary"]["action"] == "reject");
    let answer = check_text(&setup, "you are such a G.R.A.P.E.F.R.U.I.T");
    let reason = &answer["summary"]["reject_reason"][0];
    assert_eq!(reason["id"], "listed_term");
    assert_eq!(reason["source"], "termlist");
    assert_eq!(reason["match"]["term"], "grapefruit");
    assert_eq!(reason["match"]["label"], "insult here");
    assert_eq!(
        check_text(&setup, "grapefruits are sour")["summary"]["action"],
        "accept"
    );
    // A hash does not go into a text list.
    let (status, _) = send(
        &setup,
        "POST",
        "/v1/lists/slang/entries",
        "application/json",
        &json_body(
            &json!({"entries": [{"hash_type": "md5", "hash": "900150983cd24fb0d6963f7d28e17f72"}]}),
        ),
    );
    assert_eq!(status, 400);

    // The shipped word list counts "cock"; this community's allow list hides it.
    let answer = check_text(&setup, "the cock crowed at dawn");
    assert_eq!(answer["summary"]["action"], "review", "{answer}");
    assert_eq!(
        sightengine_profanity(&setup, "the cock is a fucking bird"),
        ["cock", "fucking"]
    );
    let (status, answer) = send(
        &setup,
        "POST",
        "/v1/lists/local/import",
        "text/plain",
        b"# farm words\ncock\n",
    );
    assert_eq!(status, 201, "{answer}");
    eventually(|| check_text(&setup, "the cock crowed at dawn")["summary"]["action"] == "accept");
    let answer = check_text(&setup, "the cock crowed at dawn");
    assert_eq!(answer["scores"]["profanity"], 0.0);
    assert_eq!(answer["list_matches"][0]["kind"], "allow");
    // Other words are still read.
    assert_eq!(
        check_text(&setup, "the cock is a fucking bird")["summary"]["action"],
        "review"
    );
    // Sightengine's rules mode, through the workflow it reads (`text-rules`), hides the same
    // word from its profanity matches.
    assert_eq!(
        sightengine_profanity(&setup, "the cock is a fucking bird"),
        ["fucking"]
    );

    let (status, exported) = send(&setup, "GET", "/v1/lists/slang/export", "", b"");
    assert_eq!(status, 200);
    assert_eq!(
        exported.as_str().unwrap(),
        "term,label,id\ngrapefruit,insult here,\n"
    );
    let (status, page) = send(&setup, "GET", "/v1/lists/slang/entries", "", b"");
    assert_eq!(status, 200);
    assert_schema("EntriesPage", &page);
}

/// Sightengine's `check.json`: `add_to_list` (and `custom_id`) as Sightengine documents them,
/// `lists` and the answer's `list_matches` and `added_to_list` as modgate's own.
#[test]
fn check_json_adds_images_to_lists_and_looks_them_up() {
    let setup = setup();
    create_list(&setup, "banned", "block");
    let cat = testimage("jpeg_baseline_chelsea_451x300.jpg");
    let send = |key: &str, fields: &[(&str, &str)]| -> (u16, Value) {
        let mut fields = fields.to_vec();
        fields.push(("api_secret", key));
        let (content_type, body) = form_with_media(&fields, Some(("cat.jpg", "image/jpeg", &cat)));
        let (status, _, answer) = post(
            &setup.server.url("/1.0/check.json"),
            &[("Content-Type", &content_type)],
            &body,
        );
        (status, answer)
    };
    // A key without the `lists` scope may check, not add.
    let image_only = setup
        .server
        .new_key("acme", "pro", &["--scopes", "image"])
        .0;
    let (status, answer) = send(&image_only, &[("add_to_list", "banned")]);
    assert_sightengine_error(status, &answer, 403, "credentials_error");
    let (status, answer) = send(&setup.key, &[("add_to_list", "nothing")]);
    assert_eq!(status, 404, "{answer}");
    let (status, answer) = send(&setup.key, &[("custom_id", "u-1")]);
    assert_eq!(status, 400, "{answer}");
    let (status, answer) = send(&setup.key, &[("lists", "Bad Name")]);
    assert_eq!(status, 400, "{answer}");

    // Added, without `models`, under the caller's id; again: nothing new.
    let (status, answer) = send(
        &setup.key,
        &[("add_to_list", "banned"), ("custom_id", "upload-7")],
    );
    assert_eq!(status, 200, "{answer}");
    assert_schema("SightengineAnswer", &answer);
    assert_eq!(answer["added_to_list"]["list"], "banned");
    let added = answer["added_to_list"]["added"].as_array().unwrap();
    assert_eq!(added.len(), 3, "{answer}");
    assert!(added.iter().all(|entry| entry["id"] == "upload-7"));
    assert!(answer.get("nudity").is_none() && answer.get("list_matches").is_none());
    let (status, answer) = send(&setup.key, &[("add_to_list", "banned")]);
    assert_eq!(status, 200, "{answer}");
    assert_eq!(
        answer["added_to_list"]["existing"]
            .as_array()
            .unwrap()
            .len(),
        3
    );

    // Looked up by `lists`, with or without models; by the workflow's lists when its hashlist
    // check runs for `nudity`; and not at all otherwise.
    eventually(|| {
        let (_, answer) = send(&setup.key, &[("lists", "banned")]);
        answer["list_matches"][0]["list"] == "banned"
    });
    let (status, answer) = send(
        &setup.key,
        &[("lists", "banned,safe"), ("models", "nudity")],
    );
    assert_eq!(status, 200, "{answer}");
    assert_schema("SightengineAnswer", &answer);
    let matches = answer["list_matches"].as_array().unwrap();
    assert_eq!(matches.len(), 1, "no list `safe`: {answer}");
    assert_eq!(matches[0]["id"], "upload-7");
    assert_eq!(matches[0]["distance"], 0);
    assert!(answer["nudity"]["raw"].as_f64().is_some());
    let (_, answer) = send(
        &setup.key,
        &[("workflow", "screened"), ("models", "nudity")],
    );
    assert_eq!(answer["list_matches"][0]["list"], "banned", "{answer}");
    let (_, answer) = send(&setup.key, &[("models", "nudity")]);
    assert!(answer.get("list_matches").is_none(), "{answer}");
    let (_, answer) = send(&setup.key, &[("workflow", "screened"), ("models", "type")]);
    assert!(answer.get("list_matches").is_none(), "{answer}");
}
