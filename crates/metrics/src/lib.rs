//! Prometheus metrics: each server process (coordinator, node, S3 gateway) fills a
//! [`Registry`] and serves it at `GET /metrics` on its own port (`--metrics-listen`): in the
//! OpenMetrics text format to a scraper that asks for it (Prometheus does), else in
//! Prometheus' classic text format (what `promtool check metrics`, older scrapers and
//! people with curl read). The port serves nothing else: any other path is 404, any other
//! method 405.

use bytes::Bytes;
use http_body_util::Full;
use hyper::{Method, Request, Response, StatusCode};
pub mod encode;
pub use prometheus_client;
use prometheus_client::registry::Registry;
use std::net::SocketAddr;
use std::sync::Arc;
use std::time::Duration;
use tokio::net::TcpListener;

/// The content type of the OpenMetrics text format.
pub const CONTENT_TYPE: &str = "application/openmetrics-text; version=1.0.0; charset=utf-8";
/// ... and of Prometheus' classic text format.
pub const CLASSIC_CONTENT_TYPE: &str = "text/plain; version=0.0.4; charset=utf-8";

/// Scrapes served at once; more wait for the listener (a scrape takes well under a second).
const MAX_SCRAPES: usize = 64;
/// A scrape that has not sent its request by then is dropped.
const READ_TIMEOUT: Duration = Duration::from_secs(10);

/// The registry in the text format.
pub fn render(registry: &Registry) -> String {
    let mut out = String::new();
    // Writing into a String cannot fail; a collector that fails leaves what it wrote.
    if let Err(e) = prometheus_client::encoding::text::encode(&mut out, registry) {
        tracing::warn!("encoding metrics: {e}");
    }
    out
}

/// OpenMetrics text in Prometheus' classic format: a counter's family is named as its
/// samples are (with `_total`), and there are no `# UNIT` or `# EOF` lines.
pub fn classic(openmetrics: &str) -> String {
    let counters: std::collections::HashSet<&str> =
        openmetrics.lines().filter_map(|l| l.strip_prefix("# TYPE ")?.strip_suffix(" counter")).collect();
    let mut out = String::with_capacity(openmetrics.len() + 64);
    for line in openmetrics.lines() {
        if line.starts_with("# UNIT ") || line == "# EOF" {
            continue;
        }
        let renamed = ["# HELP ", "# TYPE "].iter().find_map(|tag| {
            let rest = line.strip_prefix(tag)?;
            let (name, tail) = rest.split_once(' ')?;
            counters.contains(name).then(|| format!("{tag}{name}_total {tail}"))
        });
        out.push_str(renamed.as_deref().unwrap_or(line));
        out.push('\n');
    }
    out
}

/// A page served beside `/metrics` (the coordinator's status page and its JSON).
pub struct Page {
    pub content_type: &'static str,
    pub body: String,
}

/// What serves the other paths of the port: a page for a path, or none (404).
pub type Pages = Arc<dyn Fn(&str) -> Option<Page> + Send + Sync>;

/// The answer to one request on the metrics port.
fn answer(registry: &Registry, pages: Option<&Pages>, method: &Method, path: &str, accept: &str) -> Response<Full<Bytes>> {
    let page = match (method, pages) {
        (&Method::GET, Some(p)) if path != "/metrics" => p(path),
        _ => None,
    };
    let (status, content_type, body) = match (method, path) {
        _ if page.is_some() => {
            let p = page.expect("just matched");
            (StatusCode::OK, p.content_type, p.body)
        }
        (&Method::GET, "/metrics") | (&Method::HEAD, "/metrics") if accept.contains("application/openmetrics-text") => {
            (StatusCode::OK, CONTENT_TYPE, render(registry))
        }
        (&Method::GET, "/metrics") | (&Method::HEAD, "/metrics") => (StatusCode::OK, CLASSIC_CONTENT_TYPE, classic(&render(registry))),
        (_, "/metrics") => (StatusCode::METHOD_NOT_ALLOWED, "text/plain", "GET /metrics only\n".to_string()),
        _ => (StatusCode::NOT_FOUND, "text/plain", "not found: this port serves GET /metrics\n".to_string()),
    };
    let mut r = Response::new(Full::new(Bytes::from(body)));
    *r.status_mut() = status;
    r.headers_mut().insert(hyper::header::CONTENT_TYPE, hyper::header::HeaderValue::from_static(content_type));
    r
}

/// Serves `registry` at `http://listen/metrics` until the task is aborted; returns the
/// address bound (`listen` may ask for port 0).
pub async fn serve(listen: &str, registry: Arc<Registry>) -> Result<(SocketAddr, tokio::task::JoinHandle<()>), String> {
    serve_with_pages(listen, registry, None).await
}

/// [`serve`], with `pages` answering GETs of other paths.
pub async fn serve_with_pages(
    listen: &str,
    registry: Arc<Registry>,
    pages: Option<Pages>,
) -> Result<(SocketAddr, tokio::task::JoinHandle<()>), String> {
    let listener = TcpListener::bind(listen).await.map_err(|e| format!("metrics listener on {listen}: {e}"))?;
    let addr = listener.local_addr().map_err(|e| e.to_string())?;
    tracing::info!("metrics at http://{addr}/metrics");
    let slots = Arc::new(tokio::sync::Semaphore::new(MAX_SCRAPES));
    let task = tokio::spawn(async move {
        loop {
            let permit = slots.clone().acquire_owned().await.expect("never closed");
            let (stream, _) = match listener.accept().await {
                Ok(s) => s,
                Err(e) => {
                    tracing::debug!("metrics accept: {e}");
                    tokio::time::sleep(Duration::from_millis(50)).await;
                    continue;
                }
            };
            let (registry, pages) = (registry.clone(), pages.clone());
            tokio::spawn(async move {
                let _permit = permit;
                let service = hyper::service::service_fn(move |req: Request<hyper::body::Incoming>| {
                    let accept = req.headers().get(hyper::header::ACCEPT).and_then(|v| v.to_str().ok()).unwrap_or("");
                    let r = answer(&registry, pages.as_ref(), req.method(), req.uri().path(), accept);
                    async move { Ok::<_, std::convert::Infallible>(r) }
                });
                let conn = hyper::server::conn::http1::Builder::new()
                    .timer(hyper_util::rt::TokioTimer::new())
                    .header_read_timeout(READ_TIMEOUT)
                    .serve_connection(hyper_util::rt::TokioIo::new(stream), service);
                if let Err(e) = conn.await {
                    tracing::debug!("metrics connection: {e}");
                }
            });
        }
    });
    Ok((addr, task))
}

#[cfg(test)]
mod tests {
    use super::*;
    use prometheus_client::metrics::counter::Counter;

    #[tokio::test(flavor = "multi_thread", worker_threads = 2)]
    async fn the_port_serves_metrics_and_nothing_else() {
        let mut registry = Registry::default();
        let c: Counter = Counter::default();
        registry.register("kintsugi_test_bytes", "Bytes of a test", c.clone());
        c.inc_by(42);
        let (addr, _task) = serve("127.0.0.1:0", Arc::new(registry)).await.unwrap();
        let (body, plain) = tokio::task::spawn_blocking(move || {
            let ok =
                ureq::get(&format!("http://{addr}/metrics")).set("Accept", "application/openmetrics-text; version=1.0.0").call().unwrap();
            assert_eq!(ok.header("content-type"), Some(CONTENT_TYPE));
            let body = ok.into_string().unwrap();
            let plain = ureq::get(&format!("http://{addr}/metrics")).call().unwrap();
            assert_eq!(plain.header("content-type"), Some(CLASSIC_CONTENT_TYPE));
            let plain = plain.into_string().unwrap();
            let missing = ureq::get(&format!("http://{addr}/status")).call().unwrap_err();
            assert!(matches!(missing, ureq::Error::Status(404, _)), "{missing:?}");
            let post = ureq::post(&format!("http://{addr}/metrics")).call().unwrap_err();
            assert!(matches!(post, ureq::Error::Status(405, _)), "{post:?}");
            (body, plain)
        })
        .await
        .unwrap();
        assert!(body.contains("# TYPE kintsugi_test_bytes counter\n"), "{body}");
        assert!(body.contains("kintsugi_test_bytes_total 42"), "{body}");
        assert!(body.ends_with("# EOF\n"), "{body}");
        assert_eq!(
            plain,
            "# HELP kintsugi_test_bytes_total Bytes of a test.\n# TYPE kintsugi_test_bytes_total counter\nkintsugi_test_bytes_total 42\n"
        );
    }
}
