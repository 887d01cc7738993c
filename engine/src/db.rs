//! Connecting to PostgreSQL and applying the schema.

use anyhow::Context;
use sqlx::{
    migrate::{MigrateDatabase, Migrator},
    postgres::{PgConnectOptions, PgPoolOptions},
    PgPool, Postgres,
};
use std::{str::FromStr, time::Duration};

/// The project's migrations (`migrations/` at the workspace root), embedded in the binary.
pub static MIGRATOR: Migrator = sqlx::migrate!("../migrations");

/// Creates the database named in `url` when it does not exist yet.
pub async fn ensure_database(url: &str) -> anyhow::Result<()> {
    if !Postgres::database_exists(url)
        .await
        .with_context(|| format!("cannot reach PostgreSQL at {}", redact(url)))?
    {
        Postgres::create_database(url)
            .await
            .with_context(|| format!("cannot create the database {}", redact(url)))?;
        tracing::info!(database = %redact(url), "created database");
    }
    Ok(())
}

pub async fn connect(url: &str, max_connections: u32) -> anyhow::Result<PgPool> {
    let options = PgConnectOptions::from_str(url)
        .with_context(|| format!("DATABASE_URL is not a valid PostgreSQL URL: {}", redact(url)))?
        .application_name("draft-studio");
    PgPoolOptions::new()
        .max_connections(max_connections)
        .acquire_timeout(Duration::from_secs(10))
        .connect_with(options)
        .await
        .with_context(|| format!("cannot connect to PostgreSQL at {}", redact(url)))
}

pub async fn migrate(pool: &PgPool) -> anyhow::Result<()> {
    MIGRATOR.run(pool).await.context("applying database migrations failed")
}

/// Whether the server vacuums tables itself. A sample is rewritten several times while a run
/// works on it (claimed, its lease renewed, settled, reviewed), and without autovacuum every old
/// copy stays in the table: a 25,000-sample run left 207,000 dead rows beside its 25,000, and
/// every page that reads a run's samples read them all.
pub async fn autovacuum_on(pool: &PgPool) -> sqlx::Result<bool> {
    sqlx::query_scalar("SELECT current_setting('autovacuum') = 'on'").fetch_one(pool).await
}

/// The URL with any password replaced, safe to print.
pub fn redact(url: &str) -> String {
    match url::Url::parse(url) {
        Ok(mut parsed) if parsed.password().is_some() => {
            let _ = parsed.set_password(Some("***"));
            parsed.to_string()
        }
        _ => url.to_string(),
    }
}

#[cfg(test)]
mod tests {
    #[test]
    fn redact_hides_only_the_password() {
        assert_eq!(super::redact("postgres://bob:secret@db:5432/x"), "postgres://bob:***@db:5432/x");
        assert_eq!(super::redact("postgres://bob@db/x"), "postgres://bob@db/x");
    }
}
