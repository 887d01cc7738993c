//! Background jobs held under a lease: dataset imports (`datasets`) and exports (`export`), one
//! protocol for both. A process claims a job (its row's `lease_owner`, `lease_expires_at` and
//! `claims`), renews the lease while it works, and writes only while it still holds it; when a
//! process dies its lease runs out and another takes the job over from the start, or ends it
//! after `max_claims` starts (a job that kills its process must not kill every process).
//!
//! - `lease`: what a process holds (`Claim`), the options of every job kind (`JobOptions`), and
//!   the statements every job table shares (`JobTable::renew`). What differs by table — how a
//!   job is claimed, handed back, finished or ended — stays with its table (`datasets::lease`,
//!   `export::lease`), one guarded statement per transition.
//! - `hold`: runs a claimed job while renewing its lease, the renewal polled beside the work and
//!   never awaited in a `select!` arm (a batch's transaction may hold the job's row, and a
//!   renewal awaited with the work unpolled would wait on it for ever: that hung imports once);
//!   the job is told to stop at its next batch when the lease is lost or the process stops.
//!   `poll` is the worker loop of every kind.

pub mod hold;
pub mod lease;

pub use hold::{hold, poll, Held};
pub use lease::{Claim, JobOptions, JobTable};
