//! The Datasets section: the list, the new-dataset form (path, upload, hub) with a preview and
//! an overridable mapping, and the dataset page with live import progress and a row browser.

pub mod api;
mod charts;
pub mod detail;
pub mod list;
pub mod new;
mod upload;

use std::time::Duration;

/// Calls `tick` every `every` while the page is open in a browser.
pub(crate) fn every(every: Duration, tick: impl Fn() + Clone + 'static) {
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

/// "1,234,567".
pub(crate) fn thousands(n: i64) -> String {
    let digits = n.unsigned_abs().to_string();
    let mut out = String::new();
    for (i, c) in digits.chars().enumerate() {
        if i > 0 && (digits.len() - i) % 3 == 0 {
            out.push(',');
        }
        out.push(c);
    }
    if n < 0 {
        format!("-{out}")
    } else {
        out
    }
}

pub(crate) fn bytes(n: i64) -> String {
    const UNITS: [&str; 5] = ["B", "KiB", "MiB", "GiB", "TiB"];
    let mut value = n as f64;
    let mut unit = 0;
    while value >= 1024.0 && unit < UNITS.len() - 1 {
        value /= 1024.0;
        unit += 1;
    }
    if unit == 0 {
        format!("{n} B")
    } else {
        format!("{value:.1} {}", UNITS[unit])
    }
}
