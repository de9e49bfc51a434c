//! Time series with explicit gaps: a missed sample is a gap, not a zero. Series are pruned by
//! age relative to the newest point (event time), never by the wall clock.

use super::event::Timestamp;
use serde::{Deserialize, Serialize};
use std::collections::VecDeque;

/// One point: a value, or a gap (the source failed or disconnected at that instant).
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct Point<T> {
    pub ts: Timestamp,
    pub value: Option<T>,
}

/// A bounded time series.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct Series<T> {
    points: VecDeque<Point<T>>,
    /// Points older than this, relative to the newest point, are dropped.
    max_age_ms: i64,
}

impl<T> Default for Series<T> {
    fn default() -> Self {
        Self::with_max_age(chrono::Duration::hours(2))
    }
}

impl<T> Series<T> {
    pub fn with_max_age(max_age: chrono::Duration) -> Self {
        Series {
            points: VecDeque::new(),
            max_age_ms: max_age.num_milliseconds(),
        }
    }

    /// Append a value.
    pub fn push(&mut self, ts: Timestamp, value: T) {
        self.insert(Point {
            ts,
            value: Some(value),
        });
    }

    /// Append a gap (shown as a break in charts), unless the series already ends in one.
    pub fn gap(&mut self, ts: Timestamp) {
        if self.points.back().is_none_or(|p| p.value.is_some()) {
            self.insert(Point { ts, value: None });
        }
    }

    fn insert(&mut self, p: Point<T>) {
        // Sources are mostly in order; a late point is placed where it belongs.
        match self.points.back() {
            Some(last) if last.ts > p.ts => {
                let at = self.points.partition_point(|q| q.ts <= p.ts);
                self.points.insert(at, p);
            }
            _ => self.points.push_back(p),
        }
        // Prune by age relative to the newest point.
        let Some(newest) = self.points.back().map(|p| p.ts) else {
            return;
        };
        let cutoff = newest - chrono::Duration::milliseconds(self.max_age_ms);
        while self.points.front().is_some_and(|p| p.ts < cutoff) {
            self.points.pop_front();
        }
    }

    pub fn points(&self) -> impl DoubleEndedIterator<Item = &Point<T>> + ExactSizeIterator {
        self.points.iter()
    }

    /// Points at or after `since`.
    pub fn since(&self, since: Timestamp) -> impl Iterator<Item = &Point<T>> {
        let at = self.points.partition_point(|p| p.ts < since);
        self.points.range(at..)
    }

    pub fn last_value(&self) -> Option<&T> {
        self.points.iter().rev().find_map(|p| p.value.as_ref())
    }

    pub fn len(&self) -> usize {
        self.points.len()
    }

    pub fn is_empty(&self) -> bool {
        self.points.is_empty()
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn t(ms: i64) -> Timestamp {
        chrono::DateTime::from_timestamp_millis(1_800_000_000_000 + ms).unwrap()
    }

    #[test]
    fn gaps_are_explicit_and_not_repeated() {
        let mut s = Series::default();
        s.push(t(0), 1u64);
        s.gap(t(250));
        s.gap(t(500));
        s.push(t(750), 3);
        let v: Vec<_> = s.points().map(|p| p.value).collect();
        assert_eq!(v, vec![Some(1), None, Some(3)]);
    }

    #[test]
    fn pruned_by_event_time_and_late_points_sorted() {
        let mut s = Series::with_max_age(chrono::Duration::seconds(1));
        s.push(t(0), 1u64);
        s.push(t(600), 2);
        s.push(t(300), 9);
        assert_eq!(
            s.points().map(|p| p.value.unwrap()).collect::<Vec<_>>(),
            vec![1, 9, 2]
        );
        s.push(t(1500), 3);
        assert_eq!(
            s.points().map(|p| p.value.unwrap()).collect::<Vec<_>>(),
            vec![2, 3]
        );
        assert_eq!(s.since(t(1000)).count(), 1);
    }
}
