//! Follows a run in the browser: an `EventSource` on `/api/runs/{id}/events` feeds each
//! snapshot into signals. The browser reconnects by itself after a network break.

use domain::dashboard::{ChartPoint, RunSnapshot};
use leptos::prelude::*;

/// The chart keeps at most this many points; older ones drop off as new seconds arrive.
pub const MAX_CHART_POINTS: usize = 1800;

/// Applies one snapshot: the figures, and the newest second of the chart.
pub fn apply(snap: RunSnapshot, snapshot: RwSignal<Option<RunSnapshot>>, points: RwSignal<Vec<ChartPoint>>) {
    if let Some(latest) = snap.latest.clone() {
        points.update(|points| push_point(points, latest));
    }
    snapshot.set(Some(snap));
}

/// Appends a point newer than the last one (a snapshot may repeat the same second).
pub fn push_point(points: &mut Vec<ChartPoint>, point: ChartPoint) {
    let newer = points.last().is_none_or(|last| point.t >= last.t + i64::from(last.seconds));
    if newer {
        points.push(point);
        if points.len() > MAX_CHART_POINTS {
            points.drain(..points.len() - MAX_CHART_POINTS);
        }
    }
}

/// Opens the event stream once the page is hydrated; closes it when the page goes.
pub fn follow(
    run_id: i64,
    snapshot: RwSignal<Option<RunSnapshot>>,
    points: RwSignal<Vec<ChartPoint>>,
    connected: RwSignal<bool>,
) {
    #[cfg(feature = "hydrate")]
    Effect::new(move |_| {
        use leptos::__reexports::send_wrapper::SendWrapper;
        use wasm_bindgen::{closure::Closure, JsCast};
        let Ok(source) = web_sys::EventSource::new(&format!("/api/runs/{run_id}/events")) else {
            return;
        };
        let on_snapshot =
            Closure::<dyn FnMut(web_sys::MessageEvent)>::new(move |event: web_sys::MessageEvent| {
                let Some(text) = event.data().as_string() else { return };
                match serde_json::from_str::<RunSnapshot>(&text) {
                    Ok(snap) => {
                        connected.set(true);
                        apply(snap, snapshot, points);
                    }
                    Err(e) => leptos::logging::warn!("unreadable run snapshot: {e}"),
                }
            });
        let _ = source.add_event_listener_with_callback("snapshot", on_snapshot.as_ref().unchecked_ref());
        let on_error = Closure::<dyn FnMut(web_sys::Event)>::new(move |_| connected.set(false));
        source.set_onerror(Some(on_error.as_ref().unchecked_ref()));
        let open = SendWrapper::new((source, on_snapshot, on_error));
        on_cleanup(move || {
            let (source, _, _) = open.take();
            source.close();
        });
    });
    #[cfg(not(feature = "hydrate"))]
    let _ = (run_id, snapshot, points, connected);
}

#[cfg(test)]
mod tests {
    use super::*;

    fn point(t: i64) -> ChartPoint {
        ChartPoint {
            t,
            seconds: 1,
            prompt_tps: None,
            generation_tps: None,
            client_tps: 1.0,
            in_flight: 1.0,
            errors: 0.0,
            completed: 0.0,
        }
    }

    #[test]
    fn a_repeated_second_is_not_drawn_twice() {
        let mut points = vec![point(10)];
        push_point(&mut points, point(10));
        push_point(&mut points, point(11));
        assert_eq!(points.iter().map(|p| p.t).collect::<Vec<_>>(), vec![10, 11]);
    }

    #[test]
    fn the_oldest_points_drop_off() {
        let mut points: Vec<ChartPoint> = (0..MAX_CHART_POINTS as i64).map(point).collect();
        push_point(&mut points, point(MAX_CHART_POINTS as i64));
        assert_eq!(points.len(), MAX_CHART_POINTS);
        assert_eq!(points[0].t, 1);
    }
}
