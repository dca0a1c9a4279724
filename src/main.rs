//! The `modgate` binary: logging, then the command line (see `modgate::cli`).

use std::process::ExitCode;

fn main() -> ExitCode {
    let filter = tracing_subscriber::EnvFilter::try_from_default_env()
        .unwrap_or_else(|_| tracing_subscriber::EnvFilter::new("info"));
    tracing_subscriber::fmt()
        .with_env_filter(filter)
        .with_writer(std::io::stderr)
        .init();
    match modgate::cli::main() {
        Ok(()) => ExitCode::SUCCESS,
        Err(error) => {
            eprintln!("modgate: {error:#}");
            ExitCode::FAILURE
        }
    }
}
