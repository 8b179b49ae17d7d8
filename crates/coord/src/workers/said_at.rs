//! Saying a repeated thing at most once a period, so a condition that persists (chunks
//! waiting for a node) does not fill the log.

use std::time::Duration;

/// When something repeated was last logged: to say it at most once per period.
#[derive(Default)]
pub(crate) struct SaidAt(std::sync::Mutex<Option<std::time::Instant>>);

impl SaidAt {
    /// True (and the time noted) when it has not been said within `every`.
    pub(crate) fn due(&self, every: Duration) -> bool {
        let mut at = self.0.lock().expect("said lock");
        if at.is_some_and(|t| t.elapsed() < every) {
            return false;
        }
        *at = Some(std::time::Instant::now());
        true
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_repeated_warning_is_said_once_per_period() {
        let said = SaidAt::default();
        // Automatic repair passes every few seconds for a minute: one line.
        let lines = (0..12).filter(|_| said.due(Duration::from_secs(60))).count();
        assert_eq!(lines, 1);
        // Once the period is over, it is said again.
        assert!(said.due(Duration::ZERO));
    }
}
