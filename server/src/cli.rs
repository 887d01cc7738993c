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
    /// Start, watch and control generation runs through the HTTP API (--url/DS_URL, --token/DS_TOKEN).
    #[command(subcommand, after_help = crate::client::EXIT_CODES_HELP)]
    Run(RunCommand),
    /// Start, watch and download exports through the HTTP API (--url/DS_URL, --token/DS_TOKEN).
    #[command(subcommand, after_help = crate::client::EXIT_CODES_HELP)]
    Export(ExportCommand),
    /// A draft's acceptance on a run, and two evaluations compared, through the HTTP API.
    #[command(subcommand, after_help = crate::client::EXIT_CODES_HELP)]
    Acceptance(AcceptanceCommand),
    /// Make API tokens from the command line.
    #[command(subcommand)]
    Token(TokenCommand),
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
    /// The column listing the functions a row offers, as a list or a JSON string (default:
    /// detected `tools` or `functions`).
    #[arg(long)]
    pub tools_column: Option<String>,
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

/// Where the API is and the token to call it with.
#[derive(Args, Debug, Clone)]
pub struct ApiArgs {
    /// The app's address.
    #[arg(long, env = "DS_URL", default_value = "http://127.0.0.1:3000")]
    pub url: String,
    /// An API token from the app's Tokens page.
    #[arg(long, env = "DS_TOKEN", hide_env_values = true, default_value = "", hide_default_value = true)]
    pub token: String,
}

#[derive(Args, Debug, Clone)]
pub struct WaitArgs {
    /// Wait until it ends, with a progress bar on a terminal; the exit code says how it ended.
    #[arg(long)]
    pub wait: bool,
    /// Seconds between status checks while waiting.
    #[arg(long, default_value_t = 2.0)]
    pub interval: f64,
}

#[derive(Subcommand, Debug)]
pub enum RunCommand {
    /// Start a run from a settings file (the new-run form's fields as JSON) and/or flags.
    Start(Box<RunStart>),
    /// Print a run's status and counters.
    Status {
        id: i64,
        /// Print the whole snapshot as JSON.
        #[arg(long)]
        json: bool,
        #[command(flatten)]
        api: ApiArgs,
    },
    /// Pause a running run.
    Pause {
        id: i64,
        #[command(flatten)]
        api: ApiArgs,
    },
    /// Resume a paused run.
    Resume {
        id: i64,
        #[command(flatten)]
        api: ApiArgs,
    },
    /// Cancel a run (finished samples are kept).
    Cancel {
        id: i64,
        #[command(flatten)]
        api: ApiArgs,
    },
    /// Re-queue a run's failed and timed-out samples.
    Retry {
        id: i64,
        #[command(flatten)]
        api: ApiArgs,
        #[command(flatten)]
        wait: WaitArgs,
    },
}

#[derive(Args, Debug)]
pub struct RunStart {
    /// A JSON file with the new-run form's fields (`name`, `dataset_id`, `endpoint_ids`, `model`,
    /// `max_tokens`, …); flags override it.
    #[arg(long)]
    pub settings: Option<std::path::PathBuf>,
    #[arg(long)]
    pub name: Option<String>,
    /// The dataset's id.
    #[arg(long)]
    pub dataset: Option<i64>,
    /// An endpoint's id; repeat for several.
    #[arg(long = "endpoint")]
    pub endpoints: Vec<i64>,
    #[arg(long)]
    pub model: Option<String>,
    #[arg(long)]
    pub max_tokens: Option<u32>,
    #[arg(long)]
    pub temperature: Option<f64>,
    /// Evaluate a draft: NAME or NAME@REVISION, as the endpoints serve it with the target.
    #[arg(long, value_name = "NAME[@REVISION]")]
    pub draft: Option<String>,
    /// The export the draft revision was trained on: recorded in the loop's lineage.
    #[arg(long, value_name = "EXPORT", requires = "draft")]
    pub trained_on: Option<i64>,
    /// Send an earlier run's prompts again, each in its thinking mode there (its dataset is used).
    #[arg(long, value_name = "RUN", conflicts_with = "from_export")]
    pub from_run: Option<i64>,
    /// Send a finished export's prompts (with --split; give --dataset, the dataset its runs drew from).
    #[arg(long, value_name = "EXPORT")]
    pub from_export: Option<i64>,
    /// The export's split to send: validation (the default) or train.
    #[arg(long, requires = "from_export", value_parser = ["validation", "train"])]
    pub split: Option<String>,
    /// Any other form field, as KEY=VALUE (e.g. --set concurrency=fixed --set concurrency_fixed=64).
    #[arg(long = "set", value_name = "KEY=VALUE")]
    pub fields: Vec<String>,
    #[command(flatten)]
    pub api: ApiArgs,
    #[command(flatten)]
    pub wait: WaitArgs,
}

#[derive(Subcommand, Debug)]
pub enum ExportCommand {
    /// Start an export from a saved preset or a spec file.
    Start {
        /// A preset's name, as saved on the Exports page.
        #[arg(long, conflicts_with = "spec", required_unless_present = "spec")]
        preset: Option<String>,
        /// A JSON file holding an export spec (`selection`, `format`, `destination`).
        #[arg(long)]
        spec: Option<std::path::PathBuf>,
        #[command(flatten)]
        api: ApiArgs,
        #[command(flatten)]
        wait: WaitArgs,
    },
    /// Print an export's status and progress.
    Status {
        id: i64,
        #[command(flatten)]
        api: ApiArgs,
    },
    /// Download every file of a completed folder export into a directory.
    Download {
        id: i64,
        /// The directory to write into (created when missing).
        #[arg(long)]
        out: std::path::PathBuf,
        #[command(flatten)]
        api: ApiArgs,
    },
}

#[derive(Subcommand, Debug)]
pub enum TokenCommand {
    /// Make an API token for an account and print it (shown once; works on the database, like `user add`).
    Create {
        username: String,
        /// What the token is for.
        #[arg(long, default_value = "cli")]
        name: String,
        /// Days until it expires.
        #[arg(long, default_value_t = 90)]
        days: u32,
    },
}

#[derive(Subcommand, Debug)]
pub enum AcceptanceCommand {
    /// A run's acceptance: pooled by verify steps with its 95% interval, and by category.
    Show {
        run: i64,
        /// Print the whole report as JSON (every breakdown and the weakest samples).
        #[arg(long)]
        json: bool,
        #[command(flatten)]
        api: ApiArgs,
    },
    /// Register a draft revision with the export it was trained on (the loop's lineage).
    Register {
        /// NAME or NAME@REVISION.
        #[arg(value_name = "NAME[@REVISION]")]
        draft: String,
        /// The completed export whose training rows it was trained on.
        #[arg(long, value_name = "EXPORT")]
        trained_on: Option<i64>,
        #[command(flatten)]
        api: ApiArgs,
    },
    /// The registered draft revisions, newest first, with the exports they were trained on.
    Drafts {
        /// Only this draft's revisions.
        #[arg(long)]
        name: Option<String>,
        #[arg(long)]
        json: bool,
        #[command(flatten)]
        api: ApiArgs,
    },
    /// A draft's loop: each revision, the export it was trained on, its acceptance on the
    /// held-out prompts overall and per category, and its change from the revision before.
    Loop {
        /// The draft's name.
        draft: String,
        /// The held-out dataset its evaluations sent (default: the newest evaluation's).
        #[arg(long)]
        dataset: Option<i64>,
        #[arg(long)]
        json: bool,
        #[command(flatten)]
        api: ApiArgs,
    },
    /// Two runs of the same prompts compared prompt by prompt: B − A with its interval.
    Compare {
        /// The baseline run.
        a: i64,
        /// The run compared with it.
        b: i64,
        /// Print the whole comparison as JSON.
        #[arg(long)]
        json: bool,
        #[command(flatten)]
        api: ApiArgs,
    },
}
