//! `kintsugi codec`: erasure-code a file into shard files, decode it back from any k good
//! shards, and repair lost or corrupted shards through a repair graph. Everything streams
//! in blocks, so files larger than memory work; every written file is crash-safe.

pub mod manifest;
mod walk;

use crate::atomic_file::{write_atomic, AtomicFile};
use crate::units::{human_bytes, parse_nonzero_size};
use anyhow::{bail, Context, Result};
use clap::{Args, Subcommand};
use indicatif::{ProgressBar, ProgressStyle};
use kintsugi_codes::{Code, CodeSpec};
use kintsugi_plan::{memory_executor, shapes, RepairTask, Shape};
use manifest::{Manifest, ShardEntry, FORMAT};
use serde::Serialize;
use std::fs::File;
use std::os::unix::fs::FileExt;
use std::path::{Path, PathBuf};
use walk::{ShardCrc, Walk};

/// Subcommands of `kintsugi codec`.
#[derive(Subcommand, Debug)]
pub enum CodecCmd {
    /// Split FILE into k data and n-k parity shard files plus a manifest.
    Encode(EncodeArgs),
    /// Rebuild the original file from any k intact shards.
    Decode(DecodeArgs),
    /// Rebuild lost or corrupted shards in place.
    Repair(RepairArgs),
}

#[derive(Args, Debug)]
pub struct EncodeArgs {
    /// The file to encode.
    pub file: PathBuf,
    /// Code: rs:K,M (Reed-Solomon, ISA-L compatible), lrc:K,L,M (Azure LRC) or
    /// clay:K,M,D (Clay, Ceph's clay plugin layout; shards round up to whole sub-chunks).
    #[arg(long, default_value = "rs:10,4")]
    pub code: CodeSpec,
    /// Directory for the shards and the manifest (created if missing).
    #[arg(long)]
    pub out: PathBuf,
    /// Bytes of each shard processed per step.
    #[arg(long, default_value = "1MiB", value_parser = parse_nonzero_size)]
    pub block: usize,
    /// Print a JSON summary instead of text.
    #[arg(long)]
    pub json: bool,
}

#[derive(Args, Debug)]
pub struct DecodeArgs {
    /// The manifest written by `codec encode`.
    pub manifest: PathBuf,
    /// Where to write the decoded file.
    #[arg(long)]
    pub out: PathBuf,
    /// Bytes of each shard processed per step.
    #[arg(long, default_value = "1MiB", value_parser = parse_nonzero_size)]
    pub block: usize,
    /// Print a JSON summary instead of text.
    #[arg(long)]
    pub json: bool,
}

#[derive(Args, Debug)]
pub struct RepairArgs {
    /// The manifest written by `codec encode`.
    pub manifest: PathBuf,
    /// Shard index to rebuild (repeatable). Default: every missing or corrupted shard.
    #[arg(long)]
    pub lost: Vec<usize>,
    /// Repair graph shape: cr, ppr, ecpipe or ecpipe-cyclic.
    #[arg(long, default_value = "cr")]
    pub method: Shape,
    /// Slice size streamed through the graph.
    #[arg(long, default_value = "32KiB", value_parser = parse_nonzero_size)]
    pub slice: usize,
    /// Bytes of each shard processed per step.
    #[arg(long, default_value = "1MiB", value_parser = parse_nonzero_size)]
    pub block: usize,
    /// Print a JSON summary instead of text.
    #[arg(long)]
    pub json: bool,
}

/// Runs a codec subcommand.
pub fn run(cmd: CodecCmd) -> Result<()> {
    match cmd {
        CodecCmd::Encode(a) => encode(&a),
        CodecCmd::Decode(a) => decode(&a),
        CodecCmd::Repair(a) => repair(&a),
    }
}

fn progress(total: u64, what: &str) -> ProgressBar {
    let pb = ProgressBar::new(total);
    pb.set_style(
        ProgressStyle::with_template("{msg} [{bar:30}] {bytes}/{total_bytes} {bytes_per_sec} eta {eta}")
            .expect("static template")
            .progress_chars("=> "),
    );
    pb.set_message(what.to_string());
    pb
}

/// Reads `buf.len()` bytes at `off`, zero-filling past the end of the file.
fn read_block(f: &File, off: u64, buf: &mut [u8]) -> std::io::Result<()> {
    let mut got = 0;
    while got < buf.len() {
        match f.read_at(&mut buf[got..], off + got as u64) {
            Ok(0) => break,
            Ok(n) => got += n,
            Err(e) if e.kind() == std::io::ErrorKind::Interrupted => continue,
            Err(e) => return Err(e),
        }
    }
    buf[got..].fill(0);
    Ok(())
}

#[derive(Serialize)]
struct EncodeSummary<'a> {
    manifest: &'a Path,
    code: String,
    size: u64,
    shard_len: u64,
    shards: usize,
    seconds: f64,
}

fn encode(a: &EncodeArgs) -> Result<()> {
    let started = std::time::Instant::now();
    let code = a.code.build()?;
    let input = File::open(&a.file).with_context(|| format!("cannot open {}", a.file.display()))?;
    let meta = input.metadata().with_context(|| format!("cannot stat {}", a.file.display()))?;
    if !meta.is_file() {
        bail!("{} is not a regular file", a.file.display());
    }
    let file_name = a.file.file_name().with_context(|| format!("{} has no file name", a.file.display()))?.to_string_lossy().to_string();
    std::fs::create_dir_all(&a.out).with_context(|| format!("cannot create {}", a.out.display()))?;
    let (k, n) = (code.k(), code.n());
    let size = meta.len();
    let shard_len = manifest::shard_len(size, k, code.sub_chunks());

    let names: Vec<String> = (0..n).map(|i| Manifest::shard_name(&file_name, i, n)).collect();
    let outs: Vec<AtomicFile> = names.iter().map(|s| AtomicFile::create(&a.out.join(s))).collect::<Result<_>>()?;
    let walk = Walk::new(code.sub_chunks(), shard_len, a.block);
    let mut crcs: Vec<ShardCrc> = (0..n).map(|_| ShardCrc::new(&walk)).collect();
    let mut bufs = vec![vec![0u8; walk.gathered()]; n];
    let all = walk.all();
    let pb = progress(size, "encode");
    for (off, w) in walk.windows() {
        let g = walk.alpha * w;
        // Bytes past the end of the file read as zeros: the padding of the last data shard.
        for (i, buf) in bufs.iter_mut().take(k).enumerate() {
            walk.read(&input, i as u64 * shard_len, off, w, buf, &all).with_context(|| format!("cannot read {}", a.file.display()))?;
        }
        let (data, parity) = bufs.split_at_mut(k);
        let drefs: Vec<&[u8]> = data.iter().map(|d| &d[..g]).collect();
        let mut prefs: Vec<&mut [u8]> = parity.iter_mut().map(|p| &mut p[..g]).collect();
        code.encode(&drefs, &mut prefs)?;
        for i in 0..n {
            walk.write(outs[i].file(), 0, off, w, &bufs[i][..g], u64::MAX).with_context(|| format!("cannot write shard {}", names[i]))?;
            crcs[i].add(&bufs[i][..g], w);
        }
        pb.inc(g as u64 * k as u64);
    }
    let crcs: Vec<u32> = crcs.iter().map(|c| c.finish()).collect();
    pb.finish_and_clear();
    for f in outs {
        f.commit()?;
    }
    let manifest = Manifest {
        format: FORMAT,
        code: a.code,
        k,
        m: n - k,
        size,
        shard_len,
        file: file_name.clone(),
        shards: (0..n).map(|i| ShardEntry { index: i, file: names[i].clone(), crc32c: crcs[i] }).collect(),
    };
    let mpath = Manifest::path_for(&a.out, &file_name);
    write_atomic(&mpath, serde_json::to_string_pretty(&manifest)?.as_bytes())?;
    let summary =
        EncodeSummary { manifest: &mpath, code: a.code.to_string(), size, shard_len, shards: n, seconds: started.elapsed().as_secs_f64() };
    if a.json {
        println!("{}", serde_json::to_string(&summary)?);
    } else {
        println!(
            "encoded {} ({}) with {} into {} shards of {} in {}\nmanifest: {}",
            a.file.display(),
            human_bytes(size),
            a.code,
            n,
            human_bytes(shard_len),
            a.out.display(),
            mpath.display()
        );
    }
    Ok(())
}

/// What was found when checking one shard against the manifest.
#[derive(Clone, Debug, PartialEq, Eq, Serialize)]
#[serde(rename_all = "snake_case")]
pub enum ShardState {
    Ok,
    Missing,
    WrongLength { got: u64 },
    ChecksumMismatch { got: u32 },
    Unreadable { error: String },
}

/// Checks every shard's presence, length and CRC.
fn check_shards(m: &Manifest, dir: &Path, block: usize) -> Vec<ShardState> {
    let pb = progress(m.shard_len * m.shards.len() as u64, "verify");
    let states = m
        .shards
        .iter()
        .map(|s| {
            let path = dir.join(&s.file);
            let f = match File::open(&path) {
                Ok(f) => f,
                Err(e) if e.kind() == std::io::ErrorKind::NotFound => return ShardState::Missing,
                Err(e) => return ShardState::Unreadable { error: e.to_string() },
            };
            match f.metadata() {
                Ok(md) if md.len() != m.shard_len => return ShardState::WrongLength { got: md.len() },
                Ok(_) => {}
                Err(e) => return ShardState::Unreadable { error: e.to_string() },
            }
            let mut crc = 0u32;
            let mut buf = vec![0u8; block.min(m.shard_len.max(1) as usize)];
            let mut off = 0;
            while off < m.shard_len {
                let w = buf.len().min((m.shard_len - off) as usize);
                if let Err(e) = read_block(&f, off, &mut buf[..w]) {
                    return ShardState::Unreadable { error: e.to_string() };
                }
                crc = kintsugi_proto::crc::crc32c_append(crc, &buf[..w]);
                off += w as u64;
                pb.inc(w as u64);
            }
            if crc != s.crc32c {
                ShardState::ChecksumMismatch { got: crc }
            } else {
                ShardState::Ok
            }
        })
        .collect();
    pb.finish_and_clear();
    states
}

fn describe(state: &ShardState) -> String {
    match state {
        ShardState::Ok => "ok".into(),
        ShardState::Missing => "missing".into(),
        ShardState::WrongLength { got } => format!("wrong length ({got} bytes)"),
        ShardState::ChecksumMismatch { got } => format!("checksum mismatch (crc32c {got:08x})"),
        ShardState::Unreadable { error } => format!("unreadable ({error})"),
    }
}

fn manifest_dir(path: &Path) -> PathBuf {
    match path.parent() {
        Some(d) if !d.as_os_str().is_empty() => d.to_path_buf(),
        _ => PathBuf::from("."),
    }
}

fn open_shards(m: &Manifest, dir: &Path, which: &[usize]) -> Result<Vec<File>> {
    which
        .iter()
        .map(|&i| {
            let p = dir.join(&m.shards[i].file);
            File::open(&p).with_context(|| format!("cannot open shard {}", p.display()))
        })
        .collect()
}

#[derive(Serialize)]
struct DecodeSummary<'a> {
    out: &'a Path,
    size: u64,
    shards: Vec<ShardState>,
    rebuilt_data_shards: Vec<usize>,
    seconds: f64,
}

fn decode(a: &DecodeArgs) -> Result<()> {
    let started = std::time::Instant::now();
    let (m, code) = Manifest::load(&a.manifest)?;
    let dir = manifest_dir(&a.manifest);
    let states = check_shards(&m, &dir, a.block);
    let good: Vec<usize> = (0..code.n()).filter(|&i| states[i] == ShardState::Ok).collect();
    let bad_data: Vec<usize> = (0..code.k()).filter(|&i| states[i] != ShardState::Ok).collect();
    for (i, s) in states.iter().enumerate() {
        if *s != ShardState::Ok {
            eprintln!("warning: shard {i} ({}): {}", m.shards[i].file, describe(s));
        }
    }
    let dec = code.decoder(&bad_data, &good).context("too few intact shards to decode")?;
    let data_files = open_shards(&m, &dir, &(0..code.k()).filter(|i| good.contains(i)).collect::<Vec<_>>())?;
    let src_files = open_shards(&m, &dir, &dec.sources)?;
    let out = AtomicFile::create(&a.out)?;
    let l = m.shard_len;
    let walk = Walk::new(code.sub_chunks(), l, a.block);
    let all = walk.all();
    let mut src = vec![vec![0u8; walk.gathered()]; dec.sources.len()];
    let mut dst = vec![vec![0u8; walk.gathered()]; dec.targets.len()];
    let mut buf = vec![0u8; walk.gathered()];
    let pb = progress(m.size, "decode");
    for (off, w) in walk.windows() {
        let g = walk.alpha * w;
        // Intact data shards are copied; lost ones are computed.
        let mut intact = data_files.iter();
        for i in (0..code.k()).filter(|i| good.contains(i)) {
            walk.read(intact.next().expect("one file per intact data shard"), 0, off, w, &mut buf, &all)?;
            walk.write(out.file(), i as u64 * l, off, w, &buf[..g], m.size)?;
        }
        if !dec.targets.is_empty() {
            for (f, s) in src_files.iter().zip(src.iter_mut()) {
                walk.read(f, 0, off, w, s, &all)?;
            }
            let srefs: Vec<&[u8]> = src.iter().map(|s| &s[..g]).collect();
            let mut drefs: Vec<&mut [u8]> = dst.iter_mut().map(|d| &mut d[..g]).collect();
            dec.apply(&srefs, &mut drefs)?;
            for (t, d) in dec.targets.iter().zip(&dst) {
                walk.write(out.file(), *t as u64 * l, off, w, &d[..g], m.size)?;
            }
        }
        pb.inc(g as u64 * code.k() as u64);
    }
    pb.finish_and_clear();
    out.file().set_len(m.size)?;
    out.commit()?;
    let summary = DecodeSummary {
        out: &a.out,
        size: m.size,
        shards: states,
        rebuilt_data_shards: dec.targets.clone(),
        seconds: started.elapsed().as_secs_f64(),
    };
    if a.json {
        println!("{}", serde_json::to_string(&summary)?);
    } else {
        println!(
            "decoded {} to {} from {} intact shards{}",
            human_bytes(m.size),
            a.out.display(),
            good.len(),
            if dec.targets.is_empty() { String::new() } else { format!(", rebuilding data shards {:?}", dec.targets) }
        );
    }
    Ok(())
}

#[derive(Serialize)]
struct RepairedShard {
    index: usize,
    was: ShardState,
    helpers: Vec<usize>,
    method: String,
    verified: bool,
    /// Bytes read from the helper shards (d/q shards' worth for Clay, k for RS).
    helper_bytes_read: u64,
}

fn repair(a: &RepairArgs) -> Result<()> {
    let (m, code) = Manifest::load(&a.manifest)?;
    let dir = manifest_dir(&a.manifest);
    let n = code.n();
    if let Some(&bad) = a.lost.iter().find(|&&i| i >= n) {
        bail!("--lost {bad} is out of range: {} has shards 0..{}", m.code, n - 1);
    }
    let states = check_shards(&m, &dir, a.block);
    let mut lost: Vec<usize> = if a.lost.is_empty() { (0..n).filter(|&i| states[i] != ShardState::Ok).collect() } else { a.lost.clone() };
    lost.sort_unstable();
    lost.dedup();
    // Helpers come from intact shards that are not being rebuilt.
    let mut avail: Vec<usize> = (0..n).filter(|&i| states[i] == ShardState::Ok && !lost.contains(&i)).collect();
    let mut report = Vec::new();
    for &i in &lost {
        let helpers = code.choose_helpers(i, &avail).with_context(|| format!("cannot repair shard {i}"))?;
        let helper_bytes_read = repair_one(&m, code.as_ref(), &dir, i, &helpers, a)?;
        report.push(RepairedShard {
            index: i,
            was: states[i].clone(),
            helpers,
            method: a.method.to_string(),
            verified: true,
            helper_bytes_read,
        });
        // A verified shard can help rebuild the next one.
        avail.push(i);
    }
    if a.json {
        println!("{}", serde_json::to_string(&report)?);
    } else if report.is_empty() {
        println!("all {n} shards are intact; nothing to repair");
    } else {
        for r in &report {
            println!(
                "repaired shard {} ({}) with {} from shards {:?}, reading {}; checksum verified",
                r.index,
                describe(&r.was),
                r.method,
                r.helpers,
                human_bytes(r.helper_bytes_read)
            );
        }
    }
    Ok(())
}

/// Rebuilds shard `lost` window by window through the repair graph, reading only the
/// sub-chunks its equation names, and checks its CRC before moving it into place. Returns
/// the bytes read from helpers.
fn repair_one(m: &Manifest, code: &dyn Code, dir: &Path, lost: usize, helpers: &[usize], a: &RepairArgs) -> Result<u64> {
    let equation = code.repair_equation(lost, helpers)?;
    let n = code.n() as u32;
    // Node ids for the graph: shard i on node i, the rebuilt shard on node n.
    let task = RepairTask { helper_nodes: equation.helpers().iter().map(|&h| h as u32).collect(), equation, destination: n };
    let graph = shapes::build(a.method, &task)?;
    let files = open_shards(m, dir, &task.equation.helpers())?;
    let target = dir.join(&m.shards[lost].file);
    let out = AtomicFile::create(&target)?;
    let l = m.shard_len;
    let walk = Walk::new(code.sub_chunks(), l, a.block);
    let mut bufs = vec![vec![0u8; walk.gathered()]; files.len()];
    let mut crc = ShardCrc::new(&walk);
    let mut read = 0u64;
    let pb = progress(l, &format!("repair shard {lost}"));
    for (off, w) in walk.windows() {
        let g = walk.alpha * w;
        for ((f, b), term) in files.iter().zip(bufs.iter_mut()).zip(&task.equation.terms) {
            read += walk.read(f, 0, off, w, &mut b[..g], &term.reads)?;
        }
        let refs: Vec<&[u8]> = bufs.iter().map(|b| &b[..g]).collect();
        let rebuilt = memory_executor::execute(&graph, &refs, a.slice)?;
        walk.write(out.file(), 0, off, w, &rebuilt, u64::MAX)?;
        crc.add(&rebuilt, w);
        pb.inc(g as u64);
    }
    pb.finish_and_clear();
    let crc = crc.finish();
    if crc != m.shards[lost].crc32c {
        bail!(
            "rebuilt shard {lost} has crc32c {crc:08x}, the manifest says {:08x}: a helper shard may be corrupted in a way its checksum did not catch; nothing was written",
            m.shards[lost].crc32c
        );
    }
    out.commit()?;
    Ok(read)
}
