use rand::Rng;
use std::time::Duration;

const BASE: Duration = Duration::from_secs(1);
const CAP: Duration = Duration::from_secs(60);

/// Jittered exponential backoff before try `attempt + 1` (after `attempt` failed tries): a
/// uniformly random delay in [½, 1] × min(cap, base × 2^(attempt−1)), so retries of samples that
/// failed together do not arrive together.
pub fn delay(attempt: u32) -> Duration {
    let exp = BASE.saturating_mul(1u32 << attempt.saturating_sub(1).min(16)).min(CAP);
    exp.mul_f64(rand::thread_rng().gen_range(0.5..=1.0))
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn grows_exponentially_with_jitter_and_a_cap() {
        for _ in 0..200 {
            let first = delay(1);
            assert!(first >= Duration::from_millis(500) && first <= Duration::from_secs(1), "{first:?}");
            let fourth = delay(4);
            assert!(fourth >= Duration::from_secs(4) && fourth <= Duration::from_secs(8), "{fourth:?}");
            assert!(delay(30) <= CAP);
        }
    }
}
