use clap::Parser;
use server::{cli::Cli, commands};

#[tokio::main]
async fn main() -> std::process::ExitCode {
    let cli = Cli::parse();
    match commands::run(cli).await {
        Ok(()) => std::process::ExitCode::SUCCESS,
        Err(e) => {
            // `{:#}` prints the whole context chain on one line: what failed, then why.
            eprintln!("error: {e:#}");
            std::process::ExitCode::FAILURE
        }
    }
}
