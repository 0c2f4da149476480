//! `loopguard`: replay a recorded multi-agent trace and see its loops. The
//! command is the library's [`loopguard_cli::run`]; see its crate docs.

use std::process::ExitCode;

fn main() -> ExitCode {
    ExitCode::from(loopguard_cli::run(std::env::args_os()))
}
