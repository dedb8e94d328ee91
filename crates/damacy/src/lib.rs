//! damacy streams regions of zarr arrays (random crops, tiles, rows) into batched tensors for
//! training, one pipeline per rank.
//!
//! This crate is the user-facing facade. Today it offers the host read path of
//! [`damacy_codec`] ([`Reader`], [`Store`], [`Region`]) and the per-rank sample plans of
//! [`damacy_sampler`] (re-exported as [`sampler`]); the batched `Pipeline` builds on both.
//!
//! ```
//! use damacy::{ReadConfig, Reader, Region, Store, StoreOptions};
//! # fn main() -> Result<(), damacy::Error> {
//! # let root = concat!(env!("CARGO_MANIFEST_DIR"), "/../../fixtures");
//! let store = Store::open(root, &StoreOptions::default())?;
//! let reader = Reader::new(ReadConfig::default())?;
//! let array = reader.open_array(&store, "v3/zstd_l3_ck")?;
//! let tile = reader.read_region(&store, &array, &Region::new(vec![0, 0, 0], vec![16, 16, 8]))?;
//! assert_eq!(tile.len(), 16 * 16 * 8 * 2);
//! # Ok(()) }
//! ```

pub use damacy_codec::{
    ArrayInfo, Batch, Dtype, Executor, Location, OutOfBounds, OutputDtype, ReadConfig, Reader, Region, StatsSnapshot,
    Store, StoreKind, StoreOptions,
};
pub use damacy_sampler as sampler;

/// Everything that can go wrong in damacy.
#[derive(Debug, thiserror::Error)]
#[non_exhaustive]
pub enum Error {
    /// From the read path (stores, metadata, decoding).
    #[error(transparent)]
    Codec(#[from] damacy_codec::Error),
}
