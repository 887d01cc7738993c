use super::password::verify_password;
use crate::{Error, Result};
use domain::{Role, Viewer};
use governor::{clock::DefaultClock, state::keyed::DefaultKeyedStateStore, Quota, RateLimiter};
use sqlx::PgPool;
use std::{
    collections::HashMap,
    net::IpAddr,
    num::NonZeroU32,
    sync::{Mutex, OnceLock},
    time::{Duration, Instant},
};

type Keyed<K> = RateLimiter<K, DefaultKeyedStateStore<K>, DefaultClock>;

/// Limits failed sign-ins per account and per client address, so a password cannot be guessed
/// by brute force against one account, nor by spraying many accounts from one address. Only
/// failures count: a team signing in many times from one office address is never locked out.
pub struct LoginLimiter {
    per_account: Keyed<String>,
    per_address: Keyed<IpAddr>,
    /// Keys that ran out of failures, and until when they are refused without a check.
    blocked: Mutex<HashMap<Blocked, Instant>>,
}

#[derive(Clone, Debug, PartialEq, Eq, Hash)]
enum Blocked {
    Account(String),
    Address(IpAddr),
}

/// Blocked keys kept before expired ones are swept.
const BLOCKED_SWEEP: usize = 10_000;

impl LoginLimiter {
    /// `per_account` failures (then one more every `refill`), and four times as many per address.
    pub fn new(per_account: u32, refill: Duration) -> Self {
        let burst = NonZeroU32::new(per_account.max(1)).expect("at least one");
        let address_burst = NonZeroU32::new(per_account.max(1) * 4).expect("at least one");
        let quota = |burst| Quota::with_period(refill).expect("refill period > 0").allow_burst(burst);
        Self {
            per_account: RateLimiter::keyed(quota(burst)),
            per_address: RateLimiter::keyed(quota(address_burst)),
            blocked: Mutex::default(),
        }
    }

    fn keys(username: &str, address: Option<IpAddr>) -> impl Iterator<Item = Blocked> {
        std::iter::once(Blocked::Account(username.to_string())).chain(address.map(Blocked::Address))
    }

    /// Refuses an attempt from a key that is still blocked.
    fn check(&self, username: &str, address: Option<IpAddr>) -> Result<()> {
        let now = Instant::now();
        let blocked = self.blocked.lock().expect("login limiter");
        let wait = Self::keys(username, address)
            .filter_map(|key| blocked.get(&key).and_then(|until| until.checked_duration_since(now)))
            .max();
        match wait {
            Some(wait) if !wait.is_zero() => Err(Error::RateLimited(wait)),
            _ => Ok(()),
        }
    }

    /// Counts a failed attempt; a key out of failures is blocked until its next one refills.
    fn failed(&self, username: &str, address: Option<IpAddr>) {
        let clock = governor::clock::DefaultClock::default();
        let now = governor::clock::Clock::now(&clock);
        let mut waits = vec![(
            Blocked::Account(username.to_string()),
            self.per_account.check_key(&username.to_string()).err().map(|n| n.wait_time_from(now)),
        )];
        if let Some(address) = address {
            waits.push((
                Blocked::Address(address),
                self.per_address.check_key(&address).err().map(|n| n.wait_time_from(now)),
            ));
        }
        let mut blocked = self.blocked.lock().expect("login limiter");
        if blocked.len() >= BLOCKED_SWEEP {
            let now = Instant::now();
            blocked.retain(|_, until| *until > now);
        }
        for (key, wait) in waits {
            if let Some(wait) = wait {
                blocked.insert(key, Instant::now() + wait);
            }
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
        limiter.check("alice", None).unwrap();
        limiter.failed("alice", None);
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
        for i in 0..9 {
            limiter.failed(&format!("user{i}"), Some(ip));
        }
        assert!(matches!(limiter.check("user99", Some(ip)), Err(Error::RateLimited(_))));
        limiter.check("user99", Some("10.0.0.8".parse().unwrap())).unwrap();
    }
}
