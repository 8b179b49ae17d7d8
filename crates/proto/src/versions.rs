//! Versions of an object name, as S3's versioning has them: a write to a versioned name
//! keeps what it replaces, a delete writes a delete marker, and every kept version stays
//! readable (and repaired) by its id until it is deleted by that id.

use crate::layout::Attrs;
use serde::{Deserialize, Serialize};
use std::fmt;
use std::str::FromStr;

/// What a write or a delete does to the versions of its name (an S3 bucket's versioning
/// state).
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq, Hash, Serialize, Deserialize)]
#[serde(rename_all = "snake_case")]
pub enum Versioning {
    /// Never versioned: a write replaces the name's one version, a delete removes it.
    #[default]
    Unversioned,
    /// A write is a new version with its own id; a delete writes a delete marker; nothing
    /// is removed but by its version id.
    Enabled,
    /// A write or a delete (a marker) is the "null" version, replacing the null version the
    /// name may have; the versions with ids stay.
    Suspended,
}

impl Versioning {
    pub fn is_unversioned(&self) -> bool {
        *self == Versioning::Unversioned
    }
}

/// A version of a name: its id, or the "null" version (written without versioning).
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash, Serialize, Deserialize)]
#[serde(rename_all = "snake_case")]
pub enum VersionRef {
    Null,
    Id(u64),
}

impl fmt::Display for VersionRef {
    /// S3's form: `null`, or 16 hex digits.
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self {
            VersionRef::Null => f.write_str("null"),
            VersionRef::Id(v) => write!(f, "{v:016x}"),
        }
    }
}

/// A version id that is neither `null` nor one this store gives out.
#[derive(Clone, Debug, PartialEq, Eq, thiserror::Error)]
#[error("'{0}' is not a version id (ids are \"null\" or 16 hex digits)")]
pub struct BadVersionId(pub String);

impl FromStr for VersionRef {
    type Err = BadVersionId;
    fn from_str(s: &str) -> Result<Self, Self::Err> {
        if s == "null" {
            return Ok(VersionRef::Null);
        }
        if s.len() != 16 || !s.bytes().all(|b| b.is_ascii_hexdigit()) {
            return Err(BadVersionId(s.chars().take(64).collect()));
        }
        u64::from_str_radix(s, 16).map(VersionRef::Id).map_err(|_| BadVersionId(s.to_string()))
    }
}

/// One version of a name, as version listings and versioned deletes answer.
#[derive(Clone, Debug, PartialEq, Eq, Serialize, Deserialize)]
pub struct VersionInfo {
    /// The object's name (not where a kept version is stored).
    pub name: String,
    /// The cluster's version number (it orders versions: higher is newer).
    pub version: u64,
    /// Its S3 id is its own (false: the "null" version).
    #[serde(default)]
    pub versioned: bool,
    #[serde(default)]
    pub delete_marker: bool,
    /// The name's current version.
    #[serde(default)]
    pub latest: bool,
    pub size: u64,
    /// When it was written (ms since the epoch).
    #[serde(default)]
    pub created_ms: u64,
    #[serde(default, skip_serializing_if = "Attrs::is_empty")]
    pub attrs: Attrs,
}

impl VersionInfo {
    /// Its id as a request names it.
    pub fn id(&self) -> VersionRef {
        if self.versioned {
            VersionRef::Id(self.version)
        } else {
            VersionRef::Null
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn version_ids_read_back_and_bad_ones_are_refused() {
        for v in [VersionRef::Null, VersionRef::Id(0), VersionRef::Id(42), VersionRef::Id(u64::MAX)] {
            assert_eq!(v.to_string().parse::<VersionRef>(), Ok(v));
        }
        assert_eq!(VersionRef::Id(255).to_string(), "00000000000000ff");
        for bad in ["", "NULL", "ff", "0000000000000000f", "zzzzzzzzzzzzzzzz", "../../../../etc/"] {
            assert!(bad.parse::<VersionRef>().is_err(), "{bad}");
        }
    }
}
