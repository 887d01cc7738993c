//! The configurable list of flag reasons (`flag_reasons`).

use crate::{Error, Result};
use domain::review::FlagReason;
use sqlx::PgPool;

pub async fn list(pool: &PgPool) -> Result<Vec<FlagReason>> {
    Ok(sqlx::query_as!(
        FlagReason,
        "SELECT code, label, selectable, automatic FROM flag_reasons ORDER BY position, code"
    )
    .fetch_all(pool)
    .await?)
}

/// Checks that every code is a reason reviewers may choose; returns them sorted, without repeats.
pub async fn validate(pool: &PgPool, codes: &[String]) -> Result<Vec<String>> {
    let mut codes: Vec<String> =
        codes.iter().map(|c| c.trim().to_string()).filter(|c| !c.is_empty()).collect();
    codes.sort();
    codes.dedup();
    if codes.is_empty() {
        return Ok(codes);
    }
    let known =
        sqlx::query_scalar!("SELECT code FROM flag_reasons WHERE selectable AND code = ANY($1)", &codes)
            .fetch_all(pool)
            .await?;
    if let Some(unknown) = codes.iter().find(|c| !known.contains(c)) {
        let offered =
            list(pool).await?.into_iter().filter(|r| r.selectable).map(|r| r.code).collect::<Vec<_>>();
        return Err(Error::invalid(format!(
            "\"{unknown}\" is not a flag reason; choose from {}",
            offered.join(", ")
        )));
    }
    Ok(codes)
}
