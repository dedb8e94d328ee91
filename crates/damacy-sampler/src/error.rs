//! The crate's one error type.

use thiserror::Error;

/// Everything that can go wrong when building a space, a rank source or a plan.
///
/// Every message names the bad value and says what to change. Plans validate
/// once, in [`Plan::new`](crate::Plan::new); after that nothing fails.
#[derive(Debug, Clone, PartialEq, Eq, Error)]
#[non_exhaustive]
pub enum SamplerError {
    /// The world size is zero.
    #[error("world size is 0: set WORLD_SIZE (or the `world` argument) to the number of ranks, at least 1")]
    ZeroWorld,

    /// The rank is not below the world size.
    #[error("rank {rank} is out of range for world size {world}: the rank must be in 0..{world}")]
    RankOutOfRange {
        /// The rank that was given.
        rank: u32,
        /// The world size that was given.
        world: u32,
    },

    /// An environment variable (`RANK`, `WORLD_SIZE`, `LOCAL_RANK`) has a value
    /// that is not a non-negative integer.
    #[error("environment variable {name}={value:?} is not a non-negative integer; torchrun sets it to one")]
    InvalidEnv {
        /// The variable's name.
        name: &'static str,
        /// The value that was found.
        value: String,
    },

    /// One of `RANK` / `WORLD_SIZE` is set and the other is not.
    #[error(
        "environment variable {present} is set but {missing} is not: set both (torchrun does), or neither for a single process"
    )]
    IncompleteEnv {
        /// The variable that is set.
        present: &'static str,
        /// The variable that is missing.
        missing: &'static str,
    },

    /// The per-rank batch size is zero.
    #[error("batch size is 0: use a per-rank batch size of at least 1")]
    ZeroBatchSize,

    /// A two-level shuffle was asked for with a window of zero groups.
    #[error("shuffle window is 0 groups: use a window of at least 1 group")]
    ZeroWindow,

    /// The sample space holds no samples (or no groups, for a group-granular plan).
    #[error("the sample space has no {what}: give it at least one (check array lengths, shapes and the crop shape)")]
    EmptySpace {
        /// `"samples"` or `"chunk groups"` / `"shard groups"`.
        what: &'static str,
    },

    /// `EqualLength::Drop` would leave no full batch on some rank, so every rank
    /// would get an empty plan. This includes N < world.
    #[error(
        "EqualLength::Drop leaves no full batch: the shortest rank has {shortest} of {samples} samples \
         (world {world}) but the batch size is {batch_size}; use EqualLength::Pad or EqualLength::Uneven, \
         a smaller batch size, fewer ranks, or sample granularity"
    )]
    DropLeavesNothing {
        /// Samples in the space (or left after the resume cursor).
        samples: u64,
        /// The world size.
        world: u32,
        /// The per-rank batch size.
        batch_size: u64,
        /// Samples on the shortest rank before dropping.
        shortest: u64,
    },

    /// The number of data-loader workers is zero.
    #[error("number of workers is 0: use at least 1 (one per DataLoader worker process)")]
    ZeroWorkers,

    /// The worker id is not below the number of workers.
    #[error("worker {worker} is out of range for {workers} workers: the worker id must be in 0..{workers}")]
    WorkerOutOfRange {
        /// The worker id that was given.
        worker: u32,
        /// The number of workers that was given.
        workers: u32,
    },

    /// A size that must be positive (chunk size, chunk or crop extent, stride,
    /// element size, random crop count) is zero.
    #[error("{what} is 0{location}: it must be at least 1")]
    ZeroSize {
        /// What the value is, e.g. `"chunk size"`.
        what: &'static str,
        /// Where it was found, e.g. `" (array 2, dim 1)"`, or empty.
        location: String,
    },

    /// Shapes given for one array (or the crop) have different numbers of dimensions.
    #[error("{what} has {got} dimensions but array {array} has {expected}: give one extent per dimension")]
    DimensionMismatch {
        /// The array index.
        array: usize,
        /// What has the wrong rank, e.g. `"chunk shape"`.
        what: &'static str,
        /// Dimensions of the array.
        expected: usize,
        /// Dimensions that were given.
        got: usize,
    },

    /// An array has more dimensions than the crate supports.
    #[error("array {array} has {ndim} dimensions; at most {max} are supported")]
    TooManyDimensions {
        /// The array index.
        array: usize,
        /// Its number of dimensions.
        ndim: usize,
        /// The supported maximum.
        max: usize,
    },

    /// A shard extent is not a whole number of chunks.
    #[error(
        "array {array}: shard extent {shard} in dim {dim} is not a multiple of the chunk extent {chunk}; \
         zarr shards hold whole chunks"
    )]
    ShardNotMultipleOfChunk {
        /// The array index.
        array: usize,
        /// The dimension.
        dim: usize,
        /// The shard extent.
        shard: u64,
        /// The chunk extent.
        chunk: u64,
    },

    /// `CropPlacement::WithinChunk` / `WithinShard` was asked for with a crop
    /// larger than a chunk / shard.
    #[error(
        "array {array}: the crop extent {crop} in dim {dim} is larger than the {level} extent {extent}, \
         so no crop fits inside one {level}; use CropPlacement::Anywhere or a smaller crop"
    )]
    CropLargerThanCell {
        /// The array index.
        array: usize,
        /// The dimension.
        dim: usize,
        /// The crop extent.
        crop: u64,
        /// `"chunk"` or `"shard"`.
        level: &'static str,
        /// The chunk or shard extent.
        extent: u64,
    },

    /// A count does not fit in 64 bits.
    #[error("{what} overflows 64 bits: use fewer or smaller arrays, or a larger stride")]
    Overflow {
        /// What overflowed.
        what: &'static str,
    },

    /// A resume cursor lies past the end of the epoch.
    #[error("resume cursor {cursor} is past the end of the epoch ({len} positions): use a checkpoint from this space")]
    CursorOutOfRange {
        /// The cursor that was given.
        cursor: u64,
        /// Positions in the epoch's global order.
        len: u64,
    },

    /// A plan that depends on the world size was resumed under another world size
    /// or global batch size.
    #[error(
        "this plan ({mode}) depends on the world size and batch size, and the checkpoint was taken with \
         world {saved_world} × batch {saved_batch} but this run has world {world} × batch {batch}; \
         resume with the same world and batch size, or use strided sample-granular plans, which are elastic"
    )]
    NotElastic {
        /// The plan's mode in words.
        mode: &'static str,
        /// World size at the checkpoint.
        saved_world: u32,
        /// Per-rank batch size at the checkpoint.
        saved_batch: u64,
        /// World size now.
        world: u32,
        /// Per-rank batch size now.
        batch: u64,
    },

    /// A checkpoint of a world-size-dependent plan does not sit on a step boundary.
    #[error(
        "resume cursor {cursor} is not a whole number of global batches ({global_batch} samples); \
         use Plan::checkpoint to make checkpoints"
    )]
    CursorNotOnStep {
        /// The cursor that was given.
        cursor: u64,
        /// World size × per-rank batch size.
        global_batch: u64,
    },
}
