//! What the run pages show, read from the queue and the per-second metrics the workers record.
//!
//! - `list`: the runs list with progress and a throughput sparkline.
//! - `snapshot`: one run's live figures (counts, rates, endpoints, lengths, errors, alerts).
//! - `series`: the throughput history, downsampled to a bounded number of points.
//! - `bias`: outcome distributions by length band and category, with warnings.
//! - `alerts`: the rules that raise alerts, and the monitor that exports them on `/metrics`.
//! - `live`: one snapshot per run and second, shared by every viewer.
//! - `overview`: the home page's runs in progress and review progress per run.
//! - `rates`: requests and tokens per second over the last minute, for both.

pub mod alerts;
pub mod bias;
pub mod list;
pub mod live;
pub mod overview;
pub mod rates;
pub mod series;
pub mod snapshot;

pub use alerts::AlertPolicy;
pub use live::LiveHub;
