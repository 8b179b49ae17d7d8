//! Object lock: a version's retention (a mode, and a date before which it may not be
//! deleted) and its legal hold, kept in the version's attributes, and the rules that every
//! path which deletes, replaces or changes a version checks in the coordinator's
//! transaction: S3's DELETE and DeleteObjects, lifecycle, the CLI, an overwrite of an
//! unversioned name.
//!
//! As in S3: COMPLIANCE is never shortened, weakened or deleted before its date, by anyone;
//! GOVERNANCE yields only to a request that asks to bypass it; a legal hold keeps a version
//! until it is lifted, whatever its retention.

use crate::wire_error::{ErrorKind, WireError};
use crate::Attrs;

/// The attribute of the retention mode: `GOVERNANCE` or `COMPLIANCE`.
pub const MODE: &str = "retain.mode";
/// The attribute of the retain-until date, in milliseconds since the Unix epoch.
pub const UNTIL: &str = "retain.until";
/// The attribute of the legal hold: `ON` when held.
pub const HOLD: &str = "retain.hold";

#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash)]
pub enum Mode {
    Governance,
    Compliance,
}

impl Mode {
    pub fn as_str(self) -> &'static str {
        match self {
            Mode::Governance => "GOVERNANCE",
            Mode::Compliance => "COMPLIANCE",
        }
    }

    pub fn parse(s: &str) -> Option<Mode> {
        match s {
            "GOVERNANCE" => Some(Mode::Governance),
            "COMPLIANCE" => Some(Mode::Compliance),
            _ => None,
        }
    }
}

/// A version's retention.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct Retention {
    pub mode: Mode,
    pub until_ms: u64,
}

/// The retention `attrs` record, if any (a malformed one reads as COMPLIANCE forever: a
/// broken record must not free what it was meant to keep).
pub fn retention(attrs: &Attrs) -> Option<Retention> {
    let mode = attrs.get(MODE)?;
    let mode = Mode::parse(mode).unwrap_or(Mode::Compliance);
    let until_ms = attrs.get(UNTIL).and_then(|u| u.parse().ok()).unwrap_or(u64::MAX);
    Some(Retention { mode, until_ms })
}

/// Sets (or with None, removes) the retention in `attrs`.
pub fn set_retention(attrs: &mut Attrs, r: Option<Retention>) {
    match r {
        Some(r) => {
            attrs.insert(MODE.into(), r.mode.as_str().into());
            attrs.insert(UNTIL.into(), r.until_ms.to_string());
        }
        None => {
            attrs.remove(MODE);
            attrs.remove(UNTIL);
        }
    }
}

/// Whether `attrs` record a legal hold.
pub fn legal_hold(attrs: &Attrs) -> bool {
    attrs.get(HOLD).is_some_and(|h| h != "OFF")
}

pub fn set_legal_hold(attrs: &mut Attrs, on: bool) {
    if on {
        attrs.insert(HOLD.into(), "ON".into());
    } else {
        attrs.remove(HOLD);
    }
}

fn locked(what: String) -> WireError {
    WireError::new(ErrorKind::Locked, what)
}

/// Whether the version of `name` with `attrs` may be deleted (or replaced) at `now_ms`.
pub fn may_delete(name: &str, attrs: &Attrs, now_ms: u64, bypass_governance: bool) -> Result<(), WireError> {
    if legal_hold(attrs) {
        return Err(locked(format!("'{name}' is under a legal hold")));
    }
    match retention(attrs) {
        Some(r) if r.until_ms > now_ms && (r.mode == Mode::Compliance || !bypass_governance) => {
            Err(locked(format!("'{name}' is retained in {} mode until {} ms since the epoch", r.mode.as_str(), r.until_ms)))
        }
        _ => Ok(()),
    }
}

/// Whether `new` may replace the attributes `old` of a version of `name` at `now_ms`: a
/// retention in force may be extended, and a GOVERNANCE one made COMPLIANCE; shortening or
/// removing it takes GOVERNANCE and a bypass. Legal holds come and go freely.
pub fn may_change(name: &str, old: &Attrs, new: &Attrs, now_ms: u64, bypass_governance: bool) -> Result<(), WireError> {
    let Some(was) = retention(old).filter(|r| r.until_ms > now_ms) else { return Ok(()) };
    if was.mode == Mode::Governance && bypass_governance {
        return Ok(());
    }
    let kept = match retention(new) {
        Some(now) => now.until_ms >= was.until_ms && (was.mode == Mode::Governance || now.mode == Mode::Compliance),
        None => false,
    };
    if kept {
        return Ok(());
    }
    Err(locked(format!(
        "'{name}' is retained in {} mode until {} ms since the epoch: its retention may only be extended{}",
        was.mode.as_str(),
        was.until_ms,
        if was.mode == Mode::Governance { " (or bypassed)" } else { "" }
    )))
}

#[cfg(test)]
mod tests {
    use super::*;

    fn with(mode: Option<Mode>, until: u64, hold: bool) -> Attrs {
        let mut a = Attrs::new();
        set_retention(&mut a, mode.map(|mode| Retention { mode, until_ms: until }));
        set_legal_hold(&mut a, hold);
        a
    }

    #[test]
    fn deletion_waits_for_the_date_and_the_hold() {
        let locked = |a: &Attrs, now, bypass| may_delete("k", a, now, bypass).map_err(|e| e.kind());
        let c = with(Some(Mode::Compliance), 1000, false);
        assert_eq!(locked(&c, 999, true), Err(ErrorKind::Locked), "COMPLIANCE yields to nothing");
        assert_eq!(locked(&c, 1000, false), Ok(()), "until its date");
        let g = with(Some(Mode::Governance), 1000, false);
        assert_eq!(locked(&g, 999, false), Err(ErrorKind::Locked));
        assert_eq!(locked(&g, 999, true), Ok(()), "GOVERNANCE yields to a bypass");
        let h = with(None, 0, true);
        assert_eq!(locked(&h, u64::MAX, true), Err(ErrorKind::Locked), "a hold yields to nothing");
        assert_eq!(locked(&Attrs::new(), 5, false), Ok(()));
        let mut broken = Attrs::new();
        broken.insert(MODE.into(), "SOMETHING".into());
        assert_eq!(locked(&broken, u64::MAX - 1, true), Err(ErrorKind::Locked), "a malformed retention keeps");
    }

    #[test]
    fn retention_in_force_is_only_extended() {
        let ok = |old: &Attrs, new: &Attrs, bypass| may_change("k", old, new, 500, bypass).is_ok();
        let c = with(Some(Mode::Compliance), 1000, false);
        assert!(ok(&c, &with(Some(Mode::Compliance), 2000, false), false), "extended");
        assert!(ok(&c, &with(Some(Mode::Compliance), 1000, true), false), "a hold added");
        assert!(!ok(&c, &with(Some(Mode::Compliance), 999, false), true), "shortened");
        assert!(!ok(&c, &with(Some(Mode::Governance), 2000, false), true), "weakened");
        assert!(!ok(&c, &Attrs::new(), true), "removed");
        let g = with(Some(Mode::Governance), 1000, false);
        assert!(ok(&g, &with(Some(Mode::Compliance), 1000, false), false), "made COMPLIANCE");
        assert!(!ok(&g, &with(Some(Mode::Governance), 600, false), false), "shortened without a bypass");
        assert!(ok(&g, &Attrs::new(), true), "removed with a bypass");
        let expired = with(Some(Mode::Compliance), 400, false);
        assert!(ok(&expired, &Attrs::new(), false), "a retention past its date is no more");
    }
}
