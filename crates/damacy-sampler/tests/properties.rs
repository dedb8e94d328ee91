//! Property tests over index spaces: every rank's plan is built in one process
//! and checked for disjointness, coverage, equal batch counts, determinism,
//! epoch-to-epoch change, resumption, elasticity and worker splits.

use std::collections::{HashMap, HashSet};

use damacy_sampler::{
    EpochKey, EqualLength, Granularity, GroupLevel, IndexOptions, IndexSpace, Mode, Plan, PlanConfig, PlannedSample,
    RankSource, SampleSpace, SamplerError, Shuffle, WorkerSplit,
};
use proptest::prelude::*;

#[derive(Debug, Clone)]
struct Case {
    lengths: Vec<u64>,
    chunk: u64,
    per_shard: u64,
    world: u32,
    batch: u64,
    mode: Mode,
    granularity: Granularity,
    level: GroupLevel,
    shuffle: Shuffle,
    equal: EqualLength,
    seed: u64,
    epoch: u64,
}

impl Case {
    fn space(&self) -> IndexSpace {
        IndexSpace::with_options(
            &self.lengths,
            IndexOptions::new().with_chunk_size(self.chunk).with_chunks_per_shard(self.per_shard),
        )
        .unwrap()
    }

    fn config(&self, rank: u32) -> PlanConfig {
        PlanConfig::new()
            .with_rank(RankSource::new(rank, self.world))
            .with_batch_size(self.batch)
            .with_mode(self.mode)
            .with_granularity(self.granularity)
            .with_group_level(self.level)
            .with_shuffle(self.shuffle)
            .with_equal_length(self.equal)
            .with_seed(self.seed)
            .with_epoch(self.epoch)
    }

    fn plans<'a>(&self, space: &'a IndexSpace) -> Result<Vec<Plan<&'a IndexSpace>>, SamplerError> {
        (0..self.world).map(|r| Plan::new(space, self.config(r))).collect()
    }
}

fn shuffle() -> impl Strategy<Value = Shuffle> {
    prop_oneof![Just(Shuffle::None), Just(Shuffle::Full), (1u64..=4).prop_map(|window| Shuffle::TwoLevel { window }),]
}

fn equal() -> impl Strategy<Value = EqualLength> {
    prop_oneof![Just(EqualLength::Pad), Just(EqualLength::Drop), Just(EqualLength::Uneven)]
}

fn case() -> impl Strategy<Value = Case> {
    (
        prop::collection::vec(0u64..120, 1..=3),
        1u64..=40,
        1u64..=3,
        1u32..=6,
        1u64..=8,
        prop_oneof![Just(Mode::Strided), Just(Mode::Contiguous)],
        prop_oneof![Just(Granularity::Sample), Just(Granularity::Group)],
        prop_oneof![Just(GroupLevel::Chunk), Just(GroupLevel::Shard)],
        shuffle(),
        equal(),
        any::<u64>(),
        0u64..6,
    )
        .prop_filter("at least one sample", |t| t.0.iter().sum::<u64>() > 0)
        .prop_map(
            |(lengths, chunk, per_shard, world, batch, mode, granularity, level, shuffle, equal, seed, epoch)| Case {
                lengths,
                chunk,
                per_shard,
                world,
                batch,
                mode,
                granularity,
                level,
                shuffle,
                equal,
                seed,
                epoch,
            },
        )
}

fn entries<S: SampleSpace>(plan: &Plan<S>) -> Vec<PlannedSample> {
    plan.iter().collect()
}

/// Group index of every id at `level`.
fn group_of(space: &IndexSpace, level: GroupLevel) -> Vec<u64> {
    let key = EpochKey::new(0, 0);
    let mut out = vec![0; space.len() as usize];
    for g in 0..space.group_count(level) {
        for id in space.group_range(level, g, key) {
            out[id as usize] = g;
        }
    }
    out
}

fn config() -> ProptestConfig {
    ProptestConfig { cases: 256, ..ProptestConfig::default() }
}

proptest! {
    #![proptest_config(config())]

    /// Disjointness, coverage, equal lengths, padding at the tail, group
    /// exclusivity, determinism, random access and batches.
    #[test]
    fn every_rank_together(c in case()) {
        let space = c.space();
        let n = space.len();
        let gb = u64::from(c.world) * c.batch;
        let plans = match c.plans(&space) {
            Ok(p) => p,
            Err(e) => {
                // The only expected failure: Drop with nothing left.
                prop_assert!(matches!(e, SamplerError::DropLeavesNothing { .. }), "{e}");
                prop_assert_eq!(c.equal, EqualLength::Drop);
                if c.granularity == Granularity::Sample {
                    prop_assert!(n < gb);
                } else {
                    let uneven = Case { equal: EqualLength::Uneven, ..c.clone() };
                    let shortest = uneven.plans(&space).unwrap().iter().map(Plan::len).min().unwrap();
                    prop_assert!(shortest < c.batch);
                }
                return Ok(());
            }
        };
        if c.equal == EqualLength::Drop && c.granularity == Granularity::Sample {
            prop_assert!(n >= gb);
        }
        let all: Vec<Vec<PlannedSample>> = plans.iter().map(entries).collect();
        for (p, e) in plans.iter().zip(&all) {
            prop_assert_eq!(p.len(), e.len() as u64);
            prop_assert_eq!(p.n_batches(), p.batches().count() as u64);
            // Padding only at the tail.
            if let Some(first) = e.iter().position(|s| s.padded) {
                prop_assert!(e[first..].iter().all(|s| s.padded));
            }
            // Batches and random access agree with iteration.
            let flat: Vec<_> = p.batches().flat_map(|b| b.samples).collect();
            prop_assert_eq!(&flat, e);
            for i in [0, e.len() / 2, e.len().saturating_sub(1)] {
                if i < e.len() {
                    prop_assert_eq!(p.get(i as u64), Some(e[i]));
                }
            }
            prop_assert_eq!(p.get(e.len() as u64), None);
        }

        // Lengths.
        let lens: Vec<u64> = plans.iter().map(Plan::len).collect();
        let batches: Vec<u64> = plans.iter().map(Plan::n_batches).collect();
        match c.equal {
            EqualLength::Pad | EqualLength::Drop => {
                prop_assert!(lens.iter().all(|&l| l == lens[0] && l % c.batch == 0), "{lens:?}");
                prop_assert!(batches.iter().all(|&b| b == batches[0]));
                prop_assert!(lens[0] > 0);
            }
            EqualLength::Uneven => {
                prop_assert_eq!(lens.iter().sum::<u64>(), n);
                if c.granularity == Granularity::Sample {
                    let (lo, hi) = (batches.iter().min().unwrap(), batches.iter().max().unwrap());
                    prop_assert!(hi - lo <= 1, "{batches:?}");
                }
            }
        }

        // Disjoint, and coverage.
        let mut seen = HashSet::new();
        for s in all.iter().flatten().filter(|s| !s.padded) {
            prop_assert!(s.id < n);
            prop_assert!(seen.insert(s.id), "id {} on two ranks or twice", s.id);
        }
        match c.equal {
            EqualLength::Pad | EqualLength::Uneven => prop_assert_eq!(seen.len() as u64, n),
            EqualLength::Drop => {
                prop_assert_eq!(seen.len() as u64, lens.iter().sum::<u64>());
                prop_assert!(all.iter().flatten().all(|s| !s.padded));
                if c.granularity == Granularity::Sample {
                    prop_assert_eq!(seen.len() as u64, n - n % gb);
                }
            }
        }
        if c.equal == EqualLength::Pad && c.granularity == Granularity::Sample {
            let padded = all.iter().flatten().filter(|s| s.padded).count() as u64;
            prop_assert_eq!(padded, n.div_ceil(gb) * gb - n);
        }

        // Group granularity: no group on two ranks; padding repeats the rank's own groups.
        if c.granularity == Granularity::Group {
            let groups = group_of(&space, c.level);
            let mut owner: HashMap<u64, usize> = HashMap::new();
            for (r, e) in all.iter().enumerate() {
                let own: HashSet<u64> = e.iter().filter(|s| !s.padded).map(|s| groups[s.id as usize]).collect();
                for &g in &own {
                    let o = *owner.entry(g).or_insert(r);
                    prop_assert_eq!(o, r, "group {} on ranks {} and {}", g, o, r);
                }
                if !own.is_empty() {
                    for s in e.iter().filter(|s| s.padded) {
                        prop_assert!(own.contains(&groups[s.id as usize]), "pad read another rank's group");
                    }
                }
            }
        }

        // Determinism.
        let again: Vec<Vec<PlannedSample>> = c.plans(&space).unwrap().iter().map(entries).collect();
        prop_assert_eq!(&again, &all);
    }

    /// A plan resumed from the checkpoint after k batches is the tail of the
    /// uninterrupted plan, on every rank and in every mode.
    #[test]
    fn resume_is_the_tail(c in case(), frac in 0.0f64..=1.0) {
        let space = c.space();
        let Ok(plans) = c.plans(&space) else { return Ok(()) };
        let nb = plans.iter().map(Plan::n_batches).max().unwrap();
        let k = (nb as f64 * frac) as u64;
        let state = plans[0].checkpoint(k);
        for p in &plans {
            prop_assert_eq!(p.checkpoint(k), state, "ranks disagree on the checkpoint");
        }
        for (r, p) in plans.iter().enumerate() {
            let resumed = Plan::new(&space, c.config(r as u32).with_resume(state)).unwrap();
            let tail: Vec<_> = p.iter().skip((k * c.batch) as usize).collect();
            prop_assert_eq!(entries(&resumed), tail, "rank {} after {} batches", r, k);
            prop_assert_eq!(resumed.n_batches(), p.n_batches().saturating_sub(k));
            // Resuming a resumed plan composes.
            let k2 = resumed.n_batches() / 2;
            let twice = Plan::new(&space, c.config(r as u32).with_resume(resumed.checkpoint(k2))).unwrap();
            let tail2: Vec<_> = p.iter().skip(((k + k2) * c.batch) as usize).collect();
            prop_assert_eq!(entries(&twice), tail2);
        }
    }

    /// Workers split a rank's batches disjointly and completely.
    #[test]
    fn workers_split_disjointly(c in case(), workers in 1u32..=5, contiguous in any::<bool>()) {
        let space = c.space();
        let Ok(plans) = c.plans(&space) else { return Ok(()) };
        let split = if contiguous { WorkerSplit::Contiguous } else { WorkerSplit::Interleaved };
        for p in &plans {
            let mut got: Vec<(u64, Vec<PlannedSample>)> = vec![];
            let mut len = 0;
            for w in 0..workers {
                let wp = p.worker_with(w, workers, split).unwrap();
                len += wp.len();
                prop_assert_eq!(wp.n_batches(), wp.batches().count() as u64);
                got.extend(wp.batches().map(|b| (b.index, b.samples)));
            }
            prop_assert_eq!(len, p.len());
            got.sort_by_key(|(i, _)| *i);
            let indices: Vec<u64> = got.iter().map(|(i, _)| *i).collect();
            prop_assert_eq!(indices, (0..p.n_batches()).collect::<Vec<_>>());
            let flat: Vec<_> = got.into_iter().flat_map(|(_, s)| s).collect();
            prop_assert_eq!(flat, entries(p));
        }
    }

    /// Shuffled orders change from epoch to epoch.
    #[test]
    fn epochs_differ(c in case()) {
        let c = Case { equal: EqualLength::Uneven, ..c };
        let space = c.space();
        if space.len() < 12 || c.shuffle == Shuffle::None {
            return Ok(());
        }
        let order = |epoch| -> Vec<u64> {
            let c = Case { epoch, ..c.clone() };
            c.plans(&space).unwrap().iter().flat_map(|p| p.iter().map(|s| s.id).collect::<Vec<_>>()).collect()
        };
        prop_assert_ne!(order(c.epoch), order(c.epoch + 1));
    }

    /// The samples Drop leaves out change with the epoch, even unshuffled.
    #[test]
    fn dropped_samples_move(n in 1u64..300, world in 1u32..=4, batch in 1u64..=8, seed in any::<u64>(), contiguous in any::<bool>()) {
        let gb = u64::from(world) * batch;
        let d = n % gb;
        if n < gb || d == 0 || n - d + 1 < 8 {
            return Ok(());
        }
        let space = IndexSpace::new(n);
        let mode = if contiguous { Mode::Contiguous } else { Mode::Strided };
        let dropped = |epoch| -> Vec<u64> {
            let mut kept = HashSet::new();
            for r in 0..world {
                let cfg = PlanConfig::new().with_rank(RankSource::new(r, world)).with_batch_size(batch)
                    .with_mode(mode).with_shuffle(Shuffle::None).with_equal_length(EqualLength::Drop)
                    .with_seed(seed).with_epoch(epoch);
                kept.extend(Plan::new(&space, cfg).unwrap().iter().map(|s| s.id));
            }
            (0..n).filter(|i| !kept.contains(i)).collect()
        };
        let first = dropped(0);
        prop_assert_eq!(first.len() as u64, d);
        prop_assert!((1..6).any(|e| dropped(e) != first), "the same {d} samples dropped in 6 epochs");
    }
}

/// Strided sample-granular plans for one world size and batch size.
fn strided(
    space: &IndexSpace,
    world: u32,
    batch: u64,
    shuffle: Shuffle,
    equal: EqualLength,
    seed: u64,
) -> Vec<Plan<&IndexSpace>> {
    (0..world)
        .map(|r| {
            Plan::new(
                space,
                PlanConfig::new()
                    .with_rank(RankSource::new(r, world))
                    .with_batch_size(batch)
                    .with_shuffle(shuffle)
                    .with_equal_length(equal)
                    .with_seed(seed)
                    .with_epoch(2),
            )
            .unwrap()
        })
        .collect()
}

/// The global order a set of strided plans realises: rank r's j-th entry is
/// global position r + j·world.
fn global_order<S: SampleSpace>(plans: &[Plan<S>]) -> Vec<PlannedSample> {
    let w = plans.len();
    let total: usize = plans.iter().map(|p| p.len() as usize).sum();
    let mut out = vec![None; total];
    for (r, p) in plans.iter().enumerate() {
        for (j, s) in p.iter().enumerate() {
            out[r + j * w] = Some(s);
        }
    }
    out.into_iter().map(Option::unwrap).collect()
}

const GLOBAL_BATCHES: [(u64, &[u32]); 3] = [(6, &[1, 2, 3, 6]), (12, &[1, 2, 3, 4, 6, 12]), (8, &[1, 2, 4, 8])];

proptest! {
    #![proptest_config(config())]

    /// With a fixed global batch, the global order is the same on any world
    /// size, and a run resumed on another world size continues it exactly.
    #[test]
    fn elastic_order_and_resume(
        n in 1u64..300,
        gbi in 0usize..3,
        w1i in 0usize..6,
        w2i in 0usize..6,
        shuffle in shuffle(),
        equal in equal(),
        chunk in 1u64..20,
        seed in any::<u64>(),
        frac in 0.0f64..=1.0,
    ) {
        let (gb, worlds) = GLOBAL_BATCHES[gbi];
        let (w1, w2) = (worlds[w1i % worlds.len()], worlds[w2i % worlds.len()]);
        let (b1, b2) = (gb / u64::from(w1), gb / u64::from(w2));
        prop_assume!(!(equal == EqualLength::Drop && n < gb));
        let space = IndexSpace::chunked(n, chunk).unwrap();
        let p1 = strided(&space, w1, b1, shuffle, equal, seed);
        let p2 = strided(&space, w2, b2, shuffle, equal, seed);
        let order = global_order(&p1);
        prop_assert_eq!(&order, &global_order(&p2), "global order depends on the world size");

        let k = (p1[0].n_batches() as f64 * frac) as u64;
        let state = p1[0].checkpoint(k);
        let resumed: Vec<_> = (0..w2)
            .map(|r| {
                Plan::new(
                    &space,
                    PlanConfig::new()
                        .with_rank(RankSource::new(r, w2))
                        .with_batch_size(b2)
                        .with_shuffle(shuffle)
                        .with_equal_length(equal)
                        .with_seed(seed)
                        .with_resume(state),
                )
                .unwrap()
            })
            .collect();
        let consumed = (k * gb).min(order.len() as u64) as usize;
        prop_assert_eq!(global_order(&resumed), order[consumed..].to_vec());
    }

    /// Resumed on another world size *and* another global batch, an elastic
    /// plan never repeats a sample (and, without Drop, still covers them all).
    #[test]
    fn elastic_resume_other_global_batch(
        n in 1u64..300,
        (w1, b1) in (1u32..=5, 1u64..=6),
        (w2, b2) in (1u32..=5, 1u64..=6),
        shuffle in shuffle(),
        equal in equal(),
        seed in any::<u64>(),
        frac in 0.0f64..=1.0,
    ) {
        prop_assume!(!(equal == EqualLength::Drop && n < u64::from(w1) * b1));
        let space = IndexSpace::chunked(n, 7).unwrap();
        let p1 = strided(&space, w1, b1, shuffle, equal, seed);
        let k = (p1[0].n_batches() as f64 * frac) as u64;
        let state = p1[0].checkpoint(k);
        let mut seen = HashSet::new();
        for p in &p1 {
            for s in p.iter().take((k * b1) as usize).filter(|s| !s.padded) {
                prop_assert!(seen.insert(s.id));
            }
        }
        for r in 0..w2 {
            let cfg = PlanConfig::new().with_rank(RankSource::new(r, w2)).with_batch_size(b2)
                .with_shuffle(shuffle).with_equal_length(equal).with_seed(seed).with_resume(state);
            match Plan::new(&space, cfg) {
                Ok(p) => for s in p.iter().filter(|s| !s.padded) {
                    prop_assert!(seen.insert(s.id), "id {} repeated after resize", s.id);
                },
                // Resuming at cursor 0 is a fresh start: Drop may leave nothing for the new global batch.
                Err(e) => prop_assert!(
                    state.cursor == 0 && matches!(e, SamplerError::DropLeavesNothing { .. }),
                    "{e}"
                ),
            }
        }
        if equal != EqualLength::Drop {
            prop_assert_eq!(seen.len() as u64, n);
        }
    }
}
