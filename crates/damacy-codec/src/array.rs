//! Opening arrays: zarrs' metadata and codec chains plus the facts the planner needs
//! ([`ArrayMeta`]), and the handle a reader hands out ([`ArrayHandle`]): it owns its store, the
//! per-array semantics ([`ArrayOptions`]: output dtype, out-of-bounds policy, checksums) and the
//! chain's route, all decided once, when the array is opened.

use std::num::NonZeroU64;
use std::sync::Arc;

use zarrs::array::{Array, ArrayMetadata, CodecChain, CodecMetadataOptions};
use zarrs::metadata::v3::MetadataV3;
use zarrs::metadata_ext::codec::sharding::{ShardingCodecConfiguration, ShardingIndexLocation};
use zarrs::plugin::{ExtensionName, ZarrVersion};
use zarrs_storage::ReadableStorageTraits;

use crate::codec::{ChainRoute, classify};
use crate::dtype::{Dtype, OutputDtype};
use crate::error::{Error, Result};
use crate::store::Store;

/// The sharding layout of an array whose codec chain is `sharding_indexed`.
#[derive(Debug, Clone)]
pub struct ShardLayout {
    /// The inner chunk shape.
    pub inner_shape: Vec<u64>,
    /// Inner chunks per shard along each axis.
    pub chunks_per_shard: Vec<u64>,
    /// The codec chain of each inner chunk.
    pub inner_codecs: Arc<CodecChain>,
    /// The inner chain's metadata (for display and routing).
    pub inner_codec_metadata: Vec<MetadataV3>,
    /// The chain that decodes the index (usually `bytes` + `crc32c`).
    pub index_codecs: Arc<CodecChain>,
    /// The index chain's metadata.
    pub index_codec_metadata: Vec<MetadataV3>,
    /// Whether the index sits at the start or the end of the shard.
    pub index_at_start: bool,
    /// The encoded size of the index in bytes.
    pub index_encoded_size: u64,
}

impl ShardLayout {
    /// Decode an encoded shard index (exactly [`ShardLayout::index_encoded_size`] bytes) into
    /// one `(offset, nbytes)` per inner chunk in C order, `None` for an empty inner chunk. The
    /// crc32c of the index codecs is verified. Any input gives a value or an error.
    pub fn decode_index(&self, encoded: &[u8]) -> Result<Vec<Option<(u64, u64)>>, String> {
        decode_shard_index(self, encoded)
    }

    /// The number of inner chunks in a shard.
    #[must_use]
    pub fn inner_chunks(&self) -> u64 {
        self.chunks_per_shard.iter().product()
    }
}

/// The metadata of an opened zarr array (v2 or v3) with a regular chunk grid and a fixed-size
/// data type.
#[derive(Clone)]
#[non_exhaustive]
pub struct ArrayMeta {
    /// The array's path in its store, starting with `/`.
    pub path: String,
    /// The zarr format, 2 or 3.
    pub zarr_format: u8,
    /// The array shape.
    pub shape: Vec<u64>,
    /// The data type.
    pub dtype: Dtype,
    /// The chunk shape of the grid (the shard shape, for a sharded array).
    pub chunk_shape: Vec<u64>,
    /// The number of chunks (shards) along each axis.
    pub grid_shape: Vec<u64>,
    /// The fill value, as one element in native byte order.
    pub fill_value: Vec<u8>,
    /// The codec chain's metadata, in zarr v3 form (zarrs converts v2 metadata).
    pub codec_metadata: Vec<MetadataV3>,
    /// The sharding layout, for sharded arrays.
    pub shard: Option<ShardLayout>,
    /// How each decode unit's chain decodes: device kernels, or the CPU and why.
    pub route: ChainRoute,
    array: Arc<Array<dyn ReadableStorageTraits>>,
}

/// Normalise a user-given array path to zarrs' form (`/a/b`, or `/` for the root).
#[must_use]
pub fn normalize_path(path: &str) -> String {
    let trimmed = path.trim_matches('/');
    if trimmed.is_empty() { "/".to_owned() } else { format!("/{trimmed}") }
}

impl std::fmt::Debug for ArrayMeta {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("ArrayMeta")
            .field("path", &self.path)
            .field("shape", &self.shape)
            .field("dtype", &self.dtype)
            .field("chunk_shape", &self.chunk_shape)
            .finish_non_exhaustive()
    }
}

/// zarrs' refusal to build an array from valid metadata: a data type, codec, chunk grid, chunk
/// key encoding, storage transformer or extension field zarrs does not know is
/// [`Error::Unsupported`] (the same whether the metadata came from the store or from the
/// caller); anything else is [`Error::Metadata`].
fn create_error(path: &str, e: zarrs::array::ArrayCreateError) -> Error {
    use zarrs::array::ArrayCreateError as E;
    match e {
        E::DataTypeCreateError(_)
        | E::CodecsCreateError(_)
        | E::StorageTransformersCreateError(_)
        | E::ChunkGridCreateError(_)
        | E::ChunkKeyEncodingCreateError(_)
        | E::AdditionalFieldUnsupportedError(_) => Error::Unsupported(format!("array {path}: {e}")),
        other => Error::Metadata { path: path.to_owned(), message: other.to_string(), source: Some(Arc::new(other)) },
    }
}

impl ArrayMeta {
    /// Read the metadata of the array at `path` in `store`.
    pub fn open(store: &Store, path: &str) -> Result<Self> {
        let path = normalize_path(path);
        let readable: Arc<dyn ReadableStorageTraits> = store.storage().clone();
        let array = Array::open(readable, &path).map_err(|e| match e {
            zarrs::array::ArrayCreateError::MissingMetadata => {
                Error::NotFound(format!("no zarr array at {path} in {}", store.url()))
            }
            zarrs::array::ArrayCreateError::StorageError(zarrs_storage::StorageError::InvalidMetadata(
                key,
                message,
            )) => Error::metadata(&path, format!("{key}: {message}")),
            zarrs::array::ArrayCreateError::StorageError(e) => {
                Error::storage(crate::error::Location::array(store.url(), &path), e)
            }
            other => create_error(&path, other),
        })?;
        Self::from_array(array, path)
    }

    /// The metadata of an array zarrs already opened (its store, metadata and codec chain are
    /// used as they are).
    pub fn from_zarrs(array: Array<dyn ReadableStorageTraits>) -> Result<Self> {
        let path = array.path().as_str().to_owned();
        Self::from_array(array, path)
    }

    /// The metadata of the array at `path` in `store` given as its JSON document (`zarr.json`
    /// for zarr v3, `.zarray` for v2) rather than read from the store: what a caller that
    /// already holds the metadata (zarr-python) uses, so an array rewritten in place at the
    /// same path is never served from stale metadata.
    pub fn from_metadata_json(store: &Store, path: &str, json: &str) -> Result<Self> {
        let path = normalize_path(path);
        let metadata: ArrayMetadata = serde_json::from_str(json).map_err(|e| Error::Metadata {
            path: path.clone(),
            message: e.to_string(),
            source: Some(Arc::new(e)),
        })?;
        let readable: Arc<dyn ReadableStorageTraits> = store.storage().clone();
        let array = Array::new_with_metadata(readable, &path, metadata).map_err(|e| create_error(&path, e))?;
        Self::from_array(array, path)
    }

    fn from_array(array: Array<dyn ReadableStorageTraits>, path: String) -> Result<Self> {
        let meta_err = |message: String| Error::metadata(&path, message);
        let zarr_format = match array.metadata() {
            ArrayMetadata::V3(m) => {
                if m.chunk_grid.name() != "regular" {
                    return Err(Error::Unsupported(format!(
                        "array {path} has a {:?} chunk grid; damacy reads regular chunk grids",
                        m.chunk_grid.name()
                    )));
                }
                3
            }
            ArrayMetadata::V2(_) => 2,
        };
        let dtype_name = array
            .data_type()
            .name(ZarrVersion::V3)
            .ok_or_else(|| Error::Unsupported(format!("array {path} has a data type with no zarr v3 name")))?;
        let dtype: Dtype = dtype_name.parse().map_err(|e| Error::Unsupported(format!("array {path}: {e}")))?;
        let shape = array.shape().to_vec();
        let zeros = vec![0u64; shape.len()];
        let chunk_shape: Vec<u64> = array
            .chunk_shape(&zeros)
            .map_err(|e| meta_err(format!("chunk shape: {e}")))?
            .iter()
            .map(|c| c.get())
            .collect();
        let grid_shape = array.chunk_grid_shape().to_vec();
        let fill_value = array.fill_value().as_ne_bytes().to_vec();
        if fill_value.len() != dtype.size() {
            return Err(meta_err(format!("fill value has {} bytes, {dtype} needs {}", fill_value.len(), dtype.size())));
        }
        let codec_metadata = array.codecs().create_metadatas(&CodecMetadataOptions::default());
        let shard = codec_metadata
            .iter()
            .find(|m| m.name() == "sharding_indexed")
            .map(|m| shard_layout(m, &chunk_shape, dtype).map_err(meta_err))
            .transpose()?;
        let route =
            classify(shard.as_ref().map_or(&codec_metadata, |s: &ShardLayout| &s.inner_codec_metadata), dtype.size());
        Ok(Self {
            route,
            path,
            zarr_format,
            shape,
            dtype,
            chunk_shape,
            grid_shape,
            fill_value,
            codec_metadata,
            shard,
            array: Arc::new(array),
        })
    }

    /// The zarrs array (metadata, codec chain, chunk keys).
    #[must_use]
    pub fn zarrs(&self) -> &Array<dyn ReadableStorageTraits> {
        &self.array
    }

    /// The store key of the chunk (shard) at grid coordinates `chunk`.
    #[must_use]
    pub fn chunk_key(&self, chunk: &[u64]) -> zarrs_storage::StoreKey {
        self.array.chunk_key(chunk)
    }

    /// Elements in the whole array.
    #[must_use]
    pub fn num_elements(&self) -> u64 {
        self.shape.iter().product()
    }

    /// Decoded size of the whole array in bytes.
    #[must_use]
    pub fn decoded_bytes(&self) -> u64 {
        self.num_elements() * self.dtype.size() as u64
    }

    /// The unit the planner decodes: the inner chunk shape for a sharded array, else the
    /// chunk shape.
    #[must_use]
    pub fn decode_shape(&self) -> &[u64] {
        self.shard.as_ref().map_or(&self.chunk_shape, |s| &s.inner_shape)
    }

    /// The codec chain that decodes one decode unit (inner chunk or chunk).
    #[must_use]
    pub fn decode_chain(&self) -> Arc<CodecChain> {
        self.shard.as_ref().map_or_else(|| self.array.codecs(), |s| s.inner_codecs.clone())
    }

    /// The codec metadata of one decode unit.
    #[must_use]
    pub fn decode_chain_metadata(&self) -> &[MetadataV3] {
        self.shard.as_ref().map_or(&self.codec_metadata, |s| &s.inner_codec_metadata)
    }
}

fn shard_layout(meta: &MetadataV3, shard_shape: &[u64], dtype: Dtype) -> Result<ShardLayout, String> {
    let ShardingCodecConfiguration::V1(config) = meta
        .to_typed_configuration::<ShardingCodecConfiguration>()
        .map_err(|e| format!("sharding_indexed configuration: {e}"))?
    else {
        return Err("unknown sharding_indexed configuration version".to_owned());
    };
    let inner_shape: Vec<u64> = config.chunk_shape.iter().map(|c| c.get()).collect();
    if inner_shape.len() != shard_shape.len() {
        return Err(format!("inner chunk shape {inner_shape:?} does not match shard shape {shard_shape:?}"));
    }
    let mut chunks_per_shard = Vec::with_capacity(inner_shape.len());
    for (s, c) in shard_shape.iter().zip(&inner_shape) {
        if s % c != 0 {
            return Err(format!("shard shape {shard_shape:?} is not a multiple of inner chunk shape {inner_shape:?}"));
        }
        chunks_per_shard.push(s / c);
    }
    let inner_codecs = CodecChain::from_metadata(&config.codecs).map_err(|e| format!("inner codecs: {e}"))?;
    let index_codecs = CodecChain::from_metadata(&config.index_codecs).map_err(|e| format!("index codecs: {e}"))?;
    let mut index_encoded_size = chunks_per_shard.iter().product::<u64>() * 16;
    for m in &config.index_codecs {
        match m.name() {
            "bytes" => {}
            "crc32c" => index_encoded_size += 4,
            other => {
                return Err(format!("index codec {other:?} is not supported (damacy reads bytes and crc32c indexes)"));
            }
        }
    }
    let _ = dtype;
    Ok(ShardLayout {
        inner_shape,
        chunks_per_shard,
        inner_codecs: Arc::new(inner_codecs),
        inner_codec_metadata: config.codecs,
        index_codecs: Arc::new(index_codecs),
        index_codec_metadata: config.index_codecs,
        index_at_start: config.index_location == ShardingIndexLocation::Start,
        index_encoded_size,
    })
}

/// Decode an encoded shard index into `(offset, nbytes)` pairs, `None` for empty inner chunks.
fn decode_shard_index(layout: &ShardLayout, encoded: &[u8]) -> Result<Vec<Option<(u64, u64)>>, String> {
    use zarrs::array::{ArrayToBytesCodecTraits, CodecOptions, FillValue};
    if encoded.len() as u64 != layout.index_encoded_size {
        return Err(format!("shard index has {} bytes, expected {}", encoded.len(), layout.index_encoded_size));
    }
    let mut shape: Vec<NonZeroU64> = Vec::with_capacity(layout.chunks_per_shard.len() + 1);
    for &c in &layout.chunks_per_shard {
        shape.push(NonZeroU64::new(c).ok_or("zero chunks per shard")?);
    }
    shape.push(NonZeroU64::MIN.saturating_add(1));
    let decoded = layout
        .index_codecs
        .decode(
            encoded.to_vec().into(),
            &shape,
            &zarrs::array::data_type::uint64(),
            &FillValue::from(u64::MAX),
            &CodecOptions::default(),
        )
        .map_err(|e| format!("shard index: {e}"))?;
    let raw = decoded.into_fixed().map_err(|e| format!("shard index: {e}"))?;
    let mut out = Vec::with_capacity(raw.len() / 16);
    for pair in raw.chunks_exact(16) {
        let offset = u64::from_ne_bytes(pair[..8].try_into().map_err(|_| "index entry")?);
        let nbytes = u64::from_ne_bytes(pair[8..].try_into().map_err(|_| "index entry")?);
        if offset == u64::MAX && nbytes == u64::MAX {
            out.push(None);
        } else {
            out.push(Some((offset, nbytes)));
        }
    }
    Ok(out)
}

/// Per-array semantics, bound when the array is opened: what a batch of it looks like. Build
/// with `ArrayOptions::default().with_*(…)`.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
#[non_exhaustive]
pub struct ArrayOptions {
    /// Element type of batches. Default [`OutputDtype::Native`].
    pub output_dtype: OutputDtype,
    /// Regions outside the array. Default [`OutOfBounds::Error`].
    pub out_of_bounds: OutOfBounds,
    /// Allow casts to an integer type that cannot hold the source's range (`uint16` to
    /// `int16`), or from a floating-point type to an integer type (see [`OutputDtype`]'s
    /// table). Default false: such a cast is an error when the array is opened. Floating-point
    /// outputs take every source without it, rounded to nearest even.
    pub allow_lossy_cast: bool,
    /// Verify checksums (crc32c codecs, zstd content checksums) while decoding. Default true.
    pub validate_checksums: bool,
}

impl Default for ArrayOptions {
    fn default() -> Self {
        Self {
            output_dtype: OutputDtype::Native,
            out_of_bounds: OutOfBounds::Error,
            allow_lossy_cast: false,
            validate_checksums: true,
        }
    }
}

impl ArrayOptions {
    /// Set the output element type.
    #[must_use]
    pub fn with_output_dtype(mut self, dtype: OutputDtype) -> Self {
        self.output_dtype = dtype;
        self
    }

    /// Set the out-of-bounds policy.
    #[must_use]
    pub fn with_out_of_bounds(mut self, policy: OutOfBounds) -> Self {
        self.out_of_bounds = policy;
        self
    }

    /// Allow casts to integer types that cannot hold the source's values (see
    /// [`ArrayOptions::allow_lossy_cast`]).
    #[must_use]
    pub fn with_lossy_cast(mut self, allow: bool) -> Self {
        self.allow_lossy_cast = allow;
        self
    }

    /// Verify checksums while decoding (or not).
    #[must_use]
    pub fn with_validate_checksums(mut self, validate: bool) -> Self {
        self.validate_checksums = validate;
        self
    }
}

/// What to do with a region that reaches outside its array.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, Default)]
#[non_exhaustive]
pub enum OutOfBounds {
    /// Fail with an error naming the array and the region (the default).
    #[default]
    Error,
    /// Pad the part outside the array with the fill value.
    Fill,
}

/// An open array: its store, its metadata, the options it was opened with and the element type
/// its batches have. Cheap to clone; dereferences to [`ArrayMeta`].
#[derive(Clone)]
pub struct ArrayHandle {
    inner: Arc<HandleInner>,
}

struct HandleInner {
    store: Store,
    meta: ArrayMeta,
    options: ArrayOptions,
    out_dtype: Dtype,
}

impl std::fmt::Debug for ArrayHandle {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("ArrayHandle")
            .field("store", &self.inner.store.url())
            .field("meta", &self.inner.meta)
            .field("options", &self.inner.options)
            .finish()
    }
}

impl std::ops::Deref for ArrayHandle {
    type Target = ArrayMeta;

    fn deref(&self) -> &ArrayMeta {
        &self.inner.meta
    }
}

impl ArrayHandle {
    /// Bind metadata to its store and options; refuses a cast that loses values unless the
    /// options allow it. [`crate::Reader::open_array`] does this with cached metadata; call it
    /// directly with metadata from [`ArrayMeta::from_metadata_json`] or
    /// [`ArrayMeta::from_zarrs`].
    pub fn new(store: Store, meta: ArrayMeta, options: ArrayOptions) -> Result<Self> {
        let out_dtype = options.output_dtype.resolve(meta.dtype);
        if !options.allow_lossy_cast
            && let Some(reason) = meta.dtype.lossy_cast_reason(out_dtype)
        {
            return Err(Error::invalid(format!(
                "output dtype {out_dtype} for array {}: {reason}; choose another output dtype or allow lossy casts",
                meta.path
            )));
        }
        Ok(Self { inner: Arc::new(HandleInner { store, meta, options, out_dtype }) })
    }

    /// An array from metadata the caller built (e.g. [`ArrayMeta::from_zarrs`] of an array zarrs
    /// opened) and the store that holds its chunks; refuses a cast that loses values unless the
    /// options allow it. Nothing is read.
    pub fn from_meta(store: Store, meta: ArrayMeta, options: ArrayOptions) -> Result<Self> {
        Self::new(store, meta, options)
    }

    /// The store the array lives in.
    #[must_use]
    pub fn store(&self) -> &Store {
        &self.inner.store
    }

    /// The array's metadata.
    #[must_use]
    pub fn meta(&self) -> &ArrayMeta {
        &self.inner.meta
    }

    /// The options the array was opened with.
    #[must_use]
    pub fn options(&self) -> &ArrayOptions {
        &self.inner.options
    }

    /// The element type of batches read from this array.
    #[must_use]
    pub fn out_dtype(&self) -> Dtype {
        self.inner.out_dtype
    }

    /// This array with other options (the metadata is shared, not read again).
    pub fn with_options(&self, options: ArrayOptions) -> Result<Self> {
        Self::new(self.inner.store.clone(), self.inner.meta.clone(), options)
    }
}
