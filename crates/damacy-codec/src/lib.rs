//! damacy-codec: the read path of damacy beside zarrs.
//!
//! zarrs has no codec-pipeline object to swap out, so this crate sits beside
//! [`zarrs::array::Array`] and uses zarrs for metadata, data types, chunk grids, chunk keys,
//! codec chains and storage, while planning, fetching and decoding batches of regions itself:
//!
//! ```text
//! regions ─ plan (chunks, shard indexes from the cache) ─ coalesced byte-range reads
//!         ─ decode (zarrs codec chains on rayon, or device kernels) ─ assemble ─ Batch
//! ```
//!
//! Start with [`Store::open`], [`Reader::new`] and [`Reader::read_batch`].

pub mod array;
mod assemble;
pub mod config;
mod cpu;
pub mod device;
pub mod discover;
pub mod dtype;
pub mod error;
pub mod io;
pub mod reader;
pub mod region;
pub mod route;
pub mod shard_index;
pub mod stats;
pub mod store;

pub use array::ArrayInfo;
pub use config::{Executor, OutOfBounds, ReadConfig};
pub use dtype::{Dtype, OutputDtype};
pub use error::{Error, Location, Result};
pub use reader::{Batch, Reader};
pub use region::Region;
pub use stats::StatsSnapshot;
pub use store::{Store, StoreKind, StoreOptions};
