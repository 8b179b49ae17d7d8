//! Progress of long client work (put, get): a bar on a terminal, a log line every few
//! seconds otherwise, nothing for small objects.

use crate::units::human_bytes;
use indicatif::{ProgressBar, ProgressStyle};
use std::io::IsTerminal;
use std::sync::Mutex;
use std::time::{Duration, Instant};

/// Objects smaller than this finish too quickly to need progress.
const QUIET_BELOW: u64 = 64 << 20;
/// Between two log lines when stderr is not a terminal.
const LINE_EVERY: Duration = Duration::from_secs(5);

pub struct Progress {
    what: String,
    total: u64,
    /// Counting items, not bytes.
    items: bool,
    bar: Option<ProgressBar>,
    /// Start, and when the last line was printed (no terminal).
    lines: Option<Mutex<(Instant, Instant)>>,
}

impl Progress {
    /// Progress over `total` bytes (quiet below 64 MiB).
    pub fn new(what: &str, total: u64) -> Self {
        Self::build(what, total, total >= QUIET_BELOW, false)
    }

    /// Progress over `total` items (quiet when there are none).
    pub fn count(what: &str, total: u64) -> Self {
        Self::build(what, total, total > 0, true)
    }

    fn build(what: &str, total: u64, show: bool, items: bool) -> Self {
        let (mut bar, mut lines) = (None, None);
        if show {
            if std::io::stderr().is_terminal() {
                let pb = ProgressBar::new(total);
                let template = if items {
                    "{msg} [{bar:30}] {pos}/{len} eta {eta}"
                } else {
                    "{msg} [{bar:30}] {bytes}/{total_bytes} {bytes_per_sec} eta {eta}"
                };
                pb.set_style(ProgressStyle::with_template(template).expect("static template").progress_chars("=> "));
                pb.set_message(what.to_string());
                bar = Some(pb);
            } else {
                lines = Some(Mutex::new((Instant::now(), Instant::now())));
            }
        }
        Progress { what: what.to_string(), total, items, bar, lines }
    }

    /// `done` bytes of `total` are through.
    pub fn set(&self, done: u64) {
        if let Some(b) = &self.bar {
            b.set_position(done);
        }
        if let Some(l) = &self.lines {
            let mut l = l.lock().expect("progress lock");
            if l.1.elapsed() >= LINE_EVERY && done < self.total {
                l.1 = Instant::now();
                let rate = done as f64 / l.0.elapsed().as_secs_f64().max(1e-9);
                if self.items {
                    eprintln!("{}: {done} of {}", self.what, self.total);
                } else {
                    eprintln!("{}: {} of {} ({}/s)", self.what, human_bytes(done), human_bytes(self.total), human_bytes(rate as u64));
                }
            }
        }
    }

    pub fn finish(&self) {
        if let Some(b) = &self.bar {
            b.finish_and_clear();
        }
    }
}

impl Drop for Progress {
    fn drop(&mut self) {
        // An abandoned bar (an error, an aborted watcher) does not stay on the terminal.
        self.finish();
    }
}
