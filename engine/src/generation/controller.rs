//! Adaptive concurrency for one endpoint, run once per tick.
//!
//! Against vLLM, latency is not a congestion signal (a request's time grows with its length)
//! and the server never sheds load (its queue is unbounded), so RTT- or 429-driven limiters do
//! not transfer. What a vLLM server does as its batch grows is known: its generation rate rises
//! (on a GPU, sublinearly, until the KV cache is full and the scheduler preempts; on some
//! servers it flattens much earlier), and once the batch is at `max_num_seqs` more requests
//! only wait. The controller follows that:
//!
//! - **Slow start.** While the server has room (nothing waiting) and the limit is in use, double
//!   it, and keep doubling while one doubling raises the server's generation rate by a quarter
//!   or more: a gain that size stands out of a reading's noise, so such a step needs one
//!   reading, and the ramp to a batch of hundreds takes seconds.
//! - **Judged growth.** A doubling that shows less is read for longer (five readings) before it
//!   is judged: kept if it raised the rate by 5% (slow start then ends: the rate is flattening),
//!   undone otherwise (the rate has flattened: a bigger batch would only make each request
//!   slower and the run's tail longer), and a marginal gain measured against a single reading
//!   of the old limit is measured again from there. Afterwards the controller probes a limit
//!   half again as large every half a minute, judged the same way. (Steps of an eighth judged
//!   by 5% cannot work: on a server whose rate rises sublinearly they gain 2–4%, inside the
//!   noise of a reading.)
//! - **Halving.** A limit that a larger one did not improve on may itself be larger than the
//!   rate needs: the limit a new endpoint starts at is a guess, and a probe can be kept on a
//!   noisy reading. Past what the rate needs a bigger batch only makes each request slower and
//!   the run's tail longer (on a server flat past 25 running, a run at 64 ends 2% later than at
//!   32), so the controller halves it and keeps the half while the rate holds within 3%, undoing
//!   it otherwise. A halving, like a doubling, is a step whose effect stands out of the noise;
//!   a limit a doubling paid from, or a halving cost, is not tried again.
//! - **Readings after a change** are left out until the server holds the new limit (an
//!   increase's requests take a tick or two to be sent and admitted; a decrease takes effect as
//!   the requests over it finish), and one more; a judged step is judged on the last
//!   three of its five readings: a wave of prefill dips the generation rate for a while on any
//!   server, and judged during it every increase would look like a loss.
//! - **A full batch** (requests waiting on three readings in a row while the running count no
//!   longer rises; at a run's start every request waits for a step or two) holds the limit at
//!   what runs plus a small queue, which keeps the batch full as requests finish.
//! - **Backing off** on a preemption storm (preemptions with the KV cache nearly full) and on
//!   timeouts or server errors the endpoint's verdicts counted, each followed by a few ticks of
//!   hold.
//!
//! Without `/metrics` the controller falls back to the client's own view: time to first token
//! against its unloaded baseline stands in for the waiting queue.

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
    /// Requests outstanding on the endpoint under this limit (all worker processes).
    pub outstanding: u32,
    pub server: Option<ServerSignals>,
    /// Timeouts and server errors counted against samples since the previous tick.
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

/// A doubling in slow start is kept on one reading when it raises the rate this much.
const CLEAR_GAIN: f64 = 1.25;
/// A judged increase is kept when it raises the rate this much.
const WORTH_GROWING: f64 = 1.05;
/// A judged gain below this, measured against fewer than `BEFORE_READINGS` readings of the old
/// limit, is measured again.
const MARGINAL_GAIN: f64 = 1.12;
/// Readings a judged increase is read for, and how many of the last of them are judged.
const JUDGED_READINGS: usize = 5;
const JUDGED_TAIL: usize = 3;
/// Readings of the old limit that make a trustworthy "before".
const BEFORE_READINGS: usize = 3;
/// Readings kept under one limit.
const KEPT_READINGS: usize = 8;
/// Readings after an increase left out at most, waiting for its requests to arrive.
const MOST_SKIPPED: u32 = 10;
/// Ticks to hold after a decrease before growing again.
const HOLD_TICKS: u32 = 3;
/// A halving is kept when the rate under it is at least this share of the rate before.
const TRIM_HOLDS: f64 = 0.97;
/// Ticks between probes for more once slow start has ended.
const PROBE_EVERY: u32 = 30;
/// Ticks before a limit that did not pay may be tried again.
const CEILING_TICKS: u32 = 120;
/// Ticks to wait for a first `/metrics` reading (or a first generation rate) before growing
/// without it.
const FIRST_SCRAPE_TICKS: u32 = 3;
/// Readings with a queue, the running count not rising, that make a full batch.
const FULL_BATCH_READINGS: u32 = 3;

#[derive(Clone, Copy, Debug, PartialEq, Eq)]
enum Growth {
    /// Doubling while each doubling pays.
    SlowStart,
    /// Probing for more now and then, each probe judged.
    Probing,
}

/// An increase from `from`, made while the server generated `before` tokens/s (the mean of
/// `before_readings` readings).
#[derive(Clone, Copy, Debug)]
struct Trial {
    from: u32,
    before: f64,
    before_readings: usize,
    /// Judged on `JUDGED_READINGS` readings, not on one against `CLEAR_GAIN`.
    judged: bool,
}

/// A limit not to grow past for a while.
#[derive(Clone, Copy, Debug)]
struct Ceiling {
    limit: u32,
    ticks: u32,
    cause: Cause,
}

/// Why growing past a ceiling does not pay.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
enum Cause {
    /// A larger limit did not raise the server's generation rate: the rate is flat from here
    /// up, so a smaller limit may hold it as well (the trim tries one).
    Flat,
    /// The KV cache filled until the scheduler preempted.
    Preempted,
    /// More requests only waited in the server's queue.
    Queued,
}

impl Cause {
    fn why(self) -> &'static str {
        match self {
            Cause::Flat => "did not raise the server's generation rate",
            Cause::Preempted => "filled the KV cache until it preempted",
            Cause::Queued => "only waited in the server's queue",
        }
    }
}

/// A halving of a limit that a larger one did not improve on, from `from`, made while the
/// server generated `before` tokens/s.
#[derive(Clone, Copy, Debug)]
struct Trim {
    from: u32,
    before: f64,
}

/// The readings of the server's generation rate under the current limit.
#[derive(Clone, Debug)]
struct RateReadings {
    values: VecDeque<f64>,
    skip: Skip,
}

/// Readings still to leave out.
#[derive(Clone, Copy, Debug)]
enum Skip {
    None,
    /// The next reading: the first after a change covers the old limit (or the start-up).
    Next,
    /// Readings until the server holds the new limit, at most `left` more, then the next:
    /// after an increase, its requests take a tick or two to be sent and admitted, and their
    /// prefill to end; a decrease takes effect only as the requests over it finish.
    Settling {
        until: Held,
        left: u32,
    },
}

/// The requests (running and waiting) a server holds once a new limit has taken effect.
#[derive(Clone, Copy, Debug)]
enum Held {
    AtLeast(f64),
    AtMost(f64),
}

impl Held {
    fn by(self, present: f64) -> bool {
        match self {
            Held::AtLeast(requests) => present >= requests,
            Held::AtMost(requests) => present <= requests,
        }
    }
}

impl RateReadings {
    fn new() -> Self {
        Self { values: VecDeque::with_capacity(KEPT_READINGS), skip: Skip::Next }
    }

    /// `present` is the requests the server holds (running and waiting).
    fn push(&mut self, generation: Option<f64>, present: f64) {
        let Some(tps) = generation else { return };
        match self.skip {
            Skip::None => {}
            Skip::Next => {
                self.skip = Skip::None;
                return;
            }
            Skip::Settling { until, left } => {
                self.skip = if until.by(present) || left == 0 {
                    Skip::Next
                } else {
                    Skip::Settling { until, left: left - 1 }
                };
                return;
            }
        }
        if self.values.len() == KEPT_READINGS {
            self.values.pop_front();
        }
        self.values.push_back(tps);
    }

    /// The limit changed from `from` to `to`: earlier readings say nothing about it. Readings
    /// wait for the server to hold the new limit: after an increase, for its requests to
    /// arrive; after a decrease, for the requests over it to finish.
    fn restart(&mut self, from: u32, to: u32) {
        self.values.clear();
        let requests = f64::from(to);
        let until = if to > from { Held::AtLeast(requests * 0.9) } else { Held::AtMost(requests * 1.1) };
        self.skip = Skip::Settling { until, left: MOST_SKIPPED };
    }

    fn count(&self) -> usize {
        self.values.len()
    }

    /// The mean of the last `n` readings (fewer if there are fewer).
    fn mean_of_last(&self, n: usize) -> Option<f64> {
        let take = self.values.len().min(n);
        (take > 0).then(|| self.values.iter().rev().take(take).sum::<f64>() / take as f64)
    }

    fn mean(&self) -> Option<f64> {
        self.mean_of_last(KEPT_READINGS)
    }
}

#[derive(Clone, Debug)]
pub struct Controller {
    limit: u32,
    min: u32,
    max: u32,
    growth: Growth,
    /// Ticks left holding after a decrease.
    hold: u32,
    /// Lowest time to first token seen (EWMA of quiet periods), the no-queue baseline.
    ttft_baseline: Option<f64>,
    rates: RateReadings,
    trial: Option<Trial>,
    /// A doubling that showed a marginal gain against a single reading, to be judged again
    /// once the rate under the limit it was undone to has been read enough.
    rejudge: Option<u32>,
    /// A limit that growing past did not pay, and the ticks until it may be tried again.
    ceiling: Option<Ceiling>,
    /// The halving being judged.
    trim: Option<Trim>,
    /// The largest limit known to generate less than a larger one (a doubling from it paid, or
    /// a halving to it cost): the trim never goes down to it.
    known_worse: u32,
    /// Ticks since the last increase (for the probes once slow start has ended).
    since_growth: u32,
    /// Ticks observed so far.
    ticks: u32,
    /// Consecutive readings with more than a small queue while the running count did not rise.
    queued_readings: u32,
    /// The running count at the previous reading.
    last_running: f64,
    /// The most requests seen running over those queued readings: the server's batch. (A
    /// reading taken just after a wave of completions, before the queue is admitted, shows
    /// fewer.)
    batch_seen: f64,
    /// Consecutive ticks with `/metrics` but no generation rate (the first scrape, or scrapes
    /// slower than a tick).
    ticks_without_rate: u32,
}

impl Controller {
    pub fn new(initial: u32, min: u32, max: u32) -> Self {
        Self {
            limit: initial.clamp(min, max),
            min,
            max,
            growth: Growth::SlowStart,
            hold: 0,
            ttft_baseline: None,
            rates: RateReadings::new(),
            trial: None,
            rejudge: None,
            ceiling: None,
            trim: None,
            known_worse: 0,
            since_growth: 0,
            ticks: 0,
            queued_readings: 0,
            last_running: 0.0,
            batch_seen: 0.0,
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
            self.trim = None;
            self.rates.restart(self.limit, limit);
        }
        self.limit = limit;
    }

    pub fn observe(&mut self, obs: Observation) -> Decision {
        self.ticks += 1;
        self.since_growth += 1;
        self.hold = self.hold.saturating_sub(1);
        self.ceiling = self.ceiling.filter(|c| c.ticks > 1).map(|c| Ceiling { ticks: c.ticks - 1, ..c });
        let (target, reason) = match obs.server {
            Some(server) => self.with_server(obs, server),
            None => self.without_server(obs),
        };
        let target = target.clamp(self.min, self.max);
        let changed = target != self.limit;
        if target < self.limit {
            self.hold = HOLD_TICKS;
            self.growth = Growth::Probing;
            self.trial = None;
        }
        if target > self.limit {
            self.since_growth = 0;
        }
        if changed {
            self.rates.restart(self.limit, target);
        }
        self.limit = target;
        Decision { limit: target, reason, changed }
    }

    fn decrease(&self, factor: f64) -> u32 {
        ((self.limit as f64 * factor).floor() as u32).min(self.limit.saturating_sub(1)).max(1)
    }

    /// Using (nearly) all of the limit: only then does growing it change anything.
    fn saturated(&self, outstanding: u32) -> bool {
        outstanding as f64 >= self.limit as f64 * 0.9
    }

    fn with_server(&mut self, obs: Observation, s: ServerSignals) -> (u32, String) {
        self.rates.push(s.generation_tps, s.running + s.waiting);
        self.ticks_without_rate = if s.generation_tps.is_some() { 0 } else { self.ticks_without_rate + 1 };
        let queue_target = (s.running / 8.0).max(4.0);
        // New requests wait until a step admits them (at a run's start, every one of them), so a
        // queue alone is not a full batch: it must last while the running count stops rising.
        let running_rose = s.running > self.last_running * 1.02 + 0.5;
        let queued = s.waiting > queue_target * 2.0 && !running_rose;
        self.queued_readings = if queued { self.queued_readings + 1 } else { 0 };
        self.batch_seen = if queued { self.batch_seen.max(s.running) } else { 0.0 };
        self.last_running = s.running;
        if obs.failures > 0 {
            self.trim = None;
            return (
                self.decrease(0.8),
                format!("{} timeouts or server errors in the last second", obs.failures),
            );
        }
        // The KV cache is full and the scheduler evicts running requests to recompute them
        // later. A lower limit takes effect only as requests finish (the running ones keep
        // growing their contexts meanwhile), so one cut, to below what ran, then wait until the
        // requests outstanding are within the new limit before judging again.
        if s.new_preemptions > 0.0 && s.kv_usage >= 0.9 && self.hold == 0 && obs.outstanding <= self.limit {
            self.growth = Growth::Probing;
            self.trim = None;
            let below_running = (s.running * 0.9).floor() as u32;
            self.ceiling =
                Some(Ceiling { limit: below_running.max(1), ticks: CEILING_TICKS, cause: Cause::Preempted });
            return (
                below_running.min(self.decrease(0.9)),
                format!(
                    "server preempted {} requests with the KV cache {:.0}% full ({:.0} running)",
                    s.new_preemptions,
                    s.kv_usage * 100.0,
                    s.running
                ),
            );
        }
        if self.queued_readings >= FULL_BATCH_READINGS {
            self.growth = Growth::Probing;
            self.trial = None;
            self.trim = None;
            self.rejudge = None;
            // The batch is full: keep a small queue so it stays full, no more; more would only
            // wait, so probes stay below this for a while.
            let batch = self.batch_seen.max(s.running);
            let target = ((batch + (batch / 8.0).max(4.0)).round() as u32).min(self.limit);
            self.ceiling = Some(Ceiling { limit: target, ticks: CEILING_TICKS, cause: Cause::Queued });
            return (target, format!("server batch is full: {batch:.0} running, {:.0} waiting", s.waiting));
        }
        if let Some(verdict) = self.judge_trial() {
            return verdict;
        }
        if let Some(verdict) = self.judge_trim() {
            return verdict;
        }
        let room = self.saturated(obs.outstanding) && s.waiting <= queue_target && s.kv_usage < 0.95;
        if self.hold > 0 || !room {
            return (self.limit, "steady".to_string());
        }
        if let Some(ceiling) = self.ceiling.filter(|c| self.limit >= c.limit) {
            // A larger limit did not raise the rate: the limit may be larger than the rate
            // needs (it started there, or a probe was kept on a noisy reading), and past what
            // the rate needs a bigger batch only makes each request slower and the run's tail
            // longer. Half of it is tried, unless a smaller limit is known to generate less,
            // against a full set of readings of this one (a halving that holds the rate is
            // judged within 3%).
            let half = self.limit / 2;
            if ceiling.cause == Cause::Flat
                && half > self.known_worse
                && half >= self.min
                && self.rates.count() >= KEPT_READINGS
            {
                let before = self.rates.mean().expect("enough readings");
                self.trim = Some(Trim { from: self.limit, before });
                return (
                    half,
                    format!(
                        "halved from {}: a larger limit did not raise the server's generation rate, so a smaller one may hold it",
                        self.limit
                    ),
                );
            }
            return (
                self.limit,
                format!(
                    "steady: more than {} {} (next try in {} ticks)",
                    ceiling.limit,
                    ceiling.cause.why(),
                    ceiling.ticks
                ),
            );
        }
        if let Some(next) = self.rejudge {
            if self.rates.count() < BEFORE_READINGS {
                return (
                    self.limit,
                    format!("measuring the server's generation rate again before judging {next}"),
                );
            }
            self.rejudge = None;
            self.trial = Some(self.trial_from_here(true));
            return (next, format!("judging {next} against {} by the server's generation rate", self.limit));
        }
        if self.growth == Growth::Probing && self.since_growth < PROBE_EVERY {
            return (self.limit, "steady".to_string());
        }
        if self.rates.count() == 0 && self.ticks_without_rate < FIRST_SCRAPE_TICKS {
            // No reading under this limit yet to judge a bigger one against. (A server whose
            // /metrics has no generation counter never gives one: growth then goes on unjudged.)
            return (self.limit, "measuring the server's generation rate before growing".to_string());
        }
        let (next, judged) = match self.growth {
            Growth::SlowStart => (self.limit.saturating_mul(2), false),
            Growth::Probing => (self.limit + (self.limit / 2).max(1), true),
        };
        self.trial = Some(self.trial_from_here(judged));
        (
            next,
            format!(
                "server has room: {:.0} running, {:.0} waiting, KV cache {:.0}%",
                s.running,
                s.waiting,
                s.kv_usage * 100.0
            ),
        )
    }

    /// A trial of an increase from the current limit, against the readings under it.
    fn trial_from_here(&self, judged: bool) -> Trial {
        Trial {
            from: self.limit,
            before: self.rates.mean().unwrap_or(0.0),
            before_readings: self.rates.count(),
            judged,
        }
    }

    /// Follows the last increase: keeps it (`None`), holds while its readings come in, or
    /// undoes it when it did not pay.
    fn judge_trial(&mut self) -> Option<(u32, String)> {
        let mut trial = self.trial.take()?;
        if trial.from >= self.limit || trial.before <= 0.0 {
            // Nothing to judge: the limit went down since, or there was no rate to compare.
            return None;
        }
        let judging =
            || Some((self.limit, "judging the last increase by the server's generation rate".to_string()));
        if !trial.judged {
            let Some(first) = self.rates.mean_of_last(1) else {
                self.trial = Some(trial);
                return judging();
            };
            if first >= trial.before * CLEAR_GAIN {
                self.known_worse = self.known_worse.max(trial.from);
                return None; // slow start goes on
            }
            // Less than a clear gain on one reading: read this limit for longer.
            trial.judged = true;
        }
        if self.rates.count() < JUDGED_READINGS {
            self.trial = Some(trial);
            return judging();
        }
        // The last of them: a transient after the change (a wave of prefill, completions that
        // came together) dips the first ones on any server.
        let after = self.rates.mean_of_last(JUDGED_TAIL).expect("enough readings");
        let gain = after / trial.before;
        if gain >= CLEAR_GAIN && self.growth == Growth::SlowStart {
            self.known_worse = self.known_worse.max(trial.from);
            return None; // a slow reading, not a flattening rate: slow start goes on
        }
        self.growth = Growth::Probing;
        if gain >= WORTH_GROWING && (gain >= MARGINAL_GAIN || trial.before_readings >= BEFORE_READINGS) {
            self.known_worse = self.known_worse.max(trial.from);
            return None;
        }
        if gain >= WORTH_GROWING {
            // A marginal gain against a single reading of the old limit: measure it properly.
            self.rejudge = Some(self.limit);
            return Some((
                trial.from,
                format!(
                    "{} raised the server's generation rate by only {:.0}% over {}; measuring again to judge it",
                    self.limit,
                    (gain - 1.0) * 100.0,
                    trial.from
                ),
            ));
        }
        self.ceiling = Some(Ceiling { limit: trial.from, ticks: CEILING_TICKS, cause: Cause::Flat });
        Some((
            trial.from,
            format!(
                "{} did not raise the server's generation rate over {} ({:.0} → {:.0} tokens/s)",
                self.limit, trial.from, trial.before, after
            ),
        ))
    }

    /// Follows the last halving: keeps it (`None`, with the ceiling brought down to it) when
    /// the server's rate held, undoes it when the rate fell.
    fn judge_trim(&mut self) -> Option<(u32, String)> {
        let trim = self.trim.take()?;
        if self.rates.count() < JUDGED_READINGS {
            self.trim = Some(trim);
            return Some((
                self.limit,
                format!("judging {} against {} by the server's generation rate", self.limit, trim.from),
            ));
        }
        let after = self.rates.mean_of_last(JUDGED_TAIL).expect("enough readings");
        if after >= trim.before * TRIM_HOLDS {
            // Growing past this limit (to where it came from) did not raise the rate either.
            self.ceiling = Some(Ceiling { limit: self.limit, ticks: CEILING_TICKS, cause: Cause::Flat });
            return None;
        }
        self.known_worse = self.known_worse.max(self.limit);
        Some((
            trim.from,
            format!(
                "{} lowered the server's generation rate below {}'s ({:.0} → {:.0} tokens/s)",
                self.limit, trim.from, trim.before, after
            ),
        ))
    }

    fn without_server(&mut self, obs: Observation) -> (u32, String) {
        self.trim = None;
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
            let next = match self.growth {
                Growth::SlowStart => self.limit.saturating_mul(2),
                Growth::Probing => self.limit + (self.limit / 8).max(1),
            };
            return (next, "requests start promptly; probing for more (no /metrics)".to_string());
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

    /// A toy server with `max_seqs` batch slots (everything above waits) whose generation rate
    /// at `n` running is `rate(n)`, each reading off by the next factor of `jitter` (cycled).
    fn run_against(
        max_seqs: u32,
        ticks: usize,
        start: u32,
        rate: impl Fn(f64) -> f64,
        jitter: &[f64],
    ) -> Vec<Decision> {
        let mut c = Controller::new(start, 1, 1024);
        (0..ticks)
            .map(|tick| {
                let outstanding = c.limit();
                let running = outstanding.min(max_seqs);
                let mut signals =
                    server(running as f64, outstanding.saturating_sub(max_seqs) as f64, 0.3, 0.0);
                if let Some(s) = signals.as_mut() {
                    s.generation_tps = Some(rate(running as f64) * jitter[tick % jitter.len()]);
                }
                c.observe(Observation { outstanding, server: signals, ..Default::default() })
            })
            .collect()
    }

    /// Flat past a knee: each sequence runs at 60 tokens/s alone, all share 60 × knee.
    fn knee(knee: f64) -> impl Fn(f64) -> f64 {
        move |n: f64| 60.0 * n.min(knee)
    }

    /// A GPU-like server: a step costs 32.5 ms plus 0.48 ms per sequence.
    fn affine(n: f64) -> f64 {
        n / (0.0325 + 0.00048 * n)
    }

    #[test]
    fn slow_start_doubles_while_each_doubling_clearly_pays() {
        // A rate that rises all the way: 16 → 32 → 64 → 128 → 256, one reading each.
        let decisions = run_against(1024, 12, 16, affine, &[1.0]);
        let limits: Vec<u32> = decisions.iter().filter(|d| d.changed).map(|d| d.limit).collect();
        assert_eq!(limits[..4], [32, 64, 128, 256], "{decisions:#?}");
        let at_256 = decisions.iter().position(|d| d.limit == 256).unwrap();
        assert!(at_256 <= 13, "256 reached on tick {at_256}: {decisions:#?}");
    }

    #[test]
    fn growth_stops_where_the_servers_rate_flattens() {
        let decisions = run_against(200, 60, 16, knee(25.0), &[1.0]);
        let last = decisions.last().unwrap();
        // 16 → 32 raises the rate by 56%; 64 does not raise it at all and is undone.
        assert_eq!(last.limit, 32, "{decisions:#?}");
        let undo = decisions.iter().find(|d| d.reason.contains("did not raise")).expect("an undone increase");
        assert!(
            undo.reason.contains("64 did not raise the server's generation rate over 32"),
            "{}",
            undo.reason
        );
        let settled_by = decisions.iter().rposition(|d| d.changed).unwrap();
        assert!(settled_by < 16, "settled on tick {settled_by}");
    }

    #[test]
    fn a_start_above_a_flat_rates_knee_is_halved_while_the_rate_holds() {
        // Starting at 64 on a server flat past 25: 128 does not raise the rate, neither does
        // 64 over 32 (kept), while 16 lowers it (undone).
        let decisions = run_against(200, 120, 64, knee(25.0), &[1.0]);
        let changes: Vec<(u32, &str)> =
            decisions.iter().filter(|d| d.changed).map(|d| (d.limit, d.reason.as_str())).collect();
        assert_eq!(changes.iter().map(|c| c.0).collect::<Vec<_>>()[..4], [128, 64, 32, 16], "{changes:#?}");
        assert!(changes[2].1.contains("halved from 64"), "{changes:#?}");
        assert!(
            changes[4].1.contains("16 lowered the server's generation rate below 32's (1500 → 960 tokens/s)"),
            "{changes:#?}"
        );
        assert_eq!(decisions.last().unwrap().limit, 32, "{changes:#?}");
        let settled_by = decisions.iter().rposition(|d| d.changed && d.limit != 48).unwrap();
        assert!(settled_by < 45, "settled on tick {settled_by}: {changes:#?}");
        // A cost once known is not paid again: no second halving below 32.
        assert_eq!(changes.iter().filter(|c| c.0 == 16).count(), 1, "{changes:#?}");
    }

    #[test]
    fn a_halving_that_lowers_a_sublinear_rate_is_undone_once() {
        // The GPU-like server, flat from 64 running up (its KV cache, say): 128 does not raise
        // the rate over 64; 32 lowers it by a third and is undone, and not tried again.
        let decisions = run_against(1024, 200, 64, |n| affine(n.min(64.0)), &[1.0]);
        let halvings: Vec<&Decision> = decisions.iter().filter(|d| d.reason.starts_with("halved")).collect();
        assert_eq!(halvings.len(), 1, "{decisions:#?}");
        assert!(
            decisions
                .iter()
                .any(|d| d.reason.starts_with("32 lowered the server's generation rate below 64's")),
            "{decisions:#?}"
        );
        assert_eq!(decisions.last().unwrap().limit, 64, "{decisions:#?}");
        let at_32 = decisions.iter().filter(|d| d.limit == 32).count();
        assert!(at_32 <= 8, "{at_32} ticks at 32: {decisions:#?}");
    }

    #[test]
    fn a_sublinear_rate_keeps_growing_until_the_batch_is_full() {
        // The affine server with 256 batch slots: the rate still rises at 200.
        let decisions = run_against(256, 200, 16, affine, &[1.0]);
        let last = decisions.last().unwrap();
        assert!((256..=300).contains(&last.limit), "{decisions:#?}");
        assert!(decisions.iter().all(|d| !d.reason.contains("did not raise")), "{decisions:#?}");
    }

    #[test]
    fn noisy_readings_neither_stop_a_rising_rate_nor_keep_growth_past_a_knee() {
        // Readings off by up to 5% either way, in every order.
        let jitter = [0.95, 1.0, 1.05, 1.02, 0.98];
        for offset in 0..jitter.len() {
            let jitter: Vec<f64> = jitter.iter().cycle().skip(offset).take(jitter.len()).copied().collect();
            let flat = run_against(200, 300, 16, knee(25.0), &jitter);
            let kept_past_knee = flat.iter().filter(|d| d.limit > 48).count();
            assert!(kept_past_knee <= 30, "jitter {jitter:?}: {flat:#?}");
            assert!(flat.last().unwrap().limit <= 48, "jitter {jitter:?}: {:?}", flat.last());
            let from_above = run_against(200, 300, 64, knee(25.0), &jitter);
            assert!(from_above.last().unwrap().limit <= 48, "jitter {jitter:?}: {from_above:#?}");
            let rising = run_against(256, 300, 16, affine, &jitter);
            assert!(rising.last().unwrap().limit >= 256, "jitter {jitter:?}: {rising:#?}");
        }
    }

    #[test]
    fn a_full_batch_holds_a_small_queue_and_says_why() {
        // 64 slots, the rate still rising below them: grows to 128, then trims to 64 + a queue.
        let decisions = run_against(64, 40, 16, affine, &[1.0]);
        let last = decisions.last().unwrap();
        assert!((68..=80).contains(&last.limit), "{decisions:#?}");
        assert!(decisions.iter().any(|d| d.reason.contains("64 running, 64 waiting")), "{decisions:#?}");
    }

    #[test]
    fn a_full_batch_read_just_after_a_wave_of_completions_keeps_the_whole_batch() {
        // 64 slots: a wave of completions leaves a few empty until the queue is admitted, and
        // the scrape catches it there. The batch is still 64.
        let mut c = Controller::new(128, 1, 1024);
        let mut last = None;
        for (running, waiting) in [(64.0, 64.0), (64.0, 60.0), (60.0, 40.0), (57.0, 30.0)] {
            last = Some(c.observe(Observation {
                outstanding: 128,
                server: server(running, waiting, 0.1, 0.0),
                ..Default::default()
            }));
        }
        let d = last.unwrap();
        assert_eq!(d.limit, 72, "{d:?}");
        assert!(d.reason.contains("64 running, 30 waiting"), "{d:?}");
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
    fn requests_waiting_at_a_runs_start_while_the_batch_fills_are_not_a_full_batch() {
        let mut c = Controller::new(16, 1, 1024);
        for running in [0.0, 4.0, 10.0, 16.0] {
            let d = c.observe(Observation {
                outstanding: 16,
                server: server(running, 16.0 - running, 0.1, 0.0),
                ..Default::default()
            });
            assert!(!d.reason.contains("batch is full"), "{d:?}");
        }
    }

    #[test]
    fn readings_before_an_increase_arrives_and_during_its_prefill_are_left_out() {
        // A server whose rate doubles with the batch, but whose generation dips to a third for
        // four readings after each increase while the new requests arrive and are prefilled.
        let mut c = Controller::new(16, 1, 1024);
        let mut since_change = 0;
        let mut decisions = Vec::new();
        for _ in 0..24 {
            let limit = c.limit();
            // The new requests reach the server two ticks after the increase.
            let arrived = if since_change < 2 && limit > 16 { limit / 2 } else { limit };
            let prefilling = since_change < 4 && limit > 16;
            let mut signals = server(arrived as f64, 0.0, 0.2, 0.0);
            if let Some(s) = signals.as_mut() {
                s.generation_tps = Some(60.0 * arrived as f64 / if prefilling { 3.0 } else { 1.0 });
            }
            let d = c.observe(Observation { outstanding: limit, server: signals, ..Default::default() });
            since_change = if d.changed { 0 } else { since_change + 1 };
            decisions.push(d);
        }
        assert!(decisions.iter().all(|d| !d.reason.contains("did not raise")), "{decisions:#?}");
        assert!(c.limit() >= 64, "{decisions:#?}");
    }

    #[test]
    fn the_first_increase_waits_for_a_reading_after_the_start_up() {
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
        // The first rate covers the start-up and is left out; the next one is the baseline.
        let d = c.observe(at_16());
        assert!(d.reason.contains("measuring"), "{}", d.reason);
        let d = c.observe(at_16());
        assert_eq!(d.limit, 32, "{d:?}");
    }

    #[test]
    fn preemption_with_a_full_cache_backs_off_below_what_ran_and_holds() {
        let mut c = Controller::new(300, 1, 1024);
        let d = c.observe(Observation {
            outstanding: 300,
            server: server(250.0, 50.0, 0.98, 5.0),
            ..Default::default()
        });
        assert_eq!(d.limit, 225, "{d:?}");
        assert!(d.reason.contains("preempted 5"), "{}", d.reason);
        // The running requests keep preempting while the outstanding ones drain to the new
        // limit: no further cut until the first has taken effect.
        for outstanding in [290, 270, 250, 230] {
            let d = c.observe(Observation {
                outstanding,
                server: server(240.0, 0.0, 0.99, 3.0),
                ..Default::default()
            });
            assert_eq!(d.limit, 225, "{d:?}");
        }
        // Preempting still within the new limit: another cut.
        let d = c.observe(Observation {
            outstanding: 225,
            server: server(225.0, 0.0, 0.99, 3.0),
            ..Default::default()
        });
        assert!(d.limit < 225, "{d:?}");
        // Held after it: no growth on the next tick even though there is room.
        let held = d.limit;
        let d = c.observe(Observation {
            outstanding: held,
            server: server(held as f64, 0.0, 0.5, 0.0),
            ..Default::default()
        });
        assert_eq!(d.limit, held);
    }

    #[test]
    fn does_not_grow_a_limit_it_is_not_using() {
        let mut c = Controller::new(64, 1, 1024);
        for _ in 0..5 {
            let mut signals = server(10.0, 0.0, 0.1, 0.0);
            signals.as_mut().unwrap().generation_tps = Some(600.0);
            let d = c.observe(Observation { outstanding: 10, server: signals, ..Default::default() });
            assert_eq!(d.limit, 64);
            assert!(!d.changed);
        }
    }

    #[test]
    fn failures_cut_the_limit_and_bounds_hold() {
        let mut c = Controller::new(10, 8, 12);
        let d = c.observe(Observation { outstanding: 10, failures: 3, ..Default::default() });
        assert_eq!(d.limit, 8);
        assert!(d.reason.contains("3 timeouts"), "{}", d.reason);
        c.set_bounds(2, 6);
        assert_eq!(c.limit(), 6);
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
