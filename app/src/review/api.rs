//! The review server functions (namespace `review/`, reviewer role and up). Thin: each checks
//! the caller's role and calls `engine::review`. Bulk actions demand an engineer.

use crate::AppError;
use domain::review::{
    Decision, Facets, FlagReason, QueueProgress, SampleDetail, SampleFilter, SamplePage, TrainingView,
};
#[cfg(feature = "ssr")]
use domain::Role;
use leptos::prelude::*;
use server_fn::codec::Json;

#[server(endpoint = "review/reasons", input = Json)]
pub async fn flag_reasons() -> Result<Vec<FlagReason>, AppError> {
    use crate::ssr;
    ssr::require(Role::Reviewer)?;
    Ok(engine::review::reasons::list(&ssr::services()?.pool).await?)
}

#[server(endpoint = "review/list", input = Json)]
pub async fn list_samples(filter: SampleFilter, after: Option<String>) -> Result<SamplePage, AppError> {
    use crate::ssr;
    ssr::require(Role::Reviewer)?;
    Ok(engine::review::list::page(&ssr::services()?.pool, &filter, after.as_deref(), None).await?)
}

#[server(endpoint = "review/facets", input = Json)]
pub async fn sample_facets(filter: SampleFilter) -> Result<Facets, AppError> {
    use crate::ssr;
    ssr::require(Role::Reviewer)?;
    use engine::review::counts::{count, Counting};
    Ok(count(&ssr::services()?.pool, &filter, Counting::PANEL).await?)
}

#[server(endpoint = "review/sample", input = Json)]
pub async fn sample(id: i64) -> Result<SampleDetail, AppError> {
    use crate::ssr;
    let viewer = ssr::require(Role::Reviewer)?;
    Ok(engine::review::detail::load(&ssr::services()?.pool, &viewer, id).await?)
}

/// The sample as the pre-tokenized export writes it, decoded with the tokenizer in
/// `tokenizer_dir` (default: the latest tokenized export's).
#[server(endpoint = "review/training", input = Json)]
pub async fn load_training_view(id: i64, tokenizer_dir: Option<String>) -> Result<TrainingView, AppError> {
    use crate::ssr;
    ssr::require(Role::Reviewer)?;
    let services = ssr::services()?;
    Ok(engine::export::training_view::load(&services.pool, &services.export_storage, id, tokenizer_dir)
        .await?)
}

/// The next (`forward`) or previous sample of the filtered list, for j/k.
#[server(endpoint = "review/neighbour", input = Json)]
pub async fn neighbour(filter: SampleFilter, id: i64, forward: bool) -> Result<Option<i64>, AppError> {
    use crate::ssr;
    ssr::require(Role::Reviewer)?;
    Ok(engine::review::list::neighbour(&ssr::services()?.pool, &filter, id, forward).await?)
}

#[server(endpoint = "review/decide", input = Json)]
pub async fn decide(
    id: i64,
    version: i32,
    decision: Decision,
    flags: Vec<String>,
    note: Option<String>,
) -> Result<i32, AppError> {
    use crate::ssr;
    let viewer = ssr::require(Role::Reviewer)?;
    let input = engine::review::DecisionInput { sample_id: id, version, decision, flags, note };
    Ok(engine::review::decide(&ssr::services()?.pool, &viewer, input).await?)
}

#[server(endpoint = "review/undo", input = Json)]
pub async fn undo(id: i64, version: i32) -> Result<i32, AppError> {
    use crate::ssr;
    let viewer = ssr::require(Role::Reviewer)?;
    Ok(engine::review::undo(&ssr::services()?.pool, &viewer, id, version).await?)
}

/// Sends the sample back to generation with its run's settings; returns what to tell the user.
#[server(endpoint = "review/regenerate", input = Json)]
pub async fn regenerate(id: i64, version: i32) -> Result<String, AppError> {
    use crate::ssr;
    use engine::review::regenerate::{regenerate, Requeued};
    let viewer = ssr::require(Role::Reviewer)?;
    Ok(match regenerate(&ssr::services()?.pool, &viewer, id, version).await? {
        Requeued::Running => "Queued: a worker generates it again with the run's settings.".to_string(),
        Requeued::WaitsForResume => {
            "Queued: its run is paused, so it is generated when the run resumes.".to_string()
        }
    })
}

/// Queue mode: the sample this reviewer holds, or the next free one, leased to them.
#[server(endpoint = "review/next", input = Json)]
pub async fn next_in_queue(run: Option<i64>) -> Result<Option<i64>, AppError> {
    use crate::ssr;
    let viewer = ssr::require(Role::Reviewer)?;
    Ok(engine::review::queue::next(&ssr::services()?.pool, viewer.id, run).await?)
}

#[server(endpoint = "review/renew", input = Json)]
pub async fn renew_lease(id: i64) -> Result<bool, AppError> {
    use crate::ssr;
    let viewer = ssr::require(Role::Reviewer)?;
    Ok(engine::review::queue::renew(&ssr::services()?.pool, viewer.id, id).await?)
}

#[server(endpoint = "review/release", input = Json)]
pub async fn release_lease(id: i64) -> Result<bool, AppError> {
    use crate::ssr;
    let viewer = ssr::require(Role::Reviewer)?;
    Ok(engine::review::queue::release(&ssr::services()?.pool, viewer.id, id).await?)
}

#[server(endpoint = "review/progress", input = Json)]
pub async fn reviewer_progress(run: Option<i64>) -> Result<QueueProgress, AppError> {
    use crate::ssr;
    let viewer = ssr::require(Role::Reviewer)?;
    Ok(engine::review::queue::progress(&ssr::services()?.pool, viewer.id, run).await?)
}

/// How many finished samples a bulk action on this filter would touch. Engineers and admins.
#[server(endpoint = "review/bulk_count", input = Json)]
pub async fn bulk_count(filter: SampleFilter) -> Result<i64, AppError> {
    use crate::ssr;
    ssr::require(Role::Engineer)?;
    Ok(engine::review::bulk::count(&ssr::services()?.pool, &filter).await?)
}

/// Applies one decision to every finished sample of the filter; `expected` is the count the
/// user confirmed. Engineers and admins.
#[server(endpoint = "review/bulk_apply", input = Json)]
pub async fn bulk_apply(
    filter: SampleFilter,
    decision: Decision,
    flags: Vec<String>,
    note: Option<String>,
    expected: i64,
) -> Result<i64, AppError> {
    use crate::ssr;
    let viewer = ssr::require(Role::Engineer)?;
    let input = engine::review::bulk::BulkInput { filter, decision, flags, note, expected };
    Ok(engine::review::bulk::apply(&ssr::services()?.pool, &viewer, input).await?)
}
