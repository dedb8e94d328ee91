//! Opening stores by URL: local files (the embedded default) and, through opendal, `s3://`,
//! `gs://`, `az://`, `http(s)://` and `memory://`.
//!
//! One module per job: [`options`] parses URLs and options, [`operator`] builds a remote
//! store's opendal operator, [`mod@runtime`] bridges the synchronous engine and the async requests
//! (the process's I/O runtime), and [`adapters`] adapts stores to zarrs' storage traits.

mod adapters;
mod operator;
mod options;
mod runtime;

use std::collections::hash_map::DefaultHasher;
use std::hash::{Hash, Hasher};
use std::path::PathBuf;
use std::sync::Arc;

use zarrs_storage::{ReadableListableStorage, ReadableStorageTraits};

pub use options::{Coalescing, StoreKind, StoreOptions};
pub use runtime::off_thread;
pub(crate) use runtime::{block_on, park_on, runtime};

use crate::error::{Error, Result};
use crate::remote::{Remote, StoreStats};

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
        let (kind, rest) = options::split_scheme(url)?;
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
            let operator = operator::build_operator(kind, url, rest, options, &policy)?;
            // Errors name the store and, where one was given, the endpoint it is reached at.
            let name = match (&options.endpoint, kind) {
                (Some(ep), StoreKind::S3 | StoreKind::Gcs | StoreKind::Azure) => format!("{url} at {ep}"),
                _ => url.to_owned(),
            };
            let r = Arc::new(Remote::new(operator, &name, policy));
            remote = Some(r.clone());
            Arc::new(adapters::OpendalStorage { remote: r })
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
        Self::from_storage(name, Arc::new(adapters::Unlisted { name: name.to_owned(), storage }))
    }

    /// Wrap a zarrs async storage handle (e.g. `zarrs_opendal`'s `AsyncOpendalStore`) for the
    /// synchronous engine: each read blocks the engine thread that issued it on the store's
    /// future, with damacy's I/O runtime entered (so tokio-based stores find a reactor). From
    /// async code, call the engine through the `_async` entry points (they run it on the I/O
    /// runtime's blocking pool), not on an async worker.
    #[must_use]
    pub fn from_async_readable(name: &str, storage: Arc<dyn zarrs_storage::AsyncReadableStorageTraits>) -> Self {
        use zarrs_storage::storage_adapter::async_to_sync::AsyncToSyncStorageAdapter;
        Self::from_readable(name, Arc::new(AsyncToSyncStorageAdapter::new(storage, adapters::EngineBlockOn)))
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

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn missing_local_folder_is_not_found() {
        let err = Store::open("/definitely/not/here", &StoreOptions::default()).unwrap_err();
        assert!(matches!(err, Error::NotFound(_)), "{err}");
    }
}
