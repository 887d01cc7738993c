//! The workspace's build tasks, run as `cargo xtask <task>` (alias in .cargo/config.toml).
//!
//!   cargo xtask build [--release]   the server binary and the site it serves (see `site`)

mod site;
mod step;

use std::process::ExitCode;

const USAGE: &str = "usage: cargo xtask build [--release]";

fn main() -> ExitCode {
    let args: Vec<String> = std::env::args().skip(1).collect();
    let profile = match args.iter().map(String::as_str).collect::<Vec<_>>().as_slice() {
        ["build"] => site::Profile::Debug,
        ["build", "--release"] => site::Profile::Release,
        _ => {
            eprintln!("{USAGE}");
            return ExitCode::from(2);
        }
    };
    let root = site::workspace_root();
    match site::build(&site::Layout::from_env(root, profile)) {
        Ok(()) => ExitCode::SUCCESS,
        Err(failure) => {
            eprintln!("\x1b[1;31merror:\x1b[0m {failure}");
            ExitCode::FAILURE
        }
    }
}
