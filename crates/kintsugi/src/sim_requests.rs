//! `kintsugi sim full-node --fg-clients N`: users' requests beside the simulated repair
//! (`kintsugi_sim::requests`), for ChameleonEC's foreground P99 and interference degree.

use crate::units::{parse_nonzero_size, parse_rate};
use anyhow::{bail, Result};
use clap::Args;
use kintsugi_sim::requests::RequestLoad;
use kintsugi_sim::under_load::ForegroundReport;

/// Closed-loop YCSB-style clients (defaults: workload A as ChameleonEC runs it).
#[derive(Args, Debug, Clone)]
pub struct RequestArgs {
    /// Clients issuing requests to key-value servers on the live nodes, each on a node of
    /// its own, one request at a time; 0: no requests. The run reports the requests' P99
    /// during the repair and the interference degree T*/T - 1.
    #[arg(long, default_value_t = 0)]
    pub fg_clients: usize,
    /// Requests per client (the trace); make it outlast the repair.
    #[arg(long, default_value_t = 2000)]
    pub fg_requests: usize,
    /// Bytes of a value: a read moves it from its server to the client, an update back.
    #[arg(long, default_value = "512KiB", value_parser = parse_nonzero_size)]
    pub fg_value: usize,
    /// Share of reads (the rest are updates).
    #[arg(long, default_value_t = 0.5)]
    pub fg_read_share: f64,
    /// Records, each on a random live node, chosen zipfian.
    #[arg(long, default_value_t = 1000)]
    pub fg_records: u64,
    /// Zipfian skew of the record chosen.
    #[arg(long, default_value_t = 0.99)]
    pub fg_zipf: f64,
    /// Each client's link rate; default: the nodes' --link.
    #[arg(long, value_parser = parse_rate)]
    pub fg_client_link: Option<f64>,
    /// Seconds the clients run before the repair starts (what the planners' monitor sees
    /// first).
    #[arg(long, default_value_t = 5.0)]
    pub fg_start: f64,
}

impl RequestArgs {
    /// The load, or None without clients.
    pub fn load(&self, link: f64, seed: u64) -> Result<Option<(RequestLoad, f64)>> {
        if self.fg_clients == 0 {
            return Ok(None);
        }
        if !(self.fg_start >= 0.0 && self.fg_start.is_finite()) {
            bail!("--fg-start must be a non-negative number of seconds");
        }
        let load = RequestLoad {
            clients: self.fg_clients,
            requests: self.fg_requests,
            value: self.fg_value,
            read_share: self.fg_read_share,
            records: self.fg_records,
            zipf: self.fg_zipf,
            client_link: self.fg_client_link.unwrap_or(link),
            seed,
        };
        Ok(Some((load, self.fg_start)))
    }
}

/// The requests' lines of the text report.
pub fn print(f: &ForegroundReport) {
    println!(
        "  requests         {} clients x {} of {} bytes; repair from {:.1} s",
        f.clients,
        f.requests / f.clients.max(1),
        f.value_bytes,
        f.repair_start
    );
    println!(
        "  trace            {:.2} s alone, {:.2} s with the repair: interference {:.3}, delay {:.2} s{}",
        f.trace_seconds_alone,
        f.trace_seconds,
        f.interference,
        f.delay_seconds,
        if f.trace_shorter_than_repair { " (the trace ended first: raise --fg-requests)" } else { "" }
    );
    println!(
        "  latency          during the repair p50 {:.1} ms, p99 {:.1} ms ({} requests); alone p99 {:.1} ms",
        f.during_repair.p50_ms, f.during_repair.p99_ms, f.during_repair.requests, f.baseline.p99_ms
    );
}
