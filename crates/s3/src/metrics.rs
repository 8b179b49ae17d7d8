//! The gateway's Prometheus metrics: requests by HTTP method and status, their latency
//! until the response's head (a GET's body streams after it), and the degraded reads its
//! GETs ran (chunks rebuilt from others because theirs were lost or corrupt).

use kintsugi_metrics::prometheus_client::metrics::counter::Counter;
use kintsugi_metrics::prometheus_client::metrics::family::Family;
use kintsugi_metrics::prometheus_client::metrics::histogram::{exponential_buckets, Histogram};
use kintsugi_metrics::prometheus_client::registry::{Registry, Unit};
use std::sync::Arc;
use std::time::Duration;

type Labels = Vec<(&'static str, String)>;

/// Counters the server updates per request.
#[derive(Clone)]
pub struct RequestMetrics {
    requests: Family<Labels, Counter>,
    latency: Family<Labels, Histogram, fn() -> Histogram>,
    degraded: Histogram,
    cut: Counter,
    lifecycle: Family<Labels, Counter>,
    lifecycle_passes: Counter,
}

impl Default for RequestMetrics {
    fn default() -> Self {
        // 0.5 ms to about 16 s.
        let buckets: fn() -> Histogram = || Histogram::new(exponential_buckets(0.0005, 2.0, 16));
        RequestMetrics {
            requests: Family::default(),
            latency: Family::new_with_constructor(buckets),
            degraded: buckets(),
            cut: Counter::default(),
            lifecycle: Family::default(),
            lifecycle_passes: Counter::default(),
        }
    }
}

impl RequestMetrics {
    /// One request answered with `status` (0: the connection failed) after `took`.
    pub fn record(&self, method: &str, status: u16, took: Duration) {
        let code = if status == 0 { "error".to_string() } else { status.to_string() };
        self.requests.get_or_create(&vec![("method", method.to_string()), ("code", code)]).inc();
        self.latency.get_or_create(&vec![("method", method.to_string())]).observe(took.as_secs_f64());
    }

    /// A response body failed after its head was sent (its connection reset).
    pub fn body_cut(&self) {
        self.cut.inc();
    }

    /// What the gateway's client calls after each degraded read.
    /// One thing lifecycle did: `current` (a current version expired), `noncurrent` (a
    /// noncurrent version removed), `marker` (a lone delete marker removed) or `upload` (an
    /// incomplete multipart upload aborted).
    pub fn lifecycle_done(&self, action: &'static str) {
        self.lifecycle.get_or_create(&vec![("action", action.to_string())]).inc();
    }

    pub fn lifecycle_pass(&self) {
        self.lifecycle_passes.inc();
    }

    pub fn degraded_read_observer(&self) -> kintsugi_client::DegradedReadObserver {
        let h = self.degraded.clone();
        Arc::new(move |took: Duration| h.observe(took.as_secs_f64()))
    }

    /// The registry a gateway serves.
    pub fn registry(&self) -> Registry {
        let mut r = Registry::with_prefix("kintsugi_s3");
        r.register("requests", "S3 requests answered, by HTTP method and status code", self.requests.clone());
        r.register_with_unit(
            "request_duration",
            "Time from a request's arrival to its response's head, by HTTP method",
            Unit::Seconds,
            self.latency.clone(),
        );
        r.register_with_unit(
            "degraded_read_duration",
            "Degraded reads the gateway's GETs ran: a lost or corrupt chunk rebuilt from others",
            Unit::Seconds,
            self.degraded.clone(),
        );
        r.register(
            "bodies_cut",
            "Responses whose body failed after their head was sent; each connection was reset, not closed",
            self.cut.clone(),
        );
        r.register(
            "lifecycle_actions",
            "What bucket lifecycle rules did, by action: current, noncurrent, marker, upload (and kept_locked: a version object lock kept)",
            self.lifecycle.clone(),
        );
        r.register("lifecycle_passes", "Lifecycle passes finished over every bucket", self.lifecycle_passes.clone());
        r
    }
}
