//! Issue 14, defect 4: the ONNX Runtime environment was built with telemetry on, and with a
//! proxy reachable the modgate process sent `CONNECT mobile.events.data.microsoft.com:443` on
//! its own. A moderation service must not phone home. This runs the real server in a network
//! namespace of its own (`unshare`, root), with a DNS canary as its only name server, a proxy
//! canary in every proxy variable, and an image server, for 20 s after start including two `url`
//! checks; the only traffic allowed is what those checks asked for (`tests/egress/run.py`).

mod common;

use common::*;
use serde_json::Value;

#[test]
fn the_server_sends_nothing_but_the_downloads_it_was_asked_for() {
    let work = tempfile::tempdir().unwrap();
    let data = work.path().join("data");
    let config_path = work.path().join("modgate.toml");
    std::fs::write(
        &config_path,
        "[server]\nlisten = \"127.0.0.1:18181\"\n\n[testing]\nallow_private_urls = true\n",
    )
    .unwrap();
    let command = [
        BIN,
        "serve",
        "--config",
        config_path.to_str().unwrap(),
        "--data",
        data.to_str().unwrap(),
        "--models",
        MODELS,
        "--cores",
        "1",
    ];
    let run = serde_json::json!({
        "work": work.path(),
        "command": command,
        "port": 18181,
        "image": format!("{MODELS}/image/testimages/jpeg_baseline_chelsea_64x48.jpg"),
        "wait_s": 20,
    });
    let run_path = work.path().join("run.json");
    std::fs::write(&run_path, run.to_string()).unwrap();
    let output = std::process::Command::new("unshare")
        .args([
            "--net",
            "--mount",
            "--propagation",
            "private",
            "--",
            "python3",
        ])
        .arg(concat!(env!("CARGO_MANIFEST_DIR"), "/tests/egress/run.py"))
        .arg(&run_path)
        .env("RUST_LOG", "warn")
        .output()
        .expect("run unshare (util-linux)");
    assert!(
        output.status.success(),
        "the namespace run failed (root is needed for unshare --net): {}\n{}",
        String::from_utf8_lossy(&output.stdout),
        String::from_utf8_lossy(&output.stderr)
    );
    let seen: Value = serde_json::from_slice(&output.stdout).expect("the run's report");
    let checks = seen["checks"].as_array().unwrap();
    assert_eq!(
        checks[0][1], 200,
        "the download by a name in /etc/hosts: {seen}"
    );
    assert_eq!(
        checks[1][1], 400,
        "a name nobody answers is refused: {seen}"
    );
    assert_eq!(
        seen["images"],
        serde_json::json!(["/asked.jpg"]),
        "the image server saw the download it was asked for, once"
    );
    let names: Vec<&str> = seen["dns"]
        .as_array()
        .unwrap()
        .iter()
        .map(|name| name.as_str().unwrap())
        .collect();
    assert!(
        names.contains(&"asked.canary.test"),
        "the DNS canary hears the server's lookups: {seen}"
    );
    assert!(
        names
            .iter()
            .all(|name| ["asked.canary.test", "images.canary.test"].contains(name)),
        "a lookup nobody asked for: {names:?}"
    );
    assert_eq!(
        seen["proxy"],
        serde_json::json!([]),
        "nothing went through the proxy"
    );
}
