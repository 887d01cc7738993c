use tokio::signal::unix::{signal, SignalKind};
use tokio_util::sync::CancellationToken;

/// Cancels `token` on Ctrl-C (SIGINT) or SIGTERM. The handlers are installed before this
/// returns, so a signal during start-up also ends in an orderly stop rather than a kill.
/// Everything long-lived watches the token: the HTTP server stops accepting and lets in-flight
/// requests finish, background tasks wind down.
pub fn cancel_on_signal(token: CancellationToken) -> std::io::Result<()> {
    let mut interrupt = signal(SignalKind::interrupt())?;
    let mut terminate = signal(SignalKind::terminate())?;
    tokio::spawn(async move {
        tokio::select! {
            _ = interrupt.recv() => tracing::info!("Ctrl-C received; shutting down"),
            _ = terminate.recv() => tracing::info!("SIGTERM received; shutting down"),
        }
        token.cancel();
    });
    Ok(())
}
