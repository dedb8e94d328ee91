//! Plan options: a plain struct with documented defaults and `with_*` builders,
//! checked once by [`Plan::new`](crate::Plan::new).

use crate::rank::RankSource;
use crate::space::GroupLevel;

/// How a rank's share is cut from the epoch's order.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, Default)]
pub enum Mode {
    /// `all[rank::world]`: rank r takes every world-th item starting at r. The
    /// default. At sample granularity this is the elastic mode: each global
    /// batch (world × batch samples of the global order) is shared out among
    /// the ranks, so the global order does not depend on the world size.
    #[default]
    Strided,
    /// `all[rank*n:(rank+1)*n]`: rank r takes one contiguous block. Better
    /// locality without a shuffle or with a two-level shuffle; depends on the
    /// world size (not elastic).
    Contiguous,
}

impl Mode {
    /// The mode in words.
    #[must_use]
    pub fn name(self) -> &'static str {
        match self {
            Self::Strided => "strided",
            Self::Contiguous => "contiguous",
        }
    }
}

/// What a plan hands to ranks: single samples or whole groups.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, Default)]
pub enum Granularity {
    /// Samples are dealt out one by one. The default.
    #[default]
    Sample,
    /// Whole groups (chunks or shards, see [`PlanConfig::with_group_level`])
    /// go to one rank, so no group is read by two ranks. Depends on the world
    /// size (not elastic).
    Group,
}

/// How the epoch's order is shuffled.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, Default)]
pub enum Shuffle {
    /// No shuffle: ids in order. (An `EqualLength::Drop` hole still moves by epoch.)
    None,
    /// A full shuffle: a keyed Feistel permutation of all ids, O(1) memory.
    /// The default. With group granularity: group order shuffled, and samples
    /// within each group (use `TwoLevel` to mix samples across groups).
    #[default]
    Full,
    /// Shuffle the group order, then shuffle samples within each window of
    /// `window` consecutive groups: a batch touches about `window` groups
    /// instead of `batch` groups.
    TwoLevel {
        /// Groups per window (at least 1).
        window: u64,
    },
}

/// How ranks are made equal in length (equal batch counts keep collectives from hanging).
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, Default)]
pub enum EqualLength {
    /// Every rank gets the same number of full batches; extra samples are
    /// repeats marked `padded: true` (eval can ignore them). The default, as
    /// in torch (which pads to a multiple of the world size only).
    #[default]
    Pad,
    /// Every rank gets the same number of full batches; the rest is dropped.
    /// Which samples are dropped changes with the epoch.
    Drop,
    /// Every sample exactly once; ranks may differ by one batch and the last
    /// batch may be short. Unsafe with collectives (a rank with one batch fewer
    /// leaves the others waiting in all-reduce).
    Uneven,
}

/// How a rank's batches are split over data-loader workers.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, Default)]
pub enum WorkerSplit {
    /// Worker w takes batches w, w + n, w + 2n, …: a loader that polls its
    /// workers round-robin (torch's `DataLoader`) yields the rank's batches in
    /// plan order. The default.
    #[default]
    Interleaved,
    /// Worker w takes one contiguous run of batches: better chunk reuse inside
    /// a worker, but a round-robin loader interleaves the runs.
    Contiguous,
}

/// Where to resume an epoch: `(epoch, cursor)`, plus the world and batch size
/// the checkpoint was taken with, used to check that a world-size-dependent
/// plan is resumed under the same ones.
///
/// Make one with [`Plan::checkpoint`](crate::Plan::checkpoint); pass it to
/// [`PlanConfig::with_resume`].
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
pub struct ResumeState {
    /// The epoch.
    pub epoch: u64,
    /// Positions of the epoch's global order consumed by all ranks together.
    /// For elastic plans it counts samples that `Drop` skipped before them too;
    /// for the others it is steps × world × batch.
    pub cursor: u64,
    /// The world size at the checkpoint.
    pub world: u32,
    /// The per-rank batch size at the checkpoint.
    pub batch_size: u64,
}

/// The options of a [`Plan`](crate::Plan).
///
/// | option | default |
/// |---|---|
/// | rank / world | 0 / 1 ([`RankSource::default`]) |
/// | batch size (per rank) | 1 |
/// | [`Mode`] | `Strided` |
/// | [`Granularity`] | `Sample` |
/// | [`GroupLevel`] | `Chunk` |
/// | [`Shuffle`] | `Full` |
/// | [`EqualLength`] | `Pad` |
/// | seed / epoch | 0 / 0 |
/// | resume | none (start of the epoch) |
///
/// ```
/// use damacy_sampler::{PlanConfig, RankSource, Mode, Shuffle, EqualLength};
/// let config = PlanConfig::new()
///     .with_rank(RankSource::new(1, 4))
///     .with_batch_size(32)
///     .with_mode(Mode::Contiguous)
///     .with_shuffle(Shuffle::TwoLevel { window: 8 })
///     .with_equal_length(EqualLength::Drop)
///     .with_seed(1234)
///     .with_epoch(3);
/// assert_eq!(config.batch_size(), 32);
/// ```
#[derive(Debug, Clone, PartialEq, Eq, Hash)]
pub struct PlanConfig {
    pub(crate) rank: RankSource,
    pub(crate) batch_size: u64,
    pub(crate) mode: Mode,
    pub(crate) granularity: Granularity,
    pub(crate) group_level: GroupLevel,
    pub(crate) shuffle: Shuffle,
    pub(crate) equal_length: EqualLength,
    pub(crate) seed: u64,
    pub(crate) epoch: u64,
    pub(crate) resume: Option<ResumeState>,
}

impl Default for PlanConfig {
    fn default() -> Self {
        Self {
            rank: RankSource::default(),
            batch_size: 1,
            mode: Mode::default(),
            granularity: Granularity::default(),
            group_level: GroupLevel::default(),
            shuffle: Shuffle::default(),
            equal_length: EqualLength::default(),
            seed: 0,
            epoch: 0,
            resume: None,
        }
    }
}

impl PlanConfig {
    /// The defaults (see the table above).
    #[must_use]
    pub fn new() -> Self {
        Self::default()
    }

    /// This process's rank and the world size.
    #[must_use]
    pub fn with_rank(mut self, rank: RankSource) -> Self {
        self.rank = rank;
        self
    }

    /// Samples per batch on each rank. The global batch is world × this.
    #[must_use]
    pub fn with_batch_size(mut self, batch_size: u64) -> Self {
        self.batch_size = batch_size;
        self
    }

    /// Strided or contiguous.
    #[must_use]
    pub fn with_mode(mut self, mode: Mode) -> Self {
        self.mode = mode;
        self
    }

    /// Sample or group granularity.
    #[must_use]
    pub fn with_granularity(mut self, granularity: Granularity) -> Self {
        self.granularity = granularity;
        self
    }

    /// The groups used by group granularity and two-level shuffles.
    #[must_use]
    pub fn with_group_level(mut self, level: GroupLevel) -> Self {
        self.group_level = level;
        self
    }

    /// The shuffle.
    #[must_use]
    pub fn with_shuffle(mut self, shuffle: Shuffle) -> Self {
        self.shuffle = shuffle;
        self
    }

    /// How ranks are made equal in length.
    #[must_use]
    pub fn with_equal_length(mut self, equal_length: EqualLength) -> Self {
        self.equal_length = equal_length;
        self
    }

    /// The run's seed: the same on every rank (a per-rank seed would give each
    /// rank a different order and break disjointness).
    #[must_use]
    pub fn with_seed(mut self, seed: u64) -> Self {
        self.seed = seed;
        self
    }

    /// The epoch (what torch's `set_epoch` sets). Ignored when resuming: the
    /// checkpoint's epoch wins.
    #[must_use]
    pub fn with_epoch(mut self, epoch: u64) -> Self {
        self.epoch = epoch;
        self
    }

    /// Resume mid-epoch from a checkpoint (its epoch replaces the configured one).
    #[must_use]
    pub fn with_resume(mut self, state: ResumeState) -> Self {
        self.resume = Some(state);
        self
    }

    /// The rank source.
    #[must_use]
    pub fn rank(&self) -> RankSource {
        self.rank
    }

    /// The per-rank batch size.
    #[must_use]
    pub fn batch_size(&self) -> u64 {
        self.batch_size
    }

    /// The mode.
    #[must_use]
    pub fn mode(&self) -> Mode {
        self.mode
    }

    /// The granularity.
    #[must_use]
    pub fn granularity(&self) -> Granularity {
        self.granularity
    }

    /// The group level.
    #[must_use]
    pub fn group_level(&self) -> GroupLevel {
        self.group_level
    }

    /// The shuffle.
    #[must_use]
    pub fn shuffle(&self) -> Shuffle {
        self.shuffle
    }

    /// The equal-length policy.
    #[must_use]
    pub fn equal_length(&self) -> EqualLength {
        self.equal_length
    }

    /// The seed.
    #[must_use]
    pub fn seed(&self) -> u64 {
        self.seed
    }

    /// The epoch the plan covers (the checkpoint's when resuming).
    #[must_use]
    pub fn epoch(&self) -> u64 {
        self.resume.map_or(self.epoch, |r| r.epoch)
    }

    /// The checkpoint to resume from, if any.
    #[must_use]
    pub fn resume(&self) -> Option<ResumeState> {
        self.resume
    }
}
