//! What a process holds of a job, how long, and the statement every job table shares.

use crate::Result;
use sqlx::PgPool;
use std::time::Duration;
use uuid::Uuid;

/// A job this process holds.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct Claim {
    pub id: i64,
    pub owner: Uuid,
    /// How many times a process has started it, this one included.
    pub claims: i32,
}

/// How jobs of a kind are held and taken over.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct JobOptions {
    /// How long a job stays leased to a process that stops renewing it. Renewed every third.
    pub lease: Duration,
    /// Starts a job gets (a take-over after a crash is one more) before it is ended.
    pub max_claims: i32,
    /// How often an idle process looks for jobs.
    pub poll: Duration,
}

impl Default for JobOptions {
    fn default() -> Self {
        Self { lease: Duration::from_secs(30), max_claims: 3, poll: Duration::from_secs(2) }
    }
}

impl JobOptions {
    /// How often a held job's lease is renewed.
    pub fn renewal(&self) -> Duration {
        (self.lease / 3).max(Duration::from_millis(100))
    }
}

/// A table of jobs: its name and the status a held job is in.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct JobTable {
    pub table: &'static str,
    pub held: &'static str,
    /// What one job is called in the log ("import", "export").
    pub what: &'static str,
}

impl JobTable {
    /// Extends the lease; false when this process no longer holds the job (it ended, was
    /// cancelled, or another process took it over after the lease ran out). The table and
    /// status are the job kind's constants, never input.
    pub async fn renew(&self, pool: &PgPool, claim: &Claim, lease: Duration) -> Result<bool> {
        let sql = format!(
            "UPDATE {} SET lease_expires_at = now() + make_interval(secs => $3)
             WHERE id = $1 AND status = '{}' AND lease_owner = $2",
            self.table, self.held
        );
        let renewed = sqlx::query(&sql)
            .bind(claim.id)
            .bind(claim.owner)
            .bind(lease.as_secs_f64())
            .execute(pool)
            .await?;
        Ok(renewed.rows_affected() == 1)
    }
}
