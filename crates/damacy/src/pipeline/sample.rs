//! [`Sample`]: one region of one or more arrays, named by URI; how a URI names a store and an
//! array ([`split_uri`]); and the cache of opened stores and arrays.

use std::collections::HashMap;
use std::sync::Mutex;
use std::sync::atomic::{AtomicU64, Ordering::Relaxed};

use damacy_codec::{ArrayHandle, ArrayOptions, ChainRoute, Reader, Region, Store, StoreOptions};

use crate::Error;

/// One sample: a region of one array, or the same region of several arrays (an image and its
/// labels), each named by a URI (see [`split_uri`]). A batch holds one tensor per array, in the
/// order of [`Sample::uris`].
///
/// ```
/// use damacy::{Region, Sample};
/// let s = Sample::new("s3://bucket/brain.zarr/raw", Region::new(vec![0, 64, 128], vec![64, 64, 64]));
/// let pair = Sample::multi(["/data/a.zarr/image", "/data/a.zarr/labels"], Region::new(vec![0, 0], vec![256, 256]))
///     .with_id(17);
/// assert_eq!(pair.uris.len(), 2);
/// assert_eq!(pair.to_string(), "#17 /data/a.zarr/image+/data/a.zarr/labels [0:256, 0:256]");
/// ```
#[derive(Debug, Clone, PartialEq, Eq, Hash)]
#[non_exhaustive]
pub struct Sample {
    /// The arrays, one URI each.
    pub uris: Vec<String>,
    /// The region read from each of them.
    pub region: Region,
    /// Whether the sampler added this sample as padding (a repeat to even out rank lengths):
    /// the batch's [`crate::Batch::mask`] marks it.
    pub padded: bool,
    /// An identifier of the caller's (e.g. the sampler's global sample id), shown in errors.
    pub id: Option<u64>,
}

impl Sample {
    /// A region of one array.
    #[must_use]
    pub fn new(uri: impl Into<String>, region: Region) -> Self {
        Self { uris: vec![uri.into()], region, padded: false, id: None }
    }

    /// The same region of several arrays: one tensor each in the batch, in this order.
    #[must_use]
    pub fn multi<S: Into<String>>(uris: impl IntoIterator<Item = S>, region: Region) -> Self {
        Self { uris: uris.into_iter().map(Into::into).collect(), region, padded: false, id: None }
    }

    /// Mark the sample as padding added by the sampler.
    #[must_use]
    pub fn with_padded(mut self, padded: bool) -> Self {
        self.padded = padded;
        self
    }

    /// Attach an identifier, shown in errors and in [`crate::PipelineStats::skipped`].
    #[must_use]
    pub fn with_id(mut self, id: u64) -> Self {
        self.id = Some(id);
        self
    }
}

impl std::fmt::Display for Sample {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        if let Some(id) = self.id {
            write!(f, "#{id} ")?;
        }
        write!(f, "{} {}", self.uris.join("+"), self.region)
    }
}

/// Split a sample URI into the store's URL and the array's path inside it.
///
/// - `store#path` names both explicitly: `file:///data/set#volumes/raw`.
/// - Otherwise the store is everything up to and including the last path component that ends
///   in `.zarr`, and the array is the rest: `/data/brain.zarr/raw` is array `/raw` of store
///   `/data/brain.zarr`; `s3://bucket/brain.zarr/s0/raw` is array `/s0/raw` of
///   `s3://bucket/brain.zarr`.
/// - A URI with no such component is a store whose root is the array: `/data/raw` is array `/`
///   of store `/data/raw`.
///
/// Plain paths, `file://`, `s3://`, `gs://`, `az://`, `http(s)://` and `memory://` all work
/// (see [`Store::open`]).
///
/// ```
/// use damacy::split_uri;
/// assert_eq!(split_uri("/data/brain.zarr/raw"), ("/data/brain.zarr", "/raw".to_owned()));
/// assert_eq!(split_uri("https://host/x/brain.zarr/s0/raw/"), ("https://host/x/brain.zarr", "/s0/raw".to_owned()));
/// assert_eq!(split_uri("file:///data/set#volumes/raw"), ("file:///data/set", "/volumes/raw".to_owned()));
/// assert_eq!(split_uri("s3://bucket/raw"), ("s3://bucket/raw", "/".to_owned()));
/// ```
#[must_use]
pub fn split_uri(uri: &str) -> (&str, String) {
    let normal = |p: &str| damacy_codec::normalize_path(p);
    if let Some((store, path)) = uri.split_once('#') {
        return (store.trim_end_matches('/'), normal(path));
    }
    let trimmed = uri.trim_end_matches('/');
    // The path part starts after `scheme://` (and, for URLs, the host or bucket is a
    // component like any other).
    let body_start = trimmed.find("://").map_or(0, |i| i + 3);
    let body = &trimmed[body_start..];
    let mut end = None;
    let mut offset = 0;
    for component in body.split('/') {
        let stop = offset + component.len();
        if std::path::Path::new(component).extension().is_some_and(|e| e == "zarr") {
            end = Some(body_start + stop);
        }
        offset = stop + 1;
    }
    match end {
        Some(e) => (&trimmed[..e], normal(&trimmed[e..])),
        None => (trimmed, "/".to_owned()),
    }
}

/// Opened stores and arrays, by URI, with hit and open counts and each array's route.
pub(crate) struct ArrayCache {
    reader: Reader,
    options: ArrayOptions,
    store_options: StoreOptions,
    stores: Mutex<HashMap<String, Store>>,
    arrays: Mutex<HashMap<String, ArrayHandle>>,
    routes: Mutex<Vec<(String, String)>>,
    pub(crate) hits: AtomicU64,
    pub(crate) opens: AtomicU64,
}

impl ArrayCache {
    pub(crate) fn new(reader: Reader, options: ArrayOptions, store_options: StoreOptions) -> Self {
        Self {
            reader,
            options,
            store_options,
            stores: Mutex::new(HashMap::new()),
            arrays: Mutex::new(HashMap::new()),
            routes: Mutex::new(Vec::new()),
            hits: AtomicU64::new(0),
            opens: AtomicU64::new(0),
        }
    }

    /// The array a URI names, opened once (opening reads metadata without holding the lock;
    /// two threads opening the same array at once both succeed and one handle is kept).
    pub(crate) fn open(&self, uri: &str) -> Result<ArrayHandle, Error> {
        if let Some(a) = lock(&self.arrays)?.get(uri) {
            self.hits.fetch_add(1, Relaxed);
            return Ok(a.clone());
        }
        let (store_url, path) = split_uri(uri);
        let cached = lock(&self.stores)?.get(store_url).cloned();
        let store = if let Some(s) = cached {
            s
        } else {
            let s = Store::open(store_url, &self.store_options)?;
            lock(&self.stores)?.entry(store_url.to_owned()).or_insert(s).clone()
        };
        let array = self.reader.open_array(&store, &path, self.options)?;
        self.opens.fetch_add(1, Relaxed);
        let route = match (&array.route, self.reader.device()) {
            // The executor note says `cpu (why there is no device)`.
            (ChainRoute::Device(_), None) => self.reader.executor_note().to_owned(),
            (route, _) => route.to_string(),
        };
        let mut arrays = lock(&self.arrays)?;
        let kept = arrays.entry(uri.to_owned()).or_insert(array).clone();
        drop(arrays);
        let mut routes = lock(&self.routes)?;
        if !routes.iter().any(|(u, _)| u == uri) {
            routes.push((uri.to_owned(), route));
        }
        Ok(kept)
    }

    /// `(uri, route)` of every array opened so far, in the order they were opened.
    pub(crate) fn routes(&self) -> Vec<(String, String)> {
        self.routes.lock().map(|r| r.clone()).unwrap_or_default()
    }
}

fn lock<T>(m: &Mutex<T>) -> Result<std::sync::MutexGuard<'_, T>, Error> {
    m.lock().map_err(|_| Error::internal("pipeline: the array cache was poisoned by a panic in another thread"))
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn uris_split_at_the_last_zarr_component() {
        let cases = [
            ("/data/brain.zarr/raw", ("/data/brain.zarr", "/raw")),
            ("/data/brain.zarr", ("/data/brain.zarr", "/")),
            ("/data/brain.zarr/", ("/data/brain.zarr", "/")),
            ("relative/a.zarr/b.zarr/c", ("relative/a.zarr/b.zarr", "/c")),
            ("file:///tmp/x.zarr/s0/raw", ("file:///tmp/x.zarr", "/s0/raw")),
            ("s3://bucket.zarr/raw", ("s3://bucket.zarr", "/raw")),
            ("s3://bucket/a/b", ("s3://bucket/a/b", "/")),
            ("http://127.0.0.1:8080/x.zarr/v3/raw", ("http://127.0.0.1:8080/x.zarr", "/v3/raw")),
            ("memory://m#a/b", ("memory://m", "/a/b")),
            ("/data/not.zarrs/raw", ("/data/not.zarrs/raw", "/")),
            ("/data/set#", ("/data/set", "/")),
        ];
        for (uri, (store, path)) in cases {
            assert_eq!(split_uri(uri), (store, path.to_owned()), "{uri}");
        }
    }

    #[test]
    fn samples_display_with_their_id() {
        let s = Sample::new("/a.zarr/x", Region::new(vec![1, 2], vec![3, 4]));
        assert_eq!(s.to_string(), "/a.zarr/x [1:4, 2:6]");
        assert_eq!(s.with_id(5).with_padded(true).to_string(), "#5 /a.zarr/x [1:4, 2:6]");
    }
}
