//! Configuration: one TOML file, every field with a default and a unit in its name.
//!
//! The defaults are written once, in `src/defaults/modgate.toml`, which is embedded in the
//! binary ([`DEFAULT_CONFIG`]) and documents every field. A user's file is parsed on top of
//! them: fields left out keep their default, unknown fields are refused with the file, line and
//! field named. Command-line flags are applied after the file, then [`Config::validate`]
//! checks the whole.

use std::collections::BTreeMap;
use std::net::SocketAddr;
use std::path::{Path, PathBuf};
use std::time::Duration;

use anyhow::{bail, Context};
use serde::Deserialize;

use crate::bounds::{FORM_FIELD_BYTES_MAX, FORM_TIMEOUT_MS, IMAGE_PIXELS_MAX, TEXT_CHARS_MAX};
use crate::clock::Clock;
use crate::http::conn::ConnConfig;
use crate::http::head::HeadLimits;
use crate::inference::share::{CoreSharing, PAUSE_SLICE};
use crate::journal::{JournalConfig, SyncPolicy};
use crate::store::records::PlanLimits;

/// The commented default configuration.
pub const DEFAULT_CONFIG: &str = include_str!("defaults/modgate.toml");

#[derive(Clone, Debug, Deserialize, PartialEq)]
#[serde(deny_unknown_fields)]
pub struct Config {
    pub server: ServerConfig,
    #[serde(default)]
    pub tls: TlsConfig,
    pub limits: LimitsConfig,
    pub models: ModelsConfig,
    pub inference: InferenceConfig,
    pub journal: JournalSettings,
    pub log: LogConfig,
    pub metrics: MetricsConfig,
    #[serde(default)]
    pub workflows: WorkflowsConfig,
    #[serde(default)]
    pub testing: TestingConfig,
    pub plans: BTreeMap<String, PlanLimits>,
    /// `[cluster]`: run as a node of a fleet on PostgreSQL ([`crate::fleet`]). Absent: one
    /// node on its embedded LMDB store.
    #[serde(default)]
    pub cluster: Option<ClusterConfig>,
}

/// `[cluster]`: the fleet this node belongs to.
#[derive(Clone, Debug, Deserialize, PartialEq)]
#[serde(deny_unknown_fields)]
pub struct ClusterConfig {
    /// Unique in the fleet; default: the host name.
    pub node_id: Option<String>,
    /// The control plane: organizations, plans, keys, workflows and their change log.
    pub postgres_url: String,
    /// The rate and concurrency budgets (Redis or Valkey). Without it, rate and concurrency
    /// are each node's own (the quota is the fleet's, in PostgreSQL, either way).
    pub redis_url: Option<String>,
    /// Concurrency permits a node holds expire this long after its last word with Redis, so
    /// a node that dies gives them back; a live node renews them every second.
    #[serde(default = "default_permit_ttl_ms")]
    pub permit_ttl_ms: u64,
    /// Past this long without reaching PostgreSQL, a node says it is stale (log, metric,
    /// `fleet status`); it keeps answering from its last applied state.
    #[serde(default = "default_stale_after_ms")]
    pub stale_after_ms: u64,
    /// The change log keeps a change at least this long, and always while a live node has not
    /// applied it; an admin write prunes what is older. A node down longer than this takes a
    /// snapshot of the control plane when it comes back instead of replaying the changes.
    #[serde(default = "default_change_log_keep_hours")]
    pub change_log_keep_hours: u32,
    /// Connections that ship this node's journal to PostgreSQL, each with one batch in flight
    /// (count them in its `max_connections`). Default: one per shard, up to
    /// [`crate::fleet::shipper::SHIP_CONNECTIONS_DEFAULT_MAX`]; more than the shards are not
    /// opened, since a shard has one batch in flight.
    pub shipping_connections: Option<usize>,
    /// A node deletes the records of its own journal this long after they were shipped to
    /// the fleet's table (`journal` in PostgreSQL, which `modgate journal --config` reads and
    /// `journal prune --config` prunes): 0 deletes them once shipped. A record not shipped
    /// yet is never deleted.
    #[serde(default = "default_local_journal_keep_minutes")]
    pub local_journal_keep_minutes: u32,
}

fn default_permit_ttl_ms() -> u64 {
    5_000
}

fn default_stale_after_ms() -> u64 {
    60_000
}

fn default_change_log_keep_hours() -> u32 {
    7 * 24
}

fn default_local_journal_keep_minutes() -> u32 {
    60
}

/// `cluster.local_journal_keep_minutes` at most: a year.
pub const LOCAL_JOURNAL_KEEP_MINUTES_MAX: u32 = 366 * 24 * 60;

impl ClusterConfig {
    /// This node's id: `node_id`, else the host name.
    pub fn node_id(&self) -> String {
        self.node_id.clone().unwrap_or_else(|| {
            nix::unistd::gethostname()
                .ok()
                .and_then(|name| name.into_string().ok())
                .unwrap_or_else(|| "modgate".to_owned())
        })
    }
}

/// `[log]`: what is logged (to stderr) and how.
#[derive(Clone, Debug, Deserialize, PartialEq)]
#[serde(deny_unknown_fields)]
pub struct LogConfig {
    /// A level or a filter in the `RUST_LOG` syntax.
    pub level: String,
    pub format: LogFormat,
}

#[derive(Clone, Copy, Debug, Deserialize, PartialEq, Eq)]
#[serde(rename_all = "lowercase")]
pub enum LogFormat {
    Text,
    Json,
}

/// `[metrics]`: the Prometheus listener.
#[derive(Clone, Debug, Deserialize, PartialEq)]
#[serde(deny_unknown_fields)]
pub struct MetricsConfig {
    /// `ADDR:PORT`, or empty for no metrics at all.
    pub listen: String,
}

impl MetricsConfig {
    /// The listener's address; `None` when metrics are off.
    pub fn address(&self) -> anyhow::Result<Option<SocketAddr>> {
        if self.listen.is_empty() {
            return Ok(None);
        }
        self.listen
            .parse()
            .map(Some)
            .with_context(|| format!("metrics.listen '{}' is not ADDR:PORT", self.listen))
    }

    pub fn enabled(&self) -> bool {
        !self.listen.is_empty()
    }
}

/// `[workflows]`: a workflow file kept in step with the store.
#[derive(Clone, Debug, Default, Deserialize, PartialEq)]
#[serde(deny_unknown_fields)]
pub struct WorkflowsConfig {
    /// Imported at start and on SIGHUP.
    pub file: Option<PathBuf>,
}

#[derive(Clone, Copy, Debug, Deserialize, PartialEq, Eq)]
#[serde(rename_all = "lowercase")]
pub enum SyncMode {
    Always,
    Interval,
}

#[derive(Clone, Debug, Deserialize, PartialEq)]
#[serde(deny_unknown_fields)]
pub struct JournalSettings {
    pub sync: SyncMode,
    pub sync_interval_ms: u64,
    pub batch_records_max: usize,
    pub map_bytes: usize,
    /// Under the interval policy, where records are committed before their answers and moved
    /// to the disk journal every `sync_interval_ms` (`crate::journal::staging`): `"auto"` (a
    /// directory on `/dev/shm` when it is a tmpfs), `"off"` (straight to the disk journal), or
    /// the absolute path of a directory on a tmpfs.
    pub staging: String,
}

/// Settings for tests only; the shipped configuration sets none of them.
#[derive(Clone, Debug, Default, Deserialize, PartialEq)]
#[serde(deny_unknown_fields)]
pub struct TestingConfig {
    pub clock_offset_file: Option<PathBuf>,
    /// Test only: let `url` downloads reach private and loopback addresses.
    #[serde(default)]
    pub allow_private_urls: bool,
    /// Test only: a PEM file of extra certificate authorities trusted by `url` downloads
    /// (besides the webpki roots), so tests can serve images over https from 127.0.0.1.
    pub download_extra_roots: Option<PathBuf>,
    /// Test only: the name servers of `url` downloads instead of the system's (`ip:port`).
    pub dns_servers: Option<Vec<SocketAddr>>,
    /// Test only: a request to this exact path panics in its handler, so tests can prove that
    /// a panic closes one connection and the shard serves on (fault injection).
    pub panic_path: Option<String>,
}

#[derive(Clone, Debug, Deserialize, PartialEq)]
#[serde(deny_unknown_fields)]
pub struct ServerConfig {
    pub listen: SocketAddr,
    pub cores: usize,
    pub data_dir: PathBuf,
    pub models_dir: PathBuf,
    pub head_bytes_max: usize,
    pub uri_bytes_max: usize,
    pub header_read_timeout_ms: u64,
    pub keepalive_idle_timeout_ms: u64,
    pub write_timeout_ms: u64,
    pub connections_per_shard_max: usize,
    /// Connections per shard from one peer address, at most.
    pub connections_per_address_max: usize,
    /// The bits of an IPv6 peer's address that make it one client for
    /// `connections_per_address_max` (64: a network's usual allocation, in which a client may
    /// take an address per connection; 128: each address on its own).
    pub ipv6_client_prefix_bits: u8,
    pub drain_timeout_ms: u64,
    /// On a fresh data directory, create organization `demo` and print a key for it once.
    pub demo_key: bool,
    /// glommio: memory each shard registers with io_uring for storage I/O, bytes.
    pub io_memory_bytes: usize,
    /// glommio: submission queue depth of each shard's rings.
    pub ring_depth: usize,
    /// glommio: how long an idle shard spins before it sleeps, microseconds (0: no spin).
    pub spin_before_park_us: u64,
}

#[derive(Clone, Debug, Default, Deserialize, PartialEq)]
#[serde(deny_unknown_fields)]
pub struct TlsConfig {
    pub cert: Option<PathBuf>,
    pub key: Option<PathBuf>,
}

#[derive(Clone, Debug, Deserialize, PartialEq)]
#[serde(deny_unknown_fields)]
pub struct LimitsConfig {
    pub body_read_timeout_ms: u64,
    pub text_body_bytes_max: usize,
    pub text_form_bytes_max: usize,
    pub form_field_bytes_max: usize,
    pub form_timeout_ms: u64,
    pub uploads_per_shard_max: usize,
    /// Ports a `url` download may connect to.
    pub download_ports: Vec<u16>,
    /// Bytes of compatible forms being received per shard from callers whose key is inside
    /// the form (not yet known): past it, 503 busy.
    pub unauthenticated_upload_bytes_max: usize,
}

#[derive(Clone, Debug, Deserialize, PartialEq)]
#[serde(deny_unknown_fields)]
pub struct ModelsConfig {
    pub required: bool,
    pub onnxruntime_library: PathBuf,
    /// `[[models.custom]]`: the operator's own image classifiers ([`crate::checks::custom`]).
    #[serde(default)]
    pub custom: Vec<crate::checks::custom::CustomModel>,
}

#[derive(Clone, Debug, Deserialize, PartialEq)]
#[serde(deny_unknown_fields)]
pub struct InferenceConfig {
    pub queue_depth_max: usize,
    pub batch_rows_max: usize,
    /// How a shard and its model worker share their core ([`crate::inference::share`]).
    pub core_sharing: CoreSharing,
    /// With `"paced"`: the share of the core (0 to 0.95) the shard leaves its worker while
    /// the worker has jobs; 0 leaves it only what the shard does not use.
    pub worker_share: f64,
    /// Scheduling niceness of each shard's model worker thread (0 to 19), with `"weights"`.
    pub worker_nice: i32,
    /// Scheduling niceness of each shard's own thread (0 to 19), in both modes. With
    /// `"weights"`, where both are busy, the kernel shares the core by the two threads'
    /// weights: at the defaults (both 0) evenly; `shard_nice = 3` gives the worker two thirds.
    pub shard_nice: i32,
    /// Image results each shard keeps for repeats of the same bytes
    /// ([`crate::inference::repeats`]); 0 keeps none.
    pub image_results_kept: usize,
    /// tox-block windows whose scores each shard keeps for repeats of the same words
    /// ([`crate::checks::toxblock`]); 0 keeps none.
    pub toxblock_windows_kept: usize,
    /// The time a model job may take from its submission, queue wait included; past it, the
    /// worker stops the job at its next step and the check answers 503 `busy`.
    pub job_time_max_ms: u64,
}

/// The `modgate serve` flags that override the file, kept so that a reload (SIGHUP) reads the
/// file again under the same flags.
#[derive(Clone, Debug, Default)]
pub struct Overrides {
    pub config_path: Option<PathBuf>,
    pub data_dir: Option<PathBuf>,
    pub listen: Option<SocketAddr>,
    pub cores: Option<usize>,
    pub models_dir: Option<PathBuf>,
    pub tls: Option<(PathBuf, PathBuf)>,
    /// `ADDR:PORT`, or `off`.
    pub metrics_listen: Option<String>,
    pub log_format: Option<LogFormat>,
}

impl Overrides {
    /// The file (or the defaults) with the flags applied, validated.
    pub fn load(&self) -> anyhow::Result<Config> {
        let mut config = Config::load(self.config_path.as_deref())?;
        if let Some(data) = &self.data_dir {
            config.server.data_dir = data.clone();
        }
        if let Some(listen) = self.listen {
            config.server.listen = listen;
        }
        if let Some(cores) = self.cores {
            config.server.cores = cores;
        }
        if let Some(models) = &self.models_dir {
            config.server.models_dir = models.clone();
        }
        if let Some((cert, key)) = &self.tls {
            config.tls.cert = Some(cert.clone());
            config.tls.key = Some(key.clone());
        }
        if let Some(listen) = &self.metrics_listen {
            config.metrics.listen = if listen == "off" {
                String::new()
            } else {
                listen.clone()
            };
        }
        if let Some(format) = self.log_format {
            config.log.format = format;
        }
        config.validate()?;
        Ok(config)
    }
}

/// Bounds on configurable limits, so that a typo cannot disable a defence.
pub const HEAD_BYTES_MAX_RANGE: std::ops::RangeInclusive<usize> = 1024..=1 << 20;
/// The longest timeout or interval a configuration may set (one day), so that deadlines
/// computed from them never overflow.
pub const TIMEOUT_MS_MAX: u64 = 86_400_000;
pub const CONNECTIONS_PER_SHARD_MAX_RANGE: std::ops::RangeInclusive<usize> = 1..=1 << 20;
/// glommio allocates at least 64 KiB; more than 1 GiB per shard is a typo.
pub const IO_MEMORY_BYTES_RANGE: std::ops::RangeInclusive<usize> = 64 << 10..=1 << 30;
pub const RING_DEPTH_RANGE: std::ops::RangeInclusive<usize> = 1..=32_768;
/// `cluster.shipping_connections`: more than 64 per node would crowd PostgreSQL's default
/// `max_connections` (100) from a single node.
pub const SHIPPING_CONNECTIONS_RANGE: std::ops::RangeInclusive<usize> = 1..=64;
/// Spinning longer than a second is never a latency win.
pub const SPIN_US_MAX: u64 = 1_000_000;
/// The largest `inference.worker_share`: a shard always keeps some of its core.
pub const WORKER_SHARE_MAX: f64 = 0.95;
/// The most `inference.image_results_kept`: a result with faces, QR codes and lines of text is
/// some kilobytes, so this bounds a shard's kept results to some hundreds of MB at worst.
pub const IMAGE_RESULTS_KEPT_MAX: usize = 65_536;
/// The most `inference.toxblock_windows_kept`: a kept window is about 100 bytes, so this bounds
/// a shard's to about 100 MB.
pub const TOXBLOCK_WINDOWS_KEPT_MAX: usize = 1 << 20;
/// The most `inference.job_time_max_ms`: a minute; a check that waits longer for a model is
/// better answered busy.
pub const JOB_TIME_MAX_MS_MAX: u64 = 60_000;

impl Default for Config {
    fn default() -> Self {
        // The embedded file is checked by a unit test; it cannot fail to parse at run time.
        match parse(DEFAULT_CONFIG, Path::new("<defaults>")) {
            Ok(config) => config,
            Err(error) => panic!("embedded default configuration: {error:#}"),
        }
    }
}

/// Parses a full configuration (defaults merged under `text`).
fn parse(text: &str, origin: &Path) -> anyhow::Result<Config> {
    let mut merged: toml::Table = toml::from_str(DEFAULT_CONFIG).context("embedded defaults")?;
    // Unknown fields are refused against the user's own text first, so that the error can
    // name its line; then the values are merged over the defaults.
    let user: toml::Table =
        toml::from_str(text).map_err(|error| anyhow::anyhow!("{}: {error}", origin.display()))?;
    check_fields(text, origin)?;
    merge(&mut merged, user);
    let config: Config = toml::Value::Table(merged)
        .try_into()
        .map_err(|error| anyhow::anyhow!("{}: {error}", origin.display()))?;
    Ok(config)
}

/// Deserialises the user's text against a mirror of [`Config`] where every field is optional:
/// the error for an unknown field then carries the line and column in that text.
fn check_fields(text: &str, origin: &Path) -> anyhow::Result<()> {
    #[derive(Deserialize)]
    #[serde(deny_unknown_fields)]
    #[allow(dead_code)]
    struct Shape {
        server: Option<ServerShape>,
        tls: Option<TlsConfig>,
        limits: Option<LimitsShape>,
        models: Option<ModelsShape>,
        inference: Option<InferenceShape>,
        journal: Option<JournalShape>,
        log: Option<LogShape>,
        metrics: Option<MetricsConfig>,
        workflows: Option<WorkflowsConfig>,
        testing: Option<TestingConfig>,
        plans: Option<BTreeMap<String, PlanShape>>,
        cluster: Option<ClusterConfig>,
    }
    #[derive(Deserialize)]
    #[serde(deny_unknown_fields)]
    #[allow(dead_code)]
    struct LogShape {
        level: Option<String>,
        format: Option<LogFormat>,
    }
    #[derive(Deserialize)]
    #[serde(deny_unknown_fields)]
    #[allow(dead_code)]
    struct JournalShape {
        sync: Option<SyncMode>,
        sync_interval_ms: Option<u64>,
        batch_records_max: Option<usize>,
        map_bytes: Option<usize>,
        staging: Option<String>,
    }
    #[derive(Deserialize)]
    #[serde(deny_unknown_fields)]
    #[allow(dead_code)]
    struct ServerShape {
        listen: Option<SocketAddr>,
        cores: Option<usize>,
        data_dir: Option<PathBuf>,
        models_dir: Option<PathBuf>,
        head_bytes_max: Option<usize>,
        uri_bytes_max: Option<usize>,
        header_read_timeout_ms: Option<u64>,
        keepalive_idle_timeout_ms: Option<u64>,
        write_timeout_ms: Option<u64>,
        connections_per_shard_max: Option<usize>,
        connections_per_address_max: Option<usize>,
        ipv6_client_prefix_bits: Option<u8>,
        drain_timeout_ms: Option<u64>,
        demo_key: Option<bool>,
        io_memory_bytes: Option<usize>,
        ring_depth: Option<usize>,
        spin_before_park_us: Option<u64>,
    }
    #[derive(Deserialize)]
    #[serde(deny_unknown_fields)]
    #[allow(dead_code)]
    struct LimitsShape {
        body_read_timeout_ms: Option<u64>,
        text_body_bytes_max: Option<usize>,
        text_form_bytes_max: Option<usize>,
        form_field_bytes_max: Option<usize>,
        form_timeout_ms: Option<u64>,
        uploads_per_shard_max: Option<usize>,
        download_ports: Option<Vec<u16>>,
        unauthenticated_upload_bytes_max: Option<usize>,
    }
    #[derive(Deserialize)]
    #[serde(deny_unknown_fields)]
    #[allow(dead_code)]
    struct ModelsShape {
        required: Option<bool>,
        onnxruntime_library: Option<PathBuf>,
        custom: Option<Vec<crate::checks::custom::CustomModel>>,
    }
    #[derive(Deserialize)]
    #[serde(deny_unknown_fields)]
    #[allow(dead_code)]
    struct InferenceShape {
        queue_depth_max: Option<usize>,
        batch_rows_max: Option<usize>,
        core_sharing: Option<CoreSharing>,
        worker_share: Option<f64>,
        worker_nice: Option<i32>,
        shard_nice: Option<i32>,
        image_results_kept: Option<usize>,
        toxblock_windows_kept: Option<usize>,
        job_time_max_ms: Option<u64>,
    }
    #[derive(Deserialize)]
    #[serde(deny_unknown_fields)]
    #[allow(dead_code)]
    struct PlanShape {
        text_chars_max: Option<u32>,
        image_pixels_max: Option<u64>,
        rate_per_s: Option<u32>,
        rate_burst: Option<u32>,
        concurrent_max: Option<u32>,
        quota_per_month: Option<u64>,
        keys_max: Option<u32>,
        paid: Option<bool>,
        engine_down: Option<crate::store::records::EngineDown>,
        quota_counts: Option<crate::store::records::QuotaCounts>,
    }
    toml::from_str::<Shape>(text)
        .map(drop)
        .map_err(|error| anyhow::anyhow!("{}: {error}", origin.display()))
}

fn merge(base: &mut toml::Table, over: toml::Table) {
    for (key, value) in over {
        match (base.get_mut(&key), value) {
            (Some(toml::Value::Table(base_table)), toml::Value::Table(over_table)) => {
                merge(base_table, over_table)
            }
            (_, value) => {
                base.insert(key, value);
            }
        }
    }
}

impl Config {
    /// Reads `path` over the defaults, or the defaults alone.
    pub fn load(path: Option<&Path>) -> anyhow::Result<Config> {
        match path {
            None => Ok(Config::default()),
            Some(path) => {
                let text = std::fs::read_to_string(path)
                    .with_context(|| format!("reading {}", path.display()))?;
                parse(&text, path)
            }
        }
    }

    /// Checks the configuration as a whole, after flags were applied.
    pub fn validate(&self) -> anyhow::Result<()> {
        crate::checks::custom::validate(&self.models.custom)
            .map_err(|error| anyhow::anyhow!(error))?;
        let server = &self.server;
        if !HEAD_BYTES_MAX_RANGE.contains(&server.head_bytes_max) {
            bail!("server.head_bytes_max must be in {HEAD_BYTES_MAX_RANGE:?}");
        }
        if server.uri_bytes_max == 0 || server.uri_bytes_max > server.head_bytes_max {
            bail!("server.uri_bytes_max must be between 1 and server.head_bytes_max");
        }
        if !CONNECTIONS_PER_SHARD_MAX_RANGE.contains(&server.connections_per_address_max) {
            bail!(
                "server.connections_per_address_max must be in {CONNECTIONS_PER_SHARD_MAX_RANGE:?}"
            );
        }
        if !(1..=128).contains(&server.ipv6_client_prefix_bits) {
            bail!("server.ipv6_client_prefix_bits must be in 1..=128");
        }
        if !CONNECTIONS_PER_SHARD_MAX_RANGE.contains(&server.connections_per_shard_max) {
            bail!(
                "server.connections_per_shard_max must be in {CONNECTIONS_PER_SHARD_MAX_RANGE:?}"
            );
        }
        let timeouts_ms = [
            (
                "server.header_read_timeout_ms",
                server.header_read_timeout_ms,
            ),
            (
                "server.keepalive_idle_timeout_ms",
                server.keepalive_idle_timeout_ms,
            ),
            ("server.write_timeout_ms", server.write_timeout_ms),
            ("server.drain_timeout_ms", server.drain_timeout_ms),
            (
                "limits.body_read_timeout_ms",
                self.limits.body_read_timeout_ms,
            ),
            ("limits.form_timeout_ms", self.limits.form_timeout_ms),
            ("journal.sync_interval_ms", self.journal.sync_interval_ms),
        ];
        for (name, value) in timeouts_ms {
            if value == 0 {
                bail!("{name} must be above 0");
            }
            if value > TIMEOUT_MS_MAX {
                bail!("{name} must be at most {TIMEOUT_MS_MAX} (one day)");
            }
        }
        // Counts and sizes where 0 would refuse everything or stall a loop.
        for (name, value) in [
            ("journal.batch_records_max", self.journal.batch_records_max),
            (
                "limits.text_body_bytes_max",
                self.limits.text_body_bytes_max,
            ),
            (
                "limits.text_form_bytes_max",
                self.limits.text_form_bytes_max,
            ),
            (
                "limits.form_field_bytes_max",
                self.limits.form_field_bytes_max,
            ),
            (
                "limits.unauthenticated_upload_bytes_max",
                self.limits.unauthenticated_upload_bytes_max,
            ),
            (
                "limits.uploads_per_shard_max",
                self.limits.uploads_per_shard_max,
            ),
            ("inference.queue_depth_max", self.inference.queue_depth_max),
            ("inference.batch_rows_max", self.inference.batch_rows_max),
        ] {
            if value == 0 {
                bail!("{name} must be above 0");
            }
        }
        if self.journal.map_bytes < 1 << 20 {
            bail!("journal.map_bytes must be at least 1 MiB");
        }
        for (name, nice) in [
            ("inference.worker_nice", self.inference.worker_nice),
            ("inference.shard_nice", self.inference.shard_nice),
        ] {
            if !(0..=19).contains(&nice) {
                bail!("{name} must be in 0..=19 (a higher priority needs privileges modgate does not ask for)");
            }
        }
        if self.inference.image_results_kept > IMAGE_RESULTS_KEPT_MAX {
            bail!("inference.image_results_kept must be at most {IMAGE_RESULTS_KEPT_MAX}");
        }
        if self.inference.toxblock_windows_kept > TOXBLOCK_WINDOWS_KEPT_MAX {
            bail!("inference.toxblock_windows_kept must be at most {TOXBLOCK_WINDOWS_KEPT_MAX}");
        }
        if !(1..=JOB_TIME_MAX_MS_MAX).contains(&self.inference.job_time_max_ms) {
            bail!("inference.job_time_max_ms must be in 1..={JOB_TIME_MAX_MS_MAX}");
        }
        if !(0.0..=WORKER_SHARE_MAX).contains(&self.inference.worker_share) {
            bail!("inference.worker_share must be in 0..={WORKER_SHARE_MAX} (the shard keeps some of its core for its own checks)");
        }
        let staging = self.journal.staging.as_str();
        if !matches!(staging, "auto" | "off") && !Path::new(staging).is_absolute() {
            bail!("journal.staging must be \"auto\", \"off\" or an absolute path, not {staging:?}");
        }
        self.metrics.address()?;
        if !IO_MEMORY_BYTES_RANGE.contains(&self.server.io_memory_bytes) {
            bail!("server.io_memory_bytes must be in {IO_MEMORY_BYTES_RANGE:?}");
        }
        if !RING_DEPTH_RANGE.contains(&self.server.ring_depth) {
            bail!("server.ring_depth must be in {RING_DEPTH_RANGE:?}");
        }
        if self.server.spin_before_park_us > SPIN_US_MAX {
            bail!("server.spin_before_park_us must be at most {SPIN_US_MAX}");
        }
        let spin = Duration::from_micros(self.server.spin_before_park_us);
        if self.inference.core_sharing == CoreSharing::Paced && spin >= PAUSE_SLICE / 2 {
            bail!(
                "server.spin_before_park_us must be under {} with inference.core_sharing = \"paced\": a shard spins through its pauses, which are the model worker's time",
                (PAUSE_SLICE / 2).as_micros()
            );
        }
        if let Err(error) = tracing_subscriber::EnvFilter::try_new(&self.log.level) {
            bail!(
                "log.level '{}' is not a level or filter: {error}",
                self.log.level
            );
        }
        if self.tls.cert.is_some() != self.tls.key.is_some() {
            bail!("tls.cert and tls.key go together");
        }
        if self.plans.is_empty() {
            bail!("at least one plan is needed");
        }
        if let Some(cluster) = &self.cluster {
            if cluster.local_journal_keep_minutes > LOCAL_JOURNAL_KEEP_MINUTES_MAX {
                bail!(
                    "cluster.local_journal_keep_minutes must be at most {LOCAL_JOURNAL_KEEP_MINUTES_MAX} (a year)"
                );
            }
        }
        if let Some(connections) = self.cluster.as_ref().and_then(|c| c.shipping_connections) {
            if !SHIPPING_CONNECTIONS_RANGE.contains(&connections) {
                bail!("cluster.shipping_connections must be in {SHIPPING_CONNECTIONS_RANGE:?}");
            }
        }
        // The interface promises these bounds (`docs/interface.md#limits`); a configuration may tighten them only.
        if self.limits.form_timeout_ms > FORM_TIMEOUT_MS {
            bail!(
                "limits.form_timeout_ms must be at most {FORM_TIMEOUT_MS} (the interface's bound)"
            );
        }
        if self.limits.form_field_bytes_max > FORM_FIELD_BYTES_MAX {
            bail!(
                "limits.form_field_bytes_max must be at most {FORM_FIELD_BYTES_MAX} (the interface's bound)"
            );
        }
        for (name, plan) in &self.plans {
            if plan.rate_per_s == 0 || plan.rate_burst == 0 || plan.concurrent_max == 0 {
                bail!("plans.{name}: rate_per_s, rate_burst and concurrent_max must be above 0");
            }
            if plan.text_chars_max == 0 || plan.text_chars_max > TEXT_CHARS_MAX {
                bail!("plans.{name}.text_chars_max must be in 1..={TEXT_CHARS_MAX} (the interface's bound)");
            }
            if plan.image_pixels_max == 0 || plan.image_pixels_max > IMAGE_PIXELS_MAX {
                bail!(
                    "plans.{name}.image_pixels_max must be in 1..={IMAGE_PIXELS_MAX} (the interface's bound)"
                );
            }
        }
        Ok(())
    }

    /// Where the journal stages its commits (`journal.staging`), resolved: `None` with
    /// `sync = "always"` (each commit is fsynced to the disk journal before its answer), with
    /// `"off"`, or with `"auto"` where `/dev/shm` is not a tmpfs.
    pub fn journal_staging_root(&self) -> Option<PathBuf> {
        if self.journal.sync == SyncMode::Always {
            return None;
        }
        match self.journal.staging.as_str() {
            "off" => None,
            "auto" => crate::journal::staging::default_root(&self.server.data_dir),
            path => Some(PathBuf::from(path)),
        }
    }

    /// The journal's settings; `staging` is left to the server, which prepares it
    /// ([`crate::journal::staging::recover`]).
    pub fn journal_config(&self) -> JournalConfig {
        JournalConfig {
            sync: match self.journal.sync {
                SyncMode::Always => SyncPolicy::Always,
                SyncMode::Interval => {
                    SyncPolicy::Interval(Duration::from_millis(self.journal.sync_interval_ms))
                }
            },
            batch_records_max: self.journal.batch_records_max,
            map_bytes: self.journal.map_bytes,
            ship: self.cluster.is_some(),
            staging: None,
        }
    }

    pub fn clock(&self) -> Clock {
        match &self.testing.clock_offset_file {
            Some(path) => Clock::Offset(path.clone()),
            None => Clock::System,
        }
    }

    pub fn conn_config(&self) -> ConnConfig {
        ConnConfig {
            head: HeadLimits {
                head_bytes_max: self.server.head_bytes_max,
                uri_bytes_max: self.server.uri_bytes_max,
            },
            header_read_timeout: Duration::from_millis(self.server.header_read_timeout_ms),
            idle_timeout: Duration::from_millis(self.server.keepalive_idle_timeout_ms),
            write_timeout: Duration::from_millis(self.server.write_timeout_ms),
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn embedded_defaults_parse_and_validate() {
        let config = Config::default();
        config.validate().unwrap();
        assert!(config.plans.contains_key("free") && config.plans.contains_key("pro"));
        assert_eq!(config.plans["free"].text_chars_max, 5000);
        assert_eq!(config.plans["pro"].image_pixels_max, 50_000_000);
        // What a worker started outside a server gets is the embedded default.
        assert_eq!(
            std::time::Duration::from_millis(config.inference.job_time_max_ms),
            crate::inference::worker::JOB_TIME_MAX_DEFAULT
        );
    }

    #[test]
    fn user_values_override_and_the_rest_stays() {
        let config = parse(
            "[server]\ncores = 3\n[plans.free]\nkeys_max = 9\n",
            Path::new("f"),
        )
        .unwrap();
        assert_eq!(config.server.cores, 3);
        assert_eq!(config.plans["free"].keys_max, 9);
        assert_eq!(config.plans["free"].text_chars_max, 5000);
        assert_eq!(
            config.server.head_bytes_max,
            Config::default().server.head_bytes_max
        );
    }

    #[test]
    fn unknown_fields_name_the_file_line_and_field() {
        let error = parse(
            "[server]\ncores = 1\nheader_timeout_ms = 5\n",
            Path::new("my.toml"),
        )
        .unwrap_err()
        .to_string();
        assert!(error.contains("my.toml"), "{error}");
        assert!(error.contains("line 3"), "{error}");
        assert!(error.contains("header_timeout_ms"), "{error}");
    }

    #[test]
    fn validation() {
        let mut config = Config::default();
        config.server.write_timeout_ms = u64::MAX;
        assert!(config.validate().is_err());
        let mut config = Config::default();
        config.server.uri_bytes_max = config.server.head_bytes_max + 1;
        assert!(config.validate().is_err());
        let mut config = Config::default();
        config.tls.cert = Some("x".into());
        assert!(config.validate().is_err());
        assert_eq!(Config::default().server.ipv6_client_prefix_bits, 64);
        for bits in [0, 129] {
            let mut config = Config::default();
            config.server.ipv6_client_prefix_bits = bits;
            assert!(config.validate().is_err(), "{bits}");
        }
        // Zeros that would stall the journal's loops or refuse every request.
        let zeroed: [fn(&mut Config); 4] = [
            |c| c.journal.sync_interval_ms = 0,
            |c| c.journal.batch_records_max = 0,
            |c| c.inference.batch_rows_max = 0,
            |c| c.limits.uploads_per_shard_max = 0,
        ];
        for zero in zeroed {
            let mut config = Config::default();
            zero(&mut config);
            let error = config.validate().unwrap_err().to_string();
            assert!(error.ends_with("must be above 0"), "{error}");
        }
        // Priorities modgate can set without privileges, and staging it can find.
        let refused: [fn(&mut Config); 12] = [
            |c| c.inference.image_results_kept = IMAGE_RESULTS_KEPT_MAX + 1,
            |c| c.inference.toxblock_windows_kept = TOXBLOCK_WINDOWS_KEPT_MAX + 1,
            |c| c.inference.job_time_max_ms = 0,
            |c| c.inference.job_time_max_ms = JOB_TIME_MAX_MS_MAX + 1,
            |c| c.inference.worker_nice = -1,
            |c| c.inference.shard_nice = 20,
            |c| c.inference.worker_share = 0.96,
            |c| c.inference.worker_share = -0.1,
            |c| c.inference.worker_share = f64::NAN,
            |c| c.server.spin_before_park_us = 500,
            |c| c.journal.staging = "relative/dir".into(),
            |c| c.journal.staging = String::new(),
        ];
        for refuse in refused {
            let mut config = Config::default();
            refuse(&mut config);
            assert!(config.validate().is_err());
        }
        // Shipping connections: at least one, and not so many that one node crowds PostgreSQL.
        let cluster = |shipping_connections| {
            let text = format!(
                "[cluster]\npostgres_url = \"postgres://modgate@127.0.0.1/modgate\"\n\
                 shipping_connections = {shipping_connections}\n"
            );
            parse(&text, Path::new("fleet.toml")).and_then(|config| config.validate())
        };
        assert!(cluster(1).is_ok());
        assert!(cluster(64).is_ok());
        for refused in [0, 65] {
            let error = cluster(refused).unwrap_err().to_string();
            assert!(error.contains("cluster.shipping_connections"), "{error}");
        }
        // A node's own copy of what it shipped: an hour unless said, none to a year.
        let keep = |line: &str| {
            let text = format!(
                "[cluster]\npostgres_url = \"postgres://modgate@127.0.0.1/modgate\"\n{line}\n"
            );
            parse(&text, Path::new("fleet.toml")).and_then(|config| {
                config.validate()?;
                Ok(config
                    .cluster
                    .map(|cluster| cluster.local_journal_keep_minutes))
            })
        };
        assert_eq!(keep("").unwrap(), Some(60));
        assert_eq!(keep("local_journal_keep_minutes = 0").unwrap(), Some(0));
        assert_eq!(
            keep(&format!(
                "local_journal_keep_minutes = {LOCAL_JOURNAL_KEEP_MINUTES_MAX}"
            ))
            .unwrap(),
            Some(LOCAL_JOURNAL_KEEP_MINUTES_MAX)
        );
        let error = keep(&format!(
            "local_journal_keep_minutes = {}",
            LOCAL_JOURNAL_KEEP_MINUTES_MAX + 1
        ))
        .unwrap_err()
        .to_string();
        assert!(
            error.contains("cluster.local_journal_keep_minutes"),
            "{error}"
        );
        assert!(keep("local_journal_keep_minutes = -1").is_err());
    }

    #[test]
    fn the_tuning_profiles_are_valid() {
        let dir = Path::new(concat!(env!("CARGO_MANIFEST_DIR"), "/tuning/profiles"));
        let mut count = 0;
        for entry in std::fs::read_dir(dir).unwrap() {
            let path = entry.unwrap().path();
            let text = std::fs::read_to_string(&path).unwrap();
            let config = parse(&text, &path).unwrap_or_else(|e| panic!("{e:#}"));
            config
                .validate()
                .unwrap_or_else(|e| panic!("{}: {e:#}", path.display()));
            count += 1;
        }
        assert!(count >= 4);
    }

    #[test]
    fn the_systemd_example_configuration_is_valid() {
        let text = include_str!("../tuning/systemd/modgate.toml");
        let config = parse(text, Path::new("tuning/systemd/modgate.toml")).unwrap();
        config.validate().unwrap();
        assert_eq!(config.server.data_dir, Path::new("/var/lib/modgate"));
    }

    #[test]
    fn plans_and_forms_may_only_tighten_the_specs_limits() {
        for change in [
            (|c: &mut Config| c.limits.form_timeout_ms = 0) as fn(&mut Config),
            |c| c.limits.form_timeout_ms = FORM_TIMEOUT_MS + 1,
            |c| c.limits.form_field_bytes_max = FORM_FIELD_BYTES_MAX + 1,
            |c| c.plans.get_mut("pro").unwrap().text_chars_max = TEXT_CHARS_MAX + 1,
            |c| c.plans.get_mut("pro").unwrap().image_pixels_max = IMAGE_PIXELS_MAX + 1,
            |c| c.plans.get_mut("free").unwrap().text_chars_max = 0,
        ] {
            let mut config = Config::default();
            change(&mut config);
            assert!(config.validate().is_err());
        }
        let mut config = Config::default();
        config.limits.form_timeout_ms = 5000;
        config.plans.get_mut("pro").unwrap().text_chars_max = 10_000;
        config.validate().unwrap();
    }
}
