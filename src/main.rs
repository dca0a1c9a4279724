//! The `modgate` binary: the command line (see `modgate::cli`), which installs the logger.

use std::process::ExitCode;

fn main() -> ExitCode {
    match modgate::cli::main() {
        Ok(()) => ExitCode::SUCCESS,
        Err(error) => {
            eprintln!("modgate: {error:#}");
            ExitCode::FAILURE
        }
    }
}
