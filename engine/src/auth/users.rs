use super::password::{hash_password, validate_password};
use crate::{error::OnConstraint, Error, Result};
use domain::{Role, UserSummary, Viewer};
use sqlx::PgPool;

pub struct NewUser<'a> {
    pub username: &'a str,
    pub password: &'a str,
    pub role: Role,
}

/// Usernames are stored lower-case; this is the one place that rule lives.
pub fn normalize_username(raw: &str) -> Result<String> {
    let name = raw.trim().to_ascii_lowercase();
    let valid_chars =
        name.chars().all(|c| c.is_ascii_lowercase() || c.is_ascii_digit() || matches!(c, '.' | '_' | '-'));
    let starts_well = name.chars().next().is_some_and(|c| c.is_ascii_alphanumeric());
    if !(2..=63).contains(&name.len()) || !valid_chars || !starts_well {
        return Err(Error::invalid(format!(
            "`{}` is not a valid username: use 2 to 63 letters, digits, dots, dashes or \
             underscores, starting with a letter or digit",
            raw.trim()
        )));
    }
    Ok(name)
}

pub async fn create_user(pool: &PgPool, new: NewUser<'_>) -> Result<UserSummary> {
    let username = normalize_username(new.username)?;
    validate_password(new.password)?;
    let hash = hash_password(new.password)?;
    sqlx::query_as!(
        UserSummary,
        r#"INSERT INTO users (username, password_hash, role) VALUES ($1, $2, $3)
           RETURNING id, username, role AS "role: Role", disabled, created_at, last_login_at"#,
        username,
        hash,
        new.role as Role,
    )
    .fetch_one(pool)
    .await
    .on_constraint("users_username_key", || format!("the username `{username}` is taken"))
}

pub async fn list_users(pool: &PgPool) -> Result<Vec<UserSummary>> {
    Ok(sqlx::query_as!(
        UserSummary,
        r#"SELECT id, username, role AS "role: Role", disabled, created_at, last_login_at
           FROM users ORDER BY username"#
    )
    .fetch_all(pool)
    .await?)
}

pub async fn count_users(pool: &PgPool) -> Result<i64> {
    Ok(sqlx::query_scalar!(r#"SELECT count(*) AS "n!" FROM users"#).fetch_one(pool).await?)
}

/// The enabled user with this id, as the UI sees them; `None` once disabled or deleted.
pub async fn find_viewer(pool: &PgPool, id: i64) -> Result<Option<Viewer>> {
    Ok(sqlx::query_as!(
        Viewer,
        r#"SELECT id, username, role AS "role: Role" FROM users WHERE id = $1 AND NOT disabled"#,
        id
    )
    .fetch_optional(pool)
    .await?)
}

/// Changes a user's role. Refuses to leave the system without an enabled admin.
pub async fn set_role(pool: &PgPool, id: i64, role: Role) -> Result<UserSummary> {
    let mut tx = pool.begin().await?;
    lock_admins(&mut tx).await?;
    let user = sqlx::query_as!(
        UserSummary,
        r#"UPDATE users SET role = $2, updated_at = now() WHERE id = $1
           RETURNING id, username, role AS "role: Role", disabled, created_at, last_login_at"#,
        id,
        role as Role
    )
    .fetch_optional(&mut *tx)
    .await?
    .ok_or(Error::NotFound("user"))?;
    ensure_an_admin_remains(&mut tx).await?;
    tx.commit().await?;
    Ok(user)
}

/// Disables or re-enables an account. A disabled user's sessions stop working at their next
/// request, because every request re-reads the account.
pub async fn set_disabled(pool: &PgPool, id: i64, disabled: bool) -> Result<UserSummary> {
    let mut tx = pool.begin().await?;
    lock_admins(&mut tx).await?;
    let user = sqlx::query_as!(
        UserSummary,
        r#"UPDATE users SET disabled = $2, updated_at = now() WHERE id = $1
           RETURNING id, username, role AS "role: Role", disabled, created_at, last_login_at"#,
        id,
        disabled
    )
    .fetch_optional(&mut *tx)
    .await?
    .ok_or(Error::NotFound("user"))?;
    ensure_an_admin_remains(&mut tx).await?;
    tx.commit().await?;
    Ok(user)
}

pub async fn set_password(pool: &PgPool, id: i64, password: &str) -> Result<()> {
    validate_password(password)?;
    let hash = hash_password(password)?;
    let updated =
        sqlx::query!("UPDATE users SET password_hash = $2, updated_at = now() WHERE id = $1", id, hash)
            .execute(pool)
            .await?;
    if updated.rows_affected() == 0 {
        return Err(Error::NotFound("user"));
    }
    Ok(())
}

/// Serialises concurrent role and status changes, so two admins demoting each other at the same
/// moment cannot both succeed.
async fn lock_admins(tx: &mut sqlx::PgConnection) -> Result<()> {
    sqlx::query!("SELECT id FROM users WHERE role = 'admin' FOR UPDATE").fetch_all(tx).await?;
    Ok(())
}

async fn ensure_an_admin_remains(tx: &mut sqlx::PgConnection) -> Result<()> {
    let admins =
        sqlx::query_scalar!(r#"SELECT count(*) AS "n!" FROM users WHERE role = 'admin' AND NOT disabled"#)
            .fetch_one(tx)
            .await?;
    if admins == 0 {
        return Err(Error::conflict("this would leave no enabled admin; make another user an admin first"));
    }
    Ok(())
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn usernames_are_lowercased_and_checked() {
        assert_eq!(normalize_username("  Alice ").unwrap(), "alice");
        assert_eq!(normalize_username("a.b-c_d9").unwrap(), "a.b-c_d9");
        for bad in ["a", "-lead", "has space", "ünï", &"x".repeat(64)] {
            let err = normalize_username(bad).unwrap_err().to_string();
            assert!(err.contains("not a valid username"), "{bad}: {err}");
        }
    }
}
