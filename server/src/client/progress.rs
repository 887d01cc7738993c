//! The `--wait` progress bar: done/total, tok/s and ETA, from the API's run snapshot.

use indicatif::{ProgressBar, ProgressStyle};
use serde_json::Value;

pub struct RunProgress {
    bar: ProgressBar,
}

/// Finished and total samples of a run snapshot's `counts`.
pub fn done_total(snapshot: &Value) -> (u64, u64) {
    let count = |k: &str| snapshot["counts"][k].as_u64().unwrap_or(0);
    let done: u64 = ["ok", "truncated", "timed_out", "failed", "empty"].iter().map(|k| count(k)).sum();
    (done, done + count("pending") + count("running"))
}

impl RunProgress {
    pub fn new() -> Self {
        // Drawn to stderr only on a terminal, so logs of a scheduler stay clean.
        let bar = ProgressBar::new(0);
        bar.set_style(
            ProgressStyle::with_template("{bar:40} {pos}/{len} samples  {msg}")
                .expect("a valid template")
                .progress_chars("=> "),
        );
        Self { bar }
    }

    pub fn update(&self, snapshot: &Value) {
        let (done, total) = done_total(snapshot);
        self.bar.set_length(total);
        self.bar.set_position(done);
        let tok_s = snapshot["client_tokens_per_s"].as_f64().unwrap_or(0.0);
        let eta = match snapshot["eta_secs"].as_f64() {
            Some(s) if s.is_finite() => format_secs(s),
            _ => "–".into(),
        };
        self.bar.set_message(format!(
            "{tok_s:.0} tok/s  ETA {eta}  [{}]",
            snapshot["status"].as_str().unwrap_or("?")
        ));
    }

    pub fn finish(&self) {
        self.bar.finish_and_clear();
    }
}

/// Seconds as `1h02m`, `3m05s` or `42s`.
pub fn format_secs(secs: f64) -> String {
    let s = secs.max(0.0).round() as u64;
    match s {
        0..=59 => format!("{s}s"),
        60..=3599 => format!("{}m{:02}s", s / 60, s % 60),
        _ => format!("{}h{:02}m", s / 3600, (s % 3600) / 60),
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn counts_and_times_read_as_a_person_expects() {
        let snapshot = serde_json::json!({"counts": {"pending": 3, "running": 2, "ok": 4, "failed": 1}});
        assert_eq!(done_total(&snapshot), (5, 10));
        assert_eq!(format_secs(42.4), "42s");
        assert_eq!(format_secs(185.0), "3m05s");
        assert_eq!(format_secs(3720.0), "1h02m");
    }
}
