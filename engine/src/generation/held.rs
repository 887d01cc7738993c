//! The samples this worker process is working on right now, so that only their leases are
//! renewed. A try that ended but could not be recorded (the database was away at that moment)
//! drops out of this set, its lease runs out, and the reaper returns the sample to the queue,
//! instead of the worker renewing a lease it no longer works under until it restarts.

use std::{
    collections::HashSet,
    sync::{Arc, Mutex},
};

#[derive(Clone, Debug, Default)]
pub struct HeldSamples(Arc<Mutex<HashSet<i64>>>);

/// Holds one sample until dropped.
#[derive(Debug)]
pub struct Hold {
    held: HeldSamples,
    id: i64,
}

impl HeldSamples {
    pub fn hold(&self, id: i64) -> Hold {
        self.0.lock().expect("held samples").insert(id);
        Hold { held: self.clone(), id }
    }

    pub fn ids(&self) -> Vec<i64> {
        self.0.lock().expect("held samples").iter().copied().collect()
    }
}

impl Drop for Hold {
    fn drop(&mut self) {
        self.held.0.lock().expect("held samples").remove(&self.id);
    }
}

#[cfg(test)]
mod tests {
    use super::HeldSamples;

    #[test]
    fn a_sample_is_held_until_its_hold_is_dropped() {
        let held = HeldSamples::default();
        let a = held.hold(1);
        let b = held.hold(2);
        let mut ids = held.ids();
        ids.sort();
        assert_eq!(ids, vec![1, 2]);
        drop(a);
        assert_eq!(held.ids(), vec![2]);
        drop(b);
        assert!(held.ids().is_empty());
    }
}
