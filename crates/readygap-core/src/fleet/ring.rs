//! A ring of a Deployment's last N trials: the newest push drops the oldest once full, so a
//! watcher that runs for weeks keeps a constant number of trials in memory.

use crate::timeline::Trial;
use std::collections::VecDeque;

/// The last `cap` trials, oldest first.
#[derive(Debug, Clone, PartialEq)]
pub struct TrialRing {
    cap: usize,
    trials: VecDeque<Trial>,
    /// Trials pushed since the ring was made (kept ones and dropped ones).
    pub seen: u64,
}

impl TrialRing {
    /// An empty ring of `cap` trials (at least one).
    pub fn new(cap: usize) -> Self {
        let cap = cap.max(1);
        Self {
            cap,
            trials: VecDeque::with_capacity(cap),
            seen: 0,
        }
    }

    /// Keep `t`, dropping the oldest trial when full.
    pub fn push(&mut self, t: Trial) {
        if self.trials.len() == self.cap {
            self.trials.pop_front();
        }
        self.trials.push_back(t);
        self.seen += 1;
    }

    pub fn len(&self) -> usize {
        self.trials.len()
    }

    pub fn is_empty(&self) -> bool {
        self.trials.is_empty()
    }

    /// Oldest first.
    pub fn iter(&self) -> impl Iterator<Item = &Trial> {
        self.trials.iter()
    }
}
