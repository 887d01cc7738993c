use crate::{Error, Result};
use argon2::{
    password_hash::{rand_core::OsRng, PasswordHash, PasswordHasher, PasswordVerifier, SaltString},
    Argon2,
};

pub const MIN_PASSWORD_LEN: usize = 10;

/// Refuses passwords that are too short to be worth hashing.
pub fn validate_password(password: &str) -> Result<()> {
    if password.chars().count() < MIN_PASSWORD_LEN {
        return Err(Error::invalid(format!(
            "the password is too short: use at least {MIN_PASSWORD_LEN} characters"
        )));
    }
    Ok(())
}

/// Argon2id with the crate's default (OWASP-recommended) parameters, in PHC string format.
pub fn hash_password(password: &str) -> Result<String> {
    let salt = SaltString::generate(&mut OsRng);
    Argon2::default()
        .hash_password(password.as_bytes(), &salt)
        .map(|hash| hash.to_string())
        .map_err(|e| Error::Internal(anyhow::anyhow!("hashing a password failed: {e}")))
}

/// True when `password` matches the stored PHC `hash`. A malformed hash never matches.
pub fn verify_password(password: &str, hash: &str) -> bool {
    PasswordHash::new(hash)
        .map(|parsed| Argon2::default().verify_password(password.as_bytes(), &parsed).is_ok())
        .unwrap_or(false)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_hash_verifies_its_own_password_only() {
        let hash = hash_password("correct horse battery").unwrap();
        assert!(hash.starts_with("$argon2id$"));
        assert!(verify_password("correct horse battery", &hash));
        assert!(!verify_password("correct horse battery!", &hash));
        assert!(!verify_password("anything", "not a phc string"));
    }

    #[test]
    fn short_passwords_are_refused_with_the_minimum() {
        let err = validate_password("short").unwrap_err();
        assert!(err.to_string().contains("at least 10 characters"));
        assert!(validate_password("long enough pw").is_ok());
    }
}
