//! The overview's one server function: everything the home page shows, cut to the caller's
//! role (a reviewer sees review progress and their own queue; engineers and admins also see
//! runs, endpoints and exports).

use crate::{exports::api::ExportItem, AppError};
use domain::{
    dashboard::{ReviewProgress, RunInProgress},
    review::QueueProgress,
    EndpointSummary,
};
use leptos::prelude::*;
use serde::{Deserialize, Serialize};

/// How many of the latest runs the review section lists, and how many exports.
pub const REVIEW_RUNS: i64 = 8;
pub const RECENT_EXPORTS: i64 = 5;

#[derive(Clone, Debug, PartialEq, Serialize, Deserialize)]
pub struct Overview {
    /// The caller's own review queue.
    pub queue: QueueProgress,
    pub review: Vec<ReviewProgress>,
    /// For engineers and admins only.
    pub work: Option<Work>,
}

/// What engineers watch: generation, servers, exports, and what is missing to start.
#[derive(Clone, Debug, PartialEq, Serialize, Deserialize)]
pub struct Work {
    pub runs: Vec<RunInProgress>,
    pub endpoints: Vec<EndpointSummary>,
    pub exports: Vec<ExportItem>,
    pub datasets_ready: i64,
}

#[server(endpoint = "overview/get")]
pub async fn get_overview() -> Result<Overview, AppError> {
    use crate::ssr;
    use domain::Role;
    use engine::dashboard::overview;
    let viewer = ssr::require(Role::Reviewer)?;
    let pool = ssr::services()?.pool;
    let queue = engine::review::queue::progress(&pool, viewer.id, None).await?;
    let review = overview::review_progress(&pool, REVIEW_RUNS).await?;
    let work = if viewer.role.allows(Role::Engineer) {
        Some(Work {
            runs: overview::runs_in_progress(&pool).await?,
            endpoints: engine::endpoints::list(&pool).await?,
            exports: engine::export::store::items(&pool, RECENT_EXPORTS).await?,
            datasets_ready: overview::datasets_ready(&pool).await?,
        })
    } else {
        None
    };
    Ok(Overview { queue, review, work })
}
