//! The gateway's HTTP server: SigV4 with the credentials file's keys (anonymous and badly
//! signed requests are refused with 403), HTTP/1.1 on a TCP listener (or over TLS, see
//! [`crate::tls`]), a cap on open
//! connections.

use crate::credentials::Key;
use crate::gateway::Gateway;
use crate::settings::BucketSettings;
use hyper_util::rt::{TokioExecutor, TokioIo};
use hyper_util::server::conn::auto::Builder as ConnBuilder;
use kintsugi_client::Client;
use kintsugi_plan::Shape;
use s3s::service::S3ServiceBuilder;
use std::net::SocketAddr;
use std::sync::Arc;
use tokio::net::TcpListener;
use tokio::sync::{watch, Semaphore};

/// Connections served at once; more wait in the listener's backlog.
pub const MAX_CONNECTIONS: usize = 1024;

/// How to run a gateway.
#[derive(Clone)]
pub struct S3Config {
    pub listen: String,
    /// The coordinator (or several, comma-separated).
    pub coordinator: String,
    pub keys: Vec<Key>,
    pub defaults: BucketSettings,
    pub method: Shape,
    pub slice: u64,
    /// Smallest part of a multipart upload but the last ([`crate::multipart::MIN_PART`]).
    pub min_part: u64,
    /// Bytes of bodies in flight at once ([`crate::memory_budget::DEFAULT_BUDGET`]).
    pub memory_budget: u64,
    /// Where `/metrics` (Prometheus) is served; none when absent.
    pub metrics_listen: Option<String>,
    /// The region the gateway answers for (GetBucketLocation, a bucket's LocationConstraint).
    pub region: String,
    /// Base domains for virtual-hosted-style requests (`bucket.DOMAIN/key`); path style is
    /// served whatever the host.
    pub domains: Vec<String>,
    /// How fast bucket lifecycle rules are applied, and how long their day is.
    pub lifecycle: crate::lifecycle_worker::LifecyclePace,
    /// Deadlines and caps that keep slow clients from holding the gateway.
    pub limits: crate::client_limits::ClientLimits,
    /// HTTPS with this certificate and key; plain HTTP when absent.
    pub tls: Option<crate::tls::TlsFiles>,
    /// SSE-S3's master keys ([`crate::sse::MasterKeys`]); SSE-S3 is refused without them.
    pub master_keys: Option<Arc<crate::sse::MasterKeys>>,
}

/// The region when none is configured.
pub const DEFAULT_REGION: &str = "us-east-1";

/// The largest POST Object (browser form upload) taken: s3s reads the file part into memory
/// to check the policy's content-length-range, so it is kept well under S3's 5 GiB.
pub const MAX_POST_OBJECT: u64 = 64 << 20;

/// A running gateway.
pub struct S3Handle {
    pub addr: SocketAddr,
    /// The certificate served, when the gateway speaks HTTPS.
    pub tls: Option<Arc<crate::tls::Certificates>>,
    stop: watch::Sender<bool>,
    task: tokio::task::JoinHandle<()>,
    /// Where `/metrics` is served, and its task.
    pub metrics_addr: Option<SocketAddr>,
    metrics: Option<tokio::task::JoinHandle<()>>,
}

impl S3Handle {
    /// Stops accepting connections; requests in flight finish, for up to [`DRAIN_DEADLINE`].
    pub async fn stop(self) {
        let _ = self.stop.send(true);
        if let Some(m) = &self.metrics {
            m.abort();
        }
        let _ = self.task.await;
    }

    /// Reads the certificate and key files again (at SIGHUP): new connections get the new
    /// pair, open ones keep theirs. On failure the pair in use stays.
    pub fn reload_tls(&self) -> Result<(), crate::tls::TlsError> {
        match &self.tls {
            Some(c) => c.reload(),
            None => Ok(()),
        }
    }

    /// Serves until the gateway is stopped.
    pub async fn wait(self) {
        let _ = self.task.await;
    }
}

/// How long a stopping gateway lets requests in flight finish.
pub const DRAIN_DEADLINE: std::time::Duration = std::time::Duration::from_secs(25);

/// A connection that is reset (SO_LINGER 0, an RST) instead of closed when a response body
/// failed after its head was sent: a client reading a Content-Length body sees an error,
/// never a clean end it could take for a short file. Counted in the gateway's metrics.
///
/// A write the client does not take for the idle limit fails, ending the connection (and
/// the response whose body was being sent).
struct ResetOnFailure {
    stream: tokio::net::TcpStream,
    failed: Arc<std::sync::atomic::AtomicBool>,
    counters: crate::metrics::RequestMetrics,
    write_stall: crate::client_limits::StallTimer,
}

impl ResetOnFailure {
    /// `r`, or a timeout if the client has taken nothing for the idle limit.
    fn unless_stalled<T>(
        &mut self,
        cx: &mut std::task::Context<'_>,
        r: std::task::Poll<std::io::Result<T>>,
    ) -> std::task::Poll<std::io::Result<T>> {
        if self.write_stall.stalled(cx, r.is_pending()) {
            let secs = self.write_stall.limit().as_secs();
            return std::task::Poll::Ready(Err(std::io::Error::new(
                std::io::ErrorKind::TimedOut,
                format!("the client read nothing for {secs} s"),
            )));
        }
        r
    }
}

impl Drop for ResetOnFailure {
    fn drop(&mut self) {
        if self.failed.load(std::sync::atomic::Ordering::Relaxed) {
            self.counters.body_cut();
            let _ = socket2::SockRef::from(&self.stream).set_linger(Some(std::time::Duration::ZERO));
        }
    }
}

impl tokio::io::AsyncRead for ResetOnFailure {
    fn poll_read(
        mut self: std::pin::Pin<&mut Self>,
        cx: &mut std::task::Context<'_>,
        buf: &mut tokio::io::ReadBuf<'_>,
    ) -> std::task::Poll<std::io::Result<()>> {
        std::pin::Pin::new(&mut self.stream).poll_read(cx, buf)
    }
}

impl tokio::io::AsyncWrite for ResetOnFailure {
    fn poll_write(
        mut self: std::pin::Pin<&mut Self>,
        cx: &mut std::task::Context<'_>,
        buf: &[u8],
    ) -> std::task::Poll<std::io::Result<usize>> {
        let r = std::pin::Pin::new(&mut self.stream).poll_write(cx, buf);
        self.unless_stalled(cx, r)
    }
    fn poll_write_vectored(
        mut self: std::pin::Pin<&mut Self>,
        cx: &mut std::task::Context<'_>,
        bufs: &[std::io::IoSlice<'_>],
    ) -> std::task::Poll<std::io::Result<usize>> {
        let r = std::pin::Pin::new(&mut self.stream).poll_write_vectored(cx, bufs);
        self.unless_stalled(cx, r)
    }
    fn is_write_vectored(&self) -> bool {
        self.stream.is_write_vectored()
    }
    fn poll_flush(mut self: std::pin::Pin<&mut Self>, cx: &mut std::task::Context<'_>) -> std::task::Poll<std::io::Result<()>> {
        let r = std::pin::Pin::new(&mut self.stream).poll_flush(cx);
        self.unless_stalled(cx, r)
    }
    fn poll_shutdown(mut self: std::pin::Pin<&mut Self>, cx: &mut std::task::Context<'_>) -> std::task::Poll<std::io::Result<()>> {
        if self.failed.load(std::sync::atomic::Ordering::Relaxed) {
            // No FIN: the drop resets.
            return std::task::Poll::Ready(Ok(()));
        }
        std::pin::Pin::new(&mut self.stream).poll_shutdown(cx)
    }
}

/// A connection's byte stream, plain or TLS.
trait Io: tokio::io::AsyncRead + tokio::io::AsyncWrite + Unpin + Send {}
impl<T: tokio::io::AsyncRead + tokio::io::AsyncWrite + Unpin + Send> Io for T {}

/// The TLS session on `stream`, or why there is none (plain HTTP, answered; a failed handshake).
async fn handshake(certs: &crate::tls::Certificates, stream: ResetOnFailure) -> Result<Box<dyn Io>, String> {
    let mut first = [0u8; 1];
    match stream.stream.peek(&mut first).await {
        Ok(0) => return Err("closed before a request".into()),
        Ok(_) => {}
        Err(e) => return Err(e.to_string()),
    }
    // Read-buffered under TLS, so that rustls takes an upload's records from memory, not
    // from a syscall of a few KiB each (writes pass straight through).
    let stream = tokio::io::BufReader::with_capacity(64 << 10, stream);
    match crate::tls::accept(certs, first[0], stream).await {
        crate::tls::Accepted::Tls(s) => Ok(s),
        crate::tls::Accepted::Refused(why) => Err(why),
    }
}

/// Binds `cfg.listen` and serves S3 on it.
pub async fn start(cfg: S3Config) -> Result<S3Handle, String> {
    if cfg.keys.is_empty() {
        return Err("the gateway needs at least one access key".into());
    }
    let counters = crate::metrics::RequestMetrics::default();
    let mut client = Client::new(&cfg.coordinator);
    client.on_degraded_read = Some(counters.degraded_read_observer());
    let keys = crate::access::Keys::new(&cfg.keys, client.clone());
    let policies = crate::bucket_policy::Policies::new(client.clone());
    let gateway = Gateway {
        client,
        defaults: cfg.defaults,
        method: cfg.method,
        slice: cfg.slice,
        min_part: cfg.min_part,
        memory: std::sync::Arc::new(crate::memory_budget::MemoryBudget::new(cfg.memory_budget)),
        region: cfg.region.clone(),
        cors: Default::default(),
        versioning_states: Default::default(),
        keys: Some(keys.clone()),
        master_keys: cfg.master_keys.clone(),
        policies: Some(policies.clone()),
    };
    let (cors_cache, cors_client) = (gateway.cors.clone(), gateway.client.clone());
    let domains = Arc::new(crate::hosts::VirtualDomains(cfg.domains.clone()));
    let lifecycle_gateway = gateway.clone();
    let mut b = S3ServiceBuilder::new(gateway);
    b.set_auth(crate::access::KeyAuth(keys.clone()));
    b.set_access(crate::access::KeyAccess::new(keys, policies));
    if !cfg.domains.is_empty() {
        for d in &cfg.domains {
            if d.is_empty() || d.starts_with('.') || d.contains([':', '/']) {
                return Err(format!("'{d}' is not a domain name (e.g. s3.example.com)"));
            }
        }
        b.set_host(crate::hosts::VirtualDomains(cfg.domains.clone()));
    }
    let mut s3s_config = s3s::config::S3Config::default();
    s3s_config.post_object_max_file_size = MAX_POST_OBJECT;
    b.set_config(Arc::new(s3s::config::StaticConfigProvider::new(Arc::new(s3s_config))));
    let service = b.build();
    let (metrics_addr, metrics) = match &cfg.metrics_listen {
        Some(listen) => {
            let (a, t) = kintsugi_metrics::serve(listen, Arc::new(counters.registry())).await?;
            (Some(a), Some(t))
        }
        None => (None, None),
    };
    let tls = match &cfg.tls {
        Some(files) => Some(Arc::new(crate::tls::Certificates::new(files.clone()).map_err(|e| e.to_string())?)),
        None => None,
    };
    let listener = TcpListener::bind(&cfg.listen).await.map_err(|e| format!("S3 gateway cannot listen on {}: {e}", cfg.listen))?;
    let addr = listener.local_addr().map_err(|e| e.to_string())?;
    let (stop, mut stopped) = watch::channel(false);
    let lifecycle = tokio::spawn(crate::lifecycle_worker::run(lifecycle_gateway, cfg.lifecycle, counters.clone(), stopped.clone()));
    let slots = Arc::new(Semaphore::new(MAX_CONNECTIONS));
    let limits = cfg.limits;
    let addresses = crate::client_limits::Addresses::new(limits.connections_per_address);
    let region: Arc<str> = cfg.region.as_str().into();
    if tls.is_none() && !addr.ip().is_loopback() {
        tracing::warn!(
            "S3 gateway on {addr} speaks plain HTTP: keys' signatures and data cross the network in clear; give it a certificate"
        );
    }
    let certs = tls.clone();
    let secure = tls.is_some();
    let task = tokio::spawn(async move {
        let graceful = hyper_util::server::graceful::GracefulShutdown::new();
        loop {
            let permit = tokio::select! {
                p = slots.clone().acquire_owned() => p.expect("never closed"),
                _ = stopped.changed() => break,
            };
            let (stream, peer) = tokio::select! {
                r = listener.accept() => match r {
                    Ok(s) => s,
                    Err(e) => {
                        tracing::warn!("S3 gateway accept: {e}");
                        tokio::time::sleep(std::time::Duration::from_millis(100)).await;
                        continue;
                    }
                },
                _ = stopped.changed() => break,
            };
            let Some(slot) = addresses.admit(peer.ip()) else {
                tracing::debug!("S3 connection from {peer} refused: {} open from that address", limits.connections_per_address);
                continue;
            };
            let _ = stream.set_nodelay(true);
            let failed = Arc::new(std::sync::atomic::AtomicBool::new(false));
            let write_stall = crate::client_limits::StallTimer::new(limits.idle_timeout);
            let stream = ResetOnFailure { stream, failed: failed.clone(), counters: counters.clone(), write_stall };
            let first = Arc::new(tokio::sync::Notify::new());
            let first_seen = first.clone();
            let (service, counters, region) = (service.clone(), counters.clone(), region.clone());
            let (cors_cache, cors_client, domains) = (cors_cache.clone(), cors_client.clone(), domains.clone());
            // Each request counted, with its status and the time to its response's head.
            let counted = hyper::service::service_fn(move |req: hyper::Request<hyper::body::Incoming>| {
                let (service, counters, region) = (service.clone(), counters.clone(), region.clone());
                let (cors_cache, cors_client, domains) = (cors_cache.clone(), cors_client.clone(), domains.clone());
                first_seen.notify_one();
                async move {
                    let (method, started) = (req.method().clone(), std::time::Instant::now());
                    let bucket = || crate::hosts::bucket_of(&domains, req.headers(), req.uri());
                    let cors = crate::cors::Asked::of(req.headers(), &method, bucket());
                    let r = if method == http::Method::OPTIONS {
                        // A browser's preflight: answered from the bucket's CORS rules, unsigned.
                        Ok(crate::cors::preflight(&cors_cache, &cors_client, cors).await)
                    } else {
                        let (mut parts, body) = req.into_parts();
                        parts.extensions.insert(crate::access::Origin { ip: peer.ip(), secure });
                        let h1 = parts.version < http::Version::HTTP_2;
                        let withheld = h1 && crate::unread_body::continue_withheld(&parts, &body);
                        let (body, state) = crate::unread_body::Watched::new(body, limits.idle_timeout);
                        let req = http::Request::from_parts(parts, s3s::Body::http_body(body));
                        let mut r = match crate::region::signed_for(req.headers(), req.uri()).filter(|r| *r != *region) {
                            Some(asked) => Ok(crate::region::wrong_region(&asked, &region)),
                            None => service.call(req).await,
                        };
                        if state.timed_out.load(std::sync::atomic::Ordering::Relaxed) {
                            r = Ok(crate::client_limits::request_timeout(limits.idle_timeout));
                        }
                        if let (Ok(resp), true) = (&mut r, h1) {
                            crate::unread_body::close_if_unread(resp, &state.ended);
                            if withheld {
                                crate::unread_body::close(resp);
                            }
                        }
                        match (r, cors) {
                            (Ok(mut resp), Some(a)) => {
                                crate::cors::decorate(&cors_cache, &cors_client, &a, resp.headers_mut()).await;
                                Ok(resp)
                            }
                            (r, _) => r,
                        }
                    };
                    counters.record(method.as_str(), r.as_ref().map_or(0, |r| r.status().as_u16()), started.elapsed());
                    r
                }
            });
            let mut builder = ConnBuilder::new(TokioExecutor::new());
            builder.http1().timer(hyper_util::rt::TokioTimer::new()).header_read_timeout(limits.header_timeout);
            let watcher = graceful.watcher();
            let certs = certs.clone();
            tokio::spawn(crate::body::BODY_FAILED.scope(failed, async move {
                let io: Box<dyn Io> = match certs {
                    None => Box::new(stream),
                    Some(certs) => match tokio::time::timeout(limits.header_timeout, handshake(&certs, stream)).await {
                        Ok(Ok(s)) => s,
                        Ok(Err(why)) => {
                            tracing::debug!("S3 connection from {peer}: {why}");
                            return;
                        }
                        Err(_) => {
                            tracing::debug!("S3 connection from {peer}: no TLS handshake within {:?}; closed", limits.header_timeout);
                            return;
                        }
                    },
                };
                let conn = watcher.watch(builder.serve_connection(TokioIo::new(io), counted).into_owned());
                let mut conn = std::pin::pin!(conn);
                // The first request's head within the deadline (hyper's covers those after it,
                // but not the bytes it reads to tell HTTP/1 from HTTP/2).
                let begun = tokio::select! {
                    r = conn.as_mut() => Some(r),
                    _ = first.notified() => None,
                    _ = tokio::time::sleep(limits.header_timeout) => {
                        tracing::debug!("S3 connection from {peer}: no request within {:?}; closed", limits.header_timeout);
                        return;
                    }
                };
                let r = match begun {
                    Some(r) => r,
                    None => conn.await,
                };
                if let Err(e) = r {
                    tracing::debug!("S3 connection from {peer}: {e}");
                }
                drop((permit, slot));
            }));
        }
        // Stopped: no new connections; idle ones close now, requests in flight finish
        // (their responses say `Connection: close`) unless they outlast the deadline.
        drop(listener);
        let open = graceful.count();
        if open > 0 {
            tracing::info!("S3 gateway stopping: {open} connection(s) finish their requests");
        }
        if tokio::time::timeout(DRAIN_DEADLINE, graceful.shutdown()).await.is_err() {
            tracing::warn!("S3 gateway stopping: requests still running after {DRAIN_DEADLINE:?} are cut");
        }
        let _ = lifecycle.await;
    });
    tracing::info!("S3 gateway on {addr} for the cluster at {}", cfg.coordinator);
    Ok(S3Handle { addr, tls, stop, task, metrics_addr, metrics })
}
