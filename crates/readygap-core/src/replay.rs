//! The replayer: a recording played back with controls (pause, seek, speed).
//!
//! A [`Replayer`] owns the recording's [`ReplayIndex`] and a playhead: a position in events
//! (how many are applied) and the replay clock (the recording time shown). It is pure: every
//! method takes the wall-clock `now`, so tests check due times without sleeping, and returns
//! [`Step`]s for the screen. The binary's `replay` command is the task around it: it sends
//! the due events to the dashboard, and carries out the replay keys ([`ReplayCommand`]) the
//! dashboard sends back. A seek never
//! re-reads the recording: it replaces the dashboard's whole state with
//! `index.state_after(position)` (a snapshot clone plus at most a few thousand events).
//! Marks are ordered by the event that makes them appear (`Mark::at`), so "next mark" shows
//! exactly the state of a full replay up to that event.

use crate::event::{Event, Timestamp};
use crate::record::index::{Mark, ReplayIndex};
use crate::state::State;
use std::str::FromStr;
use std::sync::Arc;
use std::time::{Duration, Instant};

/// The slowest and fastest speeds `-`/`+` reach.
pub const MIN_SPEED: f64 = 1.0 / 64.0;
pub const MAX_SPEED: f64 = 1024.0;
/// Events sent per wake-up of the replay task.
pub const BATCH: usize = 2048;
/// How often the replay bar's position is refreshed while playing (wall time).
const STATUS_EVERY: Duration = Duration::from_millis(100);

/// A replay key.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum ReplayCommand {
    PauseResume,
    PrevMark,
    NextMark,
    /// T0 of the trial before the playhead.
    PrevTrial,
    /// T0 of the next trial.
    NextTrial,
    /// Speed ×2.
    Faster,
    /// Speed ÷2.
    Slower,
    Start,
    End,
}

/// Where a replay is, as the replayer last reported it (the replay bar shows it).
#[derive(Debug, Clone, PartialEq, Eq, Default)]
pub struct ReplayBar {
    /// The playhead, in ms from the recording's first event.
    pub position_ms: i64,
    /// The recording's length in ms.
    pub duration_ms: i64,
    /// The speed as shown: `×100`, `×1/4`, `max`.
    pub speed: String,
    pub paused: bool,
    /// The playhead is at the end of the recording.
    pub ended: bool,
    /// Every T0–T4 mark: (ms from the start, 0..=4).
    pub marks: Arc<[(i64, u8)]>,
}

/// What the replayer tells the screen.
#[derive(Debug, Clone)]
pub enum Step {
    /// Apply one event.
    Event(Event),
    /// Replace the whole state (the playhead moved).
    Reset(Box<State>),
    /// Where the replay is now.
    Bar(ReplayBar),
}

/// `mm:ss.t` (minutes keep counting past 59).
pub fn fmt_position(ms: i64) -> String {
    let ms = ms.max(0);
    let tenths = ms / 100;
    format!(
        "{:02}:{:02}.{}",
        tenths / 600,
        (tenths / 10) % 60,
        tenths % 10
    )
}

/// How fast to replay.
#[derive(Debug, Clone, Copy, PartialEq)]
pub enum Speed {
    /// As fast as the dashboard takes them.
    Max,
    /// Recorded pace times this factor (> 0).
    Factor(f64),
}

impl FromStr for Speed {
    type Err = String;
    fn from_str(s: &str) -> Result<Speed, String> {
        let s = s.trim();
        if s.eq_ignore_ascii_case("max") {
            return Ok(Speed::Max);
        }
        let f: f64 = s
            .trim_end_matches(['x', 'X'])
            .parse()
            .map_err(|_| format!("speed {s:?}: a positive number, 0 or `max`"))?;
        if f == 0.0 {
            Ok(Speed::Max)
        } else if f.is_finite() && f > 0.0 {
            Ok(Speed::Factor(f))
        } else {
            Err(format!("speed {s:?}: a positive number, 0 or `max`"))
        }
    }
}

/// Where a replay starts (`--from`).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum StartAt {
    /// An instant of the recording (RFC 3339).
    Time(Timestamp),
    /// An offset from the recording's first event, in ms (`90s`, `1m30s`, `1h`, `500ms`).
    Offset(i64),
    /// T0 of trial N, 1-based (`t0:N` or `trial:N`).
    Trial(u32),
}

const START_AT_FORMS: &str = "an RFC 3339 time (2026-05-01T12:00:00Z), an offset from the start (90s, 1m30s, 1h2m, 500ms) or t0:N / trial:N";

impl FromStr for StartAt {
    type Err = String;
    fn from_str(s: &str) -> Result<StartAt, String> {
        let s = s.trim();
        let lower = s.to_ascii_lowercase();
        if let Some(n) = lower
            .strip_prefix("t0:")
            .or_else(|| lower.strip_prefix("trial:"))
        {
            return match n.trim().parse::<u32>() {
                Ok(n) if n >= 1 => Ok(StartAt::Trial(n)),
                _ => Err(format!("--from {s:?}: trials are numbered from 1")),
            };
        }
        if let Ok(t) = chrono::DateTime::parse_from_rfc3339(s) {
            return Ok(StartAt::Time(t.with_timezone(&chrono::Utc)));
        }
        crate::units::parse_offset_ms(&lower)
            .map(StartAt::Offset)
            .ok_or_else(|| format!("--from {s:?}: expected {START_AT_FORMS}"))
    }
}

/// How a replay is played.
#[derive(Debug, Clone, Copy, PartialEq)]
pub struct ReplayOptions {
    pub speed: Speed,
    pub from: Option<StartAt>,
    /// Pause whenever the playhead reaches a T0–T4 mark.
    pub pause_at_marks: bool,
}

impl Default for ReplayOptions {
    fn default() -> Self {
        ReplayOptions {
            speed: Speed::Factor(1.0),
            from: None,
            pause_at_marks: false,
        }
    }
}

/// The replay controller: the index and the playhead.
pub struct Replayer {
    index: ReplayIndex,
    /// Marks in the order they appear: by (`at`, `ts`).
    marks: Vec<Mark>,
    bar_marks: Arc<[(i64, u8)]>,
    start: Timestamp,
    end: Timestamp,
    /// Events applied.
    pos: usize,
    /// The recording time shown (never behind the last applied event's time while playing).
    clock: Timestamp,
    /// Factor of the recorded pace; infinite = as fast as possible.
    speed: f64,
    paused: bool,
    pause_at_marks: bool,
    /// While playing, recording time `anchor.1` was at wall time `anchor.0`.
    anchor: (Instant, Timestamp),
    /// The last status sent to the dashboard.
    last_bar: Option<ReplayBar>,
}

/// The microseconds from `a` to `b`.
fn micros(a: Timestamp, b: Timestamp) -> i64 {
    (b - a)
        .num_microseconds()
        .unwrap_or(if b > a { i64::MAX } else { i64::MIN })
}

impl Replayer {
    /// A controller at the start (or at `opts.from`), playing. Errors when the recording is
    /// empty or `--from` is outside it.
    pub fn new(index: ReplayIndex, opts: &ReplayOptions, now: Instant) -> Result<Replayer, String> {
        let (Some(start), Some(end)) = (index.start(), index.end()) else {
            return Err("the recording has no events".into());
        };
        let mut marks = index.marks().to_vec();
        marks.sort_by_key(|m| (m.at, m.ts));
        let bar_marks: Arc<[(i64, u8)]> = marks
            .iter()
            .map(|m| ((m.ts - start).num_milliseconds(), m.which))
            .collect();
        let speed = match opts.speed {
            Speed::Max => f64::INFINITY,
            Speed::Factor(f) => f,
        };
        let mut r = Replayer {
            index,
            marks,
            bar_marks,
            start,
            end,
            pos: 0,
            clock: start,
            speed,
            paused: false,
            pause_at_marks: opts.pause_at_marks,
            anchor: (now, start),
            last_bar: None,
        };
        if let Some(from) = opts.from {
            (r.pos, r.clock) = r.resolve(from)?;
            r.anchor = (now, r.clock);
        }
        Ok(r)
    }

    /// The playhead for `--from`.
    fn resolve(&self, from: StartAt) -> Result<(usize, Timestamp), String> {
        let range = || {
            format!(
                "the recording runs from {} to {} ({})",
                self.start.to_rfc3339(),
                self.end.to_rfc3339(),
                fmt_position((self.end - self.start).num_milliseconds())
            )
        };
        // An instant or offset: where it is, or why it is not in the recording.
        let (ts, outside) = match from {
            StartAt::Time(ts) => {
                let outside = ts < self.start || ts > self.end;
                (
                    ts,
                    outside.then(|| format!("{}: outside the recording", ts.to_rfc3339())),
                )
            }
            StartAt::Offset(ms) => {
                let ts = self.start + chrono::Duration::milliseconds(ms);
                let beyond = ts > self.end;
                (
                    ts,
                    beyond.then(|| format!("{}: beyond the end", fmt_position(ms))),
                )
            }
            StartAt::Trial(n) => {
                let mark = self.index.trial_start(n);
                return mark.map(|m| (m.at, m.ts)).ok_or_else(|| {
                    let trials = self.marks.iter().filter(|m| m.which == 0).count();
                    let has = match trials {
                        0 => "no trials".to_string(),
                        _ => format!("trials 1 to {trials}"),
                    };
                    format!("--from trial {n}: the recording has {has}")
                });
            }
        };
        match outside {
            Some(what) => Err(format!("--from {what}; {}", range())),
            None => Ok((self.index.position_at(ts), ts)),
        }
    }

    pub fn index(&self) -> &ReplayIndex {
        &self.index
    }
    /// Events applied so far.
    pub fn position(&self) -> usize {
        self.pos
    }
    pub fn clock(&self) -> Timestamp {
        self.clock
    }
    pub fn paused(&self) -> bool {
        self.paused
    }
    /// The speed factor (infinite for `max`).
    pub fn speed(&self) -> f64 {
        self.speed
    }
    /// The marks in the order the playhead meets them.
    pub fn marks(&self) -> &[Mark] {
        &self.marks
    }
    /// Whether the playhead is at the end of the recording.
    pub fn ended(&self) -> bool {
        self.pos >= self.index.events().len() && self.clock >= self.end
    }

    /// The state the dashboard shows at the playhead.
    pub fn state(&self) -> State {
        self.index.state_after(self.pos)
    }

    /// The speed as the bar shows it.
    pub fn speed_label(&self) -> String {
        let f = self.speed;
        if !f.is_finite() {
            "max".into()
        } else if f >= 1.0 {
            format!("×{}", (f * 1000.0).round() / 1000.0)
        } else if (1.0 / f).fract().abs() < 1e-9 {
            format!("×1/{}", (1.0 / f).round())
        } else {
            format!("×{:.3}", f)
        }
    }

    /// What the replay bar shows.
    pub fn bar(&self) -> ReplayBar {
        ReplayBar {
            position_ms: (self.clock - self.start).num_milliseconds(),
            duration_ms: (self.end - self.start).num_milliseconds(),
            speed: self.speed_label(),
            paused: self.paused,
            ended: self.ended(),
            marks: self.bar_marks.clone(),
        }
    }

    /// The first items for the dashboard: the state at the playhead and the bar.
    pub fn begin(&mut self) -> Vec<Step> {
        let mut out = vec![Step::Reset(Box::new(self.state()))];
        out.extend(self.status());
        out
    }

    /// The recording time at wall time `now` while playing (capped at the end).
    fn recording_time(&self, now: Instant) -> Timestamp {
        if !self.speed.is_finite() {
            return self.end;
        }
        let wall = now.saturating_duration_since(self.anchor.0).as_secs_f64();
        let us = (wall * self.speed * 1e6).min(1e15) as i64;
        let t = self.anchor.1 + chrono::Duration::microseconds(us);
        t.min(self.end).max(self.anchor.1)
    }

    /// The wall time at which recording time `ts` is due while playing.
    pub fn due_of(&self, ts: Timestamp) -> Instant {
        if !self.speed.is_finite() {
            return self.anchor.0;
        }
        let us = micros(self.anchor.1, ts).max(0) as f64;
        let wait = Duration::from_secs_f64((us / 1e6 / self.speed).min(1e9));
        self.anchor
            .0
            .checked_add(wait)
            // `wait` is at most ~31 years: far enough to mean "not in this session".
            .or_else(|| self.anchor.0.checked_add(Duration::from_secs(86_400)))
            .unwrap_or(self.anchor.0)
    }

    /// The next mark to stop at with `--pause-at-marks`.
    fn next_stop(&self) -> Option<&Mark> {
        if !self.pause_at_marks {
            return None;
        }
        self.marks
            .iter()
            .find(|m| (m.at, m.ts) > (self.pos, self.clock))
    }

    /// When the next event (or the end, or a mark to stop at) is due; `None` while paused or
    /// at the end.
    pub fn next_due(&self) -> Option<Instant> {
        if self.paused || self.ended() {
            return None;
        }
        if self.next_stop().is_some_and(|m| m.at <= self.pos) {
            return Some(self.anchor.0);
        }
        let ts = self.index.events().get(self.pos).map_or(self.end, |e| e.ts);
        Some(self.due_of(ts))
    }

    /// When the replay task should wake: the next due item, and while playing at least every
    /// [`STATUS_EVERY`] to move the bar.
    pub fn next_wake(&self, now: Instant) -> Option<Instant> {
        self.next_due().map(|due| due.min(now + STATUS_EVERY))
    }

    /// Everything due by `now` (at most `max` events), then the bar if it changed. Stops at a
    /// mark (and pauses) with `--pause-at-marks`.
    pub fn advance(&mut self, now: Instant, max: usize) -> Vec<Step> {
        let mut out = Vec::new();
        if !self.paused {
            let target = self.recording_time(now);
            let stop = self.next_stop().map(|m| (m.at, m.ts));
            let events = self.index.events();
            // Whether the playhead reached `target` (not stopped at a mark or by `max`).
            let mut caught_up = true;
            loop {
                if let Some((at, ts)) = stop
                    && self.pos >= at
                {
                    self.clock = self.clock.max(ts);
                    self.paused = true;
                    caught_up = false;
                    break;
                }
                let Some(ev) = events.get(self.pos) else {
                    break;
                };
                if ev.ts > target {
                    break;
                }
                if out.len() >= max {
                    caught_up = false;
                    break;
                }
                out.push(Step::Event(ev.clone()));
                self.pos += 1;
                self.clock = self.clock.max(ev.ts);
            }
            if caught_up {
                self.clock = self.clock.max(target);
            }
        }
        if self.last_bar != Some(self.bar()) {
            out.extend(self.status());
        }
        out
    }

    /// Move the playhead and show the state there.
    fn seek(&mut self, pos: usize, clock: Timestamp, now: Instant) -> Vec<Step> {
        self.pos = pos.min(self.index.events().len());
        self.clock = clock;
        self.anchor = (now, clock);
        self.begin()
    }

    fn status(&mut self) -> Vec<Step> {
        let bar = self.bar();
        self.last_bar = Some(bar.clone());
        vec![Step::Bar(bar)]
    }

    /// Carry out a replay key at wall time `now`.
    pub fn command(&mut self, cmd: ReplayCommand, now: Instant) -> Vec<Step> {
        let here = (self.pos, self.clock);
        let after = |m: &&Mark| (m.at, m.ts) > here;
        let before = |m: &&Mark| (m.at, m.ts) < here;
        let target = match cmd {
            ReplayCommand::NextMark => self.marks.iter().find(after),
            ReplayCommand::PrevMark => self.marks.iter().rev().find(before),
            ReplayCommand::NextTrial => self.marks.iter().filter(|m| m.which == 0).find(after),
            ReplayCommand::PrevTrial => self
                .marks
                .iter()
                .rev()
                .filter(|m| m.which == 0)
                .find(before),
            ReplayCommand::Start => return self.seek(0, self.start, now),
            ReplayCommand::End => return self.seek(usize::MAX, self.end, now),
            ReplayCommand::PauseResume => {
                if self.ended() {
                    // At the end: play again from the start.
                    self.paused = false;
                    return self.seek(0, self.start, now);
                }
                if self.paused {
                    self.paused = false;
                    self.anchor = (now, self.clock);
                } else {
                    let next = self.index.events().get(self.pos).map_or(self.end, |e| e.ts);
                    self.clock = self.clock.max(self.recording_time(now).min(next));
                    self.paused = true;
                }
                return self.status();
            }
            ReplayCommand::Faster | ReplayCommand::Slower => {
                if !self.paused {
                    self.anchor = (now, self.recording_time(now));
                }
                let s = self.speed;
                self.speed = match cmd {
                    ReplayCommand::Faster if s < MAX_SPEED => (s * 2.0).min(MAX_SPEED),
                    ReplayCommand::Slower if !s.is_finite() => MAX_SPEED,
                    ReplayCommand::Slower if s > MIN_SPEED => (s / 2.0).max(MIN_SPEED),
                    _ => s,
                };
                return self.status();
            }
        };
        match target.map(|m| (m.at, m.ts)) {
            Some((at, ts)) => self.seek(at, ts, now),
            None => self.status(),
        }
    }
}
