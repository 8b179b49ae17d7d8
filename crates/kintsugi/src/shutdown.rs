//! When a service stops: at Ctrl-C (SIGINT) or at SIGTERM, the signal service managers and
//! `kill` send for a stop.

/// Waits for SIGINT or SIGTERM and names the one that came.
pub async fn requested() -> &'static str {
    #[cfg(unix)]
    {
        use tokio::signal::unix::{signal, SignalKind};
        match signal(SignalKind::terminate()) {
            Ok(mut term) => tokio::select! {
                _ = tokio::signal::ctrl_c() => "SIGINT",
                _ = term.recv() => "SIGTERM",
            },
            Err(e) => {
                tracing::warn!("cannot watch for SIGTERM ({e}); stopping at Ctrl-C only");
                tokio::signal::ctrl_c().await.ok();
                "SIGINT"
            }
        }
    }
    #[cfg(not(unix))]
    {
        tokio::signal::ctrl_c().await.ok();
        "SIGINT"
    }
}
