//! Adaptive concurrency for one endpoint, run once per second.
//!
//! Against vLLM, latency is not a congestion signal (a request's time grows with its length)
//! and the server never sheds load (its queue is unbounded), so RTT- or 429-driven limiters do
//! not transfer. The controller instead reads the server's scheduler: it grows the limit while
//! the batch has room (nothing waiting), trims it to "running + a small queue" once requests
//! wait on two readings in a row (one reading can be a burst of arrivals not yet admitted),
//! and backs off on preemptions with a full KV cache or on timeouts and server errors.
//! Past the point where the server's own generation rate stops rising, a bigger batch only
//! makes each request slower (and fills the KV cache): each increase is checked against that
//! rate, the mean of three readings under the old limit against three under the new one (the
//! first reading after a change left out, as it still covers the old limit), and one that did
//! not raise it by 5% is undone and not tried again for a minute. Averaging matters: a single
//! reading moves by a few percent with the scrape's own timing, as much as the gain judged.
//! Without `/metrics` it falls back to the client's own view: time to first token against its
//! unloaded baseline stands in for the waiting queue.

use std::collections::VecDeque;

/// The server's scheduler, from `/metrics`.
#[derive(Clone, Copy, Debug, PartialEq)]
pub struct ServerSignals {
    pub running: f64,
    pub waiting: f64,
    pub kv_usage: f64,
    /// Preemptions since the previous tick.
    pub new_preemptions: f64,
    /// Tokens the server generated per second since the previous reading, when known.
    pub generation_tps: Option<f64>,
}

/// What one tick saw.
#[derive(Clone, Copy, Debug, PartialEq, Default)]
pub struct Observation {
    /// Requests this run has outstanding on the endpoint (all worker processes).
    pub outstanding: u32,
    pub server: Option<ServerSignals>,
    /// Timeouts, 5xx and broken streams since the previous tick.
    pub failures: u32,
    /// Median time to first token of the requests that started streaming this tick.
    pub ttft_p50: Option<f64>,
}

#[derive(Clone, Debug, PartialEq)]
pub struct Decision {
    pub limit: u32,
    pub reason: String,
    pub changed: bool,
}

#[derive(Clone, Debug)]
pub struct Controller {
    limit: u32,
    min: u32,
    max: u32,
    /// Ticks to hold after a decrease before growing again.
    hold: u32,
    /// Doubling until the first sign of a full server (like TCP's slow start), then +1/8.
    slow_start: bool,
    /// Lowest time to first token seen (EWMA of quiet periods), the no-queue baseline.
    ttft_baseline: Option<f64>,
    /// The server's generation rate under the current limit.
    rates: RateReadings,
    /// The last increase, judged by the server's generation rate once it has settled.
    trial: Option<Trial>,
    /// A limit that growing past did not pay, and the ticks until it may be tried again.
    ceiling: Option<(u32, u32)>,
    /// Ticks observed so far.
    ticks: u32,
    /// Consecutive ticks with more than a small queue waiting on the server.
    queued_ticks: u32,
    /// Consecutive ticks with `/metrics` but no generation rate (the first scrape, or scrapes
    /// slower than a tick).
    ticks_without_rate: u32,
}

/// An increase from `from`, made while the server generated `before` tokens/s.
#[derive(Clone, Copy, Debug)]
struct Trial {
    from: u32,
    before: f64,
    /// Ticks since the increase.
    ticks: u32,
}

/// The last `RATE_READINGS` readings of the server's generation rate under one limit.
#[derive(Clone, Debug)]
struct RateReadings {
    values: VecDeque<f64>,
    /// `/metrics` is read on its own clock, so the first reading after a change of limit
    /// still covers mostly the old one: it is left out.
    skip_next: bool,
}

impl RateReadings {
    /// The first reading of a run covers its start-up: it is left out too.
    fn new() -> Self {
        Self { values: VecDeque::with_capacity(RATE_READINGS), skip_next: true }
    }

    fn push(&mut self, reading: Option<f64>) {
        let Some(tps) = reading else { return };
        if std::mem::take(&mut self.skip_next) {
            return;
        }
        if self.values.len() == RATE_READINGS {
            self.values.pop_front();
        }
        self.values.push_back(tps);
    }

    /// Forgets the readings: the limit changed.
    fn restart(&mut self) {
        self.values.clear();
        self.skip_next = true;
    }

    /// Their mean, once there are `RATE_READINGS` of them.
    fn settled(&self) -> Option<f64> {
        (self.values.len() == RATE_READINGS).then(|| self.values.iter().sum::<f64>() / RATE_READINGS as f64)
    }
}

const HOLD_TICKS: u32 = 3;
/// An increase must raise the server's generation rate by this factor to be kept.
const WORTH_GROWING: f64 = 1.05;
/// Ticks before a limit that did not pay is tried again (the workload may have changed).
const CEILING_TICKS: u32 = 60;
/// Ticks to wait for a first `/metrics` reading (or a first generation rate) before growing
/// without it.
const FIRST_SCRAPE_TICKS: u32 = 3;
/// Readings of the server's generation rate averaged on each side of an increase.
const RATE_READINGS: usize = 3;
/// Ticks to wait for those readings before dropping a trial (the scrapes have stopped).
const TRIAL_TICKS: u32 = 3 * RATE_READINGS as u32;

impl Controller {
    pub fn new(initial: u32, min: u32, max: u32) -> Self {
        Self {
            limit: initial.clamp(min, max),
            min,
            max,
            hold: 0,
            slow_start: true,
            ttft_baseline: None,
            rates: RateReadings::new(),
            trial: None,
            ceiling: None,
            ticks: 0,
            queued_ticks: 0,
            ticks_without_rate: 0,
        }
    }

    pub fn limit(&self) -> u32 {
        self.limit
    }

    /// The bounds follow the runs using the endpoint (the sum of theirs).
    pub fn set_bounds(&mut self, min: u32, max: u32) {
        self.min = min.max(1);
        self.max = max.max(self.min);
        self.limit = self.limit.clamp(self.min, self.max);
    }

    /// Adopts the limit another process stored while it held the controller lease.
    /// (Called every tick with the stored limit; a trial survives unless the limit changed.)
    pub fn set_limit(&mut self, limit: u32) {
        let limit = limit.clamp(self.min, self.max);
        if limit != self.limit {
            self.trial = None;
            self.rates.restart();
        }
        self.limit = limit;
    }

    pub fn observe(&mut self, obs: Observation) -> Decision {
        self.ticks += 1;
        self.hold = self.hold.saturating_sub(1);
        self.ceiling = self.ceiling.and_then(|(limit, ticks)| (ticks > 1).then(|| (limit, ticks - 1)));
        let (target, reason) = match obs.server {
            Some(server) => self.with_server(obs, server),
            None => self.without_server(obs),
        };
        let target = target.clamp(self.min, self.max);
        let changed = target != self.limit;
        if target < self.limit {
            self.hold = HOLD_TICKS;
            self.slow_start = false;
        }
        if changed {
            // Readings taken under the old limit say nothing about the new one.
            self.rates.restart();
        }
        self.limit = target;
        Decision { limit: target, reason, changed }
    }

    fn decrease(&self, factor: f64) -> u32 {
        ((self.limit as f64 * factor).floor() as u32).min(self.limit.saturating_sub(1)).max(1)
    }

    fn increase(&self) -> u32 {
        if self.slow_start {
            self.limit * 2
        } else {
            self.limit + (self.limit / 8).max(1)
        }
    }

    /// Using (nearly) all of the limit: only then does growing it change anything.
    fn saturated(&self, outstanding: u32) -> bool {
        outstanding as f64 >= self.limit as f64 * 0.9
    }

    fn with_server(&mut self, obs: Observation, s: ServerSignals) -> (u32, String) {
        self.rates.push(s.generation_tps);
        self.ticks_without_rate = if s.generation_tps.is_some() { 0 } else { self.ticks_without_rate + 1 };
        let queue_target = (s.running / 16.0).max(2.0);
        self.queued_ticks = if s.waiting > queue_target * 2.0 { self.queued_ticks + 1 } else { 0 };
        if obs.failures > 0 {
            return (
                self.decrease(0.8),
                format!("{} timeouts or server errors in the last second", obs.failures),
            );
        }
        if s.new_preemptions > 0.0 && s.kv_usage >= 0.9 {
            return (
                self.decrease(0.9),
                format!(
                    "server preempted {} requests with the KV cache {:.0}% full",
                    s.new_preemptions,
                    s.kv_usage * 100.0
                ),
            );
        }
        if let Some(verdict) = self.judge_trial() {
            return verdict;
        }
        // New requests wait until the next step admits them, so one reading with a queue can be
        // a burst of arrivals (every request of a run's start); a full batch keeps its queue.
        if self.queued_ticks >= 2 {
            self.slow_start = false;
            // The batch is full: keep a small queue so it stays full, no more.
            let target = (s.running + queue_target).round() as u32;
            let target = target.min(self.limit);
            return (
                target,
                format!("server batch is full: {:.0} running, {:.0} waiting", s.running, s.waiting),
            );
        }
        if self.hold == 0 && self.saturated(obs.outstanding) && s.waiting <= queue_target && s.kv_usage < 0.95
        {
            if self.rates.settled().is_none() && self.ticks_without_rate < FIRST_SCRAPE_TICKS {
                // Too few readings under this limit to judge a bigger one against. (A server
                // without the counter reads 0 tokens/s throughout, and every increase passes;
                // with no rate at all for a while, growth goes on unjudged.)
                return (self.limit, "measuring the server's generation rate before growing".to_string());
            }
            if let Some((ceiling, ticks)) = self.ceiling {
                if self.limit >= ceiling {
                    return (
                        self.limit,
                        format!("steady: a higher limit did not raise the server's generation rate (next try in {ticks} s)"),
                    );
                }
            }
            self.trial = self.rates.settled().map(|before| Trial { from: self.limit, before, ticks: 0 });
            return (
                self.increase(),
                format!(
                    "server has room: {:.0} running, {:.0} waiting, KV cache {:.0}%",
                    s.running,
                    s.waiting,
                    s.kv_usage * 100.0
                ),
            );
        }
        (self.limit, "steady".to_string())
    }

    /// Follows the last increase; once the rate under the new limit has settled, keeps it
    /// (`None`) or undoes it when it did not raise the rate by `WORTH_GROWING`. Holds the limit
    /// while judging.
    fn judge_trial(&mut self) -> Option<(u32, String)> {
        let mut trial = self.trial.take()?;
        trial.ticks += 1;
        let Some(after) = self.rates.settled() else {
            // Drop the trial if the readings have stopped coming.
            if trial.ticks <= TRIAL_TICKS {
                self.trial = Some(trial);
                return Some((
                    self.limit,
                    "judging the last increase by the server's generation rate".to_string(),
                ));
            }
            return None;
        };
        if after >= trial.before * WORTH_GROWING || trial.from >= self.limit {
            return None;
        }
        self.slow_start = false;
        self.ceiling = Some((trial.from, CEILING_TICKS));
        Some((
            trial.from,
            format!(
                "{} did not raise the server's generation rate over {} ({:.0} → {:.0} tokens/s)",
                self.limit, trial.from, trial.before, after
            ),
        ))
    }

    fn without_server(&mut self, obs: Observation) -> (u32, String) {
        if obs.failures > 0 {
            return (
                self.decrease(0.8),
                format!("{} timeouts or server errors in the last second", obs.failures),
            );
        }
        if let Some(ttft) = obs.ttft_p50 {
            let baseline = *self.ttft_baseline.get_or_insert(ttft);
            // Follow improvements fast and degradations slowly, so the baseline tracks the
            // quiet-server latency rather than the loaded one.
            self.ttft_baseline = Some(if ttft < baseline { ttft } else { baseline * 0.98 + ttft * 0.02 });
            if ttft > baseline * 3.0 + 0.5 {
                return (
                    self.decrease(0.9),
                    format!("time to first token {ttft:.1} s against {baseline:.1} s unloaded: the server is queueing (no /metrics)"),
                );
            }
        }
        if self.hold == 0 && self.saturated(obs.outstanding) {
            if self.ticks <= FIRST_SCRAPE_TICKS {
                // The first scrape may simply not have come back yet.
                return (self.limit, "waiting for the server's first /metrics reading".to_string());
            }
            return (self.increase(), "requests start promptly; probing for more (no /metrics)".to_string());
        }
        (self.limit, "steady (no /metrics)".to_string())
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn server(running: f64, waiting: f64, kv: f64, preempted: f64) -> Option<ServerSignals> {
        Some(ServerSignals {
            running,
            waiting,
            kv_usage: kv,
            new_preemptions: preempted,
            generation_tps: None,
        })
    }

    /// A toy server with `max_seqs` batch slots: everything above it waits.
    fn run_against(max_seqs: u32, ticks: usize) -> Controller {
        let mut c = Controller::new(8, 1, 1024);
        for _ in 0..ticks {
            let outstanding = c.limit();
            let running = outstanding.min(max_seqs) as f64;
            let waiting = outstanding.saturating_sub(max_seqs) as f64;
            c.observe(Observation {
                outstanding,
                server: server(running, waiting, 0.5, 0.0),
                ..Default::default()
            });
        }
        c
    }

    #[test]
    fn converges_to_a_full_batch_with_a_small_queue() {
        let c = run_against(200, 120);
        assert!((200..=240).contains(&c.limit()), "limit {}", c.limit());
        let c = run_against(32, 80);
        assert!((32..=40).contains(&c.limit()), "limit {}", c.limit());
    }

    /// A server whose generation rate stops rising at `knee` running sequences (each runs at
    /// 60 tokens/s alone; together they share 60 × knee).
    fn run_against_knee(knee: u32, max_seqs: u32, ticks: usize) -> Vec<Decision> {
        run_against_jittery_knee(knee, max_seqs, ticks, &[1.0])
    }

    /// The same, with each reading of the rate off by the next factor of `jitter` (cycled), as
    /// the timing of real scrapes makes it.
    fn run_against_jittery_knee(knee: u32, max_seqs: u32, ticks: usize, jitter: &[f64]) -> Vec<Decision> {
        let mut c = Controller::new(4, 1, 1024);
        (0..ticks)
            .map(|tick| {
                let outstanding = c.limit();
                let running = outstanding.min(max_seqs);
                let mut signals =
                    server(running as f64, outstanding.saturating_sub(max_seqs) as f64, 0.3, 0.0);
                if let Some(s) = signals.as_mut() {
                    s.generation_tps = Some(60.0 * running.min(knee) as f64 * jitter[tick % jitter.len()]);
                }
                c.observe(Observation { outstanding, server: signals, ..Default::default() })
            })
            .collect()
    }

    #[test]
    fn growth_stops_where_the_servers_generation_rate_stops_rising() {
        let decisions = run_against_knee(25, 200, 40);
        let last = decisions.last().unwrap();
        // 4, 8, 16, 32 raise the rate; 64 does not and is undone (each judged by three
        // readings after the first).
        assert_eq!(last.limit, 32, "{decisions:#?}");
        let undo = decisions
            .iter()
            .find(|d| d.changed && d.reason.contains("did not raise"))
            .expect("an undone increase");
        assert!(
            undo.reason.contains("64 did not raise the server's generation rate over 32"),
            "{}",
            undo.reason
        );
        assert!(last.reason.contains("next try in"), "{}", last.reason);
        // A minute later it tries again (a smaller step now), and is undone again.
        let decisions = run_against_knee(25, 200, 90);
        assert_eq!(decisions.last().unwrap().limit, 32);
        let undone: Vec<_> =
            decisions.iter().filter(|d| d.changed && d.reason.contains("did not raise")).collect();
        assert_eq!(undone.len(), 2, "{undone:#?}");
        assert!(undone[1].reason.starts_with("36 did not raise"), "{}", undone[1].reason);
    }

    #[test]
    fn a_jittery_rate_reading_does_not_keep_an_increase_past_the_knee() {
        // Readings off by up to 6% either way: one reading against another can show a 13% gain
        // where there is none.
        let jitter = [0.94, 1.0, 1.06, 1.03, 0.97];
        for offset in 0..jitter.len() {
            let jitter: Vec<f64> = jitter.iter().cycle().skip(offset).take(jitter.len()).copied().collect();
            let decisions = run_against_jittery_knee(25, 200, 300, &jitter);
            let kept_above_knee = decisions
                .windows(2)
                .filter(|pair| pair[0].limit > 32 && pair[1].reason.starts_with("server has room"))
                .count();
            assert_eq!(kept_above_knee, 0, "jitter {jitter:?}: {decisions:#?}");
            assert_eq!(decisions.last().unwrap().limit, 32, "jitter {jitter:?}");
        }
    }

    #[test]
    fn the_first_increase_waits_for_settled_readings_of_the_server() {
        let mut c = Controller::new(16, 1, 1024);
        let at_16 = || {
            let mut signals = server(16.0, 0.0, 0.1, 0.0);
            signals.as_mut().unwrap().generation_tps = Some(960.0);
            Observation { outstanding: 16, server: signals, ..Default::default() }
        };
        // The first scrape has not come back; then one from before the requests arrived.
        assert_eq!(c.observe(Observation { outstanding: 16, ..Default::default() }).limit, 16);
        let d = c.observe(Observation {
            outstanding: 16,
            server: server(0.0, 0.0, 0.0, 0.0),
            ..Default::default()
        });
        assert_eq!(d.limit, 16, "{d:?}");
        // The first rate covers the start-up and is left out; three more make a baseline.
        for _ in 0..3 {
            let d = c.observe(at_16());
            assert_eq!(d.limit, 16, "{d:?}");
            assert!(d.reason.contains("measuring"), "{}", d.reason);
        }
        let d = c.observe(at_16());
        assert_eq!(d.limit, 32, "{d:?}");
    }

    #[test]
    fn a_rate_that_keeps_rising_grows_to_a_full_batch() {
        let decisions = run_against_knee(10_000, 200, 120);
        let limit = decisions.last().unwrap().limit;
        assert!((200..=240).contains(&limit), "limit {limit}");
    }

    #[test]
    fn a_growing_queue_trims_the_limit_and_says_why() {
        let mut c = Controller::new(300, 1, 1024);
        let full =
            Observation { outstanding: 300, server: server(200.0, 100.0, 0.8, 0.0), ..Default::default() };
        // One reading could be a burst of arrivals; the second confirms the queue.
        assert_eq!(c.observe(full).limit, 300);
        let d = c.observe(full);
        assert!(d.changed && d.limit < 300 && d.limit >= 200, "{d:?}");
        assert!(d.reason.contains("200 running, 100 waiting"), "{}", d.reason);
    }

    #[test]
    fn a_burst_of_arrivals_is_not_a_full_batch() {
        // A run's start: all of its first requests wait for one step, then run.
        let mut c = Controller::new(16, 1, 1024);
        c.observe(Observation { outstanding: 16, ..Default::default() });
        let d = c.observe(Observation {
            outstanding: 16,
            server: server(0.0, 16.0, 0.0, 0.0),
            ..Default::default()
        });
        assert_eq!(d.limit, 16, "{d:?}");
        let d = c.observe(Observation {
            outstanding: 16,
            server: server(16.0, 0.0, 0.1, 0.0),
            ..Default::default()
        });
        assert_eq!(d.limit, 16, "{d:?}");
    }

    #[test]
    fn preemption_with_a_full_cache_backs_off_and_holds() {
        let mut c = Controller::new(100, 1, 1024);
        let d = c.observe(Observation {
            outstanding: 100,
            server: server(100.0, 0.0, 0.98, 5.0),
            ..Default::default()
        });
        assert_eq!(d.limit, 90);
        assert!(d.reason.contains("preempted 5"), "{}", d.reason);
        // Held: no growth on the next tick even though there is room.
        let d = c.observe(Observation {
            outstanding: 90,
            server: server(90.0, 0.0, 0.5, 0.0),
            ..Default::default()
        });
        assert_eq!(d.limit, 90);
    }

    #[test]
    fn does_not_grow_a_limit_it_is_not_using() {
        let mut c = Controller::new(64, 1, 1024);
        let d = c.observe(Observation {
            outstanding: 10,
            server: server(10.0, 0.0, 0.1, 0.0),
            ..Default::default()
        });
        assert_eq!(d.limit, 64);
        assert!(!d.changed);
    }

    #[test]
    fn failures_cut_the_limit_and_bounds_hold() {
        let mut c = Controller::new(10, 8, 12);
        let d = c.observe(Observation { outstanding: 10, failures: 3, ..Default::default() });
        assert_eq!(d.limit, 8);
        assert!(d.reason.contains("3 timeouts"), "{}", d.reason);
    }

    #[test]
    fn without_metrics_a_rising_time_to_first_token_backs_off() {
        let mut c = Controller::new(32, 1, 1024);
        for _ in 0..FIRST_SCRAPE_TICKS {
            let d = c.observe(Observation { outstanding: 32, ttft_p50: Some(0.2), ..Default::default() });
            assert_eq!(d.limit, 32, "no growth before /metrics has had a chance to answer: {d:?}");
        }
        c.observe(Observation { outstanding: 32, ttft_p50: Some(0.2), ..Default::default() });
        let grown = c.limit();
        assert!(grown > 32);
        let d = c.observe(Observation { outstanding: grown, ttft_p50: Some(5.0), ..Default::default() });
        assert!(d.limit < grown, "{d:?}");
        assert!(d.reason.contains("queueing"), "{}", d.reason);
    }
}
