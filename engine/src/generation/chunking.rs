//! How many tokens each streamed chunk carries (`stream_interval`).
//!
//! vLLM sends a streamed request's first token at once, its last with the finish reason, and in
//! between one chunk per `stream_interval` tokens (the larger of the request's and the server's
//! own setting). Every chunk costs the server's API process a serialization and a pass of the
//! reasoning parser; where that process shares the CPU with generation (a CPU server, or a GPU
//! server's busy front end) the cost comes out of the generation rate. Against the real vLLM
//! CPU server at 64 requests, its API process spent 12% of a core beside Draft Studio at a
//! chunk every 16 tokens and 8% beside a client waiting for whole answers, and its model worker
//! got correspondingly less (docs/generation-benchmark.md).
//!
//! The engine needs chunks for two things only: to see that a request is alive (the idle
//! timeout) and to count tokens as they come. So it asks for a chunk every few seconds per
//! request, from the rate each request generates at: never fewer tokens than the run's
//! `stream_interval`, never more than [`LONGEST_INTERVAL`], and never so many that a chunk
//! would come less than [`CHUNKS_PER_IDLE_TIMEOUT`] times in an idle timeout should the rate
//! fall by half.
//!
//! The rate comes from the endpoint's own streams ([`Pace`]: known from the second chunk of
//! the first requests), or else from the server's `/metrics` (its generation rate over its
//! running requests). `/metrics` alone gave the first rate only after two scrapes, 5–10 s into
//! a run at a fixed limit: on the real vLLM CPU server that was a third of a 512-prompt run's
//! requests sent at the run's 16 tokens a chunk, and a plain client streaming every 16 tokens
//! ran at 0.84× one waiting for whole answers there (docs/generation-benchmark.md). The
//! endpoint keeps the last pace in `endpoint_capacity`, so only the very first requests on a
//! new endpoint stream at the run's interval; a later run, or a restarted worker process,
//! starts from the rate the last one knew ([`Pace::from_earlier`]).

/// Seconds of generation one chunk covers when the per-request rate is known.
const SECONDS_PER_CHUNK: f64 = 4.0;
/// Chunks a request sends at least within one idle timeout, at half the rate measured.
const CHUNKS_PER_IDLE_TIMEOUT: f64 = 8.0;
/// The most tokens asked for per chunk.
pub const LONGEST_INTERVAL: u32 = 256;

/// Tokens/s one request generates at, as the chunks of an endpoint's streams tell it: each
/// chunk adds its tokens and the time since the same request's previous chunk, to sums that
/// forget (by [`Pace::KEEP`] per chunk) so the last few dozen chunks decide.
#[derive(Clone, Copy, Debug, Default)]
pub struct Pace {
    tokens: f64,
    seconds: f64,
}

impl Pace {
    /// The weight a chunk keeps at each later one: about the last 64 chunks count.
    const KEEP: f64 = 1.0 - 1.0 / 64.0;

    pub fn observe(&mut self, tokens: u32, after: std::time::Duration) {
        self.tokens = self.tokens * Self::KEEP + f64::from(tokens);
        self.seconds = self.seconds * Self::KEEP + after.as_secs_f64();
    }

    /// Seconds of chunks a rate known from before (the endpoint's last, stored by an earlier
    /// run or process) counts as: about one chunk's worth, so this process's own streams
    /// outweigh it within a few chunks.
    const EARLIER_SECONDS: f64 = SECONDS_PER_CHUNK;

    /// A pace that starts from a rate an earlier run left; none for a rate that is not one.
    pub fn from_earlier(tps: f64) -> Self {
        if !(tps.is_finite() && tps > 0.0) {
            return Self::default();
        }
        Self { tokens: tps * Self::EARLIER_SECONDS, seconds: Self::EARLIER_SECONDS }
    }

    /// None before any chunk (or while chunks came at once, as a burst read together).
    pub fn per_request_tps(&self) -> Option<f64> {
        (self.seconds > 1e-3).then(|| self.tokens / self.seconds)
    }
}

/// The interval to ask for: `floor` (the run's setting) unless the per-request rate is known,
/// otherwise a chunk every few seconds, rounded down to a power of two.
pub fn stream_interval(floor: u32, idle_timeout_secs: u32, per_request_tps: Option<f64>) -> u32 {
    let floor = floor.max(1);
    let Some(tps) = per_request_tps.filter(|tps| tps.is_finite() && *tps > 0.0) else {
        return floor;
    };
    let alive = tps / 2.0 * f64::from(idle_timeout_secs) / CHUNKS_PER_IDLE_TIMEOUT;
    let wanted = (tps * SECONDS_PER_CHUNK).min(alive).min(f64::from(LONGEST_INTERVAL));
    if wanted < f64::from(floor) {
        return floor;
    }
    // A power of two: requests sent a moment apart ask for the same interval.
    let power = 1u32 << (wanted as u32).ilog2();
    power.max(floor)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn the_pace_is_the_tokens_of_recent_chunks_over_their_time() {
        use std::time::Duration;
        let mut pace = Pace::default();
        assert_eq!(pace.per_request_tps(), None);
        pace.observe(16, Duration::ZERO);
        assert_eq!(pace.per_request_tps(), None, "no time has passed yet");
        for _ in 0..10 {
            pace.observe(16, Duration::from_millis(160));
        }
        let tps = pace.per_request_tps().unwrap();
        assert!((tps - 100.0).abs() < 11.0, "{tps}");
        // The server slows to 20 tokens/s: within a few hundred chunks the pace follows.
        for _ in 0..400 {
            pace.observe(16, Duration::from_millis(800));
        }
        let tps = pace.per_request_tps().unwrap();
        assert!((tps - 20.0).abs() < 0.5, "{tps}");
    }

    #[test]
    fn an_earlier_rate_starts_the_pace_and_the_streams_soon_outweigh_it() {
        use std::time::Duration;
        assert_eq!(Pace::from_earlier(0.0).per_request_tps(), None);
        assert_eq!(Pace::from_earlier(f64::NAN).per_request_tps(), None);
        let mut pace = Pace::from_earlier(90.0);
        assert!((pace.per_request_tps().unwrap() - 90.0).abs() < 1e-9);
        // This server now runs at 20 tokens/s a request: a few chunks of 4 s say so.
        for _ in 0..8 {
            pace.observe(80, Duration::from_secs(4));
        }
        let tps = pace.per_request_tps().unwrap();
        assert!(tps < 30.0, "{tps}");
    }

    #[test]
    fn without_a_rate_the_runs_own_interval() {
        assert_eq!(stream_interval(16, 120, None), 16);
        assert_eq!(stream_interval(16, 120, Some(0.0)), 16);
        assert_eq!(stream_interval(16, 120, Some(f64::NAN)), 16);
        assert_eq!(stream_interval(0, 120, None), 1);
    }

    #[test]
    fn a_chunk_every_few_seconds() {
        // The real vLLM CPU server at 64 running: ~25 tokens/s per request.
        assert_eq!(stream_interval(16, 120, Some(25.0)), 64);
        // A GPU server at a big batch: ~40 tokens/s per request.
        assert_eq!(stream_interval(16, 120, Some(40.0)), 128);
        // A slow request stays at the run's interval.
        assert_eq!(stream_interval(16, 120, Some(3.0)), 16);
        // A quiet server with one request running fast.
        assert_eq!(stream_interval(16, 120, Some(2_000.0)), LONGEST_INTERVAL);
    }

    #[test]
    fn the_runs_interval_is_a_floor() {
        assert_eq!(stream_interval(100, 120, Some(20.0)), 100);
        assert_eq!(stream_interval(100, 120, Some(40.0)), 128);
    }

    #[test]
    fn a_short_idle_timeout_keeps_chunks_frequent() {
        // 4 s idle timeout at 200 tokens/s: at half the rate, 8 chunks in 4 s is 50 tokens each.
        assert_eq!(stream_interval(16, 4, Some(200.0)), 32);
        // The default 120 s: a chunk at least every 7.5 s at half the rate.
        assert_eq!(stream_interval(16, 120, Some(30.0)), 64);
        // Never below the run's own interval, even if that is all the timeout allows.
        assert_eq!(stream_interval(16, 1, Some(200.0)), 16);
    }
}
