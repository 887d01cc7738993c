use tokio_util::sync::CancellationToken;

/// Cancels `token` on Ctrl-C or SIGTERM. Everything long-lived watches the token: the HTTP
/// server stops accepting and lets in-flight requests finish, background tasks wind down.
pub fn cancel_on_signal(token: CancellationToken) {
    tokio::spawn(async move {
        let ctrl_c = async {
            if let Err(e) = tokio::signal::ctrl_c().await {
                tracing::error!(error = %e, "cannot listen for Ctrl-C");
                std::future::pending::<()>().await;
            }
        };
        #[cfg(unix)]
        let terminate = async {
            match tokio::signal::unix::signal(tokio::signal::unix::SignalKind::terminate()) {
                Ok(mut signal) => {
                    signal.recv().await;
                }
                Err(e) => {
                    tracing::error!(error = %e, "cannot listen for SIGTERM");
                    std::future::pending::<()>().await;
                }
            }
        };
        #[cfg(not(unix))]
        let terminate = std::future::pending::<()>();
        tokio::select! {
            _ = ctrl_c => tracing::info!("Ctrl-C received; shutting down"),
            _ = terminate => tracing::info!("SIGTERM received; shutting down"),
        }
        token.cancel();
    });
}
