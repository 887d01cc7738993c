//! How many tokens each streamed chunk carries (`stream_interval`).
//!
//! vLLM sends a streamed request's first token at once, its last with the finish reason, and in
//! between one chunk per `stream_interval` tokens (the larger of the request's and the server's
//! own setting). Every chunk costs the server's API process a serialization and a pass of the
//! reasoning parser; where that process shares the CPU with generation (a CPU server, or a GPU
//! server's busy front end) the cost comes out of the generation rate. Against the real vLLM
//! CPU server at 64 requests, its API process spent 12% of a core beside Draft Studio at a
//! chunk every 16 tokens and 8% beside a client waiting for whole answers, and its model worker
//! got correspondingly less (README, "Generation against three servers").
//!
//! The engine needs chunks for two things only: to see that a request is alive (the idle
//! timeout) and to count tokens as they come. So it asks for a chunk every few seconds per
//! request, from the rate each request generates at (the server's generation rate over its
//! running requests): never fewer tokens than the run's `stream_interval`, never more than
//! [`LONGEST_INTERVAL`], and never so many that a chunk would come less than
//! [`CHUNKS_PER_IDLE_TIMEOUT`] times in an idle timeout should the rate fall by half.

/// Seconds of generation one chunk covers when the per-request rate is known.
const SECONDS_PER_CHUNK: f64 = 4.0;
/// Chunks a request sends at least within one idle timeout, at half the rate measured.
const CHUNKS_PER_IDLE_TIMEOUT: f64 = 8.0;
/// The most tokens asked for per chunk.
pub const LONGEST_INTERVAL: u32 = 256;

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
