use clap::{Args, Parser, Subcommand};
use domain::Role;

/// Draft Studio: generate, review and export EAGLE-3 training data from vLLM servers.
/// Configuration comes from environment variables; see the README.
#[derive(Parser, Debug)]
#[command(name = "draft-studio", version)]
pub struct Cli {
    #[command(subcommand)]
    pub command: Command,
}

#[derive(Subcommand, Debug)]
pub enum Command {
    /// Run the web app (and generation workers unless DS_WORKERS=false or --no-workers).
    Serve {
        /// Serve the web app only; run workers elsewhere with `draft-studio worker`.
        #[arg(long)]
        no_workers: bool,
    },
    /// Run generation workers only, with no web UI (any host that reaches the database).
    Worker,
    /// Apply database migrations and exit.
    Migrate,
    /// Manage accounts from the command line (the first admin is created this way).
    #[command(subcommand)]
    User(UserCommand),
}

#[derive(Subcommand, Debug)]
pub enum UserCommand {
    /// Add an account. The password is read from the terminal, or from stdin when piped.
    Add(UserAdd),
    /// Set a new password for an existing account.
    SetPassword { username: String },
    /// Print the number of accounts (used by scripts to detect a first start).
    Count,
}

#[derive(Args, Debug)]
pub struct UserAdd {
    pub username: String,
    /// admin, engineer or reviewer
    #[arg(long, value_parser = parse_role)]
    pub role: Role,
    /// Generate a random password and print it instead of asking for one.
    #[arg(long)]
    pub generate_password: bool,
}

fn parse_role(value: &str) -> Result<Role, String> {
    value.parse().map_err(|e: domain::role::UnknownRole| e.to_string())
}
