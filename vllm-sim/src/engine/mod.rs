//! The engine: one task that owns the scheduler, takes requests and aborts over a channel,
//! and steps in simulated time.

mod kv;
mod progress;
mod scheduler;

use crate::clock::SimClock;
use crate::config::EngineSettings;
use crate::metrics::Metrics;
use crate::stats::SimCounters;
use progress::Progress;
use scheduler::{Advance, NewSequence, Scheduler};
use std::sync::atomic::{AtomicU64, Ordering};
use std::sync::Arc;
use tokio::sync::mpsc;
use tokio::time::Instant;
use tokio_util::sync::CancellationToken;

/// Steps run per wake-up before the task yields. With unlimited rates steps take no
/// simulated time and would otherwise run without a break.
const MAX_STEPS_PER_WAKE: u32 = 256;

/// Why generation ended, as reported in `finish_reason`.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum FinishReason {
    /// The completion reached its natural end.
    Stop,
    /// `max_tokens` or the context length cut it.
    Length,
}

impl FinishReason {
    pub fn as_str(self) -> &'static str {
        match self {
            Self::Stop => "stop",
            Self::Length => "length",
        }
    }
}

/// What to generate for one request.
#[derive(Clone, Copy, Debug)]
pub struct SequenceRequest {
    pub prompt_tokens: u32,
    pub max_new_tokens: u32,
    pub finish_reason: FinishReason,
}

enum Command {
    Submit(NewSequence),
    Abort(u64),
}

/// Submits requests to the engine task.
#[derive(Clone, Debug)]
pub(crate) struct EngineHandle {
    commands: mpsc::UnboundedSender<Command>,
    next_id: Arc<AtomicU64>,
}

impl EngineHandle {
    pub fn submit(&self, request: SequenceRequest) -> Generation {
        let id = self.next_id.fetch_add(1, Ordering::Relaxed);
        let progress = Arc::new(Progress::default());
        let new = NewSequence {
            id,
            prompt_tokens: request.prompt_tokens,
            max_new_tokens: request.max_new_tokens,
            finish_reason: request.finish_reason,
            progress: progress.clone(),
        };
        // A closed channel means the server is shutting down; the response then ends with
        // its connection.
        let _ = self.commands.send(Command::Submit(new));
        Generation { id, max_new_tokens: request.max_new_tokens, progress, commands: self.commands.clone() }
    }
}

/// A request's generation in the engine. Dropping it before the end aborts it, which is how
/// a client disconnect (its response future or body dropped) reaches the scheduler.
#[derive(Debug)]
pub(crate) struct Generation {
    id: u64,
    max_new_tokens: u32,
    progress: Arc<Progress>,
    commands: mpsc::UnboundedSender<Command>,
}

impl Generation {
    /// Waits until `tokens` tokens exist (at most the whole completion); returns how many do.
    pub async fn reached(&self, tokens: u32) -> u32 {
        self.progress.reached(tokens.min(self.max_new_tokens)).await
    }
}

impl Drop for Generation {
    fn drop(&mut self) {
        if self.progress.generated() < self.max_new_tokens {
            let _ = self.commands.send(Command::Abort(self.id));
        }
    }
}

/// Starts the engine task; it runs until `shutdown` is cancelled.
pub(crate) fn start(
    settings: &EngineSettings,
    clock: SimClock,
    metrics: Arc<Metrics>,
    counters: Arc<SimCounters>,
    shutdown: CancellationToken,
) -> (EngineHandle, tokio::task::JoinHandle<()>) {
    let (commands, inbox) = mpsc::unbounded_channel();
    let scheduler = Scheduler::new(settings, metrics, counters);
    let task = tokio::spawn(run(scheduler, inbox, clock, shutdown));
    (EngineHandle { commands, next_id: Arc::default() }, task)
}

async fn run(
    mut scheduler: Scheduler,
    mut inbox: mpsc::UnboundedReceiver<Command>,
    clock: SimClock,
    shutdown: CancellationToken,
) {
    scheduler.publish();
    loop {
        while let Ok(command) = inbox.try_recv() {
            apply(&mut scheduler, command, &clock);
        }
        let wake_at = match scheduler.advance(clock.now(), MAX_STEPS_PER_WAKE) {
            Advance::Behind => {
                scheduler.publish();
                tokio::task::yield_now().await;
                continue;
            }
            Advance::Until(step_end) => Some(Instant::from_std(clock.instant_at(step_end))),
            Advance::Idle => None,
        };
        scheduler.publish();
        tokio::select! {
            () = shutdown.cancelled() => return,
            command = inbox.recv() => match command {
                Some(command) => apply(&mut scheduler, command, &clock),
                None => return,
            },
            () = sleep_until(wake_at) => {}
        }
    }
}

fn apply(scheduler: &mut Scheduler, command: Command, clock: &SimClock) {
    match command {
        Command::Submit(new) => scheduler.submit(new, clock.now()),
        Command::Abort(id) => scheduler.abort(id),
    }
}

async fn sleep_until(deadline: Option<Instant>) {
    match deadline {
        Some(deadline) => tokio::time::sleep_until(deadline).await,
        None => std::future::pending().await,
    }
}
