//! URL and options parsing: what kind of store a URL names ([`StoreKind`]), how hard to try
//! ([`StoreOptions`], checked into the remote layer's [`Policy`]), and how byte ranges merge
//! ([`Coalescing`]).

use std::time::Duration;

use crate::error::{Error, Result};
use crate::remote::Policy;

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
    pub(super) fn policy(&self, url: &str) -> Result<Policy> {
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

pub(super) fn split_scheme(url: &str) -> Result<(StoreKind, &str)> {
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

pub(super) fn env(name: &str) -> Option<String> {
    std::env::var(name).ok().filter(|v| !v.is_empty())
}

/// Split `bucket/some/prefix` into the bucket and an opendal root (`/some/prefix/`).
pub(super) fn bucket_and_root<'a>(url: &str, rest: &'a str) -> Result<(&'a str, String)> {
    let (bucket, prefix) = rest.split_once('/').unwrap_or((rest, ""));
    if bucket.is_empty() {
        return Err(Error::invalid(format!("no bucket or container in store URL {url:?}")));
    }
    Ok((bucket, format!("/{}", prefix.trim_matches('/'))))
}

#[cfg(test)]
mod tests {
    use super::*;

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
    fn bucket_root() {
        assert_eq!(bucket_and_root("s3://b/x/y/", "b/x/y/").unwrap(), ("b", "/x/y".to_owned()));
        assert_eq!(bucket_and_root("s3://b", "b").unwrap(), ("b", "/".to_owned()));
        assert!(bucket_and_root("s3:///x", "/x").is_err());
    }
}
