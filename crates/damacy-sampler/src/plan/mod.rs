//! Per-rank plans.
//!
//! # How a plan is built
//!
//! 1. **Global order.** From `(space, seed, epoch, shuffle)` only, never the
//!    world size: the identity, a Feistel permutation of all ids, or a
//!    two-level order (group order permuted, samples permuted within windows
//!    of groups). Group-granular plans order groups instead.
//! 2. **Equal length.** `Drop` cuts a hole of `N mod (world × batch)`
//!    positions at an epoch-keyed offset; `Pad` extends the order with
//!    repeats (marked `padded`); `Uneven` leaves it alone.
//! 3. **Share.** Strided: rank r takes positions `r, r + world, …`;
//!    contiguous: one block per rank. Group granularity does this with whole
//!    groups, then lays out the rank's samples group by group.
//!
//! # Guarantees
//!
//! | | strided, sample | contiguous, sample | group granularity |
//! |---|---|---|---|
//! | ranks disjoint (non-padded samples) | ✓ | ✓ | ✓, and no group on two ranks |
//! | coverage | all but the `Drop` hole | all but the `Drop` hole | all but each rank's `Drop` hole |
//! | equal batch counts (`Pad`/`Drop`) | ✓ | ✓ | ✓ |
//! | `Uneven` batch counts differ by | ≤ 1 | ≤ 1 | up to the group-size imbalance |
//! | global order independent of world size | ✓ | ✓ (the order; the split is not) | ✗ (groups are dealt per world) |
//! | resume on another world size, same global batch | ✓ exact continuation | ✗ error | ✗ error |
//! | resume on the same world size | ✓ tail of the plan | ✓ tail | ✓ tail |
//! | memory | O(1) (O(window) for two-level) | O(1) | O(window) + O(world) at build |
//! | build time | O(1) | O(1) | O(groups) |
//!
//! A two-level layout seeks in O(groups) on random access ([`Plan::get`]);
//! iteration is O(1) amortised per sample.

use crate::config::{EqualLength, Granularity, Mode, PlanConfig, ResumeState, Shuffle, WorkerSplit};
use crate::error::SamplerError;
use crate::hash::{EpochKey, mix, reduce, stream};
use crate::permute::Permutation;
use crate::space::{GroupLevel, SampleSpace};

mod layout;

use layout::{Cursor, GroupSeq, Layout, Windowed};

/// One entry of a plan: a global sample id, and whether it is a repeat added
/// by [`EqualLength::Pad`] (eval should ignore those).
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
pub struct PlannedSample {
    /// The global sample id (resolve it with [`Plan::resolve`]).
    pub id: u64,
    /// Whether this entry repeats a sample to even out rank lengths.
    pub padded: bool,
}

/// One batch of a plan.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Batch {
    /// The batch's index in the rank's plan.
    pub index: u64,
    /// Its samples, in order.
    pub samples: Vec<PlannedSample>,
}

/// How position `v` of the (un-holed, un-padded) order is fixed up.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
enum Fix {
    Identity,
    /// Positions at or after `at` skip `len` positions (the `Drop` hole).
    Hole {
        at: u64,
        len: u64,
    },
    /// Positions at or past `n` wrap around and are padding.
    Wrap {
        n: u64,
    },
    /// Every entry is padding, with id `v mod n` (a group-granular rank with
    /// no groups).
    AllPadded {
        n: u64,
    },
}

/// The per-rank plan: this rank's ordered samples for one epoch, computed
/// lazily in O(1) memory (see the [module docs](self) for the guarantees).
///
/// # Examples
///
/// Strided, sample granularity, full shuffle (the defaults; elastic):
///
/// ```
/// use damacy_sampler::{IndexSpace, Plan, PlanConfig, RankSource};
/// let space = IndexSpace::new(10);
/// let plans: Vec<Plan<_>> = (0..3)
///     .map(|r| Plan::new(&space, PlanConfig::new().with_rank(RankSource::new(r, 3)).with_batch_size(2).with_seed(7)))
///     .collect::<Result<_, _>>()?;
/// // Pad: 10 samples → 2 full batches per rank, 2 repeats marked padded.
/// assert!(plans.iter().all(|p| p.n_batches() == 2 && p.len() == 4));
/// let padded: usize = plans.iter().map(|p| p.iter().filter(|s| s.padded).count()).sum();
/// assert_eq!(padded, 2);
/// # Ok::<(), damacy_sampler::SamplerError>(())
/// ```
///
/// Contiguous, no shuffle, drop: `all[rank*n:(rank+1)*n]`:
///
/// ```
/// use damacy_sampler::{EqualLength, IndexSpace, Mode, Plan, PlanConfig, RankSource, Shuffle};
/// let config = |r| PlanConfig::new()
///     .with_rank(RankSource::new(r, 2))
///     .with_mode(Mode::Contiguous)
///     .with_shuffle(Shuffle::None)
///     .with_equal_length(EqualLength::Drop)
///     .with_batch_size(2);
/// let p0 = Plan::new(IndexSpace::new(8), config(0))?;
/// let p1 = Plan::new(IndexSpace::new(8), config(1))?;
/// assert_eq!(p0.iter().map(|s| s.id).collect::<Vec<_>>(), vec![0, 1, 2, 3]);
/// assert_eq!(p1.iter().map(|s| s.id).collect::<Vec<_>>(), vec![4, 5, 6, 7]);
/// # Ok::<(), damacy_sampler::SamplerError>(())
/// ```
///
/// Chunk granularity with a two-level shuffle: whole chunks per rank.
///
/// ```
/// use damacy_sampler::{Granularity, IndexSpace, Plan, PlanConfig, RankSource, Shuffle, EqualLength};
/// let space = IndexSpace::chunked(1000, 100)?;
/// let config = |r| PlanConfig::new()
///     .with_rank(RankSource::new(r, 2))
///     .with_granularity(Granularity::Group)
///     .with_shuffle(Shuffle::TwoLevel { window: 2 })
///     .with_equal_length(EqualLength::Uneven)
///     .with_batch_size(50);
/// let chunks = |r| -> std::collections::BTreeSet<u64> {
///     Plan::new(&space, config(r)).unwrap().iter().map(|s| s.id / 100).collect()
/// };
/// let (c0, c1) = (chunks(0), chunks(1));
/// assert_eq!(c0.len() + c1.len(), 10);
/// assert!(c0.is_disjoint(&c1));
/// # Ok::<(), damacy_sampler::SamplerError>(())
/// ```
///
/// Resuming: a checkpoint taken after k batches gives the tail of the plan,
/// and (strided, sample granularity) continues on another world size:
///
/// ```
/// use damacy_sampler::{IndexSpace, Plan, PlanConfig, RankSource};
/// let space = IndexSpace::new(96);
/// let cfg = |r, w, b| PlanConfig::new().with_rank(RankSource::new(r, w)).with_batch_size(b).with_seed(3);
/// let before = Plan::new(&space, cfg(0, 2, 6))?;
/// let state = before.checkpoint(3); // 3 steps of a global batch of 12
/// assert_eq!(state.cursor, 36);
/// // Same world: the tail.
/// let resumed = Plan::new(&space, cfg(0, 2, 6).with_resume(state))?;
/// assert!(resumed.iter().eq(before.iter().skip(18)));
/// // World 3 with batch 4 (global batch 12): continues without repeats.
/// let mut seen: Vec<u64> = (0..2).flat_map(|r| Plan::new(&space, cfg(r, 2, 6)).unwrap().iter().take(18).map(|s| s.id).collect::<Vec<_>>()).collect();
/// for r in 0..3 {
///     seen.extend(Plan::new(&space, cfg(r, 3, 4).with_resume(state))?.iter().map(|s| s.id));
/// }
/// seen.sort_unstable();
/// assert_eq!(seen, (0..96).collect::<Vec<_>>());
/// # Ok::<(), damacy_sampler::SamplerError>(())
/// ```
#[derive(Debug, Clone)]
pub struct Plan<S> {
    space: S,
    config: PlanConfig,
    key: EpochKey,
    rank: u32,
    world: u32,
    len: u64,
    base: u64,
    step: u64,
    fix: Fix,
    layout: Layout,
    elastic: bool,
    /// Elastic plans: the global-order cursor this plan starts at.
    start_cursor: u64,
    /// Elastic plans: end of the (un-holed) order; others: unused.
    order_end: u64,
    /// World-size-dependent plans: steps done before this plan starts.
    start_steps: u64,
    /// World-size-dependent plans: steps in the whole epoch (longest rank).
    epoch_steps: u64,
}

fn group_what(level: GroupLevel) -> &'static str {
    match level {
        GroupLevel::Chunk => "chunk groups",
        GroupLevel::Shard => "shard groups",
    }
}

/// What the share step computes: the rank's entries are `fix(base + i·step)`
/// for `i in 0..len`.
struct Share {
    len: u64,
    base: u64,
    step: u64,
    fix: Fix,
    layout: Layout,
    order_end: u64,
    epoch_steps: u64,
}

impl<S: SampleSpace> Plan<S> {
    /// Builds this rank's plan for one epoch, checking the configuration once.
    ///
    /// Errors: world 0 or rank ≥ world; batch size or window 0; an empty
    /// space; `Drop` leaving no full batch (e.g. N < world); a resume cursor
    /// past the epoch, off a step boundary, or (for world-size-dependent plans)
    /// from another world or batch size.
    pub fn new(space: S, config: PlanConfig) -> Result<Self, SamplerError> {
        config.rank.validate()?;
        if config.batch_size == 0 {
            return Err(SamplerError::ZeroBatchSize);
        }
        if let Shuffle::TwoLevel { window: 0 } = config.shuffle {
            return Err(SamplerError::ZeroWindow);
        }
        if space.is_empty() {
            return Err(SamplerError::EmptySpace { what: "samples" });
        }
        let key = EpochKey::new(config.seed, config.epoch());
        let world = config.rank.world();
        let rank = config.rank.rank();
        let global_batch = u64::from(world)
            .checked_mul(config.batch_size)
            .ok_or(SamplerError::Overflow { what: "global batch size" })?;
        let elastic = config.granularity == Granularity::Sample && config.mode == Mode::Strided;

        let mut start_cursor = 0;
        let mut start_steps = 0;
        if let Some(state) = config.resume {
            if elastic {
                if state.cursor > space.len() {
                    return Err(SamplerError::CursorOutOfRange { cursor: state.cursor, len: space.len() });
                }
                start_cursor = state.cursor;
            } else {
                if state.world != world || state.batch_size != config.batch_size {
                    return Err(SamplerError::NotElastic {
                        mode: if config.granularity == Granularity::Group {
                            "group granularity"
                        } else {
                            "contiguous, sample granularity"
                        },
                        saved_world: state.world,
                        saved_batch: state.batch_size,
                        world,
                        batch: config.batch_size,
                    });
                }
                if state.cursor % global_batch != 0 {
                    return Err(SamplerError::CursorNotOnStep { cursor: state.cursor, global_batch });
                }
                start_steps = state.cursor / global_batch;
            }
        }

        let share = match config.granularity {
            Granularity::Sample => Self::share_samples(&space, &config, key, start_cursor)?,
            Granularity::Group => Self::share_groups(&space, &config, key)?,
        };
        let Share { mut len, mut base, step, fix, layout, order_end, epoch_steps } = share;

        if !elastic && start_steps > 0 {
            if start_steps > epoch_steps {
                return Err(SamplerError::CursorOutOfRange {
                    cursor: start_steps * global_batch,
                    len: epoch_steps * global_batch,
                });
            }
            let skip = (start_steps * config.batch_size).min(len);
            base += skip * step;
            len -= skip;
        }
        Ok(Self {
            space,
            config,
            key,
            rank,
            world,
            len,
            base,
            step,
            fix,
            layout,
            elastic,
            start_cursor,
            order_end,
            start_steps,
            epoch_steps,
        })
    }

    fn share_samples(space: &S, config: &PlanConfig, key: EpochKey, c0: u64) -> Result<Share, SamplerError> {
        let n = space.len();
        let world = u64::from(config.rank.world());
        let rank = u64::from(config.rank.rank());
        let b = config.batch_size;
        let gb = world * b;
        let layout = match config.shuffle {
            Shuffle::None => Layout::Flat(None),
            Shuffle::Full => Layout::Flat(Some(Permutation::new(n, key.stream(stream::ORDER)))),
            Shuffle::TwoLevel { window } => {
                let level = config.group_level;
                let g = space.group_count(level);
                if g == 0 {
                    return Err(SamplerError::EmptySpace { what: group_what(level) });
                }
                Layout::Windowed(Windowed {
                    seq: GroupSeq {
                        order: Some(Permutation::new(g, key.stream(stream::GROUP_ORDER))),
                        start: 0,
                        step: 1,
                        count: g,
                    },
                    window,
                    level,
                    salt: Some(key.stream(stream::WINDOW)),
                })
            }
        };
        // The order after equal-length fixing: positions c0..order_end (un-holed).
        let rem = n - c0;
        let (order_end, fix) = match config.equal_length {
            EqualLength::Drop => {
                let d = rem % gb;
                let kept = rem - d;
                if kept == 0 && c0 == 0 {
                    return Err(SamplerError::DropLeavesNothing {
                        samples: n,
                        world: config.rank.world(),
                        batch_size: b,
                        shortest: n / world,
                    });
                }
                let fix = if d == 0 {
                    Fix::Identity
                } else {
                    // The hole sits at the same absolute place for a fresh plan
                    // and for one resumed before it (same global batch).
                    let d0 = n % gb;
                    let at = reduce(key.stream(stream::DROP), n - d0 + 1).clamp(c0, n - d);
                    Fix::Hole { at, len: d }
                };
                (c0 + kept, fix)
            }
            EqualLength::Pad => {
                let padded = rem.div_ceil(gb) * gb;
                let fix = if padded == rem { Fix::Identity } else { Fix::Wrap { n } };
                (c0 + padded, fix)
            }
            EqualLength::Uneven => (n, Fix::Identity),
        };
        let total = order_end - c0;
        let (len, base, step) = match config.mode {
            Mode::Strided => {
                let base = c0 + rank;
                let len = if order_end > base { (order_end - base - 1) / world + 1 } else { 0 };
                (len, base, world)
            }
            Mode::Contiguous => {
                if config.equal_length == EqualLength::Uneven {
                    let lo = (u128::from(rank) * u128::from(total) / u128::from(world)) as u64;
                    let hi = (u128::from(rank + 1) * u128::from(total) / u128::from(world)) as u64;
                    (hi - lo, c0 + lo, 1)
                } else {
                    let per = total / world;
                    (per, c0 + rank * per, 1)
                }
            }
        };
        let epoch_steps = total.div_ceil(world).div_ceil(b);
        Ok(Share { len, base, step, fix, layout, order_end, epoch_steps })
    }

    fn share_groups(space: &S, config: &PlanConfig, key: EpochKey) -> Result<Share, SamplerError> {
        let n = space.len();
        let level = config.group_level;
        let g = space.group_count(level);
        if g == 0 {
            return Err(SamplerError::EmptySpace { what: group_what(level) });
        }
        let world = u64::from(config.rank.world());
        let rank = u64::from(config.rank.rank());
        let b = config.batch_size;
        let order = match config.shuffle {
            Shuffle::None => None,
            Shuffle::Full | Shuffle::TwoLevel { .. } => Some(Permutation::new(g, key.stream(stream::GROUP_ORDER))),
        };
        let seq_of = |q: u64| -> GroupSeq {
            match config.mode {
                Mode::Strided => GroupSeq {
                    order: order.clone(),
                    start: q,
                    step: world,
                    count: if g > q { (g - q - 1) / world + 1 } else { 0 },
                },
                Mode::Contiguous => {
                    let lo = (u128::from(q) * u128::from(g) / u128::from(world)) as u64;
                    let hi = (u128::from(q + 1) * u128::from(g) / u128::from(world)) as u64;
                    GroupSeq { order: order.clone(), start: lo, step: 1, count: hi - lo }
                }
            }
        };
        // Samples per rank: one pass over all groups, O(world) memory.
        let lengths: Vec<u64> = (0..world)
            .map(|q| {
                let seq = seq_of(q);
                (0..seq.count)
                    .map(|j| {
                        let r = space.group_range(level, seq.group(j), key);
                        r.end - r.start
                    })
                    .sum()
            })
            .collect();
        let mine = lengths[rank as usize];
        let shortest = lengths.iter().copied().min().unwrap_or(0);
        let longest = lengths.iter().copied().max().unwrap_or(0);
        let (window, salt) = match config.shuffle {
            Shuffle::None => (1, None),
            Shuffle::Full => (1, Some(mix(key.stream(stream::WINDOW), rank))),
            Shuffle::TwoLevel { window } => (window, Some(mix(key.stream(stream::WINDOW), rank))),
        };
        let layout = Layout::Windowed(Windowed { seq: seq_of(rank), window, level, salt });
        let (len, fix, epoch_steps) = match config.equal_length {
            EqualLength::Drop => {
                let kept = shortest / b * b;
                if kept == 0 {
                    return Err(SamplerError::DropLeavesNothing {
                        samples: n,
                        world: config.rank.world(),
                        batch_size: b,
                        shortest,
                    });
                }
                let fix = if mine > kept {
                    let at = reduce(mix(key.stream(stream::DROP), rank), kept + 1);
                    Fix::Hole { at, len: mine - kept }
                } else {
                    Fix::Identity
                };
                (kept, fix, kept / b)
            }
            EqualLength::Pad => {
                let target = longest.div_ceil(b) * b;
                let fix = if mine == 0 {
                    Fix::AllPadded { n }
                } else if target > mine {
                    Fix::Wrap { n: mine }
                } else {
                    Fix::Identity
                };
                (target, fix, target / b)
            }
            EqualLength::Uneven => (mine, Fix::Identity, longest.div_ceil(b)),
        };
        Ok(Share { len, base: 0, step: 1, fix, layout, order_end: 0, epoch_steps })
    }
}

impl<S> Plan<S> {
    /// Entries in this rank's plan (padded ones included).
    #[must_use]
    pub fn len(&self) -> u64 {
        self.len
    }

    /// Whether this rank's plan is empty.
    #[must_use]
    pub fn is_empty(&self) -> bool {
        self.len == 0
    }

    /// Batches in this rank's plan: `ceil(len / batch_size)`. Equal on every
    /// rank under `Pad` and `Drop`.
    #[must_use]
    pub fn n_batches(&self) -> u64 {
        self.len.div_ceil(self.config.batch_size)
    }

    /// The per-rank batch size.
    #[must_use]
    pub fn batch_size(&self) -> u64 {
        self.config.batch_size
    }

    /// This rank.
    #[must_use]
    pub fn rank(&self) -> u32 {
        self.rank
    }

    /// The world size.
    #[must_use]
    pub fn world(&self) -> u32 {
        self.world
    }

    /// The epoch this plan covers.
    #[must_use]
    pub fn epoch(&self) -> u64 {
        self.config.epoch()
    }

    /// The epoch's key (for per-sample randomness: [`EpochKey::sample_rng`]).
    #[must_use]
    pub fn key(&self) -> EpochKey {
        self.key
    }

    /// The configuration the plan was built from.
    #[must_use]
    pub fn config(&self) -> &PlanConfig {
        &self.config
    }

    /// The sample space.
    #[must_use]
    pub fn space(&self) -> &S {
        &self.space
    }

    /// Whether the plan is elastic: its global order and checkpoints do not
    /// depend on the world size (strided plans at sample granularity).
    #[must_use]
    pub fn is_elastic(&self) -> bool {
        self.elastic
    }

    /// The index range of batch `b` within the plan.
    #[must_use]
    pub fn batch_bounds(&self, b: u64) -> std::ops::Range<u64> {
        let bs = self.config.batch_size;
        let lo = b.saturating_mul(bs).min(self.len);
        let hi = lo.saturating_add(bs).min(self.len);
        lo..hi
    }
}

impl<S: SampleSpace> Plan<S> {
    /// The checkpoint after `batches_done` batches of this plan (counting from
    /// where this plan starts). The same on every rank; feed it to
    /// [`PlanConfig::with_resume`] to continue.
    #[must_use]
    pub fn checkpoint(&self, batches_done: u64) -> ResumeState {
        let gb = u64::from(self.world) * self.config.batch_size;
        let cursor = if self.elastic {
            let v = self.start_cursor.saturating_add(batches_done.saturating_mul(gb)).min(self.order_end);
            let n = self.space.len();
            if v == self.order_end {
                n
            } else {
                match self.fix {
                    Fix::Hole { at, len } if v > at => v + len,
                    _ => v,
                }
                .min(n)
            }
        } else {
            self.start_steps.saturating_add(batches_done).min(self.epoch_steps) * gb
        };
        ResumeState { epoch: self.config.epoch(), cursor, world: self.world, batch_size: self.config.batch_size }
    }

    /// Entry `i` of this rank's plan, or `None` past the end. O(1) for flat
    /// orders; a two-level or group-granular plan scans its groups from the
    /// start (use [`iter`](Self::iter) for sequential access).
    #[must_use]
    pub fn get(&self, i: u64) -> Option<PlannedSample> {
        if i >= self.len {
            return None;
        }
        self.entry(i, &mut Cursor::default())
    }

    #[inline]
    fn entry(&self, i: u64, cur: &mut Cursor) -> Option<PlannedSample> {
        let v = self.base + i * self.step;
        let (p, padded) = match self.fix {
            Fix::Identity => (v, false),
            Fix::Hole { at, len } => (if v < at { v } else { v + len }, false),
            Fix::Wrap { n } => {
                if v < n {
                    (v, false)
                } else {
                    (v % n, true)
                }
            }
            Fix::AllPadded { n } => {
                return Some(PlannedSample { id: v % n, padded: true });
            }
        };
        let id = match &self.layout {
            Layout::Flat(None) => p,
            Layout::Flat(Some(perm)) => perm.apply(p),
            Layout::Windowed(w) => w.locate(&self.space, self.key, p, cur)?,
        };
        Some(PlannedSample { id, padded })
    }

    /// This rank's entries in order.
    #[must_use]
    pub fn iter(&self) -> PlanIter<'_, S> {
        PlanIter { plan: self, next: 0, end: self.len, cursor: Cursor::default() }
    }

    /// This rank's batches in order (the last one short under `Uneven`).
    #[must_use]
    pub fn batches(&self) -> Batches<'_, S> {
        Batches { iter: self.iter(), indices: BatchIndices::Range(0..self.n_batches()) }
    }

    /// Batch `b` of this plan, or `None` past the end. Random access: like
    /// [`get`](Self::get), a two-level or group-granular plan scans its groups
    /// from the start; use [`batches`](Self::batches) to walk them in order.
    #[must_use]
    pub fn batch(&self, b: u64) -> Option<Batch> {
        if b >= self.n_batches() {
            return None;
        }
        let r = self.batch_bounds(b);
        let mut cur = Cursor::default();
        let samples = r.filter_map(|i| self.entry(i, &mut cur)).collect();
        Some(Batch { index: b, samples })
    }

    /// Resolves an entry to the space's sample (a row, a crop, …).
    #[must_use]
    pub fn resolve(&self, sample: PlannedSample) -> S::Sample {
        self.space.resolve(sample.id, self.key)
    }

    /// Worker `worker` of `workers`' share of this rank's batches, split the
    /// default way ([`WorkerSplit::Interleaved`]).
    pub fn worker(&self, worker: u32, workers: u32) -> Result<WorkerPlan<'_, S>, SamplerError> {
        self.worker_with(worker, workers, WorkerSplit::Interleaved)
    }

    /// Worker `worker` of `workers`' share of this rank's batches. Workers get
    /// disjoint sets of whole batches that together make the rank's plan.
    pub fn worker_with(
        &self,
        worker: u32,
        workers: u32,
        split: WorkerSplit,
    ) -> Result<WorkerPlan<'_, S>, SamplerError> {
        if workers == 0 {
            return Err(SamplerError::ZeroWorkers);
        }
        if worker >= workers {
            return Err(SamplerError::WorkerOutOfRange { worker, workers });
        }
        Ok(WorkerPlan { plan: self, worker: u64::from(worker), workers: u64::from(workers), split })
    }
}

impl<'a, S: SampleSpace> IntoIterator for &'a Plan<S> {
    type Item = PlannedSample;
    type IntoIter = PlanIter<'a, S>;
    fn into_iter(self) -> Self::IntoIter {
        self.iter()
    }
}

/// The iterator of a plan's entries ([`Plan::iter`]).
#[derive(Debug)]
pub struct PlanIter<'a, S> {
    plan: &'a Plan<S>,
    next: u64,
    end: u64,
    cursor: Cursor,
}

impl<S: SampleSpace> PlanIter<'_, S> {
    /// Jumps to entry `i` (forward jumps are cheap; backward ones rescan a
    /// two-level plan's groups).
    pub fn seek(&mut self, i: u64) {
        self.next = i.min(self.end);
    }
}

impl<S: SampleSpace> Iterator for PlanIter<'_, S> {
    type Item = PlannedSample;

    #[inline]
    fn next(&mut self) -> Option<PlannedSample> {
        if self.next >= self.end {
            return None;
        }
        let s = self.plan.entry(self.next, &mut self.cursor);
        self.next += 1;
        s
    }

    fn size_hint(&self) -> (usize, Option<usize>) {
        let n = usize::try_from(self.end - self.next).unwrap_or(usize::MAX);
        (n, Some(n))
    }

    fn nth(&mut self, n: usize) -> Option<PlannedSample> {
        self.next = self.next.saturating_add(n as u64).min(self.end);
        self.next()
    }
}

impl<S: SampleSpace> ExactSizeIterator for PlanIter<'_, S> {}

#[derive(Debug)]
enum BatchIndices {
    Range(std::ops::Range<u64>),
    Strided { next: u64, step: u64, end: u64 },
}

impl Iterator for BatchIndices {
    type Item = u64;
    fn next(&mut self) -> Option<u64> {
        match self {
            Self::Range(r) => r.next(),
            Self::Strided { next, step, end } => {
                if *next >= *end {
                    return None;
                }
                let b = *next;
                *next += *step;
                Some(b)
            }
        }
    }
}

/// The iterator of a plan's (or a worker's) batches.
#[derive(Debug)]
pub struct Batches<'a, S> {
    iter: PlanIter<'a, S>,
    indices: BatchIndices,
}

impl<S: SampleSpace> Iterator for Batches<'_, S> {
    type Item = Batch;

    fn next(&mut self) -> Option<Batch> {
        let b = self.indices.next()?;
        let r = self.iter.plan.batch_bounds(b);
        self.iter.seek(r.start);
        let samples: Vec<_> = (&mut self.iter).take((r.end - r.start) as usize).collect();
        if samples.is_empty() {
            return None;
        }
        Some(Batch { index: b, samples })
    }
}

/// One data-loader worker's share of a rank's plan: a disjoint set of whole
/// batches ([`Plan::worker`]).
///
/// ```
/// use damacy_sampler::{IndexSpace, Plan, PlanConfig};
/// let plan = Plan::new(IndexSpace::new(100), PlanConfig::new().with_batch_size(10))?;
/// let w1 = plan.worker(1, 4)?;
/// assert_eq!(w1.batch_indices().collect::<Vec<_>>(), vec![1, 5, 9]);
/// assert_eq!(w1.len(), 30);
/// # Ok::<(), damacy_sampler::SamplerError>(())
/// ```
#[derive(Debug, Clone, Copy)]
pub struct WorkerPlan<'a, S> {
    plan: &'a Plan<S>,
    worker: u64,
    workers: u64,
    split: WorkerSplit,
}

impl<'a, S: SampleSpace> WorkerPlan<'a, S> {
    fn indices(&self) -> BatchIndices {
        let nb = self.plan.n_batches();
        match self.split {
            WorkerSplit::Interleaved => BatchIndices::Strided { next: self.worker, step: self.workers, end: nb },
            WorkerSplit::Contiguous => {
                let lo = (u128::from(self.worker) * u128::from(nb) / u128::from(self.workers)) as u64;
                let hi = (u128::from(self.worker + 1) * u128::from(nb) / u128::from(self.workers)) as u64;
                BatchIndices::Range(lo..hi)
            }
        }
    }

    /// The rank-plan indices of this worker's batches, in order.
    pub fn batch_indices(&self) -> impl Iterator<Item = u64> + use<'a, S> {
        self.indices()
    }

    /// This worker's number of batches.
    #[must_use]
    pub fn n_batches(&self) -> u64 {
        let nb = self.plan.n_batches();
        match self.split {
            WorkerSplit::Interleaved => {
                if nb > self.worker {
                    (nb - self.worker - 1) / self.workers + 1
                } else {
                    0
                }
            }
            WorkerSplit::Contiguous => {
                let lo = (u128::from(self.worker) * u128::from(nb) / u128::from(self.workers)) as u64;
                let hi = (u128::from(self.worker + 1) * u128::from(nb) / u128::from(self.workers)) as u64;
                hi - lo
            }
        }
    }

    /// This worker's number of entries.
    #[must_use]
    pub fn len(&self) -> u64 {
        let nb = self.plan.n_batches();
        let n = self.n_batches() * self.plan.batch_size();
        let last = self.plan.batch_bounds(nb.saturating_sub(1));
        let owns_last = nb > 0
            && match self.split {
                WorkerSplit::Interleaved => (nb - 1) % self.workers == self.worker,
                WorkerSplit::Contiguous => {
                    let hi = (u128::from(self.worker + 1) * u128::from(nb) / u128::from(self.workers)) as u64;
                    hi == nb && self.n_batches() > 0
                }
            };
        if owns_last { n - (self.plan.batch_size() - (last.end - last.start)) } else { n }
    }

    /// Whether this worker has no entries.
    #[must_use]
    pub fn is_empty(&self) -> bool {
        self.n_batches() == 0
    }

    /// This worker's batches, in order.
    #[must_use]
    pub fn batches(&self) -> Batches<'a, S> {
        Batches { iter: self.plan.iter(), indices: self.indices() }
    }

    /// This worker's entries, in order.
    pub fn iter(&self) -> impl Iterator<Item = PlannedSample> + use<'a, S> {
        self.batches().flat_map(|b| b.samples)
    }
}

#[cfg(test)]
mod tests;
