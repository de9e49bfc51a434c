//! The real terminal: raw mode and the alternate screen, set up and restored, and the panic
//! hook that gives the terminal back. A panic on another thread must not be followed by one
//! more frame drawn over the restored terminal and the panic message, nor by the alternate
//! screen entered after the restore: the terminal is set up and every frame is drawn under
//! one lock ([`PanicRelease::write`]), and the panic hook takes that lock (waiting for the
//! setup or the frame in progress), marks the terminal released, and only then restores it
//! (raw mode off, alternate screen left); the dashboard loop then draws nothing more and ends.

use color_eyre::eyre::{Result, WrapErr, eyre};
use ratatui::Terminal;
use std::cell::Cell;
use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::{Mutex, TryLockError};
use std::time::Duration;

/// The real terminal, shared by the loop that draws on it and the panic hook that gives it
/// back .
pub struct PanicRelease {
    /// The dashboard holds the terminal: a panic must give it back.
    active: AtomicBool,
    /// A panic hook gave the terminal back: nothing may be drawn any more.
    released: AtomicBool,
    /// Held while a frame is written to the terminal.
    drawing: Mutex<()>,
}

thread_local! {
    /// This thread is writing a frame (a panic in `draw` must not wait for its own lock).
    static IN_DRAW: Cell<bool> = const { Cell::new(false) };
}

/// The real terminal's [`PanicRelease`], for the dashboard loop.
pub static PANIC_RELEASE: PanicRelease = PanicRelease::new();

impl PanicRelease {
    const fn new() -> Self {
        PanicRelease {
            active: AtomicBool::new(false),
            released: AtomicBool::new(false),
            drawing: Mutex::new(()),
        }
    }

    /// Whether a panic gave the terminal back.
    pub fn released(&self) -> bool {
        self.released.load(Ordering::SeqCst)
    }

    /// Wait (bounded) for a frame in progress on another thread, then mark the terminal
    /// released. Called by the panic hook before the terminal is restored.
    pub fn release(&self) {
        if !IN_DRAW.with(Cell::get) {
            let deadline = std::time::Instant::now() + Duration::from_secs(2);
            loop {
                match self.drawing.try_lock() {
                    Ok(_) | Err(TryLockError::Poisoned(_)) => break,
                    Err(TryLockError::WouldBlock) if std::time::Instant::now() < deadline => {
                        std::thread::sleep(Duration::from_millis(1));
                    }
                    Err(TryLockError::WouldBlock) => break,
                }
            }
        }
        self.released.store(true, Ordering::SeqCst);
    }

    /// Run `write` (a frame, a resize) unless the terminal was released; false if it was.
    pub fn write<T>(&self, write: impl FnOnce() -> T) -> Option<T> {
        let _lock = self
            .drawing
            .lock()
            .unwrap_or_else(std::sync::PoisonError::into_inner);
        if self.released() {
            return None;
        }
        IN_DRAW.with(|d| d.set(true));
        let out = write();
        IN_DRAW.with(|d| d.set(false));
        Some(out)
    }
}

/// Install the panic hook (once per process), then enable raw mode and enter the alternate
/// screen under the drawing lock.
pub fn setup() -> Result<ratatui::DefaultTerminal> {
    static HOOK: std::sync::Once = std::sync::Once::new();
    HOOK.call_once(|| {
        let previous = std::panic::take_hook();
        std::panic::set_hook(Box::new(move |info| {
            if PANIC_RELEASE.active.load(Ordering::SeqCst) {
                PANIC_RELEASE.release();
                ratatui::restore();
            }
            previous(info);
        }));
    });
    PANIC_RELEASE.released.store(false, Ordering::SeqCst);
    PANIC_RELEASE.active.store(true, Ordering::SeqCst);
    let terminal = PANIC_RELEASE
        .write(|| -> std::io::Result<ratatui::DefaultTerminal> {
            crossterm::terminal::enable_raw_mode()?;
            crossterm::execute!(std::io::stdout(), crossterm::terminal::EnterAlternateScreen)?;
            Terminal::new(ratatui::backend::CrosstermBackend::new(std::io::stdout()))
        })
        .ok_or_else(|| eyre!("a panic happened while the terminal was being set up"))
        .and_then(|t| t.wrap_err("setting up the terminal"));
    if terminal.is_err() {
        PANIC_RELEASE.active.store(false, Ordering::SeqCst);
        ratatui::restore();
    }
    terminal
}

/// Restore the terminal unless the panic hook did it already (restoring twice would move the
/// cursor back over what was printed since: leaving the alternate screen restores the cursor).
pub fn restore() -> Result<()> {
    PANIC_RELEASE
        .write(|| {
            PANIC_RELEASE.active.store(false, Ordering::SeqCst);
            ratatui::try_restore()
        })
        .transpose()
        .wrap_err("restoring the terminal")?;
    Ok(())
}

#[cfg(test)]
mod tests {
    use super::*;
    use std::sync::Arc;
    use std::sync::mpsc as std_mpsc;

    #[test]
    fn release_waits_for_the_frame_in_progress_then_stops_all_writes() {
        let release = Arc::new(PanicRelease::new());
        let order = Arc::new(Mutex::new(Vec::new()));
        let (in_frame_tx, in_frame_rx) = std_mpsc::channel();
        let (go_tx, go_rx) = std_mpsc::channel::<()>();
        let drawer = {
            let (release, order) = (release.clone(), order.clone());
            std::thread::spawn(move || {
                release.write(|| {
                    in_frame_tx.send(()).expect("test alive");
                    go_rx.recv().expect("test alive");
                    order.lock().expect("order").push("frame written");
                })
            })
        };
        in_frame_rx.recv().expect("the drawer started its frame");
        let releaser = {
            let (release, order) = (release.clone(), order.clone());
            std::thread::spawn(move || {
                release.release();
                order.lock().expect("order").push("released");
            })
        };
        // Were `release` not to wait for the frame, it would be marked released now.
        let deadline = std::time::Instant::now() + Duration::from_millis(300);
        while std::time::Instant::now() < deadline && !release.released() {
            std::thread::yield_now();
        }
        go_tx.send(()).expect("drawer alive");
        assert_eq!(drawer.join().expect("drawer"), Some(()));
        releaser.join().expect("releaser");
        assert_eq!(
            *order.lock().expect("order"),
            ["frame written", "released"],
            "the release waited for the frame"
        );
        assert!(release.released());
        let mut ran = false;
        assert_eq!(release.write(|| ran = true), None);
        assert!(!ran, "nothing is written after the release");
    }

    #[test]
    fn a_panic_inside_a_frame_releases_without_waiting_for_itself() {
        let release = PanicRelease::new();
        // The hook runs on the drawing thread while it holds the lock: no deadlock.
        let out = release.write(|| {
            release.release();
            7
        });
        assert_eq!(out, Some(7));
        assert!(release.released());
        assert_eq!(release.write(|| 8), None);
    }
}
