//! When a run needs attention: no progress, an error spike, an endpoint down. The rules are pure
//! functions of a few figures, so the run page and the app's `/metrics` always agree.

use crate::metrics::EngineMetrics;
use domain::{
    dashboard::{Alert, AlertKind},
    generation::RunStatus,
};
use sqlx::PgPool;
use std::{collections::HashSet, sync::Arc, time::Duration};
use tokio_util::sync::CancellationToken;

/// Thresholds of the alert rules.
#[derive(Clone, Copy, Debug, PartialEq)]
pub struct AlertPolicy {
    /// A running run that finishes no sample for this long raises `no_progress`.
    pub stall_after: Duration,
    /// Tries in the last minute below which no error spike is called (too few to judge).
    pub spike_min_tries: i64,
    /// The last minute's error rate must reach this…
    pub spike_min_rate: f64,
    /// …and this multiple of the run's rate so far.
    pub spike_factor: f64,
}

impl Default for AlertPolicy {
    fn default() -> Self {
        Self {
            stall_after: Duration::from_secs(300),
            spike_min_tries: 10,
            spike_min_rate: 0.2,
            spike_factor: 3.0,
        }
    }
}

/// The figures the rules look at.
#[derive(Clone, Debug, Default, PartialEq)]
pub struct AlertInputs {
    pub status: Option<RunStatus>,
    /// Samples not yet finished.
    pub remaining: i64,
    /// Seconds since a sample last finished (or since the run started, if none has).
    pub idle_secs: f64,
    /// Failed tries and all tries in the last minute.
    pub recent_errors: i64,
    pub recent_tries: i64,
    /// Failed tries and all tries over the run so far.
    pub total_errors: i64,
    pub total_tries: i64,
    /// Names of the run's endpoints that do not answer.
    pub down_endpoints: Vec<String>,
}

pub fn evaluate(inputs: &AlertInputs, policy: &AlertPolicy) -> Vec<Alert> {
    let mut alerts = Vec::new();
    if inputs.status != Some(RunStatus::Running) {
        return alerts;
    }
    let stall = policy.stall_after.as_secs_f64();
    if inputs.remaining > 0 && inputs.idle_secs >= stall {
        alerts.push(Alert {
            kind: AlertKind::NoProgress,
            message: format!(
                "No sample has finished for {}; check the endpoints and the workers (is `draft-studio worker` or the server running?)",
                human_duration(inputs.idle_secs)
            ),
        });
    }
    if inputs.recent_tries >= policy.spike_min_tries {
        let recent = inputs.recent_errors as f64 / inputs.recent_tries as f64;
        let overall =
            if inputs.total_tries > 0 { inputs.total_errors as f64 / inputs.total_tries as f64 } else { 0.0 };
        if recent >= policy.spike_min_rate && recent >= policy.spike_factor * overall {
            alerts.push(Alert {
                kind: AlertKind::ErrorSpike,
                message: format!(
                    "{:.0}% of the last minute's tries failed (the run so far: {:.0}%); see the latest errors below",
                    recent * 100.0,
                    overall * 100.0
                ),
            });
        }
    }
    if !inputs.down_endpoints.is_empty() {
        alerts.push(Alert {
            kind: AlertKind::EndpointDown,
            message: format!(
                "{} not answering; dispatch to it is paused and resumes when its /health answers",
                inputs.down_endpoints.join(", ")
                    + if inputs.down_endpoints.len() == 1 { " is" } else { " are" }
            ),
        });
    }
    alerts
}

fn human_duration(secs: f64) -> String {
    let secs = secs as u64;
    match secs {
        0..=119 => format!("{secs} s"),
        120..=7199 => format!("{} min", secs / 60),
        _ => format!("{} h {} min", secs / 3600, secs % 3600 / 60),
    }
}

/// Reads the alert inputs of one run.
pub async fn inputs(pool: &PgPool, run_id: i64) -> crate::Result<AlertInputs> {
    let row = sqlx::query!(
        r#"SELECT r.status AS "status: RunStatus",
                  (SELECT COALESCE(sum(t.n), 0) FROM sample_tally t WHERE t.run_id = r.id AND t.state IN ('pending', 'running'))::bigint AS "remaining!",
                  extract(epoch FROM now() - COALESCE(
                      (SELECT max(m.at) + interval '1 second' FROM run_metrics m WHERE m.run_id = r.id AND m.completed > 0),
                      r.created_at))::float8 AS "idle_secs!",
                  (SELECT COALESCE(sum(m.errors), 0) FROM run_metrics m WHERE m.run_id = r.id AND m.at > now() - interval '60 seconds')::bigint AS "recent_errors!",
                  (SELECT COALESCE(sum(m.errors + m.completed), 0) FROM run_metrics m WHERE m.run_id = r.id AND m.at > now() - interval '60 seconds')::bigint AS "recent_tries!",
                  (SELECT COALESCE(sum(m.errors), 0) FROM run_metrics m WHERE m.run_id = r.id)::bigint AS "total_errors!",
                  (SELECT COALESCE(sum(m.errors + m.completed), 0) FROM run_metrics m WHERE m.run_id = r.id)::bigint AS "total_tries!",
                  ARRAY(SELECT e.name FROM run_endpoints re JOIN endpoints e ON e.id = re.endpoint_id
                        WHERE re.run_id = r.id AND NOT re.healthy ORDER BY e.name) AS "down!"
           FROM runs r WHERE r.id = $1"#,
        run_id
    )
    .fetch_optional(pool)
    .await?
    .ok_or(crate::Error::NotFound("run"))?;
    Ok(AlertInputs {
        status: Some(row.status),
        remaining: row.remaining,
        idle_secs: row.idle_secs,
        recent_errors: row.recent_errors,
        recent_tries: row.recent_tries,
        total_errors: row.total_errors,
        total_tries: row.total_tries,
        down_endpoints: row.down,
    })
}

/// Every few seconds, evaluates the alerts of the running runs and exports them as the gauge
/// `draft_studio_run_alert{run, kind}` (1 while raised), until `stop`.
pub async fn monitor(
    pool: PgPool,
    policy: AlertPolicy,
    metrics: Arc<EngineMetrics>,
    stop: CancellationToken,
) {
    let mut every = tokio::time::interval(Duration::from_secs(5));
    every.set_missed_tick_behavior(tokio::time::MissedTickBehavior::Delay);
    let mut exported: HashSet<i64> = HashSet::new();
    loop {
        tokio::select! {
            _ = stop.cancelled() => return,
            _ = every.tick() => {}
        }
        let runs = match sqlx::query_scalar!("SELECT id FROM runs WHERE status = 'running'")
            .fetch_all(&pool)
            .await
        {
            Ok(runs) => runs,
            Err(e) => {
                tracing::warn!(error = %e, "reading running runs for alerts failed");
                continue;
            }
        };
        for run_id in exported.difference(&runs.iter().copied().collect()).copied().collect::<Vec<_>>() {
            metrics.clear_alerts(run_id);
            exported.remove(&run_id);
        }
        for run_id in runs {
            match inputs(&pool, run_id).await {
                Ok(inputs) => {
                    let raised = evaluate(&inputs, &policy);
                    metrics.set_alerts(run_id, &raised.iter().map(|a| a.kind).collect::<Vec<_>>());
                    exported.insert(run_id);
                }
                Err(e) => tracing::warn!(run.id = run_id, error = %e, "evaluating alerts failed"),
            }
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn running() -> AlertInputs {
        AlertInputs {
            status: Some(RunStatus::Running),
            remaining: 100,
            idle_secs: 1.0,
            recent_errors: 0,
            recent_tries: 50,
            total_errors: 10,
            total_tries: 1000,
            down_endpoints: vec![],
        }
    }

    fn kinds(inputs: &AlertInputs) -> Vec<AlertKind> {
        evaluate(inputs, &AlertPolicy::default()).into_iter().map(|a| a.kind).collect()
    }

    #[test]
    fn a_healthy_run_raises_nothing() {
        assert!(kinds(&running()).is_empty());
    }

    #[test]
    fn no_progress_past_the_stall_time_raises_an_alert_only_while_work_remains() {
        let stalled = AlertInputs { idle_secs: 301.0, ..running() };
        assert_eq!(kinds(&stalled), vec![AlertKind::NoProgress]);
        assert!(kinds(&AlertInputs { remaining: 0, ..stalled.clone() }).is_empty());
        assert!(kinds(&AlertInputs { status: Some(RunStatus::Paused), ..stalled }).is_empty());
    }

    #[test]
    fn an_error_spike_needs_enough_tries_and_a_rate_far_above_the_run_so_far() {
        let spike = AlertInputs { recent_errors: 20, recent_tries: 50, ..running() };
        assert_eq!(kinds(&spike), vec![AlertKind::ErrorSpike]);
        // Too few tries to judge.
        assert!(kinds(&AlertInputs { recent_errors: 5, recent_tries: 5, ..running() }).is_empty());
        // A run that always fails this much is not spiking (its rate is shown elsewhere).
        assert!(kinds(&AlertInputs { total_errors: 400, ..spike }).is_empty());
    }

    #[test]
    fn a_down_endpoint_is_named() {
        let alerts = evaluate(
            &AlertInputs { down_endpoints: vec!["gpu-7".into()], ..running() },
            &AlertPolicy::default(),
        );
        assert_eq!(alerts.len(), 1);
        assert_eq!(alerts[0].kind, AlertKind::EndpointDown);
        assert!(alerts[0].message.starts_with("gpu-7 is not answering"), "{}", alerts[0].message);
    }
}
