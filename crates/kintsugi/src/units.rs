//! Human sizes on the command line: `64MiB`, `32KiB`, `1048576`, `4k`, `1.5GB`.

/// Parses a byte size. Binary suffixes (KiB, MiB, GiB) are powers of 1024, decimal ones
/// (KB, MB, GB) powers of 1000; a bare `k`/`m`/`g` means the binary unit, as in dd.
pub fn parse_size(s: &str) -> Result<usize, String> {
    let t = s.trim();
    let split = t.find(|c: char| !(c.is_ascii_digit() || c == '.')).unwrap_or(t.len());
    let (num, unit) = t.split_at(split);
    let n: f64 = num.parse().map_err(|_| format!("'{s}' is not a size (try 4096, 64KiB or 1MiB)"))?;
    let mult: f64 = match unit.trim().to_ascii_lowercase().as_str() {
        "" | "b" => 1.0,
        "k" | "kib" => 1024.0,
        "m" | "mib" => 1024.0 * 1024.0,
        "g" | "gib" => 1024.0 * 1024.0 * 1024.0,
        "kb" => 1e3,
        "mb" => 1e6,
        "gb" => 1e9,
        other => return Err(format!("unknown size unit '{other}' in '{s}' (use B, KiB, MiB, GiB, KB, MB or GB)")),
    };
    let v = n * mult;
    if !v.is_finite() || v < 0.0 || v > usize::MAX as f64 / 2.0 {
        return Err(format!("size '{s}' is out of range"));
    }
    if v.fract() != 0.0 {
        return Err(format!("size '{s}' is not a whole number of bytes"));
    }
    Ok(v as usize)
}

/// Like [`parse_size`] but refuses zero.
pub fn parse_nonzero_size(s: &str) -> Result<usize, String> {
    match parse_size(s)? {
        0 => Err(format!("size '{s}' must be at least 1 byte")),
        v => Ok(v),
    }
}

/// Parses a link rate into bytes per second. tc-style bit rates are decimal
/// (`1gbit` = 1e9 bits/s); byte rates take `B/s`, `KB/s`, `MB/s`, `GB/s`, `KiB/s`, `MiB/s`, `GiB/s`.
pub fn parse_rate(s: &str) -> Result<f64, String> {
    let t = s.trim();
    let split = t.find(|c: char| !(c.is_ascii_digit() || c == '.')).unwrap_or(t.len());
    let (num, unit) = t.split_at(split);
    let n: f64 = num.parse().map_err(|_| format!("'{s}' is not a rate (try 1gbit, 100mbit or 125MB/s)"))?;
    let bytes_per_s = match unit.trim().to_ascii_lowercase().as_str() {
        "bit" | "bps" => n / 8.0,
        "kbit" => n * 1e3 / 8.0,
        "mbit" => n * 1e6 / 8.0,
        "gbit" => n * 1e9 / 8.0,
        "b/s" => n,
        "kb/s" => n * 1e3,
        "mb/s" => n * 1e6,
        "gb/s" => n * 1e9,
        "kib/s" => n * 1024.0,
        "mib/s" => n * 1024.0 * 1024.0,
        "gib/s" => n * 1024.0 * 1024.0 * 1024.0,
        "" => return Err(format!("rate '{s}' needs a unit (bit, kbit, mbit, gbit, B/s, MB/s, ...)")),
        other => return Err(format!("unknown rate unit '{other}' in '{s}'")),
    };
    if !(bytes_per_s > 0.0 && bytes_per_s.is_finite()) {
        return Err(format!("rate '{s}' must be positive"));
    }
    Ok(bytes_per_s)
}

/// 1536 -> "1.5 KiB".
pub fn human_bytes(b: u64) -> String {
    const UNITS: [&str; 5] = ["B", "KiB", "MiB", "GiB", "TiB"];
    let mut v = b as f64;
    let mut u = 0;
    while v >= 1024.0 && u < UNITS.len() - 1 {
        v /= 1024.0;
        u += 1;
    }
    if u == 0 {
        format!("{b} B")
    } else {
        format!("{v:.1} {}", UNITS[u])
    }
}

/// A fraction in (0, 1].
pub fn parse_fraction(s: &str) -> Result<f64, String> {
    match s.parse::<f64>() {
        Ok(f) if f > 0.0 && f <= 1.0 => Ok(f),
        _ => Err(format!("'{s}' is not a fraction in (0, 1]")),
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn sizes() {
        assert_eq!(parse_size("4096"), Ok(4096));
        assert_eq!(parse_size("64MiB"), Ok(64 << 20));
        assert_eq!(parse_size("32KiB"), Ok(32 << 10));
        assert_eq!(parse_size("1.5k"), Ok(1536));
        assert_eq!(parse_size("2GB"), Ok(2_000_000_000));
        assert!(parse_size("abc").is_err());
        assert!(parse_size("1.3").is_err());
        assert!(parse_size("5 parsecs").is_err());
        assert!(parse_nonzero_size("0").is_err());
        assert_eq!(human_bytes(1536), "1.5 KiB");
        assert_eq!(human_bytes(10), "10 B");
        assert_eq!(parse_rate("1gbit"), Ok(125e6));
        assert_eq!(parse_rate("100mbit"), Ok(12.5e6));
        assert_eq!(parse_rate("125MB/s"), Ok(125e6));
        assert!(parse_rate("0gbit").is_err());
        assert!(parse_rate("10").is_err());
        assert!(parse_rate("fast").is_err());
    }
}
