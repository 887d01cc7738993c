//! What the engine has generated for one sequence, shared with the response that streams
//! it. The engine publishes once per batch of steps, not per token, so a response wakes at
//! most once per engine wake-up and renders every token granted since.

use std::sync::atomic::{AtomicU32, Ordering};
use tokio::sync::Notify;

#[derive(Debug, Default)]
pub(crate) struct Progress {
    generated: AtomicU32,
    changed: Notify,
}

impl Progress {
    pub fn generated(&self) -> u32 {
        self.generated.load(Ordering::Acquire)
    }

    pub fn publish(&self, generated: u32) {
        self.generated.store(generated, Ordering::Release);
        // `notify_one` keeps a permit when nobody waits yet, so a waiter that checked the
        // count just before this store still wakes.
        self.changed.notify_one();
    }

    /// Waits until at least `tokens` tokens exist; returns how many do.
    pub async fn reached(&self, tokens: u32) -> u32 {
        loop {
            let generated = self.generated();
            if generated >= tokens {
                return generated;
            }
            self.changed.notified().await;
        }
    }
}
