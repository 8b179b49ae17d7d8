//! `kintsugi bench codec --code clay:K,M,D`: Clay encode, decode of m lost chunks and
//! repair of one chunk from d helpers, single thread, optionally beside Ceph's clay plugin
//! measured by a reference program in the same run (`tools/clay_ref.cc`, built
//! against libec_clay.so; see `--ceph`).

use anyhow::{bail, Context, Result};
use kintsugi_codes::{ClayCode, Code};
use serde::Serialize;
use std::collections::BTreeMap;
use std::path::Path;

use crate::bench::{rate, stat, CodecBenchArgs, Stat};

#[derive(Serialize)]
struct ClayReport {
    code: String,
    kernel: String,
    chunk_bytes: usize,
    sub_chunks: usize,
    runs: usize,
    /// Medians: encode and decode count the k data chunks, repair the rebuilt chunk.
    encode_gbps: f64,
    decode_gbps: f64,
    repair_gbps: f64,
    /// The same repair by adding each helper's dense term matrix (the equation a repair
    /// graph carries), as a sink did before it ran the structured repair.
    repair_terms_gbps: f64,
    /// Multiply-adds per rebuilt byte of that evaluation (non-zero coefficients per lost
    /// sub-chunk).
    terms_mul_adds_per_byte: f64,
    /// Structured repair over terms, per run (within one run: the machine's noise cancels).
    structured_over_terms: Stat,
    spread: BTreeMap<String, Stat>,
    #[serde(skip_serializing_if = "Option::is_none")]
    ceph: Option<BTreeMap<String, Stat>>,
    #[serde(skip_serializing_if = "Option::is_none")]
    ratio: Option<BTreeMap<String, Stat>>,
}

fn run_ceph(bin: &Path, code: &ClayCode, len: usize, seconds: f64) -> Result<BTreeMap<String, f64>> {
    let g = code.geometry();
    let out = std::process::Command::new(bin)
        .args([g.k.to_string(), g.m.to_string(), g.d.to_string(), len.to_string(), seconds.to_string()])
        .env("CEPH_CONF", "/dev/null")
        .output()
        .with_context(|| format!("cannot run the Ceph clay reference {}", bin.display()))?;
    if !out.status.success() {
        bail!("{} exited with {}: {}", bin.display(), out.status, String::from_utf8_lossy(&out.stderr));
    }
    let mut m = BTreeMap::new();
    for line in String::from_utf8_lossy(&out.stdout).lines() {
        let mut it = line.split_whitespace();
        if let (Some(name @ ("encode" | "decode" | "repair")), Some(v)) = (it.next(), it.next()) {
            m.insert(format!("{name}_gbps"), v.parse::<f64>().with_context(|| format!("bad Ceph reference line '{line}'"))?);
        }
    }
    if m.len() != 3 {
        bail!("unexpected Ceph reference output: {}", String::from_utf8_lossy(&out.stdout));
    }
    Ok(m)
}

pub fn run(a: &CodecBenchArgs, code: ClayCode) -> Result<()> {
    // Bytes of each plane per pass of the layered decoder (a tuning knob, see clay::DEFAULT_WINDOW).
    let code = match std::env::var("KINTSUGI_CLAY_WINDOW").ok().and_then(|w| w.parse::<usize>().ok()) {
        Some(w) => code.with_window(w),
        None => code,
    };
    let g = code.geometry().clone();
    let alpha = g.alpha;
    // Round the chunk to whole sub-chunks of 32-byte multiples, as Ceph aligns them.
    let unit = alpha * 32;
    let len = a.shard_size.div_ceil(unit) * unit;
    let (k, n) = (code.k(), code.n());
    let mut state = 0x2545F4914F6CDD1Du64;
    let mut random = || {
        state ^= state << 13;
        state ^= state >> 7;
        state ^= state << 17;
        state as u8
    };
    let mut shards: Vec<Vec<u8>> = (0..n).map(|_| (0..len).map(|_| random()).collect()).collect();
    let encode = |shards: &mut Vec<Vec<u8>>| -> Result<()> {
        let (d, p) = shards.split_at_mut(k);
        let dr: Vec<&[u8]> = d.iter().map(|x| x.as_slice()).collect();
        let mut pr: Vec<&mut [u8]> = p.iter_mut().map(|x| x.as_mut_slice()).collect();
        Ok(code.encode(&dr, &mut pr)?)
    };
    encode(&mut shards)?;
    // Decode: the first m data chunks lost, rebuilt from the rest.
    let lost: Vec<usize> = (0..g.m).collect();
    let avail: Vec<usize> = (g.m..n).collect();
    let dec = code.decoder(&lost, &avail)?;
    // Repair: chunk 0 from d helpers, each reading its beta sub-chunks.
    let helpers = code.choose_helpers(0, &(1..n).collect::<Vec<_>>())?;
    let eq = code.repair_equation(0, &helpers)?;
    let reads: Vec<Vec<u8>> = eq
        .terms
        .iter()
        .map(|t| t.byte_ranges(alpha, len).map(|rs| rs.into_iter().flat_map(|r| shards[t.helper][r].to_vec()).collect()))
        .collect::<std::result::Result<_, _>>()?;
    let matrices: Vec<_> = eq.terms.iter().map(|t| t.matrix(alpha)).collect();
    let nonzero = eq.terms.iter().map(|t| t.coefs.iter().filter(|&&c| c != 0).count()).sum::<usize>();
    let mut structured = Vec::new();
    let mut out = vec![vec![0u8; len]; g.m];
    let mut ours: BTreeMap<String, Vec<f64>> = BTreeMap::new();
    let mut theirs: BTreeMap<String, Vec<f64>> = BTreeMap::new();
    let mut ratios: BTreeMap<String, Vec<f64>> = BTreeMap::new();
    for _ in 0..a.runs {
        let mut r = BTreeMap::new();
        r.insert(
            "encode_gbps".to_string(),
            rate(a.seconds, k * len, || {
                let dr: Vec<&[u8]> = shards[..k].iter().map(|x| x.as_slice()).collect();
                let mut pr: Vec<&mut [u8]> = out.iter_mut().map(|x| x.as_mut_slice()).collect();
                code.encode(&dr, &mut pr).expect("valid shapes");
            }),
        );
        if (0..g.m).any(|i| out[i] != shards[k + i]) {
            bail!("encode produced wrong bytes");
        }
        r.insert(
            "decode_gbps".to_string(),
            rate(a.seconds, k * len, || {
                let sr: Vec<&[u8]> = dec.sources.iter().map(|&i| shards[i].as_slice()).collect();
                let mut dr: Vec<&mut [u8]> = out.iter_mut().map(|x| x.as_mut_slice()).collect();
                dec.apply(&sr, &mut dr).expect("valid shapes");
            }),
        );
        if (0..g.m).any(|i| out[i] != shards[lost[i]]) {
            bail!("decode produced wrong bytes");
        }
        let rr: Vec<&[u8]> = reads.iter().map(|x| x.as_slice()).collect();
        r.insert("repair_gbps".to_string(), rate(a.seconds, len, || code.repair(0, &helpers, &rr, &mut out[0]).expect("valid shapes")));
        if out[0] != shards[0] {
            bail!("repair produced wrong bytes");
        }
        let sub = len / alpha;
        r.insert(
            "repair_terms_gbps".to_string(),
            rate(a.seconds, len, || {
                out[0].fill(0);
                for ((term, m), read) in eq.terms.iter().zip(&matrices).zip(&reads) {
                    let srcs: Vec<&[u8]> = read.chunks(sub).take(term.read_count()).collect();
                    let mut dsts: Vec<&mut [u8]> = out[0].chunks_mut(sub).collect();
                    m.apply_add(&srcs, &mut dsts);
                }
            }),
        );
        if out[0] != shards[0] {
            bail!("the repair by terms produced wrong bytes");
        }
        structured.push(r["repair_gbps"] / r["repair_terms_gbps"]);
        let ceph = match &a.ceph {
            Some(bin) => Some(run_ceph(bin, &code, len, a.seconds)?),
            None => None,
        };
        for (key, v) in r {
            if let Some(c) = ceph.as_ref().and_then(|m| m.get(&key)) {
                theirs.entry(key.clone()).or_default().push(*c);
                ratios.entry(key.clone()).or_default().push(v / c);
            }
            ours.entry(key).or_default().push(v);
        }
    }
    let spread: BTreeMap<String, Stat> = ours.iter().map(|(k, v)| (k.clone(), stat(v))).collect();
    let summarise =
        |m: &BTreeMap<String, Vec<f64>>| (!m.is_empty()).then(|| m.iter().map(|(k, v)| (k.clone(), stat(v))).collect::<BTreeMap<_, _>>());
    let report = ClayReport {
        code: code.spec().to_string(),
        kernel: kintsugi_gf::Kernel::active().to_string(),
        chunk_bytes: len,
        sub_chunks: alpha,
        runs: a.runs,
        encode_gbps: spread["encode_gbps"].median,
        decode_gbps: spread["decode_gbps"].median,
        repair_gbps: spread["repair_gbps"].median,
        repair_terms_gbps: spread["repair_terms_gbps"].median,
        terms_mul_adds_per_byte: nonzero as f64 / alpha as f64,
        structured_over_terms: stat(&structured),
        spread: spread.clone(),
        ceph: summarise(&theirs),
        ratio: summarise(&ratios),
    };
    if a.json {
        println!("{}", serde_json::to_string_pretty(&report)?);
        return Ok(());
    }
    println!(
        "{} ({} sub-chunks), chunks of {} bytes, kernel {}, {} runs of {} s, one thread",
        report.code, alpha, len, report.kernel, a.runs, a.seconds
    );
    println!("encode and decode count the k data chunks per second, repair the rebuilt chunk");
    let so = &report.structured_over_terms;
    println!(
        "repair: structured (coupling, one decode per plane) {:.2}x the dense terms ({:.2}..{:.2}), which take {:.1} multiply-adds per rebuilt byte",
        so.median, so.min, so.max, report.terms_mul_adds_per_byte
    );
    println!("{:<14} {:>10} {:>16} {:>10} {:>20}", "metric (GB/s)", "median", "min..max", "Ceph", "ours/Ceph");
    for (key, s) in &spread {
        let ceph = report.ceph.as_ref().and_then(|m| m.get(key)).map_or("-".to_string(), |s| format!("{:.3}", s.median));
        let ratio = report
            .ratio
            .as_ref()
            .and_then(|m| m.get(key))
            .map_or("-".to_string(), |s| format!("{:.2} ({:.2}..{:.2})", s.median, s.min, s.max));
        println!("{:<14} {:>10.3} {:>16} {:>10} {:>20}", key, s.median, format!("{:.3}..{:.3}", s.min, s.max), ceph, ratio);
    }
    Ok(())
}
