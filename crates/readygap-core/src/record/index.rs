//! Seeking in a recording: a replay index keeps a snapshot of the reducer's state every few
//! thousand events, so the state at any instant is one snapshot clone plus at most that many
//! events applied — immediate even in a 1-hour recording — and lists every T0–T4 mark for
//! mark-to-mark and trial-to-trial navigation.

use crate::event::{Event, Timestamp};
use crate::state::State;

/// Events between snapshots.
const SNAPSHOT_EVERY: usize = 5_000;

/// One T0–T4 mark of a trial.
#[derive(Debug, Clone, PartialEq)]
pub struct Mark {
    pub ts: Timestamp,
    pub trial: u32,
    /// 0..=4 for T0..T4.
    pub which: u8,
    /// How many events are applied when the mark first appears in the state (the mark's
    /// event is the `at`-th): seeking to a mark shows `state_after(at)`.
    pub at: usize,
}

impl Mark {
    pub fn label(&self) -> String {
        const NAMES: [&str; 5] = [
            "T0 replacement requested",
            "T1 Ready",
            "T2 runtime answers",
            "T3 inference sent",
            "T4 inference done",
        ];
        format!("trial {} {}", self.trial, NAMES[self.which as usize])
    }
}

/// A recording prepared for seeking.
pub struct ReplayIndex {
    events: Vec<Event>,
    /// (number of events applied, state after them).
    snapshots: Vec<(usize, State)>,
    marks: Vec<Mark>,
}

impl ReplayIndex {
    /// Build the index (one pass through the reducer).
    pub fn new(events: Vec<Event>) -> Self {
        let mut state = State::new();
        let mut snapshots = vec![(0, State::new())];
        // (trial, which) → events applied when the mark first appeared. Only the last two
        // trials can gain marks from one event, so the scan per event is constant.
        let mut first_seen: std::collections::HashMap<(u32, u8), usize> = Default::default();
        for (i, e) in events.iter().enumerate() {
            state.apply(e);
            let trials = &state.timeline.trials;
            for t in &trials[trials.len().saturating_sub(2)..] {
                let m = &t.marks;
                for (which, ts) in [m.t0, m.t1, m.t2, m.t3, m.t4].into_iter().enumerate() {
                    if ts.is_some() {
                        first_seen.entry((t.index, which as u8)).or_insert(i + 1);
                    }
                }
            }
            if (i + 1) % SNAPSHOT_EVERY == 0 {
                snapshots.push((i + 1, state.clone()));
            }
        }
        let mut marks = Vec::new();
        for t in &state.timeline.trials {
            let m = &t.marks;
            for (which, ts) in [m.t0, m.t1, m.t2, m.t3, m.t4].into_iter().enumerate() {
                if let Some(ts) = ts {
                    let which = which as u8;
                    let at = first_seen
                        .get(&(t.index, which))
                        .copied()
                        .unwrap_or_else(|| events.partition_point(|e| e.ts <= ts));
                    marks.push(Mark {
                        ts,
                        trial: t.index,
                        which,
                        at,
                    });
                }
            }
        }
        marks.sort_by_key(|m| (m.ts, m.at));
        ReplayIndex {
            events,
            snapshots,
            marks,
        }
    }

    pub fn events(&self) -> &[Event] {
        &self.events
    }

    pub fn marks(&self) -> &[Mark] {
        &self.marks
    }

    pub fn start(&self) -> Option<Timestamp> {
        self.events.first().map(|e| e.ts)
    }

    pub fn end(&self) -> Option<Timestamp> {
        self.events.iter().map(|e| e.ts).max()
    }

    /// How many events lie at or before `ts` (events are in file order, which is time order
    /// but for small inversions between sources; the position is that of file order).
    pub fn position_at(&self, ts: Timestamp) -> usize {
        self.events.partition_point(|e| e.ts <= ts)
    }

    /// The state after the first `n` events.
    pub fn state_after(&self, n: usize) -> State {
        let n = n.min(self.events.len());
        let at = self
            .snapshots
            .partition_point(|(k, _)| *k <= n)
            .saturating_sub(1);
        let (k, snap) = &self.snapshots[at];
        let mut state = snap.clone();
        for e in &self.events[*k..n] {
            state.apply(e);
        }
        state
    }

    /// The next mark strictly after `ts`.
    pub fn next_mark(&self, ts: Timestamp) -> Option<&Mark> {
        self.marks.iter().find(|m| m.ts > ts)
    }

    /// The last mark strictly before `ts`.
    pub fn prev_mark(&self, ts: Timestamp) -> Option<&Mark> {
        self.marks.iter().rev().find(|m| m.ts < ts)
    }

    /// T0 of the next trial after `ts`.
    pub fn next_trial(&self, ts: Timestamp) -> Option<&Mark> {
        self.marks.iter().find(|m| m.which == 0 && m.ts > ts)
    }

    /// T0 of the trial before the one under way at `ts`.
    pub fn prev_trial(&self, ts: Timestamp) -> Option<&Mark> {
        self.marks.iter().rev().find(|m| m.which == 0 && m.ts < ts)
    }

    /// T0 of trial `n` (1-based).
    pub fn trial_start(&self, n: u32) -> Option<&Mark> {
        self.marks.iter().find(|m| m.which == 0 && m.trial == n)
    }
}
