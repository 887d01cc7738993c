//! Server-sent events: a run's live snapshot, once a second, for as long as the page is open.
//! Every viewer of a run shares one publisher (`engine::dashboard::LiveHub`), so fifty open
//! dashboards cost the database what one does.

use axum::{
    extract::{Path, State},
    http::StatusCode,
    response::{
        sse::{Event, KeepAlive, Sse},
        IntoResponse, Response,
    },
};
use engine::Services;
use futures::StreamExt;
use std::convert::Infallible;
use tokio_stream::wrappers::WatchStream;

/// `GET /api/runs/{id}/events`: `event: snapshot` with a `RunSnapshot` as JSON.
pub async fn run_events(State(services): State<Services>, Path(run_id): Path<i64>) -> Response {
    match sqlx::query_scalar!("SELECT id FROM runs WHERE id = $1", run_id)
        .fetch_optional(&services.pool)
        .await
    {
        Ok(Some(_)) => {}
        Ok(None) => return (StatusCode::NOT_FOUND, "no such run").into_response(),
        Err(e) => {
            tracing::error!(error = %e, "looking up a run for its event stream failed");
            return StatusCode::SERVICE_UNAVAILABLE.into_response();
        }
    }
    let closed = services.live.closed();
    let snapshots = WatchStream::new(services.live.subscribe(run_id))
        .filter_map(|json| async move {
            json.map(|json| Ok::<_, Infallible>(Event::default().event("snapshot").data(&*json)))
        })
        .take_until(closed.cancelled_owned());
    Sse::new(snapshots).keep_alive(KeepAlive::default()).into_response()
}
