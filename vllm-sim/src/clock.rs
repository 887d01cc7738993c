//! Simulated time: wall-clock time sped up by the configured time scale.
//!
//! Everything the simulator models (rates, latencies, fault delays, metrics) lives in
//! simulated seconds; only sleeping converts back to real time.

use std::time::{Duration, Instant, SystemTime, UNIX_EPOCH};

#[derive(Clone, Copy, Debug)]
pub struct SimClock {
    origin: Instant,
    scale: f64,
}

impl SimClock {
    pub fn new(scale: f64) -> Self {
        Self { origin: Instant::now(), scale }
    }

    /// Simulated seconds since the clock started.
    pub fn now(&self) -> f64 {
        self.origin.elapsed().as_secs_f64() * self.scale
    }

    /// The real instant at which simulated time `sim_secs` is reached.
    pub fn instant_at(&self, sim_secs: f64) -> Instant {
        self.origin + Duration::from_secs_f64((sim_secs / self.scale).max(0.0))
    }

    /// The real length of a simulated duration.
    pub fn real(&self, simulated: Duration) -> Duration {
        simulated.div_f64(self.scale)
    }

    pub async fn sleep(&self, simulated: Duration) {
        tokio::time::sleep(self.real(simulated)).await;
    }
}

/// Wall-clock Unix seconds, for the `created` fields of responses.
pub fn unix_seconds() -> u64 {
    SystemTime::now().duration_since(UNIX_EPOCH).map_or(0, |since| since.as_secs())
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn simulated_durations_shrink_by_the_scale() {
        let clock = SimClock::new(20.0);
        assert_eq!(clock.real(Duration::from_secs(2)), Duration::from_millis(100));
        let at = clock.instant_at(10.0);
        assert_eq!(at - clock.origin, Duration::from_millis(500));
    }
}
