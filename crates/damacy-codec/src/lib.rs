//! damacy-codec: the read engine of damacy beside zarrs.
//!
//! zarrs has no codec-pipeline object to swap out, so this crate sits beside
//! [`zarrs::array::Array`] and uses zarrs for metadata, data types, chunk grids, chunk keys,
//! codec chains and storage, while planning, fetching and decoding batches itself. A batch
//! flows through one module per stage:
//!
//! ```text
//! regions ─ plan    (units, shard indexes from the cache, coalesced requests)   plan.rs
//!         ─ fetch   (byte ranges: sync on local files, async on remote stores)   fetch.rs
//!         ─ decode  (one Executor trait: zarrs chains on rayon, or device kernels) decode/
//!         ─ assemble(crop, steps, fill, dtype cast: host or device)              assemble.rs
//!         ─ output  (a caller's host slice or device buffer, or an aligned Batch) output.rs
//! ```
//!
//! Resources (threads, caches, device budgets) belong to the [`Reader`] ([`ReaderConfig`]);
//! semantics (output dtype, out-of-bounds policy) to each opened array ([`ArrayOptions`]), and
//! each array's codec chain is classified once, when it is opened ([`ChainRoute`]).
//!
//! Start with [`Store::open`], [`Reader::new`], [`Reader::open_array`] and
//! [`Reader::read_batch`].

mod array;
mod assemble;
mod codec;
mod config;
mod ctx;
mod decode;
mod dtype;
mod error;
mod fetch;
mod output;
mod plan;
mod reader;
mod region;
mod remote;
mod route;
mod shard_index;
mod stats;
mod store;

pub use array::{ArrayHandle, ArrayMeta, ArrayOptions, OutOfBounds, ShardLayout, normalize_path};
pub use codec::{ChainRoute, DeviceChain, DeviceCodec, classify};
pub use config::{ExecutorKind, MIN_DEVICE_BUFFER_BYTES, MIN_HOST_BUFFER_BYTES, ReaderConfig};
pub use damacy_kernels::Error as DeviceError;
pub use damacy_kernels::{Device, DeviceBuffer, DeviceKind, Event, Stream};
pub use dtype::{CastKind, Dtype, OutputDtype, UnknownDtype};
pub use error::{Error, IoDriverStopped, Location, Result, Source, StorageErrorKind};
pub use output::{BATCH_ALIGN, Batch, DeviceArrayMut, Element, HostArrayMut, Output};
pub use plan::{BatchPlan, coalesce};
pub use reader::{AxisSelection, ChunkSelection, Reader};
pub use region::{Region, c_strides};
pub use remote::StoreStats;
pub use route::{CodecRoute, Route, describe, index_routes, routes};
pub use shard_index::{ShardIndex, ShardIndexCache};
pub use stats::StatsSnapshot;
pub use store::{Coalescing, Store, StoreKind, StoreOptions, off_thread};
pub use zarrs_storage;
