//! A fault-injecting HTTP/1.1 proxy for the remote-store tests: it sits on loopback between a
//! reader and a loopback server (nginx, moto) and adds latency, caps bandwidth, answers a share
//! of requests with 503 `SlowDown`, resets connections mid-body, truncates bodies, delays a
//! share of answers a lot (for hedging), or plays a store that is down (hangs or refuses).
//!
//! Bounded: loopback only (both ends), at most [`MAX_CONNECTIONS`] connections at once, each
//! closed after [`CONNECTION_LIFETIME`], and everything stops when the [`Proxy`] is dropped (it
//! owns its runtime). Faults are drawn from a seeded hash of the request number, so a run is
//! repeatable.
#![allow(dead_code, unreachable_pub, missing_docs)]

use std::fmt::Write as _;
use std::net::SocketAddr;
use std::sync::Arc;
use std::sync::atomic::{AtomicU64, Ordering::Relaxed};
use std::time::Duration;

use tokio::io::{AsyncBufReadExt, AsyncReadExt, AsyncWriteExt, BufReader};
use tokio::net::{TcpListener, TcpStream};
use tokio::sync::Semaphore;

pub const MAX_CONNECTIONS: usize = 512;
pub const CONNECTION_LIFETIME: Duration = Duration::from_mins(2);
/// Largest request or response head accepted.
const MAX_HEAD: usize = 64 << 10;

/// How a proxied store behaves.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Mode {
    /// Forward, with the faults asked for.
    Up,
    /// Accept connections and requests, never answer.
    Hang,
    /// Answer every request with 503.
    Unavailable,
}

/// What to do to the traffic. Shares are fractions of requests (0.0–1.0).
#[derive(Debug, Clone, Copy)]
pub struct Faults {
    pub mode: Mode,
    /// Added before each answer.
    pub latency: Duration,
    /// Bytes per second per connection for answer bodies.
    pub bytes_per_sec: Option<u64>,
    /// Answered 503 `SlowDown` without reaching the server.
    pub unavailable_share: f64,
    /// Half the body, then a TCP reset.
    pub reset_share: f64,
    /// A short body: with a matching Content-Length for a 206, else half a body and a close.
    pub truncate_share: f64,
    /// Answered `slow_extra` late.
    pub slow_share: f64,
    pub slow_extra: Duration,
    pub seed: u64,
}

impl Default for Faults {
    fn default() -> Self {
        Self {
            mode: Mode::Up,
            latency: Duration::ZERO,
            bytes_per_sec: None,
            unavailable_share: 0.0,
            reset_share: 0.0,
            truncate_share: 0.0,
            slow_share: 0.0,
            slow_extra: Duration::ZERO,
            seed: 1,
        }
    }
}

/// What the proxy did.
#[derive(Debug, Default)]
pub struct Counts {
    pub requests: AtomicU64,
    pub unavailable: AtomicU64,
    pub resets: AtomicU64,
    pub truncations: AtomicU64,
    pub slowed: AtomicU64,
}

pub struct Proxy {
    addr: SocketAddr,
    counts: Arc<Counts>,
    runtime: Option<tokio::runtime::Runtime>,
}

impl Drop for Proxy {
    fn drop(&mut self) {
        if let Some(rt) = self.runtime.take() {
            rt.shutdown_background();
        }
    }
}

fn loopback_addr(url: &str) -> SocketAddr {
    let host = url.split("://").nth(1).unwrap_or(url).split('/').next().unwrap_or_default();
    let addr: SocketAddr = host.replace("localhost", "127.0.0.1").parse().unwrap_or_else(|e| panic!("{url}: {e}"));
    assert!(addr.ip().is_loopback(), "the proxy only forwards to loopback, not {addr}");
    addr
}

impl Proxy {
    /// A proxy on a free loopback port in front of `upstream` (`http://127.0.0.1:PORT`).
    pub fn start(upstream: &str, faults: Faults) -> Self {
        let upstream = loopback_addr(upstream);
        let runtime = tokio::runtime::Builder::new_multi_thread()
            .worker_threads(2)
            .thread_name("fault-proxy")
            .enable_all()
            .build()
            .expect("the proxy's runtime starts");
        let listener = runtime.block_on(TcpListener::bind("127.0.0.1:0")).expect("a loopback port");
        let addr = listener.local_addr().expect("bound");
        let counts = Arc::new(Counts::default());
        let c = counts.clone();
        runtime.spawn(async move {
            let slots = Arc::new(Semaphore::new(MAX_CONNECTIONS));
            let next = Arc::new(AtomicU64::new(0));
            loop {
                let Ok(permit) = slots.clone().acquire_owned().await else { return };
                let Ok((client, _)) = listener.accept().await else { continue };
                let (c, next) = (c.clone(), next.clone());
                tokio::spawn(async move {
                    let _permit = permit;
                    let _ = tokio::time::timeout(CONNECTION_LIFETIME, serve(client, upstream, faults, &c, &next)).await;
                });
            }
        });
        Self { addr, counts, runtime: Some(runtime) }
    }

    /// A loopback URL where nothing listens (a port bound and released).
    pub fn refused_url() -> String {
        let listener = std::net::TcpListener::bind("127.0.0.1:0").expect("a loopback port");
        let addr = listener.local_addr().expect("bound");
        drop(listener);
        format!("http://{addr}")
    }

    pub fn url(&self) -> String {
        format!("http://{}", self.addr)
    }

    pub fn counts(&self) -> &Counts {
        &self.counts
    }
}

/// A number in [0, 1) from the seed and the request number.
fn draw(seed: u64, n: u64, salt: u64) -> f64 {
    let mut z = seed ^ n.wrapping_mul(0x9E37_79B9_7F4A_7C15) ^ salt.wrapping_mul(0xD1B5_4A32_D192_ED03);
    z = (z ^ (z >> 30)).wrapping_mul(0xBF58_476D_1CE4_E5B9);
    z = (z ^ (z >> 27)).wrapping_mul(0x94D0_49BB_1331_11EB);
    z ^= z >> 31;
    (z >> 11) as f64 / (1u64 << 53) as f64
}

/// A parsed HTTP/1.1 head: the first line and the header lines.
struct Head {
    first: String,
    headers: Vec<(String, String)>,
}

impl Head {
    fn get(&self, name: &str) -> Option<&str> {
        self.headers.iter().find(|(k, _)| k.eq_ignore_ascii_case(name)).map(|(_, v)| v.as_str())
    }

    fn content_length(&self) -> Option<usize> {
        self.get("content-length").and_then(|v| v.trim().parse().ok())
    }

    fn chunked(&self) -> bool {
        self.get("transfer-encoding").is_some_and(|v| v.to_ascii_lowercase().contains("chunked"))
    }

    /// The head with a new Content-Length and connection header, framing headers replaced.
    fn encode(&self, content_length: Option<usize>, close: bool) -> Vec<u8> {
        let mut out = format!("{}\r\n", self.first);
        for (k, v) in &self.headers {
            let lower = k.to_ascii_lowercase();
            if !matches!(lower.as_str(), "content-length" | "transfer-encoding" | "connection" | "keep-alive") {
                let _ = write!(out, "{k}: {v}\r\n");
            }
        }
        if let Some(n) = content_length {
            let _ = write!(out, "content-length: {n}\r\n");
        }
        out.push_str(if close { "connection: close\r\n\r\n" } else { "connection: keep-alive\r\n\r\n" });
        out.into_bytes()
    }
}

async fn read_head<R: tokio::io::AsyncBufRead + Unpin>(r: &mut R) -> Option<Head> {
    let mut first = String::new();
    if r.read_line(&mut first).await.ok()? == 0 {
        return None;
    }
    let mut headers = Vec::new();
    let mut total = first.len();
    loop {
        let mut line = String::new();
        let n = r.read_line(&mut line).await.ok()?;
        total += n;
        if n == 0 || total > MAX_HEAD {
            return None;
        }
        let line = line.trim_end_matches(['\r', '\n']);
        if line.is_empty() {
            break;
        }
        let (k, v) = line.split_once(':')?;
        headers.push((k.trim().to_owned(), v.trim().to_owned()));
    }
    Some(Head { first: first.trim_end_matches(['\r', '\n']).to_owned(), headers })
}

/// A response body: by Content-Length, chunked (de-chunked here), or up to the close.
async fn read_body<R: tokio::io::AsyncBufRead + Unpin>(
    r: &mut R,
    head: &Head,
    no_body: bool,
) -> Option<(Vec<u8>, bool)> {
    if no_body {
        return Some((Vec::new(), false));
    }
    if head.chunked() {
        let mut body = Vec::new();
        loop {
            let mut line = String::new();
            r.read_line(&mut line).await.ok()?;
            let size = usize::from_str_radix(line.trim().split(';').next()?, 16).ok()?;
            if size == 0 {
                // Trailers, up to the empty line.
                loop {
                    let mut t = String::new();
                    if r.read_line(&mut t).await.ok()? == 0 || t.trim().is_empty() {
                        return Some((body, false));
                    }
                }
            }
            let start = body.len();
            body.resize(start + size, 0);
            r.read_exact(&mut body[start..]).await.ok()?;
            let mut crlf = [0u8; 2];
            r.read_exact(&mut crlf).await.ok()?;
        }
    }
    if let Some(n) = head.content_length() {
        let mut body = vec![0u8; n];
        r.read_exact(&mut body).await.ok()?;
        return Some((body, false));
    }
    let mut body = Vec::new();
    r.read_to_end(&mut body).await.ok()?;
    Some((body, true))
}

async fn write_paced(w: &mut TcpStream, bytes: &[u8], bytes_per_sec: Option<u64>) -> std::io::Result<()> {
    let Some(rate) = bytes_per_sec else { return w.write_all(bytes).await };
    for piece in bytes.chunks(16 << 10) {
        w.write_all(piece).await?;
        tokio::time::sleep(Duration::from_secs_f64(piece.len() as f64 / rate.max(1) as f64)).await;
    }
    Ok(())
}

const SLOW_DOWN: &str = "<?xml version=\"1.0\" encoding=\"UTF-8\"?><Error><Code>SlowDown</Code><Message>Please reduce your request rate.</Message></Error>";

async fn unavailable(w: &mut TcpStream) -> std::io::Result<()> {
    let head = format!(
        "HTTP/1.1 503 Service Unavailable\r\ncontent-type: application/xml\r\ncontent-length: {}\r\nconnection: keep-alive\r\n\r\n",
        SLOW_DOWN.len()
    );
    w.write_all(head.as_bytes()).await?;
    w.write_all(SLOW_DOWN.as_bytes()).await
}

/// Send `request` upstream over the kept connection (a new one if there is none or the kept one
/// was closed by the server) and read the answer's head; the body is left to read.
async fn forward_head(server: &mut Option<BufReader<TcpStream>>, upstream: SocketAddr, request: &[u8]) -> Option<Head> {
    for _ in 0..2 {
        if server.is_none() {
            *server = Some(BufReader::new(TcpStream::connect(upstream).await.ok()?));
        }
        let s = server.as_mut()?;
        if s.get_mut().write_all(request).await.is_err() {
            *server = None;
            continue;
        }
        let Some(head) = read_head(s).await else {
            *server = None;
            continue;
        };
        return Some(head);
    }
    None
}

/// Whether an answer with this head has no body.
fn without_body(head: &Head, is_head: bool) -> bool {
    let status = head.first.split_whitespace().nth(1).unwrap_or_default();
    is_head || status == "204" || status == "304" || status.starts_with('1')
}

/// Whether the upstream connection must be dropped after this answer.
fn closes(head: &Head) -> bool {
    head.get("connection").is_some_and(|v| v.eq_ignore_ascii_case("close"))
}

/// Copy `len` body bytes from the server to the client as they arrive, paced to
/// `bytes_per_sec` when set (a store streams its answers; it does not hold them back whole).
async fn stream_body(
    server: &mut BufReader<TcpStream>,
    w: &mut TcpStream,
    len: usize,
    bytes_per_sec: Option<u64>,
) -> std::io::Result<()> {
    let mut piece = vec![0u8; 64 << 10];
    let mut left = len;
    while left > 0 {
        let n = server.read(&mut piece[..left.min(64 << 10)]).await?;
        if n == 0 {
            return Err(std::io::ErrorKind::UnexpectedEof.into());
        }
        write_paced(w, &piece[..n], bytes_per_sec).await?;
        left -= n;
    }
    Ok(())
}

/// Serve one client connection: its requests one after another (keep-alive), forwarded over
/// one upstream connection (reopened when the server closes it); answers re-framed with a
/// Content-Length.
async fn serve(client: TcpStream, upstream: SocketAddr, f: Faults, counts: &Counts, next: &AtomicU64) {
    let _ = client.set_nodelay(true);
    let mut client = BufReader::new(client);
    let mut server: Option<BufReader<TcpStream>> = None;
    loop {
        let Some(request) = read_head(&mut client).await else { return };
        let mut body = vec![0u8; request.content_length().unwrap_or(0)];
        if client.read_exact(&mut body).await.is_err() {
            return;
        }
        let n = next.fetch_add(1, Relaxed);
        counts.requests.fetch_add(1, Relaxed);
        let w = client.get_mut();
        match f.mode {
            Mode::Hang => {
                tokio::time::sleep(CONNECTION_LIFETIME).await;
                return;
            }
            Mode::Unavailable => {
                counts.unavailable.fetch_add(1, Relaxed);
                if unavailable(w).await.is_err() {
                    return;
                }
                continue;
            }
            Mode::Up => {}
        }
        if draw(f.seed, n, 1) < f.unavailable_share {
            counts.unavailable.fetch_add(1, Relaxed);
            if unavailable(w).await.is_err() {
                return;
            }
            continue;
        }
        let is_head = request.first.starts_with("HEAD ");
        let mut raw = request.encode(request.content_length(), false);
        raw.extend_from_slice(&body);
        let Some(head) = forward_head(&mut server, upstream, &raw).await else { return };
        let mut latency = f.latency;
        if draw(f.seed, n, 2) < f.slow_share {
            counts.slowed.fetch_add(1, Relaxed);
            latency += f.slow_extra;
        }
        let no_body = without_body(&head, is_head);
        // An answer of known length that no fault cuts is streamed: the latency is the time to
        // its first byte, and its body flows through as the server sends it.
        let known = if no_body || head.chunked() { None } else { head.content_length() };
        let cut_known = known.is_some_and(|len| len > 1);
        let resets = cut_known && draw(f.seed, n, 3) < f.reset_share;
        let truncates = cut_known && !resets && draw(f.seed, n, 4) < f.truncate_share;
        if let Some(len) = known.filter(|_| !resets && !truncates) {
            tokio::time::sleep(latency).await;
            let Some(s) = server.as_mut() else { return };
            let w = client.get_mut();
            if w.write_all(&head.encode(Some(len), false)).await.is_err()
                || stream_body(s, w, len, f.bytes_per_sec).await.is_err()
            {
                return;
            }
            if closes(&head) {
                server = None;
            }
            continue;
        }
        let Some(s) = server.as_mut() else { return };
        let Some((body, closed)) = read_body(s, &head, no_body).await else { return };
        if closed || closes(&head) {
            server = None;
        }
        tokio::time::sleep(latency).await;
        if !answer_whole(client.get_mut(), &head, &body, is_head, &f, n, counts).await {
            return;
        }
    }
}

/// Send an answer read whole, cut by the reset or truncation faults drawn for request `n`;
/// `false` when the client connection is done (reset, closed or broken).
async fn answer_whole(
    w: &mut TcpStream,
    head: &Head,
    body: &[u8],
    is_head: bool,
    f: &Faults,
    n: u64,
    counts: &Counts,
) -> bool {
    let length = if is_head { head.content_length() } else { Some(body.len()) };
    let cut = !is_head && body.len() > 1;
    if cut && draw(f.seed, n, 3) < f.reset_share {
        counts.resets.fetch_add(1, Relaxed);
        let _ = w.write_all(&head.encode(length, false)).await;
        let _ = w.write_all(&body[..body.len() / 2]).await;
        let _ = w.flush().await;
        // A reset, not a close: the client sees ECONNRESET mid-body.
        let _ = w.set_zero_linger();
        return false;
    }
    if cut && draw(f.seed, n, 4) < f.truncate_share {
        counts.truncations.fetch_add(1, Relaxed);
        let half = body.len() / 2;
        if head.first.split_whitespace().nth(1) == Some("206") {
            // A well-framed answer that is simply short.
            return w.write_all(&head.encode(Some(half), false)).await.is_ok()
                && w.write_all(&body[..half]).await.is_ok();
        }
        // Half the promised body, then a clean close.
        let _ = w.write_all(&head.encode(length, true)).await;
        let _ = w.write_all(&body[..half]).await;
        let _ = w.shutdown().await;
        return false;
    }
    w.write_all(&head.encode(length, false)).await.is_ok() && write_paced(w, body, f.bytes_per_sec).await.is_ok()
}
