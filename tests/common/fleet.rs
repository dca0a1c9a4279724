//! Helpers of the fleet tests: a node's `[cluster]` section and the admin CLI with
//! `--config`.

use super::engines::Postgres;
use super::BIN;

pub fn cluster_config(postgres: &Postgres, node: &str) -> String {
    format!(
        "[cluster]\nnode_id = \"{node}\"\npostgres_url = \"{}\"\n",
        postgres.url()
    )
}

/// Runs `modgate ARGS --config FILE`.
pub fn fleet_admin(config: &std::path::Path, args: &[&str]) -> std::process::Output {
    std::process::Command::new(BIN)
        .args(args)
        .arg("--config")
        .arg(config)
        .env("RUST_LOG", "warn")
        .output()
        .expect("run modgate")
}

pub fn fleet_admin_ok(config: &std::path::Path, args: &[&str]) -> String {
    let output = fleet_admin(config, args);
    assert!(
        output.status.success(),
        "modgate {args:?} failed: {}",
        String::from_utf8_lossy(&output.stderr)
    );
    String::from_utf8(output.stdout).expect("utf-8")
}

/// A configuration file for the admin commands (no node of its own).
pub fn admin_config(postgres: &Postgres, dir: &std::path::Path) -> std::path::PathBuf {
    let path = dir.join("admin.toml");
    let plans = "\n[plans.free]\nrate_per_s = 100000\nrate_burst = 100000\nconcurrent_max = 1000\nquota_per_month = 1000000000\n";
    std::fs::write(&path, cluster_config(postgres, "admin") + plans).expect("config");
    path
}
