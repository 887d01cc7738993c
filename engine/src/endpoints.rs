//! Registered vLLM servers: add, list, test the connection, remove.

use crate::{
    error::OnConstraint,
    vllm::{ServedModel, VllmClient},
    Error, Result,
};
use domain::{generation::RunSettings, EndpointCapacity, EndpointRun, EndpointSummary};
use sqlx::PgPool;
use std::collections::HashMap;

pub struct NewEndpoint<'a> {
    pub name: &'a str,
    pub base_url: &'a str,
    pub api_key: Option<&'a str>,
}

/// What the engine needs to talk to an endpoint.
#[derive(Clone, Debug)]
pub struct EndpointTarget {
    pub id: i64,
    pub name: String,
    pub base_url: String,
    pub api_key: Option<String>,
}

impl EndpointTarget {
    pub fn client(&self, http: reqwest::Client) -> Result<VllmClient> {
        VllmClient::new(http, &self.base_url, self.api_key.clone()).map_err(Error::Invalid)
    }
}

/// Registers a server after checking its URL is well-formed. Its models are read by `check`.
pub async fn create(
    pool: &PgPool,
    http: &reqwest::Client,
    new: NewEndpoint<'_>,
    by: i64,
) -> Result<EndpointSummary> {
    let name = new.name.trim();
    if name.is_empty() {
        return Err(Error::invalid("give the endpoint a name"));
    }
    let client = VllmClient::new(http.clone(), new.base_url, None).map_err(Error::Invalid)?;
    let api_key = new.api_key.map(str::trim).filter(|k| !k.is_empty());
    let id = sqlx::query_scalar!(
        "INSERT INTO endpoints (name, base_url, api_key, created_by) VALUES ($1, $2, $3, $4) RETURNING id",
        name,
        client.base_url(),
        api_key,
        by
    )
    .fetch_one(pool)
    .await
    .on_constraint("endpoints_name_key", || format!("an endpoint named `{name}` exists already"))?;
    check(pool, http, id).await
}

/// Asks the server for its models and records what it said (or why it could not answer).
pub async fn check(pool: &PgPool, http: &reqwest::Client, id: i64) -> Result<EndpointSummary> {
    let target = target(pool, id).await?;
    let result = target.client(http.clone())?.models().await;
    let (models, error) = match result {
        Ok(models) if models.is_empty() => (Some(Vec::new()), Some("the server lists no models".to_string())),
        Ok(models) => (Some(models), None),
        Err(e) => (None, Some(e)),
    };
    let models_json = models.map(|m| serde_json::to_value(m).expect("models serialize"));
    // Recorded for export manifests; a server without `/version` is not an error.
    let version = match &error {
        None => target.client(http.clone())?.version().await.ok().flatten(),
        Some(_) => None,
    };
    // Whether it runs a draft: vLLM exports spec_decode counters only then. Unknown (NULL)
    // when its /metrics cannot be read.
    let runs_draft = match &error {
        None => target.client(http.clone())?.load().await.ok().flatten().map(|load| load.spec.is_some()),
        Some(_) => None,
    };
    sqlx::query!(
        "UPDATE endpoints SET models = COALESCE($2, models), checked_at = now(), check_error = $3,
                server_version = COALESCE($4, server_version), runs_draft = $5
         WHERE id = $1",
        id,
        models_json,
        error,
        version,
        runs_draft
    )
    .execute(pool)
    .await?;
    get(pool, id).await
}

pub async fn list(pool: &PgPool) -> Result<Vec<EndpointSummary>> {
    let rows = sqlx::query!(
        r#"SELECT e.id, e.name, e.base_url, e.api_key IS NOT NULL AS "has_api_key!", e.models, e.checked_at,
                  e.check_error, e.created_at, e.runs_draft, c.spec_acceptance, c.spec_window_secs,
                  c.concurrency_limit AS "concurrency_limit?", c.limit_reason AS "limit_reason?",
                  c.limit_changed_at AS "limit_changed_at?", c.healthy AS "healthy?", c.health_reason,
                  c.server_running, c.server_waiting, c.server_kv_usage, c.server_generation_tps, c.observed_at
           FROM endpoints e LEFT JOIN endpoint_capacity c ON c.endpoint_id = e.id
           ORDER BY e.name"#
    )
    .fetch_all(pool)
    .await?;
    let mut runs = runs_by_endpoint(pool).await?;
    Ok(rows
        .into_iter()
        .map(|r| {
            let capacity = match (r.concurrency_limit, r.limit_reason, r.limit_changed_at, r.healthy) {
                (Some(limit), Some(limit_reason), Some(limit_changed_at), Some(healthy)) => {
                    Some(EndpointCapacity {
                        limit: limit.max(0) as u32,
                        limit_reason,
                        limit_changed_at,
                        healthy,
                        health_reason: r.health_reason,
                        running: r.server_running.map(|v| v.max(0) as u32),
                        waiting: r.server_waiting.map(|v| v.max(0) as u32),
                        kv_usage: r.server_kv_usage.map(f64::from),
                        generation_tps: r.server_generation_tps.map(f64::from),
                        observed_at: r.observed_at,
                    })
                }
                _ => None,
            };
            EndpointSummary {
                id: r.id,
                name: r.name,
                base_url: r.base_url,
                has_api_key: r.has_api_key,
                models: parse_models(r.models),
                runs_draft: r.runs_draft,
                draft_acceptance: r.spec_acceptance.zip(r.spec_window_secs).map(|(length, seconds)| {
                    domain::endpoint::WindowAcceptance {
                        length: f64::from(length),
                        seconds: f64::from(seconds),
                    }
                }),
                checked_at: r.checked_at,
                check_error: r.check_error,
                created_at: r.created_at,
                capacity,
                runs: runs.remove(&r.id).unwrap_or_default(),
            }
        })
        .collect())
}

/// The running and paused runs on each endpoint, with their shares.
async fn runs_by_endpoint(pool: &PgPool) -> Result<HashMap<i64, Vec<EndpointRun>>> {
    let rows = sqlx::query!(
        r#"SELECT re.endpoint_id, r.id, r.name, r.status = 'paused' AS "paused!", r.settings, re.concurrency_limit
           FROM runs r JOIN run_endpoints re ON re.run_id = r.id
           WHERE r.status IN ('running', 'paused')
           ORDER BY r.id"#
    )
    .fetch_all(pool)
    .await?;
    let mut by_endpoint: HashMap<i64, Vec<EndpointRun>> = HashMap::new();
    for row in rows {
        let weight = domain::stored::from_stored::<RunSettings>(row.settings)
            .map_or(RunSettings::DEFAULT_WEIGHT, |s| s.weight);
        by_endpoint.entry(row.endpoint_id).or_default().push(EndpointRun {
            run_id: row.id,
            name: row.name,
            paused: row.paused,
            weight,
            share: row.concurrency_limit.max(0) as u32,
        });
    }
    Ok(by_endpoint)
}

pub async fn get(pool: &PgPool, id: i64) -> Result<EndpointSummary> {
    list(pool).await?.into_iter().find(|e| e.id == id).ok_or(Error::NotFound("endpoint"))
}

pub async fn target(pool: &PgPool, id: i64) -> Result<EndpointTarget> {
    sqlx::query_as!(EndpointTarget, "SELECT id, name, base_url, api_key FROM endpoints WHERE id = $1", id)
        .fetch_optional(pool)
        .await?
        .ok_or(Error::NotFound("endpoint"))
}

/// Removes an endpoint no run has used.
pub async fn delete(pool: &PgPool, id: i64) -> Result<()> {
    let used =
        sqlx::query_scalar!(r#"SELECT count(*) AS "n!" FROM run_endpoints WHERE endpoint_id = $1"#, id)
            .fetch_one(pool)
            .await?;
    if used > 0 {
        return Err(Error::conflict(format!(
            "{used} run(s) used this endpoint; it stays so their history keeps its name"
        )));
    }
    let deleted = sqlx::query!("DELETE FROM endpoints WHERE id = $1", id).execute(pool).await?;
    if deleted.rows_affected() == 0 {
        return Err(Error::NotFound("endpoint"));
    }
    Ok(())
}

fn parse_models(value: Option<serde_json::Value>) -> Vec<ServedModel> {
    value.and_then(|v| serde_json::from_value(v).ok()).unwrap_or_default()
}
