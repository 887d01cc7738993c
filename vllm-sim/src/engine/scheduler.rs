//! Continuous batching, stepped in simulated time, after vLLM V1's scheduler.
//!
//! Each step, every decoding sequence gains one token; leftover step budget goes to prefill
//! chunks of running sequences, then to admitting waiting ones (FCFS) while slots, budget and
//! KV blocks allow. A step lasts
//! `max(1/per_seq, decoding/aggregate, base + decoding·per_seq_cost) + prefilled/prefill`
//! seconds: with the first two, throughput is `min(n·per_seq, aggregate)`,
//! flat past a knee; with the affine cost it is `n / (base + n·per_seq_cost)`, still rising
//! (ever more slowly) at any batch, as a GPU server's does until its KV cache is full. When a decoding sequence needs a
//! block and none is free, the most recently admitted sequence is preempted: its blocks are
//! freed and it goes back to the front of the queue, to recompute prompt and output on
//! readmission (V1 never swaps). This module is synchronous and takes time as an argument,
//! so it is tested without a runtime.

use super::kv::KvPool;
use super::progress::Progress;
use super::FinishReason;
use crate::config::EngineSettings;
use crate::metrics::Metrics;
use crate::stats::SimCounters;
use std::collections::VecDeque;
use std::sync::Arc;

/// A request as handed to the engine.
#[derive(Debug)]
pub(crate) struct NewSequence {
    pub id: u64,
    pub prompt_tokens: u32,
    /// Where generation stops, and why it stops there.
    pub max_new_tokens: u32,
    pub finish_reason: FinishReason,
    pub progress: Arc<Progress>,
}

/// What the engine should do next.
#[derive(Clone, Copy, Debug, PartialEq)]
pub(crate) enum Advance {
    /// Nothing to run until a request arrives.
    Idle,
    /// The step in flight ends at this simulated time.
    Until(f64),
    /// Steps are still due: more simulated time has passed than was processed.
    Behind,
}

pub(crate) struct Scheduler {
    costs: StepCosts,
    max_num_seqs: usize,
    max_num_batched_tokens: u32,
    kv: KvPool,
    /// In admission order: the last one is the first to be preempted.
    running: Vec<Sequence>,
    waiting: VecDeque<Sequence>,
    /// End of the step being executed, if any.
    in_flight: Option<f64>,
    last_step_end: f64,
    metrics: Arc<Metrics>,
    counters: Arc<SimCounters>,
}

#[derive(Debug)]
struct Sequence {
    new: NewSequence,
    arrived_at: f64,
    generated: u32,
    /// Context tokens still to compute before decoding (re)starts.
    prefill_pending: u32,
    blocks: u32,
    work: Work,
    /// The generated count the response was last told about.
    published: u32,
}

/// A sequence's share of the step in flight.
#[derive(Clone, Copy, Debug, PartialEq)]
enum Work {
    Idle,
    Decode,
    Prefill(u32),
}

impl Sequence {
    fn context_len(&self) -> u32 {
        self.new.prompt_tokens + self.generated
    }
}

/// Seconds per unit of work; 0 where the rate is unlimited.
#[derive(Clone, Copy, Debug)]
struct StepCosts {
    per_seq_step: f64,
    per_batch_token: f64,
    per_prefill_token: f64,
    step_base: f64,
    per_decoding_seq: f64,
}

impl StepCosts {
    fn new(settings: &EngineSettings) -> Self {
        let inverse = |rate: f64| if rate > 0.0 { 1.0 / rate } else { 0.0 };
        Self {
            per_seq_step: inverse(settings.per_seq_tokens_per_s),
            per_batch_token: inverse(settings.aggregate_tokens_per_s),
            per_prefill_token: inverse(settings.prefill_tokens_per_s),
            step_base: settings.step_base_ms / 1000.0,
            per_decoding_seq: settings.step_ms_per_seq / 1000.0,
        }
    }

    fn step(&self, decoding: u32, prefilled: u32) -> f64 {
        // A forward pass takes at least one sequence's token time however small the batch.
        let n = f64::from(decoding);
        let affine = self.step_base + n * self.per_decoding_seq;
        let forward = self.per_seq_step.max(n * self.per_batch_token).max(affine);
        forward + f64::from(prefilled) * self.per_prefill_token
    }
}

impl Scheduler {
    pub fn new(settings: &EngineSettings, metrics: Arc<Metrics>, counters: Arc<SimCounters>) -> Self {
        Self {
            costs: StepCosts::new(settings),
            max_num_seqs: settings.max_num_seqs as usize,
            max_num_batched_tokens: settings.max_num_batched_tokens,
            kv: KvPool::with_capacity_tokens(settings.kv_cache_tokens),
            running: Vec::new(),
            waiting: VecDeque::new(),
            in_flight: None,
            last_step_end: 0.0,
            metrics,
            counters,
        }
    }

    pub fn submit(&mut self, new: NewSequence, now: f64) {
        SimCounters::bump(&self.counters.requests_started);
        self.waiting.push_back(Sequence {
            new,
            arrived_at: now,
            generated: 0,
            prefill_pending: 0,
            blocks: 0,
            work: Work::Idle,
            published: 0,
        });
    }

    /// Drops a sequence wherever it is and frees its blocks. Unknown ids (already finished)
    /// are ignored.
    pub fn abort(&mut self, id: u64) {
        let removed = if let Some(index) = self.running.iter().position(|seq| seq.new.id == id) {
            Some(self.running.remove(index))
        } else if let Some(index) = self.waiting.iter().position(|seq| seq.new.id == id) {
            self.waiting.remove(index)
        } else {
            None
        };
        if let Some(seq) = removed {
            self.kv.give_back(seq.blocks);
            SimCounters::bump(&self.counters.requests_aborted);
        }
    }

    /// Runs every step that ends by `now`, at most `max_steps` of them.
    pub fn advance(&mut self, now: f64, max_steps: u32) -> Advance {
        for _ in 0..max_steps {
            let end = match self.in_flight {
                Some(end) => end,
                None => match self.plan_step() {
                    Some(end) => *self.in_flight.insert(end),
                    None => return Advance::Idle,
                },
            };
            if end > now {
                return Advance::Until(end);
            }
            self.complete_step(end);
        }
        Advance::Behind
    }

    /// Tells responses about new tokens and refreshes the gauges; called once per batch of
    /// steps so waiting responses wake once, not once per token.
    pub fn publish(&mut self) {
        for seq in &mut self.running {
            if seq.generated != seq.published {
                seq.published = seq.generated;
                seq.new.progress.publish(seq.generated);
            }
        }
        self.metrics.running.set(self.running.len() as f64);
        self.metrics.waiting.set(self.waiting.len() as f64);
        self.metrics.kv_cache_usage.set(self.kv.usage());
    }

    /// Decides the next step's work and returns when it ends, or `None` with nothing to do.
    fn plan_step(&mut self) -> Option<f64> {
        let start = match (self.running.is_empty(), self.waiting.front()) {
            (false, _) => self.last_step_end,
            (true, Some(front)) => self.last_step_end.max(front.arrived_at),
            (true, None) => return None,
        };
        let mut budget = self.max_num_batched_tokens;
        let (decoding, preempted) = self.schedule_decodes();
        budget -= decoding;
        let mut prefilled = self.schedule_running_prefills(&mut budget);
        // As in vLLM: a step that had to preempt admits nobody.
        if !preempted {
            prefilled += self.admit(start, &mut budget);
        }
        Some(start + self.costs.step(decoding, prefilled))
    }

    /// Gives every decoding sequence its token, preempting the newest sequences when the
    /// cache has no block for it. Returns the number decoding and whether any was preempted.
    fn schedule_decodes(&mut self) -> (u32, bool) {
        let (mut decoding, mut preempted) = (0, false);
        let mut index = 0;
        while index < self.running.len() {
            let seq = &self.running[index];
            if seq.prefill_pending > 0 {
                index += 1;
                continue;
            }
            let needed = KvPool::blocks_for(seq.context_len() + 1) - seq.blocks;
            while !self.kv.try_take(needed) {
                let victim = self.running.pop().expect("the sequence being scheduled is running");
                self.preempt(victim);
                preempted = true;
                if index == self.running.len() {
                    // It preempted itself: nothing from here on runs this step.
                    return (decoding, preempted);
                }
            }
            let seq = &mut self.running[index];
            seq.blocks += needed;
            seq.work = Work::Decode;
            decoding += 1;
            index += 1;
        }
        (decoding, preempted)
    }

    fn preempt(&mut self, mut victim: Sequence) {
        // Waiting sequences are not published; hand over what it made before it stalls.
        if victim.generated != victim.published {
            victim.published = victim.generated;
            victim.new.progress.publish(victim.generated);
        }
        self.kv.give_back(victim.blocks);
        victim.blocks = 0;
        victim.prefill_pending = 0;
        victim.work = Work::Idle;
        self.metrics.preemptions.inc();
        self.waiting.push_front(victim);
    }

    /// Continues chunked prefills of running sequences from the budget, oldest first.
    fn schedule_running_prefills(&mut self, budget: &mut u32) -> u32 {
        let mut prefilled = 0;
        for seq in self.running.iter_mut().filter(|seq| seq.prefill_pending > 0) {
            let chunk = seq.prefill_pending.min(*budget);
            seq.work = if chunk > 0 { Work::Prefill(chunk) } else { Work::Idle };
            *budget -= chunk;
            prefilled += chunk;
        }
        prefilled
    }

    /// Admits waiting sequences that arrived by `start`, FCFS, while a slot, step budget and
    /// KV blocks for their whole context (plus the token they sample) are available.
    fn admit(&mut self, start: f64, budget: &mut u32) -> u32 {
        let mut prefilled = 0;
        while self.running.len() < self.max_num_seqs && *budget > 0 {
            let Some(front) = self.waiting.front() else { break };
            let blocks = KvPool::blocks_for(front.context_len() + 1);
            if front.arrived_at > start || !self.kv.try_take(blocks) {
                break;
            }
            let mut seq = self.waiting.pop_front().expect("front exists");
            // A preempted sequence recomputes its output too, not just the prompt.
            let chunk = seq.context_len().min(*budget);
            seq.blocks = blocks;
            seq.prefill_pending = seq.context_len();
            seq.work = Work::Prefill(chunk);
            *budget -= chunk;
            prefilled += chunk;
            self.running.push(seq);
        }
        prefilled
    }

    /// Applies the step that ended at `end`: tokens, finished sequences, metrics.
    fn complete_step(&mut self, end: f64) {
        let Self { running, kv, metrics, .. } = self;
        let mut generated = 0;
        running.retain_mut(|seq| {
            match std::mem::replace(&mut seq.work, Work::Idle) {
                Work::Idle => return true,
                Work::Decode => {}
                Work::Prefill(chunk) => {
                    seq.prefill_pending -= chunk;
                    if seq.prefill_pending > 0 {
                        return true;
                    }
                    if seq.generated == 0 {
                        metrics.prompt_tokens.inc_by(u64::from(seq.new.prompt_tokens));
                        metrics.first_token(end - seq.arrived_at);
                    }
                }
            }
            // The step's forward pass samples one token, for decodes and finished prefills.
            seq.generated += 1;
            generated += 1;
            if seq.generated < seq.new.max_new_tokens {
                return true;
            }
            kv.give_back(seq.blocks);
            metrics.finished(seq.new.finish_reason, end - seq.arrived_at);
            seq.new.progress.publish(seq.generated);
            false
        });
        metrics.generation_tokens.inc_by(generated);
        self.in_flight = None;
        self.last_step_end = end;
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::config::clap_defaults;

    struct Bench {
        scheduler: Scheduler,
        metrics: Arc<Metrics>,
        progress: Vec<Arc<Progress>>,
        now: f64,
    }

    impl Bench {
        fn new(configure: impl FnOnce(&mut EngineSettings)) -> Self {
            let mut settings: EngineSettings = clap_defaults();
            configure(&mut settings);
            let metrics = Arc::new(Metrics::new("m", settings.kv_cache_tokens / 16, false));
            let scheduler = Scheduler::new(&settings, metrics.clone(), Arc::default());
            Self { scheduler, metrics, progress: Vec::new(), now: 0.0 }
        }

        fn submit(&mut self, prompt_tokens: u32, max_new_tokens: u32) -> u64 {
            let id = self.progress.len() as u64;
            let progress = Arc::new(Progress::default());
            self.progress.push(progress.clone());
            let new = NewSequence {
                id,
                prompt_tokens,
                max_new_tokens,
                finish_reason: FinishReason::Stop,
                progress,
            };
            self.scheduler.submit(new, self.now);
            id
        }

        /// Runs the engine over `seconds` of simulated time.
        fn run_for(&mut self, seconds: f64) {
            self.now += seconds;
            while self.scheduler.advance(self.now, 10_000) == Advance::Behind {}
            self.scheduler.publish();
        }

        fn generated(&self) -> u64 {
            self.metrics.generation_tokens.get()
        }

        fn finished(&self) -> usize {
            self.metrics.finished_count(FinishReason::Stop) as usize
        }
    }

    #[test]
    fn throughput_saturates_at_the_aggregate_rate() {
        for (clients, expected) in [(5, 5.0 * 50.0), (20, 1_000.0), (200, 1_000.0)] {
            let mut bench = Bench::new(|s| {
                s.aggregate_tokens_per_s = 1_000.0;
                s.per_seq_tokens_per_s = 50.0;
                s.prefill_tokens_per_s = 0.0;
            });
            for _ in 0..clients {
                bench.submit(10, 100_000);
            }
            bench.run_for(1.0);
            let before = bench.generated();
            bench.run_for(10.0);
            let rate = (bench.generated() - before) as f64 / 10.0;
            assert!(
                (rate - expected).abs() / expected < 0.01,
                "{clients} clients: {rate} tok/s, expected {expected}"
            );
        }
    }

    #[test]
    fn an_affine_step_cost_keeps_throughput_rising_with_the_batch() {
        // 30 ms per pass plus 0.5 ms per sequence: n / (0.03 + 0.0005 n) tokens/s.
        let rate = |clients: u32| {
            let mut bench = Bench::new(|s| {
                s.aggregate_tokens_per_s = 0.0;
                s.per_seq_tokens_per_s = 0.0;
                s.prefill_tokens_per_s = 0.0;
                s.step_base_ms = 30.0;
                s.step_ms_per_seq = 0.5;
                s.max_num_batched_tokens = 4_096;
                s.max_num_seqs = 512;
            });
            for _ in 0..clients {
                bench.submit(10, 100_000);
            }
            bench.run_for(1.0);
            let before = bench.generated();
            bench.run_for(20.0);
            (bench.generated() - before) as f64 / 20.0
        };
        for (clients, expected) in [(10, 285.7), (100, 1_250.0), (200, 1_538.5), (400, 1_739.1)] {
            let measured = rate(clients);
            assert!(
                (measured - expected).abs() / expected < 0.01,
                "{clients} clients: {measured} tok/s, expected {expected}"
            );
        }
    }

    #[test]
    fn max_num_seqs_caps_running_and_the_rest_wait() {
        let mut bench = Bench::new(|s| s.max_num_seqs = 8);
        for _ in 0..20 {
            bench.submit(10, 1_000);
        }
        bench.run_for(1.0);
        assert_eq!(bench.metrics.running.get(), 8.0);
        assert_eq!(bench.metrics.waiting.get(), 12.0);
        // FCFS: the first eight run, the rest have nothing yet.
        assert!(bench.progress[..8].iter().all(|p| p.generated() > 0));
        assert!(bench.progress[8..].iter().all(|p| p.generated() == 0));
    }

    #[test]
    fn an_overcommitted_cache_preempts_yet_every_request_finishes() {
        let mut bench = Bench::new(|s| {
            s.max_num_seqs = 16;
            s.kv_cache_tokens = 2_048;
            s.aggregate_tokens_per_s = 0.0;
            s.per_seq_tokens_per_s = 100.0;
        });
        for _ in 0..16 {
            bench.submit(20, 400);
        }
        for _ in 0..2_000 {
            bench.run_for(0.1);
            assert!(bench.scheduler.kv.usage() <= 1.0);
        }
        assert!(bench.metrics.preemptions.get() > 0, "16 × 420 tokens cannot fit in 2,048");
        assert_eq!(bench.finished(), 16);
        assert!(bench.progress.iter().all(|p| p.generated() == 400));
        assert_eq!(bench.scheduler.kv.usage(), 0.0, "every block is returned");
    }

    #[test]
    fn a_preempted_sequence_recomputes_its_output_and_keeps_its_tokens() {
        let mut bench = Bench::new(|s| {
            s.kv_cache_tokens = 64;
            s.max_num_batched_tokens = 256;
            s.per_seq_tokens_per_s = 10.0;
            s.aggregate_tokens_per_s = 0.0;
            s.prefill_tokens_per_s = 0.0;
        });
        bench.submit(15, 40);
        bench.submit(15, 40);
        // Each is admitted with one block; by 32 tokens of context each, all four are taken.
        bench.run_for(3.0);
        assert!(bench.metrics.preemptions.get() >= 1);
        let newest = &bench.scheduler.waiting[0];
        assert_eq!(newest.new.id, 1, "the most recently admitted is preempted");
        let kept = newest.generated;
        assert!(kept > 0);
        assert_eq!(bench.progress[1].generated(), kept, "the client keeps what it was sent");
        bench.run_for(60.0);
        assert_eq!(bench.finished(), 2);
    }

    #[test]
    fn prefill_is_chunked_by_the_step_budget_and_costs_time() {
        let mut bench = Bench::new(|s| {
            s.max_num_batched_tokens = 512;
            s.prefill_tokens_per_s = 1_000.0;
            s.per_seq_tokens_per_s = 0.0;
            s.aggregate_tokens_per_s = 0.0;
        });
        bench.submit(2_000, 10);
        // 2,000 prompt tokens at 1,000/s: the first token comes after about two seconds.
        bench.run_for(1.9);
        assert_eq!(bench.progress[0].generated(), 0);
        bench.run_for(0.2);
        assert!(bench.progress[0].generated() > 0);
        assert_eq!(bench.metrics.prompt_tokens.get(), 2_000);
    }

    #[test]
    fn aborting_frees_the_cache_and_stops_generation() {
        let mut bench = Bench::new(|s| s.per_seq_tokens_per_s = 100.0);
        let running = bench.submit(100, 100_000);
        bench.run_for(1.0);
        assert!(bench.scheduler.kv.usage() > 0.0);
        bench.scheduler.abort(running);
        bench.scheduler.publish();
        let generated = bench.generated();
        bench.run_for(1.0);
        assert_eq!(bench.generated(), generated);
        assert_eq!(bench.scheduler.kv.usage(), 0.0);
        assert_eq!(bench.metrics.running.get(), 0.0);
        assert_eq!(bench.finished(), 0, "an abort is not a success");
    }

    #[test]
    fn unlimited_rates_finish_everything_without_simulated_time_passing() {
        let mut bench = Bench::new(|s| {
            s.aggregate_tokens_per_s = 0.0;
            s.per_seq_tokens_per_s = 0.0;
            s.prefill_tokens_per_s = 0.0;
        });
        for _ in 0..10 {
            bench.submit(50, 500);
        }
        bench.run_for(0.0);
        assert_eq!(bench.finished(), 10);
        assert_eq!(bench.generated(), 5_000);
    }
}
