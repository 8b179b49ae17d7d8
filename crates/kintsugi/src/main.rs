//! kintsugi: erasure-coded storage with state-of-the-art repair. One binary, many commands.

mod atomic_file;
mod bench;
mod codec;
mod plot;
mod sim_cmd;
mod units;

use clap::{Parser, Subcommand};

#[derive(Parser, Debug)]
#[command(
    name = "kintsugi",
    version,
    about = "Erasure-coded storage with state-of-the-art repair (CR, PPR, ECPipe, RepairBoost, ChameleonEC, Clay)"
)]
struct Cli {
    #[command(subcommand)]
    cmd: Cmd,
}

#[derive(Subcommand, Debug)]
enum Cmd {
    /// Encode, decode and repair files as shard files on local disk.
    #[command(subcommand)]
    Codec(codec::CodecCmd),
    /// Measure throughput (use --json for scripts).
    #[command(subcommand)]
    Bench(bench::BenchCmd),
    /// Simulate repairs at scale with the same plans (use --json for scripts).
    #[command(subcommand)]
    Sim(sim_cmd::SimCmd),
}

fn main() -> std::process::ExitCode {
    let cli = Cli::parse();
    let result = match cli.cmd {
        Cmd::Codec(c) => codec::run(c),
        Cmd::Bench(b) => bench::run(b),
        Cmd::Sim(s) => sim_cmd::run(s),
    };
    match result {
        Ok(()) => std::process::ExitCode::SUCCESS,
        Err(e) => {
            eprintln!("error: {e:#}");
            std::process::ExitCode::FAILURE
        }
    }
}
