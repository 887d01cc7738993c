use crate::config::LogFormat;
use tracing_subscriber::{fmt, prelude::*, EnvFilter};

const DEFAULT_FILTER: &str = "info,tower_http=info,sqlx=warn";

/// Installs the global subscriber. `RUST_LOG` overrides the default filter.
pub fn init(format: LogFormat) {
    let filter = EnvFilter::try_from_default_env().unwrap_or_else(|_| EnvFilter::new(DEFAULT_FILTER));
    let registry = tracing_subscriber::registry().with(filter);
    let result = match format {
        LogFormat::Plain => registry.with(fmt::layer().with_target(false)).try_init(),
        LogFormat::Json => registry
            .with(fmt::layer().json().flatten_event(true).with_current_span(true).with_span_list(false))
            .try_init(),
    };
    // A second init (tests) keeps the first subscriber.
    let _ = result;
}
