use clap::Parser;
use server::{
    cli::{Cli, Command},
    client::{self, commands::Client},
    commands,
};

#[tokio::main]
async fn main() -> std::process::ExitCode {
    let cli = Cli::parse();
    // The API client commands need no configuration or database, only --url and --token.
    let command = match cli.command {
        Command::Run(command) => return client::run(Client::Run(command)).await.into(),
        Command::Export(command) => return client::run(Client::Export(command)).await.into(),
        Command::Acceptance(command) => return client::run(Client::Acceptance(command)).await.into(),
        command => command,
    };
    match commands::run(Cli { command }).await {
        Ok(()) => std::process::ExitCode::SUCCESS,
        Err(e) => {
            // `{:#}` prints the whole context chain on one line: what failed, then why.
            eprintln!("error: {e:#}");
            std::process::ExitCode::FAILURE
        }
    }
}
