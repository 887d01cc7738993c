//! Runs' rates over the last minute of the workers' per-second metrics.

use sqlx::PgPool;
use std::collections::HashMap;

/// Requests and client tokens per second over the last minute (or since the run's first
/// record, when that is more recent, so a run's first seconds are not diluted).
#[derive(Clone, Copy, Debug, Default, PartialEq)]
pub struct Rates {
    pub requests_per_s: f64,
    pub tokens_per_s: f64,
}

/// The rates of the given runs; a run with no record in the last minute has none (zero).
pub async fn last_minute(pool: &PgPool, run_ids: &[i64]) -> crate::Result<HashMap<i64, Rates>> {
    let rows = sqlx::query!(
        r#"SELECT run_id, sum(completed)::float8 AS "completed!", sum(client_tokens)::float8 AS "tokens!",
                  extract(epoch FROM least(interval '60 seconds', now() - min(at)))::float8 AS "window_secs!"
           FROM run_metrics WHERE run_id = ANY($1) AND at > now() - interval '60 seconds'
           GROUP BY run_id"#,
        run_ids
    )
    .fetch_all(pool)
    .await?;
    Ok(rows
        .into_iter()
        .map(|r| {
            let window = r.window_secs.max(1.0);
            (r.run_id, Rates { requests_per_s: r.completed / window, tokens_per_s: r.tokens / window })
        })
        .collect())
}

/// Seconds until `remaining` samples are done at `rates`, when there is a rate to go by.
pub fn eta_secs(remaining: i64, rates: Rates) -> Option<f64> {
    (remaining > 0 && rates.requests_per_s > 0.0).then(|| remaining as f64 / rates.requests_per_s)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn no_rate_or_nothing_left_has_no_eta() {
        let rates = Rates { requests_per_s: 2.0, tokens_per_s: 100.0 };
        assert_eq!(eta_secs(10, rates), Some(5.0));
        assert_eq!(eta_secs(0, rates), None);
        assert_eq!(eta_secs(10, Rates::default()), None);
    }
}
