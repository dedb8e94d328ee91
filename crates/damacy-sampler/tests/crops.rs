//! Crop spaces: group-granular plans read no chunk (shard) on two ranks, random
//! crops do not change with the world size, and the locality metrics on a
//! sharded 3-D space.

use std::collections::{HashMap, HashSet};

use damacy_sampler::{
    ArrayGeometry, ChunkFootprint, CropOptions, CropPlacement, CropSpace, EqualLength, Granularity, GroupLevel, Mode,
    Plan, PlanConfig, RankSource, SampleSpace, SamplerError, Shuffle, locality,
};
use proptest::prelude::*;

fn config(rank: u32, world: u32) -> PlanConfig {
    PlanConfig::new().with_rank(RankSource::new(rank, world)).with_seed(99).with_epoch(4)
}

fn dims(nd: usize, lo: u64, hi: u64) -> impl Strategy<Value = Vec<u64>> {
    prop::collection::vec(lo..=hi, nd)
}

#[derive(Debug, Clone)]
struct Geo {
    arrays: Vec<ArrayGeometry>,
    options: CropOptions,
}

fn geo() -> impl Strategy<Value = Geo> {
    (2usize..=3, 1usize..=2).prop_flat_map(|(nd, n_arrays)| {
        (
            prop::collection::vec((dims(nd, 1, 30), dims(nd, 1, 10), dims(nd, 1, 3)), n_arrays),
            dims(nd, 1, 6),
            dims(nd, 1, 5),
            prop_oneof![
                Just(CropPlacement::Anywhere),
                Just(CropPlacement::WithinChunk),
                Just(CropPlacement::WithinShard)
            ],
            prop::option::of(1u64..200),
        )
            .prop_map(|(arrays, crop, stride, placement, random)| {
                let arrays = arrays
                    .into_iter()
                    .map(|(shape, chunk, per_shard)| {
                        let shard = chunk.iter().zip(&per_shard).map(|(c, k)| c * k).collect();
                        ArrayGeometry::new(shape, chunk).with_shard_shape(shard).with_element_size(2)
                    })
                    .collect();
                let options = match random {
                    Some(count) => CropOptions::random(crop, count),
                    None => CropOptions::grid(crop).with_stride(stride),
                }
                .with_placement(placement);
                Geo { arrays, options }
            })
    })
}

fn build(g: &Geo) -> Option<CropSpace> {
    match CropSpace::new(g.arrays.clone(), g.options.clone()) {
        Ok(s) => Some(s),
        Err(SamplerError::EmptySpace { .. } | SamplerError::CropLargerThanCell { .. }) => None,
        Err(e) => panic!("unexpected error {e}"),
    }
}

proptest! {
    #![proptest_config(ProptestConfig { cases: 128, ..ProptestConfig::default() })]

    /// Group-granular plans: disjoint, complete, and with crops confined to
    /// their chunk (shard), no chunk (shard) is read on two ranks.
    #[test]
    fn group_plans_keep_chunks_on_one_rank(
        g in geo(),
        world in 1u32..=4,
        batch in 1u64..=6,
        strided in any::<bool>(),
        shard_level in any::<bool>(),
        shuffle in prop_oneof![Just(Shuffle::None), Just(Shuffle::Full), Just(Shuffle::TwoLevel { window: 2 })],
    ) {
        let Some(space) = build(&g) else { return Ok(()) };
        let level = if shard_level { GroupLevel::Shard } else { GroupLevel::Chunk };
        let mode = if strided { Mode::Strided } else { Mode::Contiguous };
        let plans: Vec<_> = (0..world)
            .map(|r| {
                Plan::new(
                    &space,
                    config(r, world)
                        .with_batch_size(batch)
                        .with_mode(mode)
                        .with_granularity(Granularity::Group)
                        .with_group_level(level)
                        .with_shuffle(shuffle)
                        .with_equal_length(EqualLength::Uneven),
                )
                .unwrap()
            })
            .collect();
        let mut seen = HashSet::new();
        let mut chunk_owner: HashMap<(usize, u64), usize> = HashMap::new();
        let mut shard_owner: HashMap<(usize, u64), usize> = HashMap::new();
        for (r, p) in plans.iter().enumerate() {
            for s in p {
                prop_assert!(seen.insert(s.id));
                let crop = p.resolve(s);
                let shape = space.arrays()[crop.array].shape();
                prop_assert!(crop.start.iter().zip(&crop.shape).zip(shape).all(|((a, w), n)| a + w <= *n));
                space.visit_chunks(s.id, p.key(), &mut |c| {
                    chunk_owner.entry((c.array, c.chunk)).or_insert(r);
                    if chunk_owner[&(c.array, c.chunk)] != r {
                        chunk_owner.insert((c.array, c.chunk), usize::MAX);
                    }
                    shard_owner.entry((c.array, c.shard)).or_insert(r);
                    if shard_owner[&(c.array, c.shard)] != r {
                        shard_owner.insert((c.array, c.shard), usize::MAX);
                    }
                });
            }
        }
        prop_assert_eq!(seen.len() as u64, space.len());
        let placement = g.options.placement();
        if placement == CropPlacement::WithinChunk && level == GroupLevel::Chunk {
            prop_assert!(chunk_owner.values().all(|&o| o != usize::MAX), "a chunk on two ranks");
            prop_assert_eq!(locality::measure(&plans).shared_chunks, 0);
        }
        if placement != CropPlacement::Anywhere && level == GroupLevel::Shard {
            prop_assert!(shard_owner.values().all(|&o| o != usize::MAX), "a shard on two ranks");
            prop_assert_eq!(locality::measure(&plans).shared_shards, 0);
        }
    }

    /// A sample's crop depends on (seed, epoch, id) only: the same on any
    /// world size and under any plan.
    #[test]
    fn crops_do_not_change_with_world_size(g in geo(), w1 in 1u32..=4, w2 in 1u32..=4) {
        let Some(space) = build(&g) else { return Ok(()) };
        let crops = |world: u32, granularity| {
            let mut out = HashMap::new();
            for r in 0..world {
                let p = Plan::new(&space, config(r, world).with_granularity(granularity)
                    .with_equal_length(EqualLength::Uneven)).unwrap();
                for s in &p {
                    out.insert(s.id, p.resolve(s));
                }
            }
            out
        };
        let a = crops(w1, Granularity::Sample);
        prop_assert_eq!(a.len() as u64, space.len());
        prop_assert_eq!(&a, &crops(w2, Granularity::Sample));
        prop_assert_eq!(&a, &crops(w2, Granularity::Group));
    }
}

/// A sharded 3-D space: 2 arrays of 128³, chunks 32³, shards 64³, u16, crops
/// of 16³ on a grid (8 per chunk).
fn sharded_3d(options: CropOptions) -> CropSpace {
    let a = ArrayGeometry::new(vec![128, 128, 128], vec![32, 32, 32])
        .with_shard_shape(vec![64, 64, 64])
        .with_element_size(2);
    CropSpace::new(vec![a.clone(), a], options).unwrap()
}

fn plans(space: &CropSpace, world: u32, f: impl Fn(PlanConfig) -> PlanConfig) -> Vec<Plan<&CropSpace>> {
    (0..world).map(|r| Plan::new(space, f(config(r, world).with_batch_size(8))).unwrap()).collect()
}

#[test]
fn chunk_granular_plans_share_no_chunk_on_a_sharded_3d_space() {
    let space = sharded_3d(CropOptions::grid(vec![16, 16, 16]));
    assert_eq!(space.len(), 2 * 8 * 8 * 8);
    for mode in [Mode::Strided, Mode::Contiguous] {
        for shuffle in [Shuffle::None, Shuffle::Full, Shuffle::TwoLevel { window: 2 }] {
            for equal in [EqualLength::Pad, EqualLength::Drop, EqualLength::Uneven] {
                let ps = plans(&space, 4, |c| {
                    c.with_mode(mode)
                        .with_granularity(Granularity::Group)
                        .with_shuffle(shuffle)
                        .with_equal_length(equal)
                });
                let report = locality::measure(&ps);
                assert_eq!(report.shared_chunks, 0, "{mode:?} {shuffle:?} {equal:?}");
                assert_eq!(report.distinct_chunks, 2 * 4 * 4 * 4);
                if !matches!(shuffle, Shuffle::TwoLevel { .. }) {
                    // A batch of 8 crops is exactly one chunk: nothing wasted.
                    assert_eq!(report.max_chunks_per_batch, 1, "{mode:?} {shuffle:?}");
                    assert!((report.read_amplification() - 1.0).abs() < 1e-9);
                }
            }
        }
    }
    // Shard granularity: no shard on two ranks.
    let ps = plans(&space, 4, |c| c.with_granularity(Granularity::Group).with_group_level(GroupLevel::Shard));
    assert_eq!(locality::measure(&ps).shared_shards, 0);
}

#[test]
fn sample_granular_shuffles_share_chunks_and_amplify_reads() {
    let space = sharded_3d(CropOptions::grid(vec![16, 16, 16]));
    let chunky = locality::measure(&plans(&space, 4, |c| c.with_granularity(Granularity::Group)));
    let strided = locality::measure(&plans(&space, 4, |c| c));
    let contiguous_two_level = locality::measure(&plans(&space, 4, |c| {
        c.with_mode(Mode::Contiguous).with_shuffle(Shuffle::TwoLevel { window: 1 })
    }));
    assert!(strided.shared_chunks > 100, "{strided:?}");
    assert!(strided.read_amplification() > 5.0, "{strided:?}");
    assert!((chunky.read_amplification() - 1.0).abs() < 1e-9);
    // Contiguous over a two-level order: each batch is one chunk; only the
    // chunks at the block boundaries can be shared.
    assert!(contiguous_two_level.read_amplification() < 1.5, "{contiguous_two_level:?}");
    assert!(contiguous_two_level.shared_chunks <= 3, "{contiguous_two_level:?}");
}

#[test]
fn random_crops_confined_to_chunks_keep_chunks_on_one_rank() {
    let space = sharded_3d(CropOptions::random(vec![16, 16, 16], 1000).with_placement(CropPlacement::WithinChunk));
    let ps = plans(&space, 4, |c| c.with_granularity(Granularity::Group).with_shuffle(Shuffle::TwoLevel { window: 2 }));
    let report = locality::measure(&ps);
    assert_eq!(report.shared_chunks, 0);
    assert_eq!(report.bytes_used, report.samples * 16 * 16 * 16 * 2);
    // Anywhere-placed random crops straddle chunks: more than one chunk per crop.
    let space = sharded_3d(CropOptions::random(vec![16, 16, 16], 1000));
    let report = locality::measure(&plans(&space, 4, |c| c));
    assert!(report.read_amplification() > 8.0, "{report:?}");
}
