use crate::config::Config;
use leptos::config::{Env, LeptosOptions};

/// Leptos' own settings, derived from ours so the binary runs without cargo-leptos' variables.
pub fn options(config: &Config) -> LeptosOptions {
    let dev = std::env::var("LEPTOS_ENV").is_ok_and(|v| v.eq_ignore_ascii_case("dev"));
    let reload_port = std::env::var("LEPTOS_RELOAD_PORT").ok().and_then(|p| p.parse().ok()).unwrap_or(3001);
    LeptosOptions::builder()
        .output_name("draft-studio")
        .site_root(config.site_root.to_string_lossy().to_string())
        .site_pkg_dir("pkg")
        .site_addr(config.bind)
        .reload_port(reload_port)
        .env(if dev { Env::DEV } else { Env::PROD })
        .build()
}
