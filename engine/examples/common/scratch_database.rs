//! A scratch database for the examples that check the engine against a real server.

use sqlx::PgPool;

/// A new, migrated database `name` on `DATABASE_URL`'s server (dropped first if it exists).
pub async fn scratch_database(name: &str) -> anyhow::Result<PgPool> {
    let server = std::env::var("DATABASE_URL")
        .unwrap_or_else(|_| "postgres://postgres@127.0.0.1:5432/postgres".into());
    let mut url = url::Url::parse(&server)?;
    url.set_path("/postgres");
    let admin = engine::db::connect(url.as_str(), 1).await?;
    sqlx::query(&format!("DROP DATABASE IF EXISTS {name} WITH (FORCE)")).execute(&admin).await?;
    sqlx::query(&format!("CREATE DATABASE {name}")).execute(&admin).await?;
    url.set_path(&format!("/{name}"));
    let pool = engine::db::connect(url.as_str(), 8).await?;
    engine::db::migrate(&pool).await?;
    Ok(pool)
}
