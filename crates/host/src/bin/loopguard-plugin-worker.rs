//! `loopguard-plugin-worker plugin-worker LIBRARY [--memory-limit-mb MB]`:
//! the plugin worker of process isolation as a program of its own, for an
//! application that embeds the engine (point `plugin_host.worker` or
//! `LOOPGUARD_PLUGIN_WORKER` at it). The `loopguard` binary runs the same
//! worker as its hidden `plugin-worker` subcommand.

use std::path::PathBuf;
use std::process::ExitCode;

fn main() -> ExitCode {
    let args: Vec<String> = std::env::args().skip(1).collect();
    let usage = "usage: loopguard-plugin-worker plugin-worker LIBRARY [--memory-limit-mb MB]";
    let (library, memory_limit_mb) = match args.as_slice() {
        [command, library] if command == "plugin-worker" => (PathBuf::from(library), None),
        [command, library, flag, megabytes]
            if command == "plugin-worker" && flag == "--memory-limit-mb" =>
        {
            match megabytes.parse::<u64>() {
                Ok(megabytes) => (PathBuf::from(library), Some(megabytes)),
                Err(err) => {
                    eprintln!("loopguard-plugin-worker: --memory-limit-mb {megabytes}: {err}");
                    return ExitCode::from(2);
                }
            }
        }
        _ => {
            eprintln!("{usage}");
            return ExitCode::from(2);
        }
    };
    match loopguard_host::run_worker(&library, memory_limit_mb) {
        Ok(()) => ExitCode::SUCCESS,
        Err(err) => {
            eprintln!(
                "loopguard-plugin-worker: plugin worker for {}: {err}",
                library.display()
            );
            ExitCode::from(2)
        }
    }
}
