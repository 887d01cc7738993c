//! A sample's life. Every change of a sample's state is a named transition here, each one
//! guarded statement (or one statement per sample batch) that says whether it applied:
//!
//! - `create`: a run's samples, made with the run (the only insert).
//! - `queue`: the generation queue — `claim`, `renew_leases`, `reap_expired_leases`, `settle`,
//!   `fail_unrecorded`, `release`, `unclaim`, `release_all`; `auto_flags` and `token_ids` are
//!   what `settle` stores beside a result.
//! - `requeue`: a finished sample back to the queue (a retry pass, a regeneration), its
//!   decision dropped and logged with the text it applied to.
//! - `review`: a reviewer's decision, a bulk decision, and undo, each logged with a hash of the
//!   text it applied to; `review_lease`: queue mode's hold of one sample by one reviewer.
//!
//! `query` turns a `SampleQuery` ("which samples") into SQL for every place that reads or acts
//! on a set of samples; `tally` keeps the counts along the review facets that triggers append
//! as samples move, folded now and then.
//!
//! Callers (generation workers, `runs`, `review::*`) check permissions and explain
//! refusals; the statements here are the only ones that move a sample. The rule they keep
//! together: a decision exists only on a finished sample (the database checks it,
//! `samples_decided_only_when_finished`), and a finished sample leaves that state only through
//! `requeue`, which drops the decision first. So a text nobody has read is never "approved".
//!
//! ```text
//!                   claim (under a lease)                settle: an answer, or the last error
//!    ┌─▶ pending ─────────────────────────▶ running ─────────────────────────────▶ ok · truncated · empty
//!    │     ▲  ▲                              │  │                                   failed · timed_out
//!    │     │  └──────────────────────────────┘  │                                        │    ▲
//!    │     │  release · unclaim · release_all · │ settle: a retryable error              │    │ decide · bulk · undo
//!    │     │  reap_expired_leases (uncounted)   │ (after a backoff; the try's            │    │ (the review state, on
//!    │     └────────────────────────────────────┘  text replaces the last one's)         │    ▼  finished samples only)
//!    │                                                                                   │
//!    └──────────────────── requeue: a retry pass or a regeneration ──────────────────────┘
//!                          review state back to unreviewed; the decision stays in
//!                          review_events with the hash of the text it applied to
//! ```

pub mod auto_flags;
pub mod create;
pub mod query;
pub mod queue;
pub mod requeue;
pub mod review;
pub mod review_lease;
pub mod tally;
pub mod token_ids;
