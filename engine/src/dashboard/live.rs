//! One snapshot per run and second, whatever the number of viewers: the first viewer of a run
//! starts a publisher task, every viewer subscribes to its `watch` channel, and the task stops
//! when the last viewer leaves. Snapshots are serialized once, so a viewer costs one write of
//! a few kilobytes per second.

use super::{snapshot, AlertPolicy};
use sqlx::PgPool;
use std::{
    collections::HashMap,
    sync::{Arc, Mutex},
    time::Duration,
};
use tokio::sync::watch;
use tokio_util::sync::CancellationToken;

/// A run's latest snapshot as JSON, `None` until the first one is read.
pub type Feed = watch::Receiver<Option<Arc<str>>>;

/// Snapshots are published this often.
const EVERY: Duration = Duration::from_secs(1);
/// The slow parts (length percentiles, attempts histogram) are re-read every this many snapshots.
const SLOW_EVERY: u32 = 5;

/// The sending side of one run's [`Feed`], shared by the hub and that run's publisher.
type Publisher = Arc<watch::Sender<Option<Arc<str>>>>;

pub struct LiveHub {
    pool: PgPool,
    policy: AlertPolicy,
    runs: Mutex<HashMap<i64, Publisher>>,
    stop: CancellationToken,
}

impl LiveHub {
    pub fn new(pool: PgPool, policy: AlertPolicy) -> Self {
        Self { pool, policy, runs: Mutex::default(), stop: CancellationToken::new() }
    }

    pub fn policy(&self) -> &AlertPolicy {
        &self.policy
    }

    /// Cancelled when the server shuts down: open event streams end so it can drain.
    pub fn closed(&self) -> CancellationToken {
        self.stop.clone()
    }

    pub fn close(&self) {
        self.stop.cancel();
    }

    /// Runs publishing now (for tests and the benchmark).
    pub fn publishing(&self) -> usize {
        self.runs.lock().expect("hub lock").len()
    }

    pub fn subscribe(self: &Arc<Self>, run_id: i64) -> Feed {
        let mut runs = self.runs.lock().expect("hub lock");
        if let Some(sender) = runs.get(&run_id) {
            return sender.subscribe();
        }
        let (sender, feed) = watch::channel(None);
        let sender = Arc::new(sender);
        runs.insert(run_id, sender.clone());
        tokio::spawn(self.clone().publish(run_id, sender));
        feed
    }

    async fn publish(self: Arc<Self>, run_id: i64, sender: Arc<watch::Sender<Option<Arc<str>>>>) {
        let mut every = tokio::time::interval(EVERY);
        every.set_missed_tick_behavior(tokio::time::MissedTickBehavior::Skip);
        let mut slow = snapshot::SlowParts::default();
        let mut tick = 0u32;
        loop {
            tokio::select! {
                _ = self.stop.cancelled() => break,
                _ = every.tick() => {}
            }
            {
                // Leave under the lock, so a viewer arriving now starts a new publisher.
                let mut runs = self.runs.lock().expect("hub lock");
                if sender.receiver_count() == 0 {
                    runs.remove(&run_id);
                    return;
                }
            }
            if tick.is_multiple_of(SLOW_EVERY) {
                match snapshot::slow_parts(&self.pool, run_id).await {
                    Ok(parts) => slow = parts,
                    Err(e) => tracing::warn!(run.id = run_id, error = %e, "reading run statistics failed"),
                }
            }
            tick = tick.wrapping_add(1);
            match snapshot::read(&self.pool, run_id, slow.clone(), &self.policy).await {
                Ok(snap) => {
                    let json: Arc<str> = serde_json::to_string(&snap).expect("snapshot serializes").into();
                    sender.send_replace(Some(json));
                }
                Err(crate::Error::NotFound(_)) => break,
                Err(e) => tracing::warn!(run.id = run_id, error = %e, "reading the run snapshot failed"),
            }
        }
        self.runs.lock().expect("hub lock").remove(&run_id);
    }
}
