//! Writing a finished try while PostgreSQL is away. A try that came back from the server is
//! work a GPU has done: when its write fails because the database cannot be reached (a
//! restart, a failover, a network cut), the result is held in memory and the write retried
//! until it lands, instead of the sample being failed. Memory is bounded twice: only tries in
//! flight can be waiting (no new sample is claimed while the database is away), and the bytes
//! held by all of them together are capped; a result that does not fit, or that has waited
//! longer than `HOLD_AT_MOST`, is given up, and its sample returns to the queue by the lease
//! expiring once the database is back (a new try, not a failure).

use crate::{Error, Result};
use prometheus_client::metrics::counter::Counter;
use std::{
    future::Future,
    sync::{
        atomic::{AtomicUsize, Ordering},
        Arc,
    },
    time::Duration,
};
use tokio::time::Instant;

/// The longest a result waits for the database.
pub const HOLD_AT_MOST: Duration = Duration::from_secs(15 * 60);
/// Bytes of results held at once by one worker process.
pub const HOLD_BYTES: usize = 512 << 20;

/// Whether an error means the database could not be reached (worth waiting for), rather than
/// that it refused this write.
pub fn database_away(error: &Error) -> bool {
    let Error::Database(error) = error else { return false };
    match error {
        sqlx::Error::Io(_)
        | sqlx::Error::PoolTimedOut
        | sqlx::Error::PoolClosed
        | sqlx::Error::WorkerCrashed
        | sqlx::Error::Tls(_)
        | sqlx::Error::Protocol(_) => true,
        // 08: connection exceptions; 57P01-57P03: the server shutting down or starting up;
        // 53300: too many connections (a restart's reconnect storm).
        sqlx::Error::Database(db) => db.code().is_some_and(|code| {
            code.starts_with("08") || matches!(code.as_ref(), "57P01" | "57P02" | "57P03" | "53300")
        }),
        _ => false,
    }
}

/// The bytes all held results take, shared by a worker's tries, and the counts of results
/// held and given up (the engine's metrics).
#[derive(Clone, Debug, Default)]
pub struct HoldBudget {
    bytes: Arc<AtomicUsize>,
    held: Counter,
    given_up: Counter,
}

impl HoldBudget {
    pub fn new(held: Counter, given_up: Counter) -> Self {
        Self { bytes: Arc::default(), held, given_up }
    }

    /// Reserves `bytes`; `None` when they do not fit.
    fn reserve(&self, bytes: usize) -> Option<Reservation> {
        let mut held = self.bytes.load(Ordering::Relaxed);
        loop {
            if held + bytes > HOLD_BYTES {
                return None;
            }
            match self.bytes.compare_exchange_weak(held, held + bytes, Ordering::AcqRel, Ordering::Relaxed) {
                Ok(_) => return Some(Reservation { budget: self.clone(), bytes }),
                Err(now) => held = now,
            }
        }
    }

    pub fn held(&self) -> usize {
        self.bytes.load(Ordering::Relaxed)
    }
}

struct Reservation {
    budget: HoldBudget,
    bytes: usize,
}

impl Drop for Reservation {
    fn drop(&mut self) {
        self.budget.bytes.fetch_sub(self.bytes, Ordering::AcqRel);
    }
}

/// Why a held write was given up.
#[derive(Debug)]
pub enum GaveUp {
    /// The database refused it (not an outage): the caller decides.
    Refused(Error),
    /// It waited too long, or did not fit in memory; the sample returns to the queue.
    Abandoned(String),
}

/// Runs `write` until it succeeds, retrying while the database is away. `bytes` is roughly what
/// the result holds in memory.
pub async fn persist<T, F, Fut>(
    budget: &HoldBudget,
    bytes: usize,
    what: &str,
    mut write: F,
) -> Result<T, GaveUp>
where
    F: FnMut() -> Fut,
    Fut: Future<Output = Result<T>>,
{
    let first = match write().await {
        Ok(done) => return Ok(done),
        Err(e) if database_away(&e) => e,
        Err(e) => return Err(GaveUp::Refused(e)),
    };
    let Some(_held) = budget.reserve(bytes) else {
        budget.given_up.inc();
        return Err(GaveUp::Abandoned(format!(
            "the database is away and this worker already holds {} MiB of results: {first}",
            budget.held() >> 20
        )));
    };
    budget.held.inc();
    tracing::warn!(error = %first, what, "the database is away; holding the result until it is back");
    let since = Instant::now();
    let mut pause = Duration::from_millis(250);
    loop {
        tokio::time::sleep(pause).await;
        pause = (pause * 2).min(Duration::from_secs(5));
        match write().await {
            Ok(done) => {
                tracing::info!(what, waited_ms = since.elapsed().as_millis() as u64, "held result written");
                return Ok(done);
            }
            Err(e) if database_away(&e) => {
                if since.elapsed() > HOLD_AT_MOST {
                    budget.given_up.inc();
                    return Err(GaveUp::Abandoned(format!(
                        "the database was away for more than {} min: {e}",
                        HOLD_AT_MOST.as_secs() / 60
                    )));
                }
            }
            Err(e) => return Err(GaveUp::Refused(e)),
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use std::sync::atomic::AtomicU32;

    fn away() -> Error {
        Error::Database(sqlx::Error::Io(std::io::Error::from(std::io::ErrorKind::ConnectionReset)))
    }

    #[test]
    fn outages_are_told_from_refusals() {
        assert!(database_away(&away()));
        assert!(database_away(&Error::Database(sqlx::Error::PoolTimedOut)));
        assert!(!database_away(&Error::Database(sqlx::Error::RowNotFound)));
        assert!(!database_away(&Error::invalid("no")));
    }

    #[tokio::test(start_paused = true)]
    async fn a_write_is_retried_until_the_database_is_back() {
        let budget = HoldBudget::default();
        let calls = AtomicU32::new(0);
        let written = persist(&budget, 1_000, "test", || {
            let n = calls.fetch_add(1, Ordering::Relaxed);
            async move {
                if n < 5 {
                    Err(away())
                } else {
                    Ok(n)
                }
            }
        })
        .await
        .unwrap();
        assert_eq!(written, 5);
        assert_eq!(budget.held(), 0, "the reservation is returned");
        assert_eq!(budget.held.get(), 1);
    }

    #[tokio::test(start_paused = true)]
    async fn a_refusal_is_not_retried_and_a_long_outage_is_given_up() {
        let budget = HoldBudget::default();
        let refused =
            persist(&budget, 10, "test", || async { Err::<(), _>(Error::invalid("bad value")) }).await;
        assert!(matches!(refused, Err(GaveUp::Refused(_))));
        let forever = persist(&budget, 10, "test", || async { Err::<(), _>(away()) }).await;
        assert!(
            matches!(forever, Err(GaveUp::Abandoned(ref m)) if m.contains("more than 15 min")),
            "{forever:?}"
        );
    }

    #[tokio::test]
    async fn results_beyond_the_memory_budget_are_given_up() {
        let budget = HoldBudget::default();
        let _big = budget.reserve(HOLD_BYTES - 10).unwrap();
        let result = persist(&budget, 100, "test", || async { Err::<(), _>(away()) }).await;
        assert!(matches!(result, Err(GaveUp::Abandoned(ref m)) if m.contains("already holds")), "{result:?}");
    }
}
