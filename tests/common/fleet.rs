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

/// A new key of `org` (`modgate key create`, which returns once every live node has it).
pub fn fleet_key(config: &std::path::Path, org: &str) -> String {
    fleet_admin_ok(config, &["key", "create", "--org", org])
        .lines()
        .next()
        .expect("the key on the first line")
        .to_owned()
}

/// The plans of the fleet tests: limits no test reaches unless it sets its own.
pub const ROOMY_PLANS: &str = "\n[plans.free]\nrate_per_s = 100000\nrate_burst = 100000\nconcurrent_max = 1000\nquota_per_month = 1000000000\n";

/// A configuration file for the admin commands (no node of its own), with `plans` (TOML).
pub fn admin_config_with(
    postgres: &Postgres,
    dir: &std::path::Path,
    plans: &str,
) -> std::path::PathBuf {
    let path = dir.join("admin.toml");
    std::fs::write(&path, cluster_config(postgres, "admin") + plans).expect("config");
    path
}

/// [`admin_config_with`] the [`ROOMY_PLANS`].
pub fn admin_config(postgres: &Postgres, dir: &std::path::Path) -> std::path::PathBuf {
    admin_config_with(postgres, dir, ROOMY_PLANS)
}

/// A control plane ready for nodes: the admin configuration written and the schema migrated.
pub fn migrated(postgres: &Postgres, dir: &std::path::Path, plans: &str) -> std::path::PathBuf {
    let config = admin_config_with(postgres, dir, plans);
    fleet_admin_ok(&config, &["db", "migrate"]);
    config
}
