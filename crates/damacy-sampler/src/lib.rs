//! Per-rank sample plans (strided, contiguous, chunk-aware, resumable).
//!
//! A [`Plan`] turns a sample space into this rank's ordered samples for one
//! epoch, so that every rank of a torchrun job sees a disjoint share, equal
//! in length, deterministic, and cheap to read from chunked storage. No I/O,
//! no GPU: compose it with any loader; damacy's Pipeline consumes it.
//!
//! - **Spaces** ([`space`]): [`IndexSpace`] (N rows over one or more arrays,
//!   in chunks of rows) and [`CropSpace`] (crop positions in N-D chunked and
//!   sharded arrays, on a grid or at random). Samples are numbered so that
//!   every chunk and every shard is a contiguous range of ids.
//! - **Modes**: [`Mode::Strided`] (`all[rank::world]`) and
//!   [`Mode::Contiguous`] (`all[rank*n:(rank+1)*n]`), at
//!   [`Granularity::Sample`] or [`Granularity::Group`] (whole chunks or shards
//!   per rank, so no chunk is decoded on two ranks).
//! - **Shuffles** ([`Shuffle`]): none, full (a keyed Feistel [`Permutation`]
//!   in O(1) memory), or two-level (group order, then samples within a window
//!   of groups). Epoch keys are a hash-mix of `(seed, epoch)` ([`EpochKey`]),
//!   never `seed + epoch`.
//! - **Equal length** ([`EqualLength`]): `Pad` (repeats marked `padded`),
//!   `Drop` (the dropped samples change by epoch) or `Uneven` (exact once).
//! - **Workers**: [`Plan::worker`] splits a rank's batches over data-loader workers.
//! - **Resumption**: [`Plan::checkpoint`] → [`ResumeState`] `(epoch, cursor)`
//!   → [`PlanConfig::with_resume`]. Strided sample-granular plans are elastic:
//!   their global order does not depend on the world size, and a run resumed
//!   on a new world size (same global batch) continues without repeats.
//! - **Rank source**: [`RankSource::new`] or [`RankSource::from_env`]
//!   (`RANK`, `WORLD_SIZE`, `LOCAL_RANK`).
//! - **Locality** ([`locality::measure`]): chunks and shards per batch, chunks
//!   shared between ranks, read amplification.
//!
//! # Example
//!
//! ```
//! use damacy_sampler::{IndexSpace, Plan, PlanConfig, RankSource, EqualLength};
//!
//! let space = IndexSpace::chunked(1_000_000, 1_000)?;
//! let config = PlanConfig::new()
//!     .with_rank(RankSource::new(2, 8)) // or RankSource::from_env()?
//!     .with_batch_size(64)
//!     .with_seed(1234)
//!     .with_epoch(5)
//!     .with_equal_length(EqualLength::Drop);
//! let plan = Plan::new(&space, config)?;
//! assert_eq!(plan.n_batches(), 1_000_000 / (8 * 64));
//! for batch in plan.batches().take(2) {
//!     let rows: Vec<u64> = batch.samples.iter().map(|s| plan.resolve(*s).row).collect();
//!     assert_eq!(rows.len(), 64);
//! }
//! # Ok::<(), damacy_sampler::SamplerError>(())
//! ```
//!
//! See [`Plan`] for an example per mode, and the [`plan`] module for which
//! guarantee holds in which mode.

mod config;
mod error;
mod hash;
pub mod locality;
mod permute;
pub mod plan;
mod rank;
pub mod space;

pub use config::{EqualLength, Granularity, Mode, PlanConfig, ResumeState, Shuffle, WorkerSplit};
pub use error::SamplerError;
pub use hash::{EpochKey, SampleRng, splitmix64};
pub use permute::Permutation;
pub use plan::{Batch, Batches, Plan, PlanIter, PlannedSample, WorkerPlan};
pub use rank::RankSource;
pub use space::{
    ArrayGeometry, ChunkFootprint, ChunkRef, CropOptions, CropPlacement, CropSample, CropSampling, CropSpace,
    GroupLevel, IndexOptions, IndexSample, IndexSpace, MAX_DIMS, Region, SampleSpace,
};

/// The README's examples, run as doc tests.
#[cfg(doctest)]
#[doc = include_str!("../README.md")]
struct ReadmeDoctests;
