//! Timers for pages that refresh themselves.

use std::time::Duration;

/// Calls `tick` every `every` while the page is open in a browser (never during a server render).
pub fn every(every: Duration, tick: impl Fn() + Clone + 'static) {
    #[cfg(feature = "hydrate")]
    {
        use leptos::prelude::*;
        Effect::new(move |_| {
            let tick = tick.clone();
            if let Ok(handle) = set_interval_with_handle(move || tick(), every) {
                on_cleanup(move || handle.clear());
            }
        });
    }
    #[cfg(not(feature = "hydrate"))]
    let _ = (every, tick);
}
