//! zarrs' storage traits over damacy's stores, both adapted (`ReadableStorageTraits` and
//! `ListableStorageTraits`): a remote store's requests ([`OpendalStorage`]), a readable-only
//! store that refuses listing ([`Unlisted`]), and the bridge that runs an async zarrs store's
//! futures for the synchronous engine ([`EngineBlockOn`]).

use std::sync::Arc;

use zarrs_storage::byte_range::{ByteRange, ByteRangeIterator, InvalidByteRangeError};
use zarrs_storage::{
    Bytes, ListableStorageTraits, MaybeBytes, MaybeBytesIterator, ReadableStorageTraits, StorageError, StoreKey,
    StoreKeys, StoreKeysPrefixes, StorePrefix,
};

use super::runtime;
use crate::remote::Remote;

/// A readable storage without listing ([`super::Store::from_readable`]): listing is an error that
/// names the store, reads pass through.
pub(super) struct Unlisted {
    pub(super) name: String,
    pub(super) storage: Arc<dyn ReadableStorageTraits>,
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

/// Runs an async store's futures for the synchronous engine ([`super::Store::from_async_readable`]):
/// on the calling thread ([`runtime::wait`]), with the I/O runtime when it could be started.
pub(super) struct EngineBlockOn;

impl zarrs_storage::storage_adapter::async_to_sync::AsyncToSyncBlockOn for EngineBlockOn {
    fn block_on<F: core::future::Future>(&self, future: F) -> F::Output {
        // Without the runtime a store that needs no tokio reactor still works; one that does
        // reports its own error.
        runtime::wait(runtime::runtime().ok(), future)
    }
}

/// zarrs' synchronous storage traits over a remote store's requests (with its retries and
/// limits), keeping opendal's error (and its kind) as the source of the `std::io::Error` zarrs
/// carries, so callers can tell a 404 from a 403 from a timeout without reading messages.
pub(super) struct OpendalStorage {
    pub(super) remote: Arc<Remote>,
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
    runtime::block_on(future).map_err(|e| StorageError::Other(e.to_string()))
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
