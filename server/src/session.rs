//! Browser sessions: signed cookies whose data lives in PostgreSQL, so sign-ins survive restarts.

use crate::config::Config;
use anyhow::Context;
use rand::RngCore;
use sqlx::PgPool;
use std::{fs, io::Write, path::Path};
use tower_sessions::{
    cookie::{Key, SameSite},
    Expiry, SessionManagerLayer,
};
use tower_sessions_sqlx_store::PostgresStore;

pub type Layer = SessionManagerLayer<PostgresStore, tower_sessions::service::SignedCookie>;

pub fn store(pool: PgPool) -> PostgresStore {
    PostgresStore::new(pool)
        .with_schema_name("public")
        .and_then(|s| s.with_table_name("sessions"))
        .expect("valid identifiers")
}

pub fn layer(store: PostgresStore, key: Key, secure: bool) -> Layer {
    SessionManagerLayer::new(store)
        .with_name("ds_session")
        .with_http_only(true)
        .with_same_site(SameSite::Lax)
        .with_secure(secure)
        .with_expiry(Expiry::OnInactivity(time::Duration::days(7)))
        .with_signed(key)
}

/// The cookie-signing key: from `DS_SESSION_SECRET`, else from `$DS_DATA_DIR/session.key`,
/// created with a random secret on first start.
pub fn signing_key(config: &Config) -> anyhow::Result<Key> {
    let secret = match &config.session_secret {
        Some(secret) => secret.clone(),
        None => read_or_create_secret(&config.data_dir.join("session.key"))?,
    };
    // `Key` wants 64 bytes; SHA-512 stretches a secret of any length to exactly that.
    use sha2::{Digest, Sha512};
    Ok(Key::from(&Sha512::digest(secret.as_bytes())))
}

fn read_or_create_secret(path: &Path) -> anyhow::Result<String> {
    if let Ok(existing) = fs::read_to_string(path) {
        let existing = existing.trim().to_string();
        anyhow::ensure!(
            existing.len() >= 32,
            "{} holds a session secret shorter than 32 characters; delete it to make a new one",
            path.display()
        );
        return Ok(existing);
    }
    if let Some(dir) = path.parent() {
        fs::create_dir_all(dir).with_context(|| format!("cannot create {}", dir.display()))?;
    }
    let mut bytes = [0u8; 32];
    rand::thread_rng().fill_bytes(&mut bytes);
    let secret = hex::encode(bytes);
    let mut options = fs::OpenOptions::new();
    options.write(true).create_new(true);
    #[cfg(unix)]
    std::os::unix::fs::OpenOptionsExt::mode(&mut options, 0o600);
    let mut file = options
        .open(path)
        .with_context(|| format!("cannot write the session secret to {}", path.display()))?;
    file.write_all(secret.as_bytes())?;
    Ok(secret)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_generated_secret_is_kept_and_reused() {
        let dir = std::env::temp_dir().join(format!("ds-session-{}", rand::random::<u64>()));
        let path = dir.join("session.key");
        let first = read_or_create_secret(&path).unwrap();
        assert_eq!(first.len(), 64);
        assert_eq!(read_or_create_secret(&path).unwrap(), first);
        fs::remove_dir_all(dir).unwrap();
    }
}
