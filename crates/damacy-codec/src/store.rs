//! Opening stores by URL: local files (the embedded default) and, through opendal, `s3://`,
//! `gs://`, `az://`, `http(s)://` and `memory://`.

use std::collections::hash_map::DefaultHasher;
use std::hash::{Hash, Hasher};
use std::path::PathBuf;
use std::sync::{Arc, OnceLock};
use std::time::Duration;

use opendal::Operator;
use zarrs_storage::ReadableListableStorage;
use zarrs_storage::storage_adapter::async_to_sync::{AsyncToSyncBlockOn, AsyncToSyncStorageAdapter};

use crate::error::{Error, Result};

/// How to reach a remote store. Every field falls back to the usual environment variables
/// (`AWS_ENDPOINT_URL`, `AWS_REGION`, `AWS_ACCESS_KEY_ID`, `AWS_SECRET_ACCESS_KEY`,
/// `AWS_SESSION_TOKEN`, `GOOGLE_APPLICATION_CREDENTIALS`, `AZURE_STORAGE_ACCOUNT`,
/// `AZURE_STORAGE_KEY`) and then to the service's defaults.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
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
    /// How many times a failed read is retried with exponential backoff before it is an
    /// error. Default 4 (see [`StoreOptions::DEFAULT_RETRIES`]).
    pub retries: Option<usize>,
}

impl StoreOptions {
    /// Retries of a failed remote read before it is reported.
    pub const DEFAULT_RETRIES: usize = 4;

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

    /// Set how many times a failed read is retried.
    #[must_use]
    pub fn with_retries(mut self, retries: usize) -> Self {
        self.retries = Some(retries);
        self
    }
}

/// What kind of store a URL names.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
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

/// An open store: a synchronous zarrs storage handle and a stable identity for cache keys.
#[derive(Clone)]
pub struct Store {
    url: String,
    kind: StoreKind,
    id: u64,
    storage: ReadableListableStorage,
    local_root: Option<PathBuf>,
}

impl std::fmt::Debug for Store {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("Store").field("url", &self.url).field("kind", &self.kind).finish_non_exhaustive()
    }
}

impl Store {
    /// Open the store a URL names. Local paths must exist; remote stores are opened lazily
    /// (the first read reports a missing bucket).
    pub fn open(url: &str, options: &StoreOptions) -> Result<Self> {
        let (kind, rest) = split_scheme(url)?;
        let mut local_root = None;
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
            let operator = build_operator(kind, url, rest, options)?;
            let store = zarrs_opendal::AsyncOpendalStore::new(operator);
            Arc::new(AsyncToSyncStorageAdapter::new(Arc::new(store), TokioBlockOn(runtime()?)))
        };
        let mut hasher = DefaultHasher::new();
        url.trim_end_matches('/').hash(&mut hasher);
        Ok(Self { url: url.to_owned(), kind, id: hasher.finish(), storage, local_root })
    }

    /// Wrap an existing zarrs storage handle (a store the caller built itself).
    #[must_use]
    pub fn from_storage(name: &str, storage: ReadableListableStorage) -> Self {
        let mut hasher = DefaultHasher::new();
        (name, Arc::as_ptr(&storage).cast::<()>() as usize).hash(&mut hasher);
        Self { url: name.to_owned(), kind: StoreKind::Memory, id: hasher.finish(), storage, local_root: None }
    }

    /// The URL the store was opened with.
    #[must_use]
    pub fn url(&self) -> &str {
        &self.url
    }

    /// What kind of store this is.
    #[must_use]
    pub fn kind(&self) -> StoreKind {
        self.kind
    }

    /// A stable identity (a hash of the URL), used in cache keys.
    #[must_use]
    pub fn id(&self) -> u64 {
        self.id
    }

    /// The zarrs storage handle.
    #[must_use]
    pub fn storage(&self) -> &ReadableListableStorage {
        &self.storage
    }

    /// The local folder, for a local store.
    #[must_use]
    pub fn local_root(&self) -> Option<&std::path::Path> {
        self.local_root.as_deref()
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

fn build_operator(kind: StoreKind, url: &str, rest: &str, options: &StoreOptions) -> Result<Operator> {
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
        StoreKind::Local => unreachable!("local stores do not use opendal"),
    };
    let retries = options.retries.unwrap_or(StoreOptions::DEFAULT_RETRIES);
    Ok(operator.layer(
        opendal::layers::RetryLayer::new()
            .with_max_times(retries)
            .with_min_delay(Duration::from_millis(50))
            .with_max_delay(Duration::from_secs(5))
            .with_jitter(),
    ))
}

/// Runs opendal's futures on one shared multi-threaded tokio runtime.
struct TokioBlockOn(&'static tokio::runtime::Runtime);

/// The process's I/O runtime, started on first use; failing to start it is an error, not a
/// panic.
fn runtime() -> Result<&'static tokio::runtime::Runtime> {
    static RUNTIME: OnceLock<std::result::Result<tokio::runtime::Runtime, String>> = OnceLock::new();
    RUNTIME
        .get_or_init(|| {
            tokio::runtime::Builder::new_multi_thread()
                .worker_threads(2)
                .thread_name("damacy-io")
                .enable_all()
                .build()
                .map_err(|e| e.to_string())
        })
        .as_ref()
        .map_err(|e| Error::invalid(format!("cannot start the I/O runtime for remote stores: {e}")))
}

impl AsyncToSyncBlockOn for TokioBlockOn {
    fn block_on<F: core::future::Future>(&self, future: F) -> F::Output {
        self.0.block_on(future)
    }
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
