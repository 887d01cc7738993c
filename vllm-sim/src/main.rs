//! The `vllm-sim` binary: serves the simulator until Ctrl-C.

use clap::{CommandFactory, FromArgMatches, Parser};
use std::net::{IpAddr, SocketAddr};
use tracing_subscriber::EnvFilter;

/// An OpenAI-compatible vLLM simulator. Every rate and delay is in simulated time, which
/// runs `--time-scale` times faster than the wall clock.
#[derive(Parser)]
#[command(name = "vllm-sim", version)]
struct Cli {
    /// Address to listen on.
    #[arg(long, default_value = "127.0.0.1")]
    host: IpAddr,

    /// Port to listen on (vLLM's default is 8000).
    #[arg(long, default_value_t = 8000)]
    port: u16,

    /// Start from a named server profile; other flags given override its settings.
    #[arg(long, value_enum)]
    profile: Option<vllm_sim::Profile>,

    #[command(flatten)]
    sim: vllm_sim::SimConfig,
}

#[tokio::main]
async fn main() -> Result<(), Box<dyn std::error::Error>> {
    tracing_subscriber::fmt()
        .with_env_filter(EnvFilter::try_from_default_env().unwrap_or_else(|_| EnvFilter::new("info")))
        .init();
    let mut cli = Cli::parse();
    if let Some(profile) = cli.profile {
        // The profile's flags go first, so the ones given on the command line win.
        let mut args: Vec<String> = std::env::args().collect();
        args.splice(1..1, profile.args().iter().map(|a| a.to_string()));
        let matches = Cli::command().args_override_self(true).get_matches_from(args);
        cli = Cli::from_arg_matches(&matches)?;
    }
    let sim = vllm_sim::spawn_on(SocketAddr::new(cli.host, cli.port), cli.sim).await?;
    tracing::info!(url = %sim.base_url(), "vllm-sim serving");
    tokio::signal::ctrl_c().await?;
    sim.shutdown().await;
    Ok(())
}
