//! Kept names: where the metadata store keeps the older versions of a name (see
//! `versions`), `"\x7f" + name + "\0" + 16 hex digits of !version`, so they sort in S3's
//! order and no listing of names meets them.

/// The first character of every kept name.
pub const KEPT: char = '\u{7f}';

/// The least string past every kept name: listings of names seek here.
pub const PAST_KEPT: &str = "\u{80}";

/// The kept name of version `version` of `name`.
pub fn kept_name(name: &str, version: u64) -> String {
    format!("{KEPT}{name}\0{:016x}", !version)
}

/// Where the kept versions of names starting with `prefix` start.
pub fn kept_prefix(prefix: &str) -> String {
    format!("{KEPT}{prefix}")
}

/// The name and version number of a kept name.
pub fn parse_kept(stored: &str) -> Option<(&str, u64)> {
    let (name, v) = stored.strip_prefix(KEPT)?.rsplit_once('\0')?;
    Some((name, !u64::from_str_radix(v, 16).ok()?))
}

pub fn is_kept(stored: &str) -> bool {
    stored.starts_with(KEPT)
}
