//! What a bucket stores its objects as: a code and a layout (and a chunk size), chosen when
//! the bucket is created (`x-kintsugi-code`, `x-kintsugi-layout` headers, or `kintsugi
//! bucket create`), kept in the bucket's record, applied to every object put in it.

use kintsugi_codes::CodeSpec;
use kintsugi_proto::{Attrs, LayoutSpec, Versioning};

pub const CODE_HEADER: &str = "x-kintsugi-code";
pub const LAYOUT_HEADER: &str = "x-kintsugi-layout";
pub const CHUNK_HEADER: &str = "x-kintsugi-chunk-size";

/// A bucket's storage settings.
#[derive(Clone, Copy, Debug, PartialEq)]
pub struct BucketSettings {
    pub code: CodeSpec,
    pub layout: LayoutSpec,
    /// Stripe layouts' chunk size (0: the coordinator's).
    pub chunk_size: u64,
    /// What its writes and deletes do to versions (set by PutBucketVersioning).
    pub versioning: Versioning,
}

impl BucketSettings {
    /// The settings from a create request's headers, defaulting to `default`'s.
    pub fn from_headers(h: &http::HeaderMap, default: BucketSettings) -> Result<Self, String> {
        let get = |name: &str| -> Result<Option<&str>, String> {
            h.get(name).map(|v| v.to_str().map_err(|_| format!("header {name} is not text"))).transpose()
        };
        let code = match get(CODE_HEADER)? {
            Some(c) => parse_code(c)?,
            None => default.code,
        };
        let layout = match get(LAYOUT_HEADER)? {
            Some(l) => parse_layout(l)?,
            None => default.layout,
        };
        let chunk_size = match get(CHUNK_HEADER)? {
            Some(c) => parse_size(c)?,
            None => default.chunk_size,
        };
        Ok(BucketSettings { code, layout, chunk_size, versioning: Versioning::Unversioned })
    }

    pub fn to_attrs(self, created_ms: u64) -> Attrs {
        let mut a = Attrs::new();
        a.insert("code".into(), self.code.to_string());
        a.insert("layout".into(), layout_name(self.layout));
        a.insert("chunk".into(), self.chunk_size.to_string());
        a.insert("created".into(), created_ms.to_string());
        a
    }

    pub fn from_attrs(a: &Attrs) -> Result<Self, String> {
        let get = |k: &str| a.get(k).ok_or(format!("bucket record without '{k}'"));
        Ok(BucketSettings {
            code: parse_code(get("code")?)?,
            layout: parse_layout(get("layout")?)?,
            chunk_size: get("chunk")?.parse().map_err(|e| format!("bucket record's chunk size: {e}"))?,
            versioning: crate::versioning::state(a),
        })
    }
}

/// When a bucket was created (ms since the epoch), from its record.
pub fn created_ms(a: &Attrs) -> u64 {
    a.get("created").and_then(|c| c.parse().ok()).unwrap_or(0)
}

pub fn parse_code(s: &str) -> Result<CodeSpec, String> {
    let c: CodeSpec = s.parse().map_err(|e| format!("code '{s}': {e}"))?;
    c.build().map_err(|e| format!("code '{s}': {e}"))?;
    Ok(c)
}

/// `stripe`, `stripe-max`, `geo` (Geometric Partitioning with the paper's s0 = 4 MiB and
/// q = 2), `geo:S0,Q[,CAP]` or `contiguous:CHUNK`; sizes in bytes or with KiB, MiB, GiB.
pub fn parse_layout(s: &str) -> Result<LayoutSpec, String> {
    let (kind, args) = s.split_once(':').unwrap_or((s, ""));
    let nums: Vec<&str> = if args.is_empty() { vec![] } else { args.split(',').map(str::trim).collect() };
    let bad = || format!("layout '{s}': stripe, stripe-max, geo, geo:S0,Q[,CAP] or contiguous:CHUNK");
    match (kind.trim(), nums.as_slice()) {
        ("stripe", []) => Ok(LayoutSpec::Stripe),
        ("stripe-max", []) => Ok(LayoutSpec::StripeMax),
        ("geo", []) => Ok(LayoutSpec::Geo { s0: 4 << 20, q: 2, cap: 0 }),
        ("geo", [s0, q, rest @ ..]) if rest.len() <= 1 => {
            let q: u64 = q.parse().map_err(|_| bad())?;
            let cap = rest.first().map(|c| parse_size(c)).transpose()?.unwrap_or(0);
            let s0 = parse_size(s0)?;
            if q < 2 || s0 == 0 {
                return Err(format!("layout '{s}': s0 above 0 and q at least 2"));
            }
            Ok(LayoutSpec::Geo { s0, q, cap })
        }
        ("contiguous", [c]) => match parse_size(c)? {
            0 => Err(bad()),
            chunk => Ok(LayoutSpec::Contiguous { chunk }),
        },
        _ => Err(bad()),
    }
}

/// The name [`parse_layout`] reads back.
pub fn layout_name(l: LayoutSpec) -> String {
    match l {
        LayoutSpec::Stripe => "stripe".into(),
        LayoutSpec::StripeMax => "stripe-max".into(),
        LayoutSpec::Geo { s0, q, cap } => format!("geo:{s0},{q},{cap}"),
        LayoutSpec::Contiguous { chunk } => format!("contiguous:{chunk}"),
    }
}

/// Bytes, optionally with a KiB, MiB or GiB suffix.
pub fn parse_size(s: &str) -> Result<u64, String> {
    let s = s.trim();
    let (num, mul) = [("KiB", 1u64 << 10), ("MiB", 1 << 20), ("GiB", 1 << 30)]
        .iter()
        .find_map(|(suffix, m)| s.strip_suffix(suffix).map(|n| (n, *m)))
        .unwrap_or((s, 1));
    num.trim().parse::<u64>().ok().and_then(|n| n.checked_mul(mul)).ok_or(format!("size '{s}': bytes, or a number with KiB, MiB or GiB"))
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn layouts_and_sizes_parse_and_print_back() {
        for s in ["stripe", "stripe-max", "geo", "geo:1MiB,2", "geo:65536,4,16MiB", "contiguous:8MiB"] {
            let l = parse_layout(s).unwrap();
            assert_eq!(parse_layout(&layout_name(l)).unwrap(), l, "{s}");
        }
        assert_eq!(parse_layout("geo").unwrap(), LayoutSpec::Geo { s0: 4 << 20, q: 2, cap: 0 });
        for bad in ["", "geo:1", "geo:0,2", "geo:1MiB,1", "contiguous:0", "stripe:3", "raid5"] {
            assert!(parse_layout(bad).is_err(), "{bad}");
        }
        assert_eq!(parse_size("4MiB").unwrap(), 4 << 20);
        assert!(parse_size("-1").is_err() && parse_size("99999999999GiB").is_err());
    }

    #[test]
    fn settings_come_from_headers_and_survive_the_bucket_record() {
        let default =
            BucketSettings { code: "rs:4,2".parse().unwrap(), layout: LayoutSpec::Stripe, chunk_size: 0, versioning: Default::default() };
        let mut h = http::HeaderMap::new();
        assert_eq!(BucketSettings::from_headers(&h, default).unwrap(), default);
        h.insert(CODE_HEADER, "clay:10,4,13".parse().unwrap());
        h.insert(LAYOUT_HEADER, "geo".parse().unwrap());
        let s = BucketSettings::from_headers(&h, default).unwrap();
        assert_eq!(s.code, "clay:10,4,13".parse().unwrap());
        assert_eq!(BucketSettings::from_attrs(&s.to_attrs(7)).unwrap(), s);
        h.insert(CODE_HEADER, "rs:0,0".parse().unwrap());
        assert!(BucketSettings::from_headers(&h, default).is_err());
    }
}
