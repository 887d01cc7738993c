//! The `draft-studio` binary's library half: configuration, the HTTP router and the commands,
//! kept in a library so the handler tests can build the same router the binary serves.

// Leptos view types of the larger pages are deep.
#![recursion_limit = "512"]

pub mod access;
pub mod api;
pub mod cli;
pub mod client;
pub mod commands;
pub mod config;
pub mod downloads;
pub mod events;
pub mod health;
pub mod leptos_config;
pub mod listener;
pub mod metrics;
pub mod router;
pub mod session;
pub mod shutdown;
pub mod state;
pub mod telemetry;
pub mod uploads;
