use super::password::verify_password;
use crate::{Error, Result};
use domain::{Role, Viewer};
use sqlx::PgPool;
use std::{
    collections::HashMap,
    net::IpAddr,
    sync::{Mutex, OnceLock},
    time::{Duration, Instant},
};

/// Limits failed sign-ins per account and per client address, so a password cannot be guessed
/// by brute force against one account, nor by spraying many accounts from one address. Only
/// failures count: a team signing in many times from one office address is never locked out.
///
/// A token bucket per key, written here rather than with `governor`: governor's limiters take
/// a cell on every check and cannot look without taking, and a sign-in must be refused up
/// front while only a failure is charged.
pub struct LoginLimiter {
    per_account: Buckets<String>,
    per_address: Buckets<IpAddr>,
}

/// Failures allowed at once (`burst`), and one more each `refill`.
struct Buckets<K> {
    burst: f64,
    refill: Duration,
    spent: Mutex<HashMap<K, Bucket>>,
}

#[derive(Clone, Copy)]
struct Bucket {
    /// Failures that may still happen, as of `at`.
    left: f64,
    at: Instant,
}

/// Keys kept before full buckets are swept out.
const SWEEP_AT: usize = 10_000;

impl<K: std::hash::Hash + Eq + Clone> Buckets<K> {
    fn new(burst: u32, refill: Duration) -> Self {
        Self { burst: f64::from(burst.max(1)), refill, spent: Mutex::default() }
    }

    fn left(&self, bucket: Bucket, now: Instant) -> f64 {
        let refilled = now.duration_since(bucket.at).as_secs_f64() / self.refill.as_secs_f64();
        (bucket.left + refilled).min(self.burst)
    }

    /// How long until `key` may try again; zero when it may now.
    fn wait(&self, key: &K) -> Duration {
        let now = Instant::now();
        let spent = self.spent.lock().expect("login limiter");
        match spent.get(key) {
            Some(&bucket) => {
                let left = self.left(bucket, now);
                if left >= 1.0 {
                    Duration::ZERO
                } else {
                    self.refill.mul_f64(1.0 - left)
                }
            }
            None => Duration::ZERO,
        }
    }

    fn charge(&self, key: K) {
        let now = Instant::now();
        let mut spent = self.spent.lock().expect("login limiter");
        if spent.len() >= SWEEP_AT {
            spent.retain(|_, b| self.left(*b, now) < self.burst);
        }
        let left = spent.get(&key).map_or(self.burst, |&b| self.left(b, now));
        spent.insert(key, Bucket { left: (left - 1.0).max(0.0), at: now });
    }
}

impl LoginLimiter {
    /// `per_account` failures (then one more every `refill`), and four times as many per address.
    pub fn new(per_account: u32, refill: Duration) -> Self {
        Self {
            per_account: Buckets::new(per_account, refill),
            per_address: Buckets::new(per_account.max(1) * 4, refill),
        }
    }

    /// Refuses an attempt from an account or address out of failures.
    fn check(&self, username: &str, address: Option<IpAddr>) -> Result<()> {
        let mut wait = self.per_account.wait(&username.to_string());
        if let Some(address) = address {
            wait = wait.max(self.per_address.wait(&address));
        }
        if wait.is_zero() {
            Ok(())
        } else {
            Err(Error::RateLimited(wait))
        }
    }

    /// Charges a failed attempt to the account and the address.
    fn failed(&self, username: &str, address: Option<IpAddr>) {
        self.per_account.charge(username.to_string());
        if let Some(address) = address {
            self.per_address.charge(address);
        }
    }
}

impl Default for LoginLimiter {
    /// Five failures per account, then one every 30 s; twenty per address.
    fn default() -> Self {
        Self::new(5, Duration::from_secs(30))
    }
}

pub struct LoginRequest<'a> {
    pub username: &'a str,
    pub password: &'a str,
    pub address: Option<IpAddr>,
}

impl LoginLimiter {
    /// Checks the credentials of an enabled account and records the sign-in.
    pub async fn login(&self, pool: &PgPool, request: LoginRequest<'_>) -> Result<Viewer> {
        let username = request.username.trim().to_ascii_lowercase();
        self.check(&username, request.address)?;
        let row = sqlx::query!(
            r#"SELECT id, username, role AS "role: Role", password_hash
               FROM users WHERE username = $1 AND NOT disabled"#,
            username
        )
        .fetch_optional(pool)
        .await?;
        // Verify against a real hash even for unknown users, so response time does not reveal
        // which usernames exist.
        let hash = row.as_ref().map_or_else(|| dummy_hash(), |r| r.password_hash.as_str());
        let password = request.password.to_string();
        let hash_owned = hash.to_string();
        let matches = tokio::task::spawn_blocking(move || verify_password(&password, &hash_owned))
            .await
            .map_err(|e| Error::Internal(e.into()))?;
        let Some(row) = row.filter(|_| matches) else {
            self.failed(&username, request.address);
            return Err(Error::BadCredentials);
        };
        sqlx::query!("UPDATE users SET last_login_at = now() WHERE id = $1", row.id).execute(pool).await?;
        Ok(Viewer { id: row.id, username: row.username, role: row.role })
    }
}

fn dummy_hash() -> &'static str {
    static HASH: OnceLock<String> = OnceLock::new();
    HASH.get_or_init(|| super::hash_password("not a real password").expect("hashing works"))
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn an_account_is_locked_after_its_failures_and_other_accounts_are_not() {
        let limiter = LoginLimiter::new(3, Duration::from_secs(60));
        for _ in 0..3 {
            limiter.check("alice", None).unwrap();
            limiter.failed("alice", None);
        }
        let err = limiter.check("alice", None).unwrap_err();
        assert!(matches!(err, Error::RateLimited(wait) if wait > Duration::from_secs(50)));
        limiter.check("bob", None).unwrap();
    }

    #[test]
    fn successful_sign_ins_do_not_count() {
        let limiter = LoginLimiter::new(2, Duration::from_secs(60));
        for _ in 0..50 {
            limiter.check("alice", Some("10.0.0.7".parse().unwrap())).unwrap();
        }
    }

    #[test]
    fn one_address_cannot_spray_many_accounts() {
        let limiter = LoginLimiter::new(2, Duration::from_secs(60));
        let ip: IpAddr = "10.0.0.7".parse().unwrap();
        for i in 0..8 {
            limiter.failed(&format!("user{i}"), Some(ip));
        }
        assert!(matches!(limiter.check("user99", Some(ip)), Err(Error::RateLimited(_))));
        limiter.check("user99", Some("10.0.0.8".parse().unwrap())).unwrap();
    }
}
