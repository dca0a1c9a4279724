//! The command line: `modgate serve` and the admin commands (the dashboard's stand-in).
//!
//! Flags are parsed in two phases: clap reads raw values, then each command validates them
//! (times, durations, lists) and reports the first problem in plain words. Admin commands write
//! the store directly, so they work while the server runs and the server sees each change on
//! its next request. Output meant for scripts comes first: `key create` and `key rotate` print
//! the new key alone on the first line of stdout.

use std::path::{Path, PathBuf};

use anyhow::{anyhow, bail, Context};
use clap::{Args, Parser, Subcommand};

use crate::clock::rfc3339;
use crate::config::Config;
use crate::store::records::{KeyRecord, Scopes, WorkflowAccess};
use crate::store::Store;
use crate::workflow;

/// Writes a line to stdout. A closed pipe (`modgate key create ... | head -1`) ends the command
/// quietly instead of panicking: what had to be done is done by then.
macro_rules! say {
    ($($arg:tt)*) => {{
        use std::io::Write as _;
        if writeln!(std::io::stdout(), $($arg)*).is_err() {
            std::process::exit(0);
        }
    }};
}

mod judgement;
mod store_args;

use store_args::{now_ms, parse_rfc3339_ms, resolve, StoreArgs};

#[derive(Parser)]
#[command(
    name = "modgate",
    version,
    about = "Self-hosted content moderation gateway"
)]
struct Cli {
    #[command(subcommand)]
    command: Command,
}

#[derive(Subcommand)]
enum Command {
    /// Run the server.
    Serve(ServeArgs),
    /// Manage organizations.
    Org {
        #[command(subcommand)]
        command: OrgCommand,
    },
    /// Manage API keys.
    Key {
        #[command(subcommand)]
        command: KeyCommand,
    },
    /// Manage workflows.
    Workflow {
        #[command(subcommand)]
        command: WorkflowCommand,
    },
    /// Manage an organization's hash lists (block and allow lists of image hashes).
    List {
        #[command(subcommand)]
        command: ListCommand,
    },
    /// Show the plans.
    Plan {
        #[command(subcommand)]
        command: PlanCommand,
    },
    /// Read the journal: every shard's records merged in time order, filtered.
    Journal(JournalArgs),
    /// Run a workflow's checks over a JSON-lines file of texts or a directory of images,
    /// offline, and report how it would decide (to choose thresholds on your own traffic).
    Eval(EvalArgs),
    /// Feedback on checks from a review tool (the route is `POST /v1/feedback`).
    Feedback {
        #[command(subcommand)]
        command: judgement::FeedbackCommand,
    },
    /// How well a workflow's thresholds fit the feedback given on its checks: per category,
    /// precision and recall at the thresholds in force, AUPRC, and the thresholds that reach
    /// the asked precision with the most recall.
    Calibrate(judgement::CalibrateArgs),
    /// The decisions a workflow's journaled checks would get under other thresholds, and
    /// which flip.
    Replay(judgement::ReplayArgs),
    /// Send one check to a running server and print its decision: an image file, or --text,
    /// or --url.
    Check(CheckArgs),
    /// The fleet's PostgreSQL schema (with a `[cluster]` configuration).
    Db {
        #[command(subcommand)]
        command: DbCommand,
    },
    /// The fleet: its nodes and engines (with a `[cluster]` configuration).
    Fleet {
        #[command(subcommand)]
        command: FleetCommand,
    },
    /// Configuration helpers.
    Config {
        /// Print the default configuration, every field commented.
        #[arg(long)]
        print_defaults: bool,
    },
}

#[derive(Args)]
struct ServeArgs {
    /// Data directory (store and journals). Default: server.data_dir of the configuration.
    #[arg(long, value_name = "DIR")]
    data: Option<PathBuf>,
    /// Listen address, e.g. 0.0.0.0:8080. Port 0 picks a free port.
    #[arg(long, value_name = "ADDR:PORT")]
    listen: Option<std::net::SocketAddr>,
    /// Shards (one per CPU); 0 = every CPU this process may use.
    #[arg(long, value_name = "N")]
    cores: Option<usize>,
    /// Configuration file (TOML); see `modgate config --print-defaults`.
    #[arg(long, value_name = "FILE")]
    config: Option<PathBuf>,
    /// Certificate chain (PEM): serve TLS.
    #[arg(long, value_name = "FILE", requires = "tls_key")]
    tls_cert: Option<PathBuf>,
    /// Private key (PEM) of --tls-cert.
    #[arg(long, value_name = "FILE", requires = "tls_cert")]
    tls_key: Option<PathBuf>,
    /// Directory of the ONNX Runtime library and models.
    #[arg(long, value_name = "DIR")]
    models: Option<PathBuf>,
    /// Prometheus listener (GET /metrics, no key), or `off`.
    #[arg(long, value_name = "ADDR:PORT|off")]
    metrics_listen: Option<String>,
    /// Log filter: a level (error, warn, info, debug, trace) or a RUST_LOG-style filter. Wins
    /// over RUST_LOG and log.level; a SIGHUP then leaves it alone.
    #[arg(long, value_name = "LEVEL")]
    log_level: Option<String>,
    /// Log lines as text (for people) or JSON (one object per line).
    #[arg(long, value_name = "text|json")]
    log_format: Option<String>,
}

#[derive(Args)]
struct CheckArgs {
    /// An image file (JPEG, PNG, WebP, GIF).
    #[arg(value_name = "IMAGE_FILE", conflicts_with_all = ["text", "url"])]
    image: Option<PathBuf>,
    /// A text to check instead of an image.
    #[arg(long, conflicts_with = "url")]
    text: Option<String>,
    /// An image address for the server to download.
    #[arg(long)]
    url: Option<String>,
    /// Workflow (default: the server's `default`).
    #[arg(long)]
    workflow: Option<String>,
    /// Your own id for the content, kept in the journal.
    #[arg(long = "ref", value_name = "REF")]
    reference: Option<String>,
    /// The server's address.
    #[arg(long, env = "MODGATE_SERVER", default_value = "http://127.0.0.1:8080")]
    server: String,
    /// The API key (better: the MODGATE_KEY environment variable, out of shell history).
    #[arg(long, env = "MODGATE_KEY", hide_env_values = true)]
    key: String,
    /// Print the server's JSON answer as it is.
    #[arg(long)]
    json: bool,
}

#[derive(Args)]
#[command(args_conflicts_with_subcommands = true)]
struct JournalArgs {
    #[command(subcommand)]
    command: Option<JournalCommand>,
    /// Only records of this key id.
    #[arg(long, value_name = "KEY_ID")]
    key: Option<String>,
    /// Only records with this ref.
    #[arg(long = "ref", value_name = "REF")]
    reference: Option<String>,
    /// Only records of this organization.
    #[arg(long, value_name = "NAME")]
    org: Option<String>,
    /// Records at or after this time (RFC 3339).
    #[arg(long, value_name = "RFC3339")]
    since: Option<String>,
    /// Records before this time (RFC 3339).
    #[arg(long, value_name = "RFC3339")]
    until: Option<String>,
    /// One JSON object per line instead of a table.
    #[arg(long)]
    json: bool,
    #[command(flatten)]
    store: StoreArgs,
}

#[derive(Subcommand)]
enum JournalCommand {
    /// Delete records older than a time (retention).
    Prune {
        #[arg(long, value_name = "RFC3339")]
        before: String,
        #[command(flatten)]
        store: StoreArgs,
    },
}

#[derive(Args)]
struct EvalArgs {
    /// JSON lines, each with a `text` (and optionally `context`).
    #[arg(
        long,
        value_name = "FILE",
        required_unless_present = "images",
        conflicts_with = "images"
    )]
    texts: Option<PathBuf>,
    /// A directory of images (every file in it).
    #[arg(long, value_name = "DIR")]
    images: Option<PathBuf>,
    #[arg(long, default_value = "default")]
    workflow: String,
    /// Workflow file (default: the shipped workflows).
    #[arg(long, value_name = "FILE")]
    workflows: Option<PathBuf>,
    /// Models directory (default: server.models_dir of --config, else `models`).
    #[arg(long, value_name = "DIR")]
    models: Option<PathBuf>,
    /// Give each line's `context` to the models (as on paid plans).
    #[arg(long)]
    context: bool,
    /// Read at most this many texts (0: all).
    #[arg(long, default_value_t = 0)]
    limit: usize,
    /// Write each item's decision as JSON lines to FILE: the item (a text's line index, an
    /// image's file name), action, reasons, scores, a text's language and its confidence, an
    /// image's face count and text when measured.
    #[arg(long, value_name = "FILE")]
    decisions: Option<PathBuf>,
    /// Configuration whose own models (`[[models.custom]]`) the workflows may name.
    #[arg(long, value_name = "FILE")]
    config: Option<PathBuf>,
}

#[derive(Subcommand)]
enum DbCommand {
    /// Create or upgrade the schema (idempotent); also writes the configuration's plans and,
    /// on a fresh database, the shipped workflows.
    Migrate {
        /// Configuration file with a `[cluster]` section.
        #[arg(long, value_name = "FILE")]
        config: PathBuf,
    },
}

#[derive(Subcommand)]
enum FleetCommand {
    /// The live nodes, their applied control-plane revision and the engines' health.
    Status {
        /// Configuration file with a `[cluster]` section.
        #[arg(long, value_name = "FILE")]
        config: PathBuf,
        /// JSON instead of a table.
        #[arg(long)]
        json: bool,
    },
    /// Drop a node that is gone for good (not live): it leaves `fleet status`, and the quota
    /// units it held go back to the ledger.
    Forget {
        /// The node's `cluster.node_id`.
        node: String,
        /// Configuration file with a `[cluster]` section.
        #[arg(long, value_name = "FILE")]
        config: PathBuf,
    },
}

#[derive(Subcommand)]
enum OrgCommand {
    /// Create an organization on a plan.
    Create {
        name: String,
        #[arg(long)]
        plan: String,
        #[command(flatten)]
        store: StoreArgs,
    },
    /// Suspend an organization: its keys get 403 organization_suspended.
    Suspend {
        name: String,
        #[command(flatten)]
        store: StoreArgs,
    },
    /// Lift a suspension.
    Resume {
        name: String,
        #[command(flatten)]
        store: StoreArgs,
    },
    /// Move an organization to another plan.
    SetPlan {
        name: String,
        plan: String,
        #[command(flatten)]
        store: StoreArgs,
    },
    /// Override limits of an organization's plan (e.g. a larger quota for one customer);
    /// `--reset` goes back to the plan's values.
    SetLimits {
        name: String,
        #[arg(long)]
        text_chars_max: Option<u32>,
        #[arg(long)]
        image_pixels_max: Option<u64>,
        #[arg(long)]
        rate_per_s: Option<u32>,
        #[arg(long)]
        rate_burst: Option<u32>,
        #[arg(long)]
        concurrent_max: Option<u32>,
        #[arg(long)]
        quota_per_month: Option<u64>,
        #[arg(long)]
        keys_max: Option<u32>,
        /// Drop every override first.
        #[arg(long)]
        reset: bool,
        #[command(flatten)]
        store: StoreArgs,
    },
    /// List organizations.
    List {
        #[command(flatten)]
        store: StoreArgs,
    },
}

#[derive(Subcommand)]
enum KeyCommand {
    /// Create a key; prints it alone on the first line (it is shown only once).
    Create {
        #[arg(long)]
        org: String,
        /// image, text, lists (the organization's hash lists), comma-separated.
        #[arg(long, default_value = "image,text")]
        scopes: String,
        /// all, or a comma-separated list of workflow names.
        #[arg(long, default_value = "all")]
        workflows: String,
        /// Expiry, RFC 3339 (e.g. 2027-01-31T00:00:00Z).
        #[arg(long, value_name = "RFC3339")]
        expires: Option<String>,
        #[command(flatten)]
        store: StoreArgs,
    },
    /// Replace a key; the old one works for the grace delay (0 to 24h). Prints the new key
    /// alone on the first line.
    Rotate {
        key_id: String,
        /// e.g. 0s, 30m, 24h.
        #[arg(long, value_name = "DURATION")]
        grace: String,
        #[command(flatten)]
        store: StoreArgs,
    },
    /// Revoke a key at once.
    Revoke {
        key_id: String,
        #[command(flatten)]
        store: StoreArgs,
    },
    /// List keys (ids, never secrets).
    List {
        #[arg(long)]
        org: Option<String>,
        #[command(flatten)]
        store: StoreArgs,
    },
}

#[derive(Subcommand)]
enum WorkflowCommand {
    /// Import workflows from a TOML file (default: the file shipped with this version).
    Import {
        file: Option<PathBuf>,
        #[command(flatten)]
        store: StoreArgs,
    },
    /// List workflows and their versions.
    List {
        #[command(flatten)]
        store: StoreArgs,
    },
}

#[derive(Subcommand)]
enum ListCommand {
    /// Create a list.
    Create {
        #[arg(long)]
        org: String,
        name: String,
        /// block (a match is the category known_image or listed_term) or allow (a match
        /// exempts the image; an allowed term is not read by the word list).
        #[arg(long)]
        kind: String,
        /// image (hashes) or text (words and phrases).
        #[arg(long, default_value = "image")]
        content: String,
        /// PDQ matches within this many bits of 256.
        #[arg(long, default_value_t = crate::lists::PDQ_DISTANCE_DEFAULT)]
        distance: u32,
        #[command(flatten)]
        store: StoreArgs,
    },
    /// Delete a list and its entries.
    Delete {
        #[arg(long)]
        org: String,
        name: String,
        #[command(flatten)]
        store: StoreArgs,
    },
    /// Show an organization's lists.
    Show {
        #[arg(long)]
        org: String,
        #[command(flatten)]
        store: StoreArgs,
    },
    /// Add an image's hashes (PDQ, MD5, SHA-256), one hash, or a term.
    Add {
        #[arg(long)]
        org: String,
        name: String,
        /// An image file to hash here, as the server would.
        #[arg(long, conflicts_with = "hash")]
        image: Option<PathBuf>,
        /// A hash in hex, with --hash-type.
        #[arg(long, requires = "hash_type")]
        hash: Option<String>,
        /// A word or phrase, for a text list.
        #[arg(long, conflicts_with_all = ["image", "hash"])]
        term: Option<String>,
        /// pdq, md5 or sha256.
        #[arg(long)]
        hash_type: Option<String>,
        #[arg(long)]
        label: Option<String>,
        /// Your own id for what the entry came from.
        #[arg(long)]
        id: Option<String>,
        #[command(flatten)]
        store: StoreArgs,
    },
    /// Remove an entry by its entry id.
    Remove {
        #[arg(long)]
        org: String,
        name: String,
        entry_id: u64,
        #[command(flatten)]
        store: StoreArgs,
    },
    /// Print entries, in the order they were added.
    Entries {
        #[arg(long)]
        org: String,
        name: String,
        /// Only entries with a higher entry id.
        #[arg(long, default_value_t = 0)]
        after: u64,
        #[arg(long, default_value_t = 100)]
        limit: usize,
        #[command(flatten)]
        store: StoreArgs,
    },
    /// Add the entries of a file: CSV for an image list (the formats of
    /// `docs/interface.md#lists`), one term per line for a text list.
    Import {
        #[arg(long)]
        org: String,
        name: String,
        file: PathBuf,
        #[command(flatten)]
        store: StoreArgs,
    },
    /// Print the entries as CSV (signal_type,signal,label,id).
    Export {
        #[arg(long)]
        org: String,
        name: String,
        #[command(flatten)]
        store: StoreArgs,
    },
}

#[derive(Subcommand)]
enum PlanCommand {
    /// List the plans in the store.
    List {
        #[command(flatten)]
        store: StoreArgs,
    },
}

/// Entry point of the binary.
pub fn main() -> anyhow::Result<()> {
    // First, while the process has one thread (see the function).
    crate::inference::disable_runtime_telemetry();
    let cli = Cli::parse();
    if !matches!(cli.command, Command::Serve(_)) {
        crate::logging::install_for_commands();
    }
    match cli.command {
        Command::Serve(args) => serve(args),
        Command::Org { command } => org(command),
        Command::Key { command } => key(command),
        Command::Workflow { command } => workflow_command(command),
        Command::List { command } => list_command(command),
        Command::Plan {
            command: PlanCommand::List { store },
        } => {
            for (name, limits) in admin(&store, false, |store| store.plans())? {
                say!("{name}\t{limits:?}");
            }
            Ok(())
        }
        Command::Journal(args) => journal(args),
        Command::Eval(args) => eval(args),
        Command::Feedback { command } => judgement::feedback(command),
        Command::Calibrate(args) => judgement::calibrate(args),
        Command::Replay(args) => judgement::replay(args),
        Command::Check(args) => crate::client::run(&crate::client::CheckRequest {
            image: args.image,
            text: args.text,
            url: args.url,
            workflow: args.workflow,
            reference: args.reference,
            server: args.server,
            key: args.key,
            json: args.json,
        }),
        Command::Db {
            command: DbCommand::Migrate { config },
        } => db_migrate(&config),
        Command::Fleet {
            command: FleetCommand::Status { config, json },
        } => fleet_status(&config, json),
        Command::Fleet {
            command: FleetCommand::Forget { node, config },
        } => {
            let cluster = cluster_of(&config)?;
            let forgotten = crate::fleet::runtime()?
                .block_on(crate::fleet::control::forget(&cluster, &node))?;
            say!(
                "forgot node {}: {} quota units it held went back to the ledger",
                forgotten.node_id,
                forgotten.units_returned
            );
            Ok(())
        }
        Command::Config { print_defaults } => {
            if !print_defaults {
                bail!("nothing to do: try `modgate config --print-defaults`");
            }
            say!("{}", crate::config::DEFAULT_CONFIG.trim_end());
            Ok(())
        }
    }
}

fn serve(args: ServeArgs) -> anyhow::Result<()> {
    let log_format = match args.log_format.as_deref() {
        None => None,
        Some("text") => Some(crate::config::LogFormat::Text),
        Some("json") => Some(crate::config::LogFormat::Json),
        Some(other) => bail!("--log-format {other}: expected text or json"),
    };
    let overrides = crate::config::Overrides {
        config_path: args.config,
        data_dir: args.data,
        listen: args.listen,
        cores: args.cores,
        models_dir: args.models,
        tls: args.tls_cert.zip(args.tls_key),
        metrics_listen: args.metrics_listen,
        log_format,
    };
    let config = overrides.load()?;
    let log = crate::logging::LogControl::install(
        config.log.format,
        args.log_level.as_deref(),
        &config.log.level,
    )?;
    crate::server::run(config, overrides, log)
}

/// The `[cluster]` section of the configuration at `path`.
fn cluster_of(path: &Path) -> anyhow::Result<crate::config::ClusterConfig> {
    Config::load(Some(path))?
        .cluster
        .ok_or_else(|| anyhow!("{} has no [cluster] section", path.display()))
}

fn db_migrate(path: &Path) -> anyhow::Result<()> {
    let config = Config::load(Some(path))?;
    let cluster = cluster_of(path)?;
    let runtime = crate::fleet::runtime()?;
    let applied = runtime.block_on(async {
        let mut client = crate::fleet::connect(&cluster, "migrate").await?;
        crate::fleet::schema::migrate(&mut client).await
    })?;
    match applied.as_slice() {
        [] => say!(
            "schema version {} is up to date",
            crate::fleet::schema::current_version()
        ),
        versions => say!("applied schema versions {versions:?}"),
    }
    // As a single node does at start: the shipped workflows the fleet does not have yet (a
    // newer version's, on an existing fleet), none overwritten.
    let added = crate::fleet::control::run_admin(&cluster, false, |store| {
        store.put_plans(&config.plans)?;
        store.add_missing_shipped_workflows(now_ms())
    })?;
    say!(
        "plans written: {}",
        config.plans.keys().cloned().collect::<Vec<_>>().join(", ")
    );
    if !added.is_empty() {
        say!("shipped workflows added: {}", added.join(", "));
    }
    Ok(())
}

fn fleet_status(path: &Path, json: bool) -> anyhow::Result<()> {
    let cluster = cluster_of(path)?;
    let status = crate::fleet::runtime()?.block_on(crate::fleet::control::status(&cluster))?;
    if json {
        say!(
            "{}",
            simd_json::to_string_pretty(&status).map_err(|e| anyhow!("{e}"))?
        );
        return Ok(());
    }
    say!(
        "control plane: revision {} (schema {}), list log: revision {}, postgres {}, redis {}",
        status.revision,
        status.schema_version,
        status.list_revision,
        status.postgres,
        status.redis
    );
    say!("node\tlive\tapplied\tbehind\tlists_behind\theartbeat_ms\tjournal_unshipped\tversion");
    for node in &status.nodes {
        say!(
            "{}\t{}\t{}\t{}\t{}\t{}\t{}\t{}",
            node.node_id,
            if node.live { "yes" } else { "no" },
            node.applied_revision,
            node.behind,
            node.lists_behind,
            node.heartbeat_age_ms,
            node.journal_unshipped,
            node.version
        );
    }
    Ok(())
}

fn eval(args: EvalArgs) -> anyhow::Result<()> {
    let config = match &args.config {
        Some(path) => Config::load(Some(path))?,
        None => Config::default(),
    };
    crate::checks::custom::register(&config.models.custom).map_err(|error| anyhow!(error))?;
    let text = match &args.workflows {
        Some(path) => {
            std::fs::read_to_string(path).with_context(|| format!("reading {}", path.display()))?
        }
        None => workflow::SHIPPED_WORKFLOWS.to_owned(),
    };
    let mut workflows = workflow::parse_workflows(&text).map_err(|error| anyhow!(error))?;
    let definition = workflows
        .remove(&args.workflow)
        .ok_or_else(|| anyhow!("no workflow '{}'", args.workflow))?;
    let models_dir = match (&args.models, &args.config) {
        (Some(dir), _) => dir.clone(),
        (None, Some(_)) => config.server.models_dir.clone(),
        (None, None) => PathBuf::from("models"),
    };
    let library = models_dir.join(&config.models.onnxruntime_library);
    let input = match (&args.texts, &args.images) {
        (Some(texts), _) => crate::eval::Input::Texts(texts),
        (None, Some(images)) => crate::eval::Input::Images(images),
        (None, None) => bail!("give --texts FILE or --images DIR"),
    };
    crate::eval::run(crate::eval::EvalOptions {
        input,
        workflow_name: &args.workflow,
        workflow: definition,
        models_dir: &models_dir,
        library: &library,
        with_context: args.context,
        limit: args.limit,
        decisions: args.decisions.as_deref(),
    })
}

/// Runs an admin operation: on the local store, or, with a `[cluster]` configuration, on the
/// fleet's control plane (one PostgreSQL transaction, then a wait for the live nodes to apply
/// it; `strict`: nodes still behind after the wait make the command fail).
fn admin<T>(
    args: &StoreArgs,
    strict: bool,
    op: impl FnOnce(&Store) -> anyhow::Result<T>,
) -> anyhow::Result<T> {
    let (dir, config) = resolve(args)?;
    match &config.cluster {
        None => op(&open_store(&dir, &config)?),
        Some(cluster) => crate::fleet::control::run_admin(cluster, strict, op),
    }
}

/// The local store under `dir`, made ready as `serve` makes a fresh one
/// ([`Store::initialise`]: the plans and shipped workflows it does not have), so that an
/// admin command run before the first `serve` finds them.
fn open_store(dir: &Path, config: &Config) -> anyhow::Result<Store> {
    let store = Store::open(dir)?;
    store.initialise(&config.plans, config.clock().now_ms())?;
    Ok(store)
}

fn journal(args: JournalArgs) -> anyhow::Result<()> {
    use crate::journal::query;
    if let Some(JournalCommand::Prune { before, store }) = args.command {
        let (dir, config) = resolve(&store)?;
        let before_ms = parse_rfc3339_ms(&before)?;
        let deleted = match &config.cluster {
            Some(cluster) => crate::fleet::runtime()?
                .block_on(crate::fleet::shipper::prune(cluster, before_ms))?,
            None => {
                // Staged records are moved every sync interval: a few of them is the longest
                // wait for the ones the cutoff covers.
                let wait = std::time::Duration::from_millis(config.journal.sync_interval_ms)
                    .saturating_mul(3)
                    .max(std::time::Duration::from_secs(2));
                query::prune(&dir, config.journal.map_bytes, before_ms, wait)? as u64
            }
        };
        say!("deleted {deleted} records older than {before}");
        return Ok(());
    }
    let (dir, config) = resolve(&args.store)?;
    let filter = query::Filter {
        key_id: args.key,
        reference: args.reference,
        org: args.org,
        since_ms: args.since.as_deref().map(parse_rfc3339_ms).transpose()?,
        until_ms: args.until.as_deref().map(parse_rfc3339_ms).transpose()?,
    };
    if !args.json {
        say!("time\trequest_id\tkey\torg\troute\tworkflow\tstatus\tresult\tref");
    }
    let mut print = |record: &crate::journal::JournalRecord<'_>| -> anyhow::Result<()> {
        if args.json {
            let line = simd_json::to_string(record).map_err(|e| anyhow!("{e}"))?;
            say!("{line}");
        } else {
            let workflow = match (&record.workflow, record.workflow_version) {
                (Some(name), Some(version)) => format!("{name}@{version}"),
                _ => "-".to_owned(),
            };
            let result = record
                .action
                .as_deref()
                .or(record.error_type.as_deref())
                .unwrap_or("-");
            say!(
                "{}\t{}\t{}\t{}\t{}\t{workflow}\t{}\t{result}\t{}",
                rfc3339(record.unix_ms),
                record.request_id,
                record.key_id.as_deref().unwrap_or("-"),
                record.org.as_deref().unwrap_or("-"),
                record.route,
                record.status,
                record.reference.as_deref().unwrap_or("-"),
            );
        }
        Ok(())
    };
    // With a [cluster] section: the fleet's table, every node's records.
    let count = match &config.cluster {
        Some(cluster) => crate::fleet::runtime()?
            .block_on(crate::fleet::shipper::query(cluster, &filter, &mut print))?,
        None => query::for_each(&dir, config.journal.map_bytes, &filter, &mut print)? as u64,
    };
    if !args.json {
        eprintln!("{count} records");
    }
    Ok(())
}

fn org(command: OrgCommand) -> anyhow::Result<()> {
    match command {
        OrgCommand::Create { name, plan, store } => {
            let record = admin(&store, false, |s| s.create_org(&name, &plan, now_ms()))?;
            say!(
                "created organization {} on plan {}",
                record.name,
                record.plan
            );
        }
        OrgCommand::Suspend { name, store } => {
            admin(&store, true, |s| set_suspended(s, &name, true))?;
            say!("suspended {name}");
        }
        OrgCommand::Resume { name, store } => {
            admin(&store, false, |s| set_suspended(s, &name, false))?;
            say!("resumed {name}");
        }
        OrgCommand::SetPlan { name, plan, store } => {
            admin(&store, false, |s| {
                s.update_org(&name, |record| {
                    record.plan = plan.clone();
                    Ok(())
                })
            })?;
            say!("{name} is now on plan {plan}");
        }
        OrgCommand::SetLimits {
            name,
            text_chars_max,
            image_pixels_max,
            rate_per_s,
            rate_burst,
            concurrent_max,
            quota_per_month,
            keys_max,
            reset,
            store,
        } => {
            if [rate_per_s, rate_burst, concurrent_max].contains(&Some(0)) {
                bail!("rate_per_s, rate_burst and concurrent_max must be above 0");
            }
            if text_chars_max.is_some_and(|n| n == 0 || n > crate::bounds::TEXT_CHARS_MAX) {
                bail!(
                    "text_chars_max must be in 1..={}",
                    crate::bounds::TEXT_CHARS_MAX
                );
            }
            if image_pixels_max.is_some_and(|n| n == 0 || n > crate::bounds::IMAGE_PIXELS_MAX) {
                bail!(
                    "image_pixels_max must be in 1..={}",
                    crate::bounds::IMAGE_PIXELS_MAX
                );
            }
            let record = admin(&store, false, |s| {
                s.update_org(&name, |record| {
                    let overrides = &mut record.overrides;
                    if reset {
                        *overrides = Default::default();
                    }
                    overrides.text_chars_max = text_chars_max.or(overrides.text_chars_max);
                    overrides.image_pixels_max = image_pixels_max.or(overrides.image_pixels_max);
                    overrides.rate_per_s = rate_per_s.or(overrides.rate_per_s);
                    overrides.rate_burst = rate_burst.or(overrides.rate_burst);
                    overrides.concurrent_max = concurrent_max.or(overrides.concurrent_max);
                    overrides.quota_per_month = quota_per_month.or(overrides.quota_per_month);
                    overrides.keys_max = keys_max.or(overrides.keys_max);
                    Ok(())
                })
            })?;
            say!("{name}: overrides {:?}", record.overrides);
        }
        OrgCommand::List { store } => {
            for record in admin(&store, false, |s| s.orgs())? {
                let state = if record.suspended {
                    "suspended"
                } else {
                    "active"
                };
                say!("{}\tplan={}\t{state}", record.name, record.plan);
            }
        }
    }
    Ok(())
}

fn set_suspended(store: &Store, name: &str, suspended: bool) -> anyhow::Result<()> {
    store.update_org(name, |record| {
        record.suspended = suspended;
        Ok(())
    })?;
    Ok(())
}

fn key(command: KeyCommand) -> anyhow::Result<()> {
    match command {
        KeyCommand::Create {
            org,
            scopes,
            workflows,
            expires,
            store,
        } => {
            let scopes = Scopes::parse(&scopes).map_err(|error| anyhow!(error))?;
            let workflows = parse_workflow_access(&workflows)?;
            let expires_ms = expires.as_deref().map(parse_rfc3339_ms).transpose()?;
            let issued = admin(&store, false, |s| {
                s.create_key(&org, scopes, workflows, expires_ms, now_ms())
            })?;
            say!("{}", issued.key);
            print_key(&issued.record);
        }
        KeyCommand::Rotate {
            key_id,
            grace,
            store,
        } => {
            let grace = humantime::parse_duration(&grace)
                .with_context(|| format!("invalid --grace '{grace}' (e.g. 0s, 30m, 24h)"))?;
            let issued = admin(&store, false, |s| {
                s.rotate_key(&key_id, grace.as_millis() as i64, now_ms())
            })?;
            say!("{}", issued.key);
            print_key(&issued.record);
            say!(
                "{key_id} works until the end of its grace delay ({})",
                humantime::format_duration(grace)
            );
        }
        KeyCommand::Revoke { key_id, store } => {
            admin(&store, true, |s| s.revoke_key(&key_id, now_ms()))?;
            say!("revoked {key_id}");
        }
        KeyCommand::List { org, store } => {
            let now = now_ms();
            say!("id\torg\tstate\tscopes\tworkflows\tcreated\texpires");
            for record in admin(&store, false, |s| s.keys(org.as_deref()))? {
                say!(
                    "{}\t{}\t{}\t{}\t{}\t{}\t{}",
                    record.id,
                    record.org,
                    record.state(now).name(),
                    record.scopes,
                    record.workflows,
                    rfc3339(record.created_ms),
                    record.expires_ms.map_or("never".to_owned(), rfc3339),
                );
            }
        }
    }
    Ok(())
}

fn print_key(record: &KeyRecord) {
    say!(
        "id={} org={} scopes={} workflows={} expires={}",
        record.id,
        record.org,
        record.scopes,
        record.workflows,
        record.expires_ms.map_or("never".to_owned(), rfc3339)
    );
}

fn parse_workflow_access(text: &str) -> anyhow::Result<WorkflowAccess> {
    if text == "all" {
        return Ok(WorkflowAccess::All);
    }
    let names: Vec<String> = text
        .split(',')
        .map(str::trim)
        .filter(|name| !name.is_empty())
        .map(str::to_owned)
        .collect();
    for name in &names {
        workflow::validate_name(name).map_err(|error| anyhow!(error))?;
    }
    Ok(WorkflowAccess::Only(names))
}

fn workflow_command(command: WorkflowCommand) -> anyhow::Result<()> {
    match command {
        WorkflowCommand::Import { file, store } => {
            let text = match &file {
                Some(path) => std::fs::read_to_string(path)
                    .with_context(|| format!("reading {}", path.display()))?,
                None => workflow::SHIPPED_WORKFLOWS.to_owned(),
            };
            let origin = file.as_deref().unwrap_or(Path::new("<shipped workflows>"));
            // The configuration first: its models are checks the file may name.
            resolve(&store)?;
            let defs = workflow::parse_workflows(&text)
                .map_err(|error| anyhow!("{}: {error}", origin.display()))?;
            for imported in admin(&store, false, |s| s.import_workflows(&defs, now_ms()))? {
                let note = if imported.changed {
                    "imported"
                } else {
                    "unchanged"
                };
                say!("{}\tversion {}\t{note}", imported.name, imported.version);
            }
        }
        WorkflowCommand::List { store } => {
            for record in admin(&store, false, |s| s.workflows())? {
                let paid = if record.definition.paid_only {
                    "\tpaid plans only"
                } else {
                    ""
                };
                say!(
                    "{}\tversion {}{paid}\t{}",
                    record.name,
                    record.version,
                    record.definition.description
                );
            }
        }
    }
    Ok(())
}

/// Where the list commands act: the local store, or a fleet's list log in PostgreSQL, with a
/// copy of the fleet's lists kept in the data directory's store (a node's own, when the CLI
/// runs beside one), brought up to the log's end by each command.
struct ListsAt {
    store: Store,
    cluster: Option<crate::config::ClusterConfig>,
}

impl ListsAt {
    fn open(args: &StoreArgs) -> anyhow::Result<ListsAt> {
        let (dir, config) = resolve(args)?;
        let store = match &config.cluster {
            // A fleet node's store is a replica, written by its follower and the replay below.
            Some(_) => Store::open(&dir)?,
            None => open_store(&dir, &config)?,
        };
        if let Some(cluster) = &config.cluster {
            crate::fleet::lists::replay_for_cli(cluster, &store)?;
        }
        Ok(ListsAt {
            store,
            cluster: config.cluster,
        })
    }

    /// Carries out `change`; in a fleet, then waits (as admin commands do) until every live
    /// node has replayed it, and names those that have not.
    fn write(
        &self,
        org: &str,
        change: crate::store::lists::ListWrite,
    ) -> anyhow::Result<crate::store::lists::ListWritten> {
        let Some(cluster) = &self.cluster else {
            return Ok(self.store.write_list(org, &change)?);
        };
        crate::fleet::runtime()?.block_on(async {
            let (written, revision) =
                crate::fleet::lists::write(cluster, &self.store, org, &change).await?;
            if let Some(revision) = revision {
                let wait = crate::fleet::control::ADMIN_WAIT;
                let lists = crate::fleet::control::Revision::Lists(revision);
                let behind = crate::fleet::control::wait_for_nodes(cluster, lists, wait).await?;
                if !behind.is_empty() {
                    eprintln!(
                        "modgate: list revision {revision} is committed, but these live nodes had not replayed it after {} s: {}",
                        wait.as_secs(),
                        behind.join(", ")
                    );
                }
            }
            Ok(written)
        })
    }
}

/// The entries of an image file: its PDQ hash (when its quality allows), MD5 and SHA-256.
fn image_file_entries(path: &Path) -> anyhow::Result<Vec<crate::lists::EntryHash>> {
    use crate::image::hashes;
    use crate::lists::EntryHash;
    let bytes = std::fs::read(path).with_context(|| format!("reading {}", path.display()))?;
    let probed = crate::image::probe::probe(&bytes)
        .map_err(|error| anyhow!("{}: {error}", path.display()))?;
    let image = crate::image::decode::decode(
        &bytes,
        &probed,
        crate::checks::registry::image_min_side_px(),
    )
    .map_err(|error| anyhow!("{}: {error}", path.display()))?;
    let found = hashes::hash(&bytes, None, &image);
    let entries = crate::lists::image_entry_hashes(&found);
    if !matches!(entries.first(), Some(EntryHash::Pdq(_))) {
        eprintln!(
            "{}: too little detail for a PDQ hash; adding its exact hashes only",
            path.display()
        );
    }
    Ok(entries)
}

/// Entries split into writes a fleet's list log takes: at most
/// [`crate::fleet::lists::LOG_ENTRIES_MAX`] entries and, by a generous estimate of their
/// encoded size, half of [`crate::fleet::lists::LOG_WRITE_BYTES_MAX`].
fn fleet_write_parts(entries: Vec<crate::lists::NewEntry>) -> Vec<Vec<crate::lists::NewEntry>> {
    use crate::fleet::lists::{LOG_ENTRIES_MAX, LOG_WRITE_BYTES_MAX};
    let size = |entry: &crate::lists::NewEntry| {
        let text = |field: &Option<String>| field.as_ref().map_or(0, String::len);
        let term = match &entry.hash {
            crate::lists::EntryHash::Term(term) => term.len(),
            _ => 0,
        };
        64 + term + text(&entry.label) + text(&entry.caller_id)
    };
    let mut parts = vec![Vec::new()];
    let mut bytes = 0;
    for entry in entries {
        let entry_bytes = size(&entry);
        let full = parts.last().is_some_and(|part| {
            part.len() >= LOG_ENTRIES_MAX || bytes + entry_bytes > LOG_WRITE_BYTES_MAX / 2
        });
        if full {
            parts.push(Vec::new());
            bytes = 0;
        }
        bytes += entry_bytes;
        if let Some(part) = parts.last_mut() {
            part.push(entry);
        }
    }
    parts.retain(|part| !part.is_empty());
    parts
}

/// What a list command did, as it says it.
fn say_written(written: &crate::store::lists::ListWritten) {
    use crate::store::lists::ListWritten;
    match written {
        ListWritten::Created(record) => say!(
            "created list {} ({} {}, PDQ distance {})",
            record.name,
            record.content.as_str(),
            record.kind.as_str(),
            record.distance_max
        ),
        ListWritten::Deleted(record) => say!(
            "deleted list {} and its {} entries",
            record.name,
            record.entries
        ),
        ListWritten::Added(added) => {
            for entry in &added.added {
                say!("{}	{}	{}", entry.id, entry.hash.kind(), entry.hash.value());
            }
            for id in &added.existing {
                eprintln!("already in the list as entry {id}");
            }
        }
        ListWritten::Removed(entry) => say!(
            "removed entry {} ({} {})",
            entry.id,
            entry.hash.kind(),
            entry.hash.value()
        ),
    }
}

fn list_command(command: ListCommand) -> anyhow::Result<()> {
    use crate::lists::{EntryHash, ListContent, ListKind, NewEntry};
    use crate::store::lists::{ListWrite, ListWritten};
    match command {
        ListCommand::Create {
            org,
            name,
            kind,
            content,
            distance,
            store,
        } => {
            let kind = ListKind::parse(&kind)
                .ok_or_else(|| anyhow!("--kind {kind}: expected block or allow"))?;
            let content = ListContent::parse(&content)
                .ok_or_else(|| anyhow!("--content {content}: expected image or text"))?;
            let change = ListWrite::create(&name, kind, content, distance, now_ms())?;
            say_written(&ListsAt::open(&store)?.write(&org, change)?);
        }
        ListCommand::Delete { org, name, store } => {
            let change = ListWrite::Delete { name };
            say_written(&ListsAt::open(&store)?.write(&org, change)?);
        }
        ListCommand::Show { org, store } => {
            say!("name	kind	distance	entries	created");
            for record in ListsAt::open(&store)?.store.lists_of(&org)? {
                say!(
                    "{}	{}	{}	{}	{}",
                    record.name,
                    record.kind.as_str(),
                    record.distance_max,
                    record.entries,
                    rfc3339(record.created_ms)
                );
            }
        }
        ListCommand::Add {
            org,
            name,
            image,
            hash,
            hash_type,
            term,
            label,
            id,
            store,
        } => {
            let hashes = match (image, hash, hash_type, term) {
                (Some(path), None, _, None) => image_file_entries(&path)?,
                (None, Some(hash), Some(kind), None) => {
                    vec![EntryHash::parse(&kind, &hash).map_err(|error| anyhow!(error))?]
                }
                (None, None, _, Some(term)) => {
                    vec![EntryHash::term(&term).map_err(|error| anyhow!(error))?]
                }
                _ => bail!("give --image FILE, --hash HEX with --hash-type, or --term TERM"),
            };
            let new: Vec<NewEntry> = hashes
                .into_iter()
                .map(|hash| NewEntry {
                    hash,
                    label: label.clone(),
                    caller_id: id.clone(),
                })
                .collect();
            let change = ListWrite::Add {
                name,
                entries: new,
                added_ms: now_ms(),
            };
            say_written(&ListsAt::open(&store)?.write(&org, change)?);
        }
        ListCommand::Remove {
            org,
            name,
            entry_id,
            store,
        } => {
            let change = ListWrite::Remove { name, id: entry_id };
            say_written(&ListsAt::open(&store)?.write(&org, change)?);
        }
        ListCommand::Entries {
            org,
            name,
            after,
            limit,
            store,
        } => {
            let (_, entries) = ListsAt::open(&store)?
                .store
                .entries(&org, &name, after, limit)?;
            say!("entry_id	hash_type	hash	label	id	added");
            for entry in entries {
                say!(
                    "{}	{}	{}	{}	{}	{}",
                    entry.id,
                    entry.hash.kind(),
                    entry.hash.value(),
                    entry.label.as_deref().unwrap_or(""),
                    entry.caller_id.as_deref().unwrap_or(""),
                    rfc3339(entry.added_ms)
                );
            }
        }
        ListCommand::Import {
            org,
            name,
            file,
            store,
        } => {
            let text = std::fs::read_to_string(&file)
                .with_context(|| format!("reading {}", file.display()))?;
            let lists = ListsAt::open(&store)?;
            let entries_max = crate::lists::LIST_ENTRIES_MAX as usize;
            let parsed = match lists.store.list(&org, &name)?.content {
                ListContent::Image => crate::lists::csv::parse(&text, entries_max),
                ListContent::Text => crate::lists::csv::parse_terms(&text, entries_max),
            }
            .map_err(|error| anyhow!("{}: {error}", file.display()))?;
            for skipped in &parsed.skipped {
                eprintln!(
                    "{}:{}: skipped: {}",
                    file.display(),
                    skipped.line,
                    skipped.reason
                );
            }
            // One write on a single node (all or none); in a fleet, writes that fit the log's
            // bounds, each all or none.
            let parts = match lists.cluster {
                Some(_) => fleet_write_parts(parsed.entries),
                None => vec![parsed.entries],
            };
            let (mut added, mut existing) = (0, 0);
            for entries in parts {
                let change = ListWrite::Add {
                    name: name.clone(),
                    entries,
                    added_ms: now_ms(),
                };
                let ListWritten::Added(done) = lists.write(&org, change)? else {
                    bail!("the store answered an import with something else than entries added");
                };
                added += done.added.len();
                existing += done.existing.len();
            }
            say!(
                "added {added} entries; {existing} were already in the list; {} rows skipped",
                parsed.skipped_count
            );
        }
        ListCommand::Export { org, name, store } => {
            let (list, entries) = ListsAt::open(&store)?.store.list_since(&org, &name, 0)?;
            let text = crate::lists::csv::export(list.content, &entries);
            use std::io::Write as _;
            if std::io::stdout().write_all(text.as_bytes()).is_err() {
                std::process::exit(0);
            }
        }
    }
    Ok(())
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn times() {
        assert_eq!(parse_rfc3339_ms("1970-01-01T00:00:01Z").unwrap(), 1000);
        assert_eq!(parse_rfc3339_ms("1970-01-01T01:00:01+01:00").unwrap(), 1000);
        assert!(parse_rfc3339_ms("tomorrow").is_err());
        assert_eq!(rfc3339(1000), "1970-01-01T00:00:01Z");
    }

    #[test]
    fn fleet_imports_are_split_by_count_and_size() {
        use crate::lists::{EntryHash, NewEntry};
        let entry = |label: usize| NewEntry {
            hash: EntryHash::Md5([7; 16]),
            label: Some("l".repeat(label)),
            caller_id: None,
        };
        let sizes = |parts: &[Vec<NewEntry>]| parts.iter().map(Vec::len).collect::<Vec<_>>();
        let small = fleet_write_parts((0..450_000).map(|_| entry(0)).collect());
        assert_eq!(sizes(&small), [200_000, 200_000, 50_000]);
        // 256-byte labels: 320 bytes an entry by the estimate, 16 MiB a part.
        let large = fleet_write_parts((0..120_000).map(|_| entry(256)).collect());
        assert_eq!(sizes(&large), [52_428, 52_428, 15_144]);
        assert!(fleet_write_parts(Vec::new()).is_empty());
    }

    #[test]
    fn workflow_lists() {
        assert_eq!(parse_workflow_access("all").unwrap(), WorkflowAccess::All);
        assert_eq!(
            parse_workflow_access("a, b").unwrap(),
            WorkflowAccess::Only(vec!["a".into(), "b".into()])
        );
        assert!(parse_workflow_access("A!").is_err());
    }
}
