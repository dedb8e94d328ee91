//! damacy streams regions of zarr arrays (random crops, tiles, rows) into batched tensors for
//! training, one pipeline per rank.
//!
//! This crate is the user-facing facade: the read engine of [`damacy_codec`] ([`Reader`],
//! [`Store`], [`ArrayHandle`], [`Region`], [`BatchPlan`], [`Output`]) and the per-rank sample
//! plans of [`damacy_sampler`] under [`sampler`] (its `Batch` of sample indexes lives there,
//! apart from the decoded [`Batch`] here).
//!
//! ```
//! use damacy::{ArrayOptions, OutputDtype, Dtype, ReaderConfig, Reader, Region, Store, StoreOptions};
//! # fn main() -> Result<(), damacy::Error> {
//! # let root = concat!(env!("CARGO_MANIFEST_DIR"), "/../../fixtures");
//! let store = Store::open(root, &StoreOptions::default())?;
//! let reader = Reader::new(ReaderConfig::default())?;
//! let options = ArrayOptions::default().with_output_dtype(OutputDtype::Cast(Dtype::F32));
//! let array = reader.open_array(&store, "v3/zstd_l3_ck", options)?;
//! let tile = reader.read_region(&array, &Region::new(vec![0, 0, 0], vec![16, 16, 8]))?;
//! assert_eq!(tile.as_slice::<f32>()?.len(), 16 * 16 * 8);
//! # Ok(()) }
//! ```

mod device_array;
pub mod dlpack;
mod pipeline;
#[cfg(feature = "zarrs")]
pub mod zarrs_ext;

pub use device_array::DeviceArray;
#[cfg(feature = "zarrs")]
pub use zarrs_ext::{ArrayDeviceExt, AsyncArrayDeviceExt, DamacyContext, DeviceArrayFuture, RetrieveOptions};

/// The read engine's batch: regions read by [`Reader::read_batch`] into memory it allocates.
pub use damacy_codec::Batch as ReadBatch;
pub use damacy_codec::zarrs_storage;
pub use damacy_codec::{
    ArrayHandle, ArrayMeta, ArrayOptions, AxisSelection, BATCH_ALIGN, BatchPlan, CastKind, ChainRoute, ChunkSelection,
    Coalescing, CodecRoute, Device, DeviceArrayMut, DeviceBuffer, DeviceChain, DeviceCodec, DeviceError, DeviceKind,
    Dtype, Element, Event, ExecutorKind, HostArrayMut, IoDriverStopped, Location, OutOfBounds, Output, OutputDtype,
    Reader, ReaderConfig, Region, Route, ShardLayout, StatsSnapshot, StorageErrorKind, Store, StoreKind, StoreOptions,
    StoreStats, Stream, UnknownDtype, c_strides, describe, index_routes, normalize_path, routes,
};
pub use damacy_sampler as sampler;
pub use pipeline::{
    Batch, BatchStats, Config, OnError, Pipeline, PipelineStats, Place, Sample, Sizes, StageStats, split_uri,
};

/// Everything that can go wrong in damacy: one type at the facade.
#[derive(Debug, thiserror::Error)]
#[non_exhaustive]
pub enum Error {
    /// From the read engine (stores, metadata, decoding, the device).
    #[error(transparent)]
    Codec(#[from] damacy_codec::Error),
    /// From a sample plan.
    #[error(transparent)]
    Sampler(#[from] damacy_sampler::SamplerError),
    /// One sample of a batch could not be read (its store or array, a corrupt chunk, a region
    /// outside the array, a shape that does not fit the batch): the pop of its batch returns
    /// this under [`OnError::Raise`].
    #[error("sample {sample} (batch {batch}, position {position}): {source}")]
    Sample {
        /// The sample, as [`Sample`]'s `Display` shows it.
        sample: String,
        /// The batch's index.
        batch: u64,
        /// The sample's position in its batch.
        position: usize,
        /// Why it could not be read.
        #[source]
        source: damacy_codec::Error,
    },
    /// [`Pipeline::pop`] waited [`Config::pop_timeout`]; the message says what starves.
    #[error("pop timed out: {0}")]
    Timeout(String),
    /// [`Pipeline::pop`] with nothing left to pop: every pushed sample was popped.
    #[error("nothing to pop: {0}")]
    Exhausted(String),
    /// [`Pipeline::pop`] while the consumer holds [`Config::depth`] batches: no batch buffer can
    /// come back until one is released or dropped.
    #[error("{0}")]
    PoolStarved(String),
    /// The pipeline was closed.
    #[error("the pipeline is closed")]
    Closed,
    /// A wait was cut short by its caller ([`Pipeline::pop_with`]'s `interrupted`, e.g. Ctrl-C).
    #[error("the wait was interrupted")]
    Interrupted,
}

impl Error {
    /// The storage failure kind, for storage errors.
    #[must_use]
    pub fn storage_kind(&self) -> Option<StorageErrorKind> {
        match self {
            Error::Codec(e) | Error::Sample { source: e, .. } => e.storage_kind(),
            _ => None,
        }
    }

    /// The read engine's error behind this one (for [`Error::Sample`], the sample's cause).
    #[must_use]
    pub fn codec(&self) -> Option<&damacy_codec::Error> {
        match self {
            Error::Codec(e) | Error::Sample { source: e, .. } => Some(e),
            _ => None,
        }
    }

    /// Whether this is [`Error::Exhausted`]: the end of what was pushed, not a failure.
    #[must_use]
    pub fn is_exhausted(&self) -> bool {
        matches!(self, Error::Exhausted(_))
    }

    /// An invalid argument (a configuration value, a call out of order).
    pub(crate) fn invalid(message: impl Into<String>) -> Self {
        Error::Codec(damacy_codec::Error::InvalidArgument(message.into()))
    }

    /// A failure inside damacy that no argument explains (a panic, poisoned state, a thread
    /// that could not be spawned): the engine's [`CodecError::Internal`].
    pub(crate) fn internal(what: impl Into<String>) -> Self {
        Error::Codec(damacy_codec::Error::Internal { what: what.into(), source: None })
    }

    /// [`Error::internal`] that keeps its underlying error.
    pub(crate) fn internal_from<E: std::error::Error + Send + Sync + 'static>(
        what: impl Into<String>,
        source: E,
    ) -> Self {
        Error::Codec(damacy_codec::Error::Internal { what: what.into(), source: Some(std::sync::Arc::new(source)) })
    }
}

/// The read engine's error type, for matching on its variants.
pub use damacy_codec::Error as CodecError;

const _: () = {
    const fn send_sync<T: Send + Sync>() {}
    send_sync::<Error>();
    send_sync::<Pipeline>();
    send_sync::<Batch>();
    send_sync::<Config>();
    send_sync::<PipelineStats>();
};
