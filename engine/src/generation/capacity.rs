//! Splitting an endpoint's capacity between the runs using it.
//!
//! The adaptive limit belongs to the server, not to a run: two runs on one endpoint must not
//! each grow to what the server holds. Each adaptive run gets a part by its weight, within its
//! own bounds; a run that cannot use its part (its queue has run dry) keeps only what it has in
//! flight, and the rest goes to the others by their weights (water-filling), so no slot the
//! server could use is left idle. A run with a fixed limit takes exactly that, outside the split.

use domain::generation::Concurrency;

/// One run's claim on an endpoint.
#[derive(Clone, Copy, Debug, PartialEq)]
pub struct Claim {
    pub run_id: i64,
    pub concurrency: Concurrency,
    pub weight: u32,
    /// How many requests the run could use: `None` while it has samples waiting.
    pub demand: Option<u32>,
}

/// A run's part of the endpoint.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct Share {
    pub run_id: i64,
    pub limit: u32,
}

/// The bounds the endpoint's adaptive limit moves between: the sum of the adaptive runs'
/// own bounds. `None` when no adaptive run uses the endpoint.
pub fn adaptive_bounds(claims: &[Claim]) -> Option<(u32, u32)> {
    claims
        .iter()
        .filter_map(|c| match c.concurrency {
            Concurrency::Adaptive { min, max } => Some((min, max)),
            Concurrency::Fixed { .. } => None,
        })
        .reduce(|(a, b), (c, d)| (a.saturating_add(c), b.saturating_add(d)))
}

/// Divides `capacity` between the adaptive claims by weight, each part within the claim's
/// bounds and no larger than its demand, and gives fixed claims their limit.
pub fn split(capacity: u32, claims: &[Claim]) -> Vec<Share> {
    // Each adaptive claim takes clamp(level × weight, min, cap); the level is the one at which
    // the parts add up to the capacity (found by bisection: the sum only grows with the level).
    let parts = |level: f64| -> Vec<f64> {
        claims
            .iter()
            .map(|claim| match claim.concurrency {
                Concurrency::Fixed { limit } => f64::from(limit),
                Concurrency::Adaptive { min, max } => {
                    let cap = claim.demand.map_or(max, |d| d.clamp(min, max));
                    (level * f64::from(claim.weight.max(1))).clamp(f64::from(min), f64::from(cap))
                }
            })
            .collect()
    };
    let adaptive_sum = |level: f64| -> f64 {
        parts(level)
            .iter()
            .zip(claims)
            .filter(|(_, c)| matches!(c.concurrency, Concurrency::Adaptive { .. }))
            .map(|(p, _)| p)
            .sum()
    };
    let (mut low, mut high) = (0.0, f64::from(capacity.max(1)));
    for _ in 0..64 {
        let mid = (low + high) / 2.0;
        if adaptive_sum(mid) > f64::from(capacity) {
            high = mid;
        } else {
            low = mid;
        }
    }
    parts(low)
        .into_iter()
        .zip(claims)
        .map(|(part, claim)| Share { run_id: claim.run_id, limit: part.round() as u32 })
        .collect()
}

#[cfg(test)]
mod tests {
    use super::*;

    fn adaptive(run_id: i64, weight: u32, demand: Option<u32>) -> Claim {
        Claim { run_id, concurrency: Concurrency::Adaptive { min: 4, max: 512 }, weight, demand }
    }

    fn limits(shares: &[Share]) -> Vec<u32> {
        shares.iter().map(|s| s.limit).collect()
    }

    #[test]
    fn one_run_gets_the_whole_capacity() {
        assert_eq!(limits(&split(200, &[adaptive(1, 1, None)])), vec![200]);
    }

    #[test]
    fn runs_share_by_weight() {
        assert_eq!(limits(&split(200, &[adaptive(1, 1, None), adaptive(2, 1, None)])), vec![100, 100]);
        assert_eq!(limits(&split(200, &[adaptive(1, 3, None), adaptive(2, 1, None)])), vec![150, 50]);
    }

    #[test]
    fn what_a_dry_run_cannot_use_goes_to_the_others() {
        let shares = split(200, &[adaptive(1, 1, Some(10)), adaptive(2, 1, None), adaptive(3, 2, None)]);
        assert_eq!(limits(&shares), vec![10, 63, 127]);
    }

    #[test]
    fn bounds_hold_and_fixed_runs_take_their_limit() {
        let small = Claim {
            run_id: 1,
            concurrency: Concurrency::Adaptive { min: 4, max: 16 },
            weight: 1,
            demand: None,
        };
        let fixed =
            Claim { run_id: 2, concurrency: Concurrency::Fixed { limit: 64 }, weight: 5, demand: None };
        let shares = split(100, &[small, fixed, adaptive(3, 1, None)]);
        assert_eq!(limits(&shares), vec![16, 64, 84]);
        // Below the sum of the minimums, every run keeps its minimum.
        assert_eq!(limits(&split(2, &[adaptive(1, 1, None), adaptive(2, 1, None)])), vec![4, 4]);
        assert_eq!(adaptive_bounds(&[small, fixed, adaptive(3, 1, None)]), Some((8, 528)));
        assert_eq!(adaptive_bounds(&[fixed]), None);
    }
}
