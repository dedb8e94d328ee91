//! Opening stores by URL: local files (the embedded default) and, through opendal, `s3://`,
//! `gs://`, `az://`, `http(s)://` and `memory://`.

use std::collections::hash_map::DefaultHasher;
use std::hash::{Hash, Hasher};
use std::path::PathBuf;
use std::sync::{Arc, Mutex};
use std::time::Duration;

use opendal::Operator;
use zarrs_storage::byte_range::{ByteRange, ByteRangeIterator, InvalidByteRangeError};
use zarrs_storage::{
    Bytes, ListableStorageTraits, MaybeBytes, MaybeBytesIterator, ReadableListableStorage, ReadableStorageTraits,
    StorageError, StoreKey, StoreKeys, StoreKeysPrefixes, StorePrefix,
};

use crate::error::{Error, Result};
use crate::remote::{Policy, Remote, StoreStats};

/// How to reach a remote store, and how hard to try. Every field has a documented default
/// (`None` means the default); build with `StoreOptions::default().with_*(…)`.
///
/// Credentials and endpoints fall back to the usual environment variables (`AWS_ENDPOINT_URL`,
/// `AWS_REGION`, `AWS_ACCESS_KEY_ID`, `AWS_SECRET_ACCESS_KEY`, `AWS_SESSION_TOKEN`,
/// `GOOGLE_APPLICATION_CREDENTIALS`, `AZURE_STORAGE_ACCOUNT`, `AZURE_STORAGE_KEY`) and then to
/// the service's defaults. The fault and concurrency options apply to remote stores only; a
/// local store is read directly by the decoding threads.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
#[non_exhaustive]
pub struct StoreOptions {
    /// The service endpoint (an S3-compatible server, a GCS emulator, an Azure account URL).
    pub endpoint: Option<String>,
    /// The region (S3). Defaults to `AWS_REGION`, then `us-east-1`.
    pub region: Option<String>,
    /// Access key id (S3) or account name (Azure).
    pub access_key_id: Option<String>,
    /// Secret access key (S3) or account key (Azure).
    pub secret_access_key: Option<String>,
    /// Send unsigned requests (public buckets).
    pub anonymous: bool,
    /// How many times a request that failed in a way that may pass (throttling such as 503
    /// `SlowDown` or 429, other 5xx, a timeout, a reset connection, a short body) is repeated,
    /// with exponential backoff and full jitter. Default [`StoreOptions::DEFAULT_RETRIES`].
    pub retries: Option<usize>,
    /// Time one request may take, to its last byte. Default
    /// [`StoreOptions::DEFAULT_REQUEST_TIMEOUT`].
    pub request_timeout: Option<Duration>,
    /// Time one read may take with all its retries, from its first request: a store that stays
    /// down gives an error naming its URL by then. Default [`StoreOptions::DEFAULT_DEADLINE`].
    pub deadline: Option<Duration>,
    /// The first retry waits up to this long; each later one up to twice as long as the one
    /// before, capped by `backoff_max`. Default [`StoreOptions::DEFAULT_BACKOFF_BASE`].
    pub backoff_base: Option<Duration>,
    /// The longest wait between retries. Default [`StoreOptions::DEFAULT_BACKOFF_MAX`].
    pub backoff_max: Option<Duration>,
    /// Hedged reads: a request still unanswered after the store's observed p95 latency is sent
    /// again (when a request slot is free) and the first answer wins. Default off.
    pub hedge: bool,
    /// Requests in flight to this store at once, over every reader and batch using it. Default
    /// [`StoreOptions::DEFAULT_MAX_REQUESTS_IN_FLIGHT`].
    pub max_requests_in_flight: Option<usize>,
    /// Bytes of reads in flight to this store at once (asked for and not yet decoded), over
    /// every reader and batch using it; bounds the memory a slow decoder lets pile up. Default
    /// [`StoreOptions::DEFAULT_MAX_BYTES_IN_FLIGHT`].
    pub max_bytes_in_flight: Option<u64>,
    /// How byte ranges of one object are merged into reads. Default: the store kind's policy
    /// ([`StoreKind::coalescing`]). A reader's own caps ([`crate::ReaderConfig::with_coalescing`]),
    /// when set, take precedence.
    pub coalescing: Option<Coalescing>,
}

impl StoreOptions {
    /// Retries of a failed remote request before the read is reported.
    pub const DEFAULT_RETRIES: usize = 8;
    /// Time one request may take.
    pub const DEFAULT_REQUEST_TIMEOUT: Duration = Duration::from_secs(10);
    /// Time one read may take, retries included.
    pub const DEFAULT_DEADLINE: Duration = Duration::from_mins(1);
    /// The first retry's longest wait.
    pub const DEFAULT_BACKOFF_BASE: Duration = Duration::from_millis(50);
    /// The longest wait between retries.
    pub const DEFAULT_BACKOFF_MAX: Duration = Duration::from_secs(5);
    /// Requests in flight to one store.
    pub const DEFAULT_MAX_REQUESTS_IN_FLIGHT: usize = 128;
    /// Bytes in flight from one store (256 MiB).
    pub const DEFAULT_MAX_BYTES_IN_FLIGHT: u64 = 256 << 20;

    /// Set the endpoint.
    #[must_use]
    pub fn with_endpoint(mut self, endpoint: impl Into<String>) -> Self {
        self.endpoint = Some(endpoint.into());
        self
    }

    /// Set the region.
    #[must_use]
    pub fn with_region(mut self, region: impl Into<String>) -> Self {
        self.region = Some(region.into());
        self
    }

    /// Set explicit credentials.
    #[must_use]
    pub fn with_credentials(mut self, key_id: impl Into<String>, secret: impl Into<String>) -> Self {
        self.access_key_id = Some(key_id.into());
        self.secret_access_key = Some(secret.into());
        self
    }

    /// Send unsigned requests.
    #[must_use]
    pub fn with_anonymous(mut self, anonymous: bool) -> Self {
        self.anonymous = anonymous;
        self
    }

    /// Set how many times a failed request is retried.
    #[must_use]
    pub fn with_retries(mut self, retries: usize) -> Self {
        self.retries = Some(retries);
        self
    }

    /// Set the per-request timeout.
    #[must_use]
    pub fn with_request_timeout(mut self, timeout: Duration) -> Self {
        self.request_timeout = Some(timeout);
        self
    }

    /// Set the deadline of one read, retries included.
    #[must_use]
    pub fn with_deadline(mut self, deadline: Duration) -> Self {
        self.deadline = Some(deadline);
        self
    }

    /// Set the backoff between retries: the first wait's cap and the longest wait.
    #[must_use]
    pub fn with_backoff(mut self, base: Duration, max: Duration) -> Self {
        self.backoff_base = Some(base);
        self.backoff_max = Some(max);
        self
    }

    /// Turn hedged reads on or off.
    #[must_use]
    pub fn with_hedge(mut self, hedge: bool) -> Self {
        self.hedge = hedge;
        self
    }

    /// Set the requests in flight to the store.
    #[must_use]
    pub fn with_max_requests_in_flight(mut self, n: usize) -> Self {
        self.max_requests_in_flight = Some(n);
        self
    }

    /// Set the bytes in flight from the store.
    #[must_use]
    pub fn with_max_bytes_in_flight(mut self, bytes: u64) -> Self {
        self.max_bytes_in_flight = Some(bytes);
        self
    }

    /// Set the coalescing policy.
    #[must_use]
    pub fn with_coalescing(mut self, coalescing: Coalescing) -> Self {
        self.coalescing = Some(coalescing);
        self
    }

    /// The fault and concurrency policy these options give, checked.
    fn policy(&self, url: &str) -> Result<Policy> {
        let policy = Policy {
            retries: self.retries.unwrap_or(Self::DEFAULT_RETRIES),
            request_timeout: self.request_timeout.unwrap_or(Self::DEFAULT_REQUEST_TIMEOUT),
            deadline: self.deadline.unwrap_or(Self::DEFAULT_DEADLINE),
            backoff_base: self.backoff_base.unwrap_or(Self::DEFAULT_BACKOFF_BASE),
            backoff_max: self.backoff_max.unwrap_or(Self::DEFAULT_BACKOFF_MAX),
            hedge: self.hedge,
            max_requests: self.max_requests_in_flight.unwrap_or(Self::DEFAULT_MAX_REQUESTS_IN_FLIGHT),
            max_bytes: self.max_bytes_in_flight.unwrap_or(Self::DEFAULT_MAX_BYTES_IN_FLIGHT),
        };
        let bad = |what: &str| Err(Error::invalid(format!("store options for {url:?}: {what}")));
        if policy.request_timeout.is_zero() || policy.deadline.is_zero() {
            return bad("request_timeout and deadline must be above zero");
        }
        if policy.max_requests == 0 {
            return bad("max_requests_in_flight is 0; use at least 1");
        }
        if policy.max_bytes < 1 << 20 {
            return bad("max_bytes_in_flight is below 1 MiB; use at least 1 MiB");
        }
        if policy.backoff_base > policy.backoff_max {
            return bad("backoff_base is above backoff_max");
        }
        if let Some(c) = &self.coalescing
            && c.max_size == 0
        {
            return bad("coalescing max_size is 0; use at least 1 byte");
        }
        Ok(policy)
    }
}

/// How byte ranges of one object merge into reads: two ranges merge when the gap between them
/// is at most `max_gap` bytes, and a merged read never grows beyond `max_size` bytes (a single
/// range larger than that is read as it is). So a read never holds more than `max_gap` unwanted
/// bytes between two wanted ranges.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
#[non_exhaustive]
pub struct Coalescing {
    /// The largest gap merged.
    pub max_gap: u64,
    /// The largest merged read.
    pub max_size: u64,
}

impl Coalescing {
    /// A policy with these caps.
    #[must_use]
    pub fn new(max_gap: u64, max_size: u64) -> Self {
        Self { max_gap, max_size }
    }
}

/// What kind of store a URL names.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
#[non_exhaustive]
pub enum StoreKind {
    /// A local folder (a plain path or `file://`).
    Local,
    /// Amazon S3 or an S3-compatible server (`s3://bucket/prefix`).
    S3,
    /// Google Cloud Storage (`gs://bucket/prefix`).
    Gcs,
    /// Azure Blob Storage (`az://container/prefix`).
    Azure,
    /// Plain HTTP(S) with range requests (`http://host/prefix`).
    Http,
    /// An in-process memory store (`memory://`), for tests.
    Memory,
}

impl StoreKind {
    /// The coalescing policy of this kind of store, from what one request costs there. Local
    /// files and memory: gaps up to 64 KiB, reads up to 16 MiB (a request costs a system call).
    /// HTTP and object stores: gaps up to 256 KiB, reads up to 8 MiB (a request costs a round
    /// trip of milliseconds, worth a few hundred KiB at the bandwidth of one connection; reads
    /// stay small enough that a batch still spreads over many connections).
    #[must_use]
    pub fn coalescing(self) -> Coalescing {
        match self {
            Self::Local | Self::Memory => Coalescing::new(64 << 10, 16 << 20),
            Self::S3 | Self::Gcs | Self::Azure | Self::Http => Coalescing::new(256 << 10, 8 << 20),
        }
    }
}

/// An open store: a synchronous zarrs storage handle (metadata, listing), the async requests
/// of a remote store (bulk reads, shard indexes) under its limits and fault policy, and a
/// stable identity for cache keys. Cheap to clone; clones share the HTTP connections, the
/// in-flight limits and the counters.
#[derive(Clone)]
pub struct Store {
    inner: Arc<StoreInner>,
}

struct StoreInner {
    url: String,
    kind: StoreKind,
    id: u64,
    storage: ReadableListableStorage,
    remote: Option<Arc<Remote>>,
    local_root: Option<PathBuf>,
    coalescing: Coalescing,
}

impl std::fmt::Debug for Store {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("Store").field("url", &self.inner.url).field("kind", &self.inner.kind).finish_non_exhaustive()
    }
}

impl Store {
    /// Open the store a URL names. Local paths must exist; remote stores are opened lazily
    /// (the first read reports a missing bucket). Works from plain threads and from inside a
    /// tokio runtime.
    pub fn open(url: &str, options: &StoreOptions) -> Result<Self> {
        let (kind, rest) = split_scheme(url)?;
        let policy = options.policy(url)?;
        let mut local_root = None;
        let mut remote = None;
        let storage: ReadableListableStorage = if kind == StoreKind::Local {
            let path = PathBuf::from(rest);
            if !path.is_dir() {
                return Err(Error::NotFound(format!("no folder at {} (store URL {url:?})", path.display())));
            }
            local_root = Some(path.clone());
            let store = zarrs::filesystem::FilesystemStore::new(&path)
                .map_err(|e| Error::invalid(format!("cannot open {}: {e}", path.display())))?;
            Arc::new(store)
        } else {
            // Registers opendal's default HTTP transport (reqwest, rustls) once per process.
            opendal::install_default();
            let operator = build_operator(kind, url, rest, options, &policy)?;
            // Errors name the store and, where one was given, the endpoint it is reached at.
            let name = match (&options.endpoint, kind) {
                (Some(ep), StoreKind::S3 | StoreKind::Gcs | StoreKind::Azure) => format!("{url} at {ep}"),
                _ => url.to_owned(),
            };
            let r = Arc::new(Remote::new(operator, &name, policy));
            remote = Some(r.clone());
            Arc::new(OpendalStorage { remote: r })
        };
        let mut hasher = DefaultHasher::new();
        url.trim_end_matches('/').hash(&mut hasher);
        let coalescing = options.coalescing.unwrap_or_else(|| kind.coalescing());
        let inner =
            StoreInner { url: url.to_owned(), kind, id: hasher.finish(), storage, remote, local_root, coalescing };
        Ok(Self { inner: Arc::new(inner) })
    }

    /// Wrap an existing zarrs storage handle (a store the caller built itself); reads go
    /// through its synchronous interface.
    #[must_use]
    pub fn from_storage(name: &str, storage: ReadableListableStorage) -> Self {
        let mut hasher = DefaultHasher::new();
        (name, Arc::as_ptr(&storage).cast::<()>() as usize).hash(&mut hasher);
        let inner = StoreInner {
            url: name.to_owned(),
            kind: StoreKind::Memory,
            id: hasher.finish(),
            storage,
            remote: None,
            local_root: None,
            coalescing: StoreKind::Memory.coalescing(),
        };
        Self { inner: Arc::new(inner) }
    }

    /// Wrap a zarrs storage handle that can only read (no listing), such as the storage of a
    /// `zarrs::array::Array` opened by the caller: the array's own store, used as it is. Reads go
    /// through its synchronous interface; listing it is an error naming the store.
    #[must_use]
    pub fn from_readable(name: &str, storage: Arc<dyn ReadableStorageTraits>) -> Self {
        Self::from_storage(name, Arc::new(Unlisted { name: name.to_owned(), storage }))
    }

    /// Wrap a zarrs async storage handle (e.g. `zarrs_opendal`'s `AsyncOpendalStore`) for the
    /// synchronous engine: each read blocks the engine thread that issued it on the store's
    /// future, with damacy's I/O runtime entered (so tokio-based stores find a reactor). Call the
    /// engine from a thread of its own (the `_async` entry points do), never on an async worker.
    #[must_use]
    pub fn from_async_readable(name: &str, storage: Arc<dyn zarrs_storage::AsyncReadableStorageTraits>) -> Self {
        use zarrs_storage::storage_adapter::async_to_sync::AsyncToSyncStorageAdapter;
        Self::from_readable(name, Arc::new(AsyncToSyncStorageAdapter::new(storage, EngineBlockOn)))
    }

    /// The URL the store was opened with.
    #[must_use]
    pub fn url(&self) -> &str {
        &self.inner.url
    }

    /// What kind of store this is.
    #[must_use]
    pub fn kind(&self) -> StoreKind {
        self.inner.kind
    }

    /// A stable identity (a hash of the URL), used in cache keys.
    #[must_use]
    pub fn id(&self) -> u64 {
        self.inner.id
    }

    /// The zarrs storage handle.
    #[must_use]
    pub fn storage(&self) -> &ReadableListableStorage {
        &self.inner.storage
    }

    /// The requests of a remote store (`None` for local and caller-built stores).
    pub(crate) fn remote(&self) -> Option<&Arc<Remote>> {
        self.inner.remote.as_ref()
    }

    /// How this store merges byte ranges into reads (its options' policy, else its kind's).
    #[must_use]
    pub fn coalescing(&self) -> Coalescing {
        self.inner.coalescing
    }

    /// What a remote store has done so far (requests, bytes, retries, timeouts, hedges,
    /// in-flight high-water marks, latency percentiles), over every reader using it; `None`
    /// for local and caller-built stores, which are read directly.
    #[must_use]
    pub fn stats(&self) -> Option<StoreStats> {
        self.inner.remote.as_ref().map(|r| r.stats())
    }

    /// The local folder, for a local store.
    #[must_use]
    pub fn local_root(&self) -> Option<&std::path::Path> {
        self.inner.local_root.as_deref()
    }
}

fn split_scheme(url: &str) -> Result<(StoreKind, &str)> {
    let Some((scheme, rest)) = url.split_once("://") else {
        return Ok((StoreKind::Local, url));
    };
    let kind = match scheme.to_ascii_lowercase().as_str() {
        "file" => StoreKind::Local,
        "s3" | "s3a" => StoreKind::S3,
        "gs" | "gcs" => StoreKind::Gcs,
        "az" | "abfs" | "azure" => StoreKind::Azure,
        "http" | "https" => StoreKind::Http,
        "memory" => StoreKind::Memory,
        other => {
            return Err(Error::invalid(format!(
                "unsupported store scheme {other:?} in {url:?}: use a path, file://, s3://, gs://, az://, http(s):// or memory://"
            )));
        }
    };
    Ok((kind, rest))
}

fn env(name: &str) -> Option<String> {
    std::env::var(name).ok().filter(|v| !v.is_empty())
}

/// Split `bucket/some/prefix` into the bucket and an opendal root (`/some/prefix/`).
fn bucket_and_root<'a>(url: &str, rest: &'a str) -> Result<(&'a str, String)> {
    let (bucket, prefix) = rest.split_once('/').unwrap_or((rest, ""));
    if bucket.is_empty() {
        return Err(Error::invalid(format!("no bucket or container in store URL {url:?}")));
    }
    Ok((bucket, format!("/{}", prefix.trim_matches('/'))))
}

fn build_operator(kind: StoreKind, url: &str, rest: &str, options: &StoreOptions, policy: &Policy) -> Result<Operator> {
    use opendal::services;
    let op_err = |e: opendal::Error| Error::invalid(format!("cannot configure store {url:?}: {e}"));
    let operator = match kind {
        StoreKind::S3 => {
            let (bucket, root) = bucket_and_root(url, rest)?;
            let mut b = services::S3::default().bucket(bucket).root(&root);
            let region = options.region.clone().or_else(|| env("AWS_REGION")).or_else(|| env("AWS_DEFAULT_REGION"));
            b = b.region(region.as_deref().unwrap_or("us-east-1"));
            if let Some(ep) =
                options.endpoint.clone().or_else(|| env("AWS_ENDPOINT_URL_S3")).or_else(|| env("AWS_ENDPOINT_URL"))
            {
                b = b.endpoint(&ep);
            }
            if let (Some(k), Some(s)) = (&options.access_key_id, &options.secret_access_key) {
                b = b.access_key_id(k).secret_access_key(s);
            }
            if options.anonymous {
                b = b.skip_signature().disable_ec2_metadata();
            }
            Operator::new(b).map_err(op_err)?
        }
        StoreKind::Gcs => {
            let (bucket, root) = bucket_and_root(url, rest)?;
            let mut b = services::Gcs::default().bucket(bucket).root(&root);
            if let Some(ep) = &options.endpoint {
                b = b.endpoint(ep);
            }
            if let Some(path) = env("GOOGLE_APPLICATION_CREDENTIALS") {
                b = b.credential_path(&path);
            }
            if options.anonymous {
                b = b.skip_signature().disable_vm_metadata();
            }
            Operator::new(b).map_err(op_err)?
        }
        StoreKind::Azure => {
            let (container, root) = bucket_and_root(url, rest)?;
            let mut b = services::Azblob::default().container(container).root(&root);
            let account = options.access_key_id.clone().or_else(|| env("AZURE_STORAGE_ACCOUNT"));
            if let Some(ep) = options
                .endpoint
                .clone()
                .or_else(|| account.as_ref().map(|a| format!("https://{a}.blob.core.windows.net")))
            {
                b = b.endpoint(&ep);
            }
            if let Some(a) = &account {
                b = b.account_name(a);
            }
            if let Some(k) = options.secret_access_key.clone().or_else(|| env("AZURE_STORAGE_KEY")) {
                b = b.account_key(&k);
            }
            if options.anonymous {
                b = b.skip_signature();
            }
            Operator::new(b).map_err(op_err)?
        }
        StoreKind::Http => {
            // Endpoint is scheme://host[:port]; the path is the root.
            let scheme_end = url.find("://").map_or(0, |i| i + 3);
            let after = &url[scheme_end..];
            let (host, path) = after.split_once('/').unwrap_or((after, ""));
            let endpoint = format!("{}{host}", &url[..scheme_end]);
            let b = services::Http::default().endpoint(&endpoint).root(&format!("/{}", path.trim_matches('/')));
            Operator::new(b).map_err(op_err)?
        }
        StoreKind::Memory => Operator::new(services::Memory::default()).map_err(op_err)?,
        StoreKind::Local => return Err(Error::invalid(format!("{url:?} is a local path, not a remote store"))),
    };
    // Each store has an HTTP client of its own instead of opendal's process-wide one: its
    // pooled connections belong to this process's I/O runtime, so a child forked after the
    // parent read something opens stores whose connections work. Connections are kept alive
    // and reused (up to the store's request limit idle per host). Retries, timeouts and
    // hedging are [`Remote`]'s, so that each is counted.
    let client = reqwest::Client::builder()
        .pool_max_idle_per_host(policy.max_requests)
        .pool_idle_timeout(Duration::from_secs(90))
        .connect_timeout(policy.request_timeout)
        .tcp_nodelay(true)
        .build()
        .map_err(|e| Error::invalid(format!("cannot build the HTTP client for {url:?}: {e}")))?;
    let transport = opendal::HttpTransporter::new(opendal_http_transport_reqwest::ReqwestTransport::new(client));
    Ok(operator.with_context(opendal::OperationContext::new().with_http_transport(transport)))
}

/// Threads of the process's I/O runtime: `DAMACY_IO_RUNTIME_THREADS` when set to a positive
/// number, else one per four CPUs, 1 to 8. Every request in flight is a task, not a thread, so
/// few are needed: one thread received 2 GB/s over loopback HTTP while the decode threads kept the
/// other core busy, and on 2 cores a second one cost 7–22 % more CPU per batch in hand-offs
/// between threads (CHANGELOG, `benches/results/remote.md`).
fn io_runtime_threads(env_value: Option<&str>, cpus: usize) -> usize {
    match env_value.and_then(|v| v.trim().parse::<usize>().ok()) {
        Some(n) if n > 0 => n,
        _ => (cpus / 4).clamp(1, 8),
    }
}

/// The process's I/O runtime, started on first use in each process (a child forked after the
/// parent started one gets its own); failing to start it is an error, not a panic.
pub(crate) fn runtime() -> Result<&'static tokio::runtime::Runtime> {
    static RUNTIME: Mutex<Option<(u32, &'static tokio::runtime::Runtime)>> = Mutex::new(None);
    let pid = std::process::id();
    let mut slot = RUNTIME.lock().map_err(|_| Error::invalid("the I/O runtime lock is poisoned"))?;
    if let Some((owner, rt)) = *slot
        && owner == pid
    {
        return Ok(rt);
    }
    let rt = tokio::runtime::Builder::new_multi_thread()
        .worker_threads(io_runtime_threads(
            env("DAMACY_IO_RUNTIME_THREADS").as_deref(),
            std::thread::available_parallelism().map_or(1, std::num::NonZero::get),
        ))
        .thread_name("damacy-io")
        .enable_all()
        .build()
        .map_err(|e| Error::invalid(format!("cannot start the I/O runtime for remote stores: {e}")))?;
    // A runtime inherited from the parent of a fork has no threads here; it is left alone
    // (dropping it could wait on threads that do not exist), and this process gets its own.
    let rt: &'static tokio::runtime::Runtime = Box::leak(Box::new(rt));
    *slot = Some((pid, rt));
    Ok(rt)
}

/// Run a future to completion on the calling thread, with the I/O runtime's reactor and timers.
/// Never calls `Runtime::block_on`, so it works from plain threads and from threads of any
/// tokio runtime (an async caller should use the `_async` entry points, which do not block
/// its worker).
pub(crate) fn block_on<F: core::future::Future>(future: F) -> Result<F::Output> {
    let rt = runtime()?;
    let _context = rt.enter();
    Ok(park_on(future))
}

/// Wakes the thread that waits in [`park_on`].
struct Unpark(std::thread::Thread);

impl std::task::Wake for Unpark {
    fn wake(self: Arc<Self>) {
        self.0.unpark();
    }

    fn wake_by_ref(self: &Arc<Self>) {
        self.0.unpark();
    }
}

/// Poll `future` on this thread, parking it between wake-ups. Unlike
/// `futures::executor::block_on` it may nest: an async storage read by the synchronous engine
/// from inside another blocking wait (a shard-index fetch of an async zarrs store) works.
pub(crate) fn park_on<F: core::future::Future>(future: F) -> F::Output {
    let waker = std::task::Waker::from(Arc::new(Unpark(std::thread::current())));
    let mut cx = std::task::Context::from_waker(&waker);
    let mut future = std::pin::pin!(future);
    loop {
        if let std::task::Poll::Ready(v) = future.as_mut().poll(&mut cx) {
            return v;
        }
        std::thread::park();
    }
}

/// Run `f` on a thread of its own and await its result without blocking the caller's
/// executor: the bridge from the synchronous engine to the `_async` entry points.
pub(crate) async fn off_thread<T: Send + 'static>(f: impl FnOnce() -> Result<T> + Send + 'static) -> Result<T> {
    let (tx, rx) = futures::channel::oneshot::channel();
    std::thread::Builder::new()
        .name("damacy-async".into())
        .spawn(move || {
            let _ = tx.send(f());
        })
        .map_err(|e| Error::invalid(format!("cannot start a thread for an async call: {e}")))?;
    rx.await.map_err(|_| Error::invalid("an async call's thread ended without a result"))?
}

/// A readable storage without listing ([`Store::from_readable`]): listing is an error that
/// names the store, reads pass through.
struct Unlisted {
    name: String,
    storage: Arc<dyn ReadableStorageTraits>,
}

impl Unlisted {
    fn refuse<T>(&self) -> std::result::Result<T, StorageError> {
        Err(StorageError::Unsupported(format!("store {:?} is readable only; it cannot be listed", self.name)))
    }
}

impl ReadableStorageTraits for Unlisted {
    fn get_partial_many<'a>(
        &'a self,
        key: &StoreKey,
        byte_ranges: ByteRangeIterator<'a>,
    ) -> std::result::Result<MaybeBytesIterator<'a>, StorageError> {
        self.storage.get_partial_many(key, byte_ranges)
    }

    fn size_key(&self, key: &StoreKey) -> std::result::Result<Option<u64>, StorageError> {
        self.storage.size_key(key)
    }

    fn supports_get_partial(&self) -> bool {
        self.storage.supports_get_partial()
    }
}

impl ListableStorageTraits for Unlisted {
    fn list(&self) -> std::result::Result<StoreKeys, StorageError> {
        self.refuse()
    }

    fn list_prefix(&self, _prefix: &StorePrefix) -> std::result::Result<StoreKeys, StorageError> {
        self.refuse()
    }

    fn list_dir(&self, _prefix: &StorePrefix) -> std::result::Result<StoreKeysPrefixes, StorageError> {
        self.refuse()
    }

    fn size_prefix(&self, _prefix: &StorePrefix) -> std::result::Result<u64, StorageError> {
        self.refuse()
    }
}

/// Runs an async store's futures for the synchronous engine ([`Store::from_async_readable`]):
/// on the calling thread, with the I/O runtime entered when it could be started.
struct EngineBlockOn;

impl zarrs_storage::storage_adapter::async_to_sync::AsyncToSyncBlockOn for EngineBlockOn {
    fn block_on<F: core::future::Future>(&self, future: F) -> F::Output {
        // Without the runtime a store that needs no tokio reactor still works; one that does
        // reports its own error.
        let _context = runtime().ok().map(tokio::runtime::Runtime::enter);
        park_on(future)
    }
}

/// zarrs' synchronous storage traits over a remote store's requests (with its retries and
/// limits), keeping opendal's error (and its kind) as the source of the `std::io::Error` zarrs
/// carries, so callers can tell a 404 from a 403 from a timeout without reading messages.
struct OpendalStorage {
    remote: Arc<Remote>,
}

fn io_error(e: opendal::Error) -> StorageError {
    let kind = match e.kind() {
        opendal::ErrorKind::NotFound => std::io::ErrorKind::NotFound,
        opendal::ErrorKind::PermissionDenied => std::io::ErrorKind::PermissionDenied,
        _ => std::io::ErrorKind::Other,
    };
    StorageError::IOError(Arc::new(std::io::Error::new(kind, e)))
}

fn not_found_is_none<T>(r: std::result::Result<T, opendal::Error>) -> std::result::Result<Option<T>, StorageError> {
    match r {
        Ok(v) => Ok(Some(v)),
        Err(e) if e.kind() == opendal::ErrorKind::NotFound => Ok(None),
        Err(e) => Err(io_error(e)),
    }
}

fn run<F: core::future::Future>(future: F) -> std::result::Result<F::Output, StorageError> {
    block_on(future).map_err(|e| StorageError::Other(e.to_string()))
}

impl ReadableStorageTraits for OpendalStorage {
    fn get_partial_many<'a>(
        &'a self,
        key: &StoreKey,
        byte_ranges: ByteRangeIterator<'a>,
    ) -> std::result::Result<MaybeBytesIterator<'a>, StorageError> {
        let ranges: Vec<ByteRange> = byte_ranges.collect();
        let remote = &self.remote;
        let path = key.as_str();
        let fetched = run(async move {
            let needs_size = ranges.iter().any(|r| matches!(r, ByteRange::Suffix(_) | ByteRange::FromStart(_, None)));
            let size = if needs_size {
                match remote.size(path).await.map_err(io_error)? {
                    Some(size) => Some(size),
                    None => return Ok(None),
                }
            } else {
                None
            };
            let mut out = Vec::with_capacity(ranges.len());
            for r in ranges {
                let range = match (r, size) {
                    (ByteRange::FromStart(s, Some(n)), _) => s..s + n,
                    (r, Some(size)) => {
                        let in_bounds = match r {
                            ByteRange::Suffix(n) => n <= size,
                            ByteRange::FromStart(s, _) => s <= size,
                        };
                        if !in_bounds {
                            return Err(InvalidByteRangeError::new(r, size).into());
                        }
                        r.to_range(size)
                    }
                    (_, None) => return Err(StorageError::Other("byte range needs the object size".into())),
                };
                match remote.read(path, Some(range)).await {
                    Ok(Some(bytes)) => out.push(bytes),
                    Ok(None) => return Ok(None),
                    Err(e) => return Err(io_error(e)),
                }
            }
            Ok(Some(out))
        })??;
        Ok(fetched.map(|v| -> Box<dyn Iterator<Item = std::result::Result<Bytes, StorageError>> + 'a> {
            Box::new(v.into_iter().map(Ok))
        }))
    }

    fn get(&self, key: &StoreKey) -> std::result::Result<MaybeBytes, StorageError> {
        run(self.remote.read(key.as_str(), None))?.map_err(io_error)
    }

    fn size_key(&self, key: &StoreKey) -> std::result::Result<Option<u64>, StorageError> {
        run(self.remote.size(key.as_str()))?.map_err(io_error)
    }

    fn supports_get_partial(&self) -> bool {
        true
    }
}

impl OpendalStorage {
    fn entries(&self, prefix: &StorePrefix, recursive: bool) -> std::result::Result<Vec<opendal::Entry>, StorageError> {
        let listed = run(async {
            not_found_is_none(self.remote.operator().list_with(prefix.as_str()).recursive(recursive).await)
        })??;
        Ok(listed.unwrap_or_default())
    }
}

impl ListableStorageTraits for OpendalStorage {
    fn list(&self) -> std::result::Result<StoreKeys, StorageError> {
        self.list_prefix(&StorePrefix::root())
    }

    fn list_prefix(&self, prefix: &StorePrefix) -> std::result::Result<StoreKeys, StorageError> {
        let mut keys = Vec::new();
        for e in self.entries(prefix, true)? {
            if e.metadata().mode() == opendal::EntryMode::FILE {
                keys.push(StoreKey::try_from(e.path())?);
            }
        }
        keys.sort();
        Ok(keys)
    }

    fn list_dir(&self, prefix: &StorePrefix) -> std::result::Result<StoreKeysPrefixes, StorageError> {
        let (mut keys, mut prefixes) = (Vec::new(), Vec::new());
        for e in self.entries(prefix, false)? {
            match e.metadata().mode() {
                opendal::EntryMode::FILE => keys.push(StoreKey::try_from(e.path())?),
                opendal::EntryMode::DIR => {
                    let p = StorePrefix::try_from(e.path())?;
                    if &p != prefix {
                        prefixes.push(p);
                    }
                }
                opendal::EntryMode::Unknown => {}
            }
        }
        keys.sort();
        prefixes.sort();
        Ok(StoreKeysPrefixes::new(keys, prefixes))
    }

    fn size_prefix(&self, prefix: &StorePrefix) -> std::result::Result<u64, StorageError> {
        let mut total = 0;
        for key in self.list_prefix(prefix)? {
            total += self.size_key(&key)?.unwrap_or(0);
        }
        Ok(total)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn io_runtime_threads_scale_with_cpus_unless_set() {
        assert_eq!([1, 2, 4, 8, 16, 64, 256].map(|c| io_runtime_threads(None, c)), [1, 1, 1, 2, 4, 8, 8]);
        assert_eq!(io_runtime_threads(Some(" 3 "), 2), 3);
        assert_eq!(io_runtime_threads(Some("0"), 16), 4);
        assert_eq!(io_runtime_threads(Some("many"), 16), 4);
    }

    #[test]
    fn schemes() {
        assert_eq!(split_scheme("/data/x.zarr").unwrap().0, StoreKind::Local);
        assert_eq!(split_scheme("file:///data").unwrap(), (StoreKind::Local, "/data"));
        assert_eq!(split_scheme("s3://b/p").unwrap().0, StoreKind::S3);
        assert_eq!(split_scheme("https://h/p").unwrap().0, StoreKind::Http);
        let err = split_scheme("ftp://h/p").unwrap_err().to_string();
        assert!(err.contains("ftp"), "{err}");
    }

    #[test]
    fn missing_local_folder_is_not_found() {
        let err = Store::open("/definitely/not/here", &StoreOptions::default()).unwrap_err();
        assert!(matches!(err, Error::NotFound(_)), "{err}");
    }

    #[test]
    fn bucket_root() {
        assert_eq!(bucket_and_root("s3://b/x/y/", "b/x/y/").unwrap(), ("b", "/x/y".to_owned()));
        assert_eq!(bucket_and_root("s3://b", "b").unwrap(), ("b", "/".to_owned()));
        assert!(bucket_and_root("s3:///x", "/x").is_err());
    }
}
