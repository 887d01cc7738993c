//! A draft's acceptance over about the last minute, from the server's `spec_decode` counters:
//! the live figure of the Endpoints page. Counters are cumulative, so the figure is the change
//! between the newest reading and the newest one at least a minute older (or the oldest kept,
//! while the window fills).

use crate::vllm::{ServerLoad, SpecCounters};
use domain::endpoint::WindowAcceptance;
use std::collections::VecDeque;
use std::time::{Duration, Instant};

const SPAN: Duration = Duration::from_secs(60);

#[derive(Debug, Default)]
pub(crate) struct SpecWindow {
    readings: VecDeque<(Instant, SpecCounters)>,
}

impl SpecWindow {
    /// Takes a new reading of `/metrics` and gives the acceptance over the window; `None` when
    /// the server runs no draft or verified nothing in the window.
    pub fn observe(&mut self, load: &ServerLoad) -> Option<WindowAcceptance> {
        let Some(counters) = load.spec else {
            self.readings.clear();
            return None;
        };
        // Counters that went back mean the server restarted: start over.
        if self.readings.back().is_some_and(|(_, last)| counters.drafts < last.drafts) {
            self.readings.clear();
        }
        self.readings.push_back((load.at, counters));
        while self.readings.len() > 2 && load.at.duration_since(self.readings[1].0) >= SPAN {
            self.readings.pop_front();
        }
        let (since, earliest) = *self.readings.front()?;
        let length = counters.length_since(&earliest)?;
        Some(WindowAcceptance { length, seconds: load.at.duration_since(since).as_secs_f64() })
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn load(at: Instant, drafts: f64, accepted: f64) -> ServerLoad {
        ServerLoad {
            at,
            running: 0.0,
            waiting: 0.0,
            kv_usage: 0.0,
            preemptions_total: 0.0,
            prompt_tokens_total: 0.0,
            generation_tokens_total: 0.0,
            spec: Some(SpecCounters { drafts, draft_tokens: drafts * 3.0, accepted }),
        }
    }

    #[test]
    fn the_window_keeps_about_a_minute() {
        let start = Instant::now();
        let mut window = SpecWindow::default();
        assert_eq!(window.observe(&load(start, 100.0, 200.0)), None, "one reading tells nothing");
        let at = |s: u64| start + Duration::from_secs(s);
        let w = window.observe(&load(at(30), 200.0, 300.0)).unwrap();
        assert_eq!((w.length, w.seconds), (2.0, 30.0));
        window.observe(&load(at(60), 300.0, 500.0));
        // At 100 s the window starts from the reading at 30 s, the newest a minute older.
        let w = window.observe(&load(at(100), 400.0, 800.0)).unwrap();
        assert_eq!((w.length, w.seconds), (1.0 + 500.0 / 200.0, 70.0));
        assert_eq!(window.observe(&load(at(101), 400.0, 800.0)).map(|w| w.seconds), Some(71.0));
    }

    #[test]
    fn no_draft_no_steps_or_a_restart_give_no_figure_or_start_over() {
        let start = Instant::now();
        let mut window = SpecWindow::default();
        window.observe(&load(start, 100.0, 200.0));
        assert_eq!(window.observe(&load(start + Duration::from_secs(5), 100.0, 200.0)), None, "no step");
        let restarted = window.observe(&load(start + Duration::from_secs(10), 5.0, 10.0));
        assert_eq!(restarted, None);
        let mut no_draft = load(start, 0.0, 0.0);
        no_draft.spec = None;
        assert_eq!(window.observe(&no_draft), None);
        assert!(window.readings.is_empty());
    }
}
