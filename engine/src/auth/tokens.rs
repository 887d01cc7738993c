//! Personal API tokens: made once (the plaintext is returned to the caller and never stored),
//! verified on every API request, listed and revoked.
//!
//! Only a SHA-256 of the token is kept. A slow password hash (argon2) protects low-entropy
//! secrets people choose; these tokens are 256 random bits, so a fast hash cannot be brute
//! forced and lets every API request be checked with one indexed lookup.

use crate::{Error, Result};
use domain::{
    token::{CreatedToken, TokenSummary, MAX_TOKEN_DAYS, TOKEN_PREFIX},
    Role, Viewer,
};
use rand::RngCore;
use sha2::{Digest, Sha256};
use sqlx::PgPool;

fn hash(token: &str) -> Vec<u8> {
    Sha256::digest(token.as_bytes()).to_vec()
}

/// Makes a token for `user_id` that expires after `days`; the returned plaintext is shown once.
pub async fn create(pool: &PgPool, user_id: i64, name: &str, days: u32) -> Result<CreatedToken> {
    let name = name.trim();
    if name.is_empty() || name.chars().count() > 100 {
        return Err(Error::invalid(
            "give the token a name of 1 to 100 characters that says where it is used (e.g. `training-cron`)",
        ));
    }
    if !(1..=MAX_TOKEN_DAYS).contains(&days) {
        return Err(Error::invalid(format!(
            "a token lives 1 to {MAX_TOKEN_DAYS} days, not {days}; make a new one when it expires"
        )));
    }
    let mut secret = [0u8; 32];
    rand::thread_rng().fill_bytes(&mut secret);
    let token = format!("{TOKEN_PREFIX}{}", hex::encode(secret));
    let summary = sqlx::query_as!(
        TokenSummary,
        r#"WITH made AS (
               INSERT INTO api_tokens (user_id, name, token_hash, expires_at)
               VALUES ($1, $2, $3, now() + make_interval(days => $4))
               RETURNING *
           )
           SELECT made.id AS "id!", made.user_id AS "user_id!", u.username, made.name AS "name!",
                  made.created_at AS "created_at!", made.expires_at AS "expires_at!",
                  made.last_used_at AS "last_used_at?", made.revoked_at AS "revoked_at?"
           FROM made JOIN users u ON u.id = made.user_id"#,
        user_id,
        name,
        hash(&token),
        days as i32,
    )
    .fetch_one(pool)
    .await?;
    Ok(CreatedToken { token, summary })
}

/// The owner of a usable token, with the owner's role as it is now. `None` for an unknown,
/// revoked or expired token and for a disabled owner. Marks the token used.
pub async fn verify(pool: &PgPool, token: &str) -> Result<Option<Viewer>> {
    if !token.starts_with(TOKEN_PREFIX) {
        return Ok(None);
    }
    Ok(sqlx::query_as!(
        Viewer,
        r#"WITH used AS (
               UPDATE api_tokens t SET last_used_at = now()
               FROM users u
               WHERE t.token_hash = $1 AND u.id = t.user_id
                 AND t.revoked_at IS NULL AND t.expires_at > now() AND NOT u.disabled
               RETURNING u.id, u.username, u.role
           )
           SELECT id AS "id!", username AS "username!", role AS "role!: Role" FROM used"#,
        hash(token),
    )
    .fetch_optional(pool)
    .await?)
}

/// The viewer's own tokens, or everyone's for an admin, newest first.
pub async fn list(pool: &PgPool, viewer: &Viewer) -> Result<Vec<TokenSummary>> {
    let everyone = viewer.role.allows(Role::Admin);
    Ok(sqlx::query_as!(
        TokenSummary,
        r#"SELECT t.id, t.user_id, u.username, t.name, t.created_at, t.expires_at, t.last_used_at,
                  t.revoked_at
           FROM api_tokens t JOIN users u ON u.id = t.user_id
           WHERE $1 OR t.user_id = $2
           ORDER BY t.id DESC"#,
        everyone,
        viewer.id,
    )
    .fetch_all(pool)
    .await?)
}

/// Revokes a token the viewer owns (any token, for an admin). Revoking twice is harmless.
pub async fn revoke(pool: &PgPool, viewer: &Viewer, id: i64) -> Result<()> {
    let everyone = viewer.role.allows(Role::Admin);
    let found = sqlx::query_scalar!(
        r#"UPDATE api_tokens SET revoked_at = coalesce(revoked_at, now())
           WHERE id = $1 AND ($2 OR user_id = $3) RETURNING id"#,
        id,
        everyone,
        viewer.id,
    )
    .fetch_optional(pool)
    .await?;
    // Someone else's token is reported as missing, so ids reveal nothing.
    found.map(|_| ()).ok_or(Error::NotFound("token"))
}
