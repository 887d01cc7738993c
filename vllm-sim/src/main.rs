//! The `vllm-sim` binary: serves the simulator until Ctrl-C.

use clap::Parser;
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

    #[command(flatten)]
    sim: vllm_sim::SimConfig,
}

#[tokio::main]
async fn main() -> Result<(), Box<dyn std::error::Error>> {
    tracing_subscriber::fmt()
        .with_env_filter(EnvFilter::try_from_default_env().unwrap_or_else(|_| EnvFilter::new("info")))
        .init();
    let cli = Cli::parse();
    let sim = vllm_sim::spawn_on(SocketAddr::new(cli.host, cli.port), cli.sim).await?;
    tracing::info!(url = %sim.base_url(), "vllm-sim serving");
    tokio::signal::ctrl_c().await?;
    sim.shutdown().await;
    Ok(())
}
