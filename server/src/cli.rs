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
    /// Run generation workers and export jobs only, with no web UI (any host that reaches the database).
    Worker,
    /// Apply database migrations and exit.
    Migrate,
    /// Manage accounts from the command line (the first admin is created this way).
    #[command(subcommand)]
    User(UserCommand),
    /// Register and list vLLM endpoints from the command line.
    #[command(subcommand)]
    Endpoint(EndpointCommand),
    /// Import source datasets from the command line.
    #[command(subcommand)]
    Dataset(DatasetCommand),
}

#[derive(Subcommand, Debug)]
pub enum EndpointCommand {
    /// Register a vLLM server (its root URL, e.g. http://gpu-7:8000) and test the connection.
    Add {
        name: String,
        base_url: String,
        /// Read the API key from this environment variable (keeps it out of shell history).
        #[arg(long)]
        api_key_env: Option<String>,
    },
    /// Print every endpoint with its models, one per line.
    List,
}

#[derive(Subcommand, Debug)]
pub enum DatasetCommand {
    /// Import a file under one of the dataset folders (DS_DATASET_ROOTS) and wait until it is done.
    Import(DatasetImport),
    /// Import the bundled demo conversations (demo/conversations.jsonl) when no dataset exists yet.
    ImportDemoIfEmpty,
}

#[derive(Args, Debug)]
pub struct DatasetImport {
    /// A .jsonl, .jsonl.gz, .json or .parquet file.
    pub path: String,
    /// The dataset's name (default: the file name).
    #[arg(long)]
    pub name: Option<String>,
    /// sharegpt, openai, alpaca or prompt (default: detected from the columns).
    #[arg(long, value_parser = parse_schema)]
    pub schema: Option<domain::dataset::Schema>,
    /// The column holding the conversation or prompt (default: the schema's usual one).
    #[arg(long)]
    pub column: Option<String>,
    /// The column holding a stable id (default: detected, else the content hash).
    #[arg(long)]
    pub id_column: Option<String>,
    /// The column holding a category (default: detected `category` or `source`).
    #[arg(long)]
    pub category_column: Option<String>,
}

fn parse_schema(value: &str) -> Result<domain::dataset::Schema, String> {
    domain::dataset::Schema::parse(value)
        .ok_or_else(|| format!("`{value}` is not a schema: use sharegpt, openai, alpaca or prompt"))
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
