//! The draft in the loop: how a speculative-decoding draft accepted on a run's samples, pooled
//! and broken down (`report`), two evaluations of the same prompts compared pair by pair
//! (`compare`), the runs a page can pick from (`evaluations`), the lineage of draft revisions,
//! the exports they were trained on and their evaluations (`lineage`), and a new run's prompts
//! drawn toward the categories where a draft is weak (`quota`). The statistics are
//! `domain::acceptance`'s; this module reads the figures `samples` keeps.

pub mod compare;
pub mod evaluations;
pub mod lineage;
pub mod quota;
pub mod report;
