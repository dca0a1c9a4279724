//! `modgate-load`: see `loadtest/README.md` and the library's documentation.

use std::path::PathBuf;
use std::process::ExitCode;
use std::time::Duration;

use anyhow::{bail, Context};
use clap::Parser;

use modgate_load::find_max::{find_max, Search};
use modgate_load::generator::{run, Arrivals, Load, RunConfig};
use modgate_load::report::{ms, Report};
use modgate_load::scenario::Scenario;

/// Drive a running modgate with a scenario's traffic and report latency and throughput.
#[derive(Parser)]
#[command(name = "modgate-load", version)]
struct Args {
    /// A scenario file, or the name of a shipped one (loadtest/scenarios/NAME.toml).
    #[arg(long, default_value = "default-text")]
    scenario: String,
    /// The server's root address (plain HTTP).
    #[arg(long, env = "MODGATE_SERVER", default_value = "http://127.0.0.1:8080")]
    server: String,
    /// An API key whose plan allows the load (see loadtest/README.md).
    #[arg(long, env = "MODGATE_KEY", hide_env_values = true)]
    key: String,
    /// Open loop: requests per second, whatever the server does.
    #[arg(long, conflicts_with = "connections")]
    rate: Option<f64>,
    /// Open-loop arrivals: uniform (evenly spaced) or poisson.
    #[arg(long, default_value = "uniform")]
    arrivals: String,
    /// Closed loop: connections sending back to back.
    #[arg(long)]
    connections: Option<usize>,
    /// Measured time, e.g. 30s, 2m.
    #[arg(long, default_value = "30s")]
    duration: String,
    /// Time sent but not measured, before the measured time.
    #[arg(long, default_value = "3s")]
    warmup: String,
    /// Open loop: connections opened at most.
    #[arg(long, default_value_t = 256)]
    connections_max: usize,
    /// Pin the generator to this CPU (keep it off the server's).
    #[arg(long)]
    cpu: Option<usize>,
    /// Write the report as JSON here.
    #[arg(long)]
    json: Option<PathBuf>,
    /// Write latency over time and the percentile curve as SVG here.
    #[arg(long)]
    svg: Option<PathBuf>,
    /// No progress line.
    #[arg(long)]
    quiet: bool,
    /// The server's process id: the report gives its CPU time per answer over the measured
    /// window (from /proc; the server must run on this machine).
    #[arg(long)]
    server_pid: Option<u32>,
    /// Find the highest arrival rate whose p99 stays under --p99.
    #[arg(long, requires = "p99")]
    find_max: bool,
    /// The p99 target of --find-max, e.g. 50ms.
    #[arg(long)]
    p99: Option<String>,
    /// --find-max: the first rate tried.
    #[arg(long, default_value_t = 20.0)]
    start_rate: f64,
    /// --find-max: measured time per step.
    #[arg(long, default_value = "10s")]
    step: String,
    /// Every text and JPEG request of the scenario carries new content at each sending (as
    /// `fresh = true` in the scenario; other images go as they are): a server on its defaults
    /// runs its models instead of answering repeats from kept results.
    #[arg(long)]
    fresh: bool,
}

/// `30s`, `500ms`, `2m`.
fn duration(text: &str) -> anyhow::Result<Duration> {
    let (number, unit) = text
        .find(|c: char| !c.is_ascii_digit() && c != '.')
        .map_or((text, "s"), |at| text.split_at(at));
    let value: f64 = number
        .parse()
        .with_context(|| format!("'{text}' is not a duration like 30s or 500ms"))?;
    let seconds = match unit {
        "ms" => value / 1000.0,
        "s" => value,
        "m" => value * 60.0,
        _ => bail!("'{text}': use ms, s or m"),
    };
    if !(0.0..=86_400.0).contains(&seconds) {
        bail!("'{text}' is out of range");
    }
    Ok(Duration::from_secs_f64(seconds))
}

fn main() -> ExitCode {
    match real_main() {
        Ok(()) => ExitCode::SUCCESS,
        Err(error) => {
            eprintln!("modgate-load: {error:#}");
            ExitCode::FAILURE
        }
    }
}

fn real_main() -> anyhow::Result<()> {
    let args = Args::parse();
    let arrivals = match args.arrivals.as_str() {
        "uniform" => Arrivals::Uniform,
        "poisson" => Arrivals::Poisson,
        other => bail!("--arrivals {other}: uniform or poisson"),
    };
    let mut scenario = Scenario::load(&modgate_load::scenario_path(&args.scenario))?;
    if args.fresh && scenario.make_fresh() == 0 {
        bail!("--fresh: the scenario has no text or JPEG request to stamp");
    }
    let (addr, host) = modgate_load::parse_server(&args.server)?;
    let requests = modgate_load::prepare_scenario(&scenario, &host, &args.key)?;
    let load = match (args.rate, args.connections) {
        (Some(rate), _) => Load::Open { rate, arrivals },
        (None, Some(connections)) => Load::Closed { connections },
        (None, None) if args.find_max => Load::Open {
            rate: args.start_rate,
            arrivals,
        },
        (None, None) => {
            bail!("give --rate R (open loop), --connections N (closed loop) or --find-max")
        }
    };
    let mut config = RunConfig::new(addr, load, duration(&args.duration)?);
    config.warmup = duration(&args.warmup)?;
    config.connections_max = args.connections_max;
    config.cpu = args.cpu;
    config.progress = !args.quiet;
    config.server_pid = args.server_pid;

    if args.find_max {
        let p99 = duration(args.p99.as_deref().unwrap_or("50ms"))?;
        let search = Search {
            p99_target: p99,
            start_rate: args.rate.unwrap_or(args.start_rate),
            rate_max: 1e6,
            step: duration(&args.step)?,
            warmup: config.warmup,
            pause: Duration::from_secs(2),
            error_ratio_max: 0.01,
            precision: 1.05,
            arrivals,
        };
        let result = find_max(&config, &requests, &scenario.name, &search, |step| {
            let cpu = step.server_cpu_us_per_answer.map_or(String::new(), |us| {
                format!("  server CPU {us:.1} µs/answer")
            });
            eprintln!(
                "rate {:>9.1}/s  throughput {:>9.1}/s  p99 {:>10}  errors {:>6}  {}{cpu}",
                step.rate,
                step.throughput_per_s,
                ms(step.p99_us),
                step.errors,
                if step.passed { "pass" } else { "fail" }
            );
        })?;
        match result.max_rate {
            Some(rate) => println!(
                "{}: the highest rate with p99 under {} is {rate:.1} requests/s",
                scenario.name,
                ms(result.p99_target_us)
            ),
            None => println!(
                "{}: no rate tried kept p99 under {}",
                scenario.name,
                ms(result.p99_target_us)
            ),
        }
        if let Some(best) = &result.best {
            print!("{}", best.table());
            if let Some(path) = &args.svg {
                std::fs::write(path, best.svg())
                    .with_context(|| format!("writing {}", path.display()))?;
            }
        }
        if let Some(path) = &args.json {
            let json = serde_json::to_string_pretty(&result)?;
            std::fs::write(path, json).with_context(|| format!("writing {}", path.display()))?;
        }
        return Ok(());
    }

    let result = run(&config, &requests)?;
    let report = Report::new(&scenario.name, load, &result, &requests);
    print!("{}", report.table());
    if let Some(path) = &args.json {
        let json = serde_json::to_string_pretty(&report)?;
        std::fs::write(path, json).with_context(|| format!("writing {}", path.display()))?;
    }
    if let Some(path) = &args.svg {
        std::fs::write(path, report.svg())
            .with_context(|| format!("writing {}", path.display()))?;
    }
    Ok(())
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn durations() {
        assert_eq!(duration("30s").unwrap(), Duration::from_secs(30));
        assert_eq!(duration("500ms").unwrap(), Duration::from_millis(500));
        assert_eq!(duration("2m").unwrap(), Duration::from_secs(120));
        assert_eq!(duration("7").unwrap(), Duration::from_secs(7));
        assert!(duration("1h").is_err());
        assert!(duration("-1s").is_err());
        assert!(duration("fast").is_err());
    }
}
