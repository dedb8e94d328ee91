//! Pinned plans (N = 10, world = 3, batch 2, chunks of 3 rows) and edge cases.
//!
//! The unshuffled plans can be checked by hand; the shuffled ones pin the
//! Feistel permutation and the epoch-key mix, so that a change to either (which
//! would change every user's order) shows up here.

use super::*;
use crate::config::{EqualLength, Granularity, Mode, PlanConfig, ResumeState, Shuffle, WorkerSplit};
use crate::rank::RankSource;
use crate::space::IndexSpace;

fn plan_str(mode: Mode, gran: Granularity, shuffle: Shuffle, eq: EqualLength) -> String {
    let space = IndexSpace::chunked(10, 3).unwrap();
    let mut out = vec![];
    for r in 0..3 {
        let cfg = PlanConfig::new()
            .with_rank(RankSource::new(r, 3))
            .with_mode(mode)
            .with_granularity(gran)
            .with_shuffle(shuffle)
            .with_equal_length(eq)
            .with_batch_size(2)
            .with_seed(0);
        let p = Plan::new(&space, cfg).unwrap();
        let v: Vec<String> = p.iter().map(|s| if s.padded { format!("{}*", s.id) } else { s.id.to_string() }).collect();
        out.push(format!("[{}]", v.join(",")));
    }
    out.join(" ")
}

use EqualLength::{Drop, Pad, Uneven};
use Granularity::{Group, Sample};
use Mode::{Contiguous, Strided};

#[test]
fn pinned_unshuffled_plans() {
    let none = Shuffle::None;
    // torch's DistributedSampler(shuffle=False) gives exactly these two:
    // pad repeats the head, uneven is all[rank::world].
    assert_eq!(plan_str(Strided, Sample, none, Pad), "[0,3,6,9] [1,4,7,0*] [2,5,8,1*]");
    assert_eq!(plan_str(Strided, Sample, none, Uneven), "[0,3,6,9] [1,4,7] [2,5,8]");
    // Drop: 10 mod 6 = 4 positions dropped, at an epoch-keyed offset (here 0).
    assert_eq!(plan_str(Strided, Sample, none, Drop), "[4,7] [5,8] [6,9]");
    assert_eq!(plan_str(Contiguous, Sample, none, Pad), "[0,1,2,3] [4,5,6,7] [8,9,0*,1*]");
    assert_eq!(plan_str(Contiguous, Sample, none, Uneven), "[0,1,2] [3,4,5] [6,7,8,9]");
    assert_eq!(plan_str(Contiguous, Sample, none, Drop), "[4,5] [6,7] [8,9]");
    // Chunks {0,1,2} {3,4,5} {6,7,8} {9}: strided gives rank 0 chunks 0 and 3.
    assert_eq!(plan_str(Strided, Group, none, Uneven), "[0,1,2,9] [3,4,5] [6,7,8]");
    assert_eq!(plan_str(Strided, Group, none, Pad), "[0,1,2,9] [3,4,5,3*] [6,7,8,6*]");
    assert_eq!(plan_str(Strided, Group, none, Drop), "[0,9] [4,5] [6,7]");
    // Contiguous over chunks: floor(r·4/3) → chunks 0 | 1 | 2,3.
    assert_eq!(plan_str(Contiguous, Group, none, Uneven), "[0,1,2] [3,4,5] [6,7,8,9]");
    assert_eq!(plan_str(Contiguous, Group, none, Pad), "[0,1,2,0*] [3,4,5,3*] [6,7,8,9]");
    assert_eq!(plan_str(Contiguous, Group, none, Drop), "[0,2] [4,5] [6,7]");
}

#[test]
fn pinned_shuffled_plans() {
    let full = Shuffle::Full;
    assert_eq!(plan_str(Strided, Sample, full, Pad), "[3,5,8,4] [0,2,9,3*] [6,1,7,0*]");
    assert_eq!(plan_str(Strided, Sample, full, Drop), "[2,9] [1,7] [8,4]");
    assert_eq!(plan_str(Strided, Sample, full, Uneven), "[3,5,8,4] [0,2,9] [6,1,7]");
    assert_eq!(plan_str(Contiguous, Sample, full, Pad), "[3,0,6,5] [2,1,8,9] [7,4,3*,0*]");
    assert_eq!(plan_str(Strided, Group, full, Uneven), "[5,4,3,9] [1,0,2] [6,8,7]");
    assert_eq!(plan_str(Contiguous, Group, full, Drop), "[5,3] [0,2] [6,8]");
}

fn cfg(r: u32, w: u32) -> PlanConfig {
    PlanConfig::new().with_rank(RankSource::new(r, w)).with_seed(11)
}

#[test]
fn n_smaller_than_world() {
    let space = IndexSpace::new(2);
    // Pad: every rank gets one batch; ranks 2 and 3 get repeats.
    let ids: Vec<_> =
        (0..4).map(|r| Plan::new(&space, cfg(r, 4).with_shuffle(Shuffle::None)).unwrap().get(0).unwrap()).collect();
    assert_eq!(
        ids.iter().map(|s| (s.id, s.padded)).collect::<Vec<_>>(),
        vec![(0, false), (1, false), (0, true), (1, true)]
    );
    // Drop: an error that says what to change.
    let e = Plan::new(&space, cfg(0, 4).with_equal_length(EqualLength::Drop)).unwrap_err();
    assert!(matches!(e, SamplerError::DropLeavesNothing { samples: 2, world: 4, .. }), "{e}");
    assert!(e.to_string().contains("EqualLength::Pad"), "{e}");
    // Uneven: ranks 2 and 3 are empty.
    let lens: Vec<_> =
        (0..4).map(|r| Plan::new(&space, cfg(r, 4).with_equal_length(EqualLength::Uneven)).unwrap().len()).collect();
    assert_eq!(lens, vec![1, 1, 0, 0]);
}

#[test]
fn n_smaller_than_batch() {
    let space = IndexSpace::new(5);
    let p = Plan::new(&space, cfg(0, 1).with_batch_size(8)).unwrap();
    assert_eq!((p.len(), p.n_batches()), (8, 1));
    assert_eq!(p.iter().filter(|s| s.padded).count(), 3);
    let e = Plan::new(&space, cfg(0, 1).with_batch_size(8).with_equal_length(EqualLength::Drop)).unwrap_err();
    assert!(matches!(e, SamplerError::DropLeavesNothing { .. }));
    let p = Plan::new(&space, cfg(0, 1).with_batch_size(8).with_equal_length(EqualLength::Uneven)).unwrap();
    assert_eq!((p.len(), p.n_batches()), (5, 1));
}

#[test]
fn chunk_larger_than_n() {
    let space = IndexSpace::chunked(7, 100).unwrap();
    let group = |r| cfg(r, 2).with_granularity(Granularity::Group).with_batch_size(2);
    // One chunk, two ranks: rank 1 has no group. Pad fills it with marked repeats.
    let p0 = Plan::new(&space, group(0)).unwrap();
    let p1 = Plan::new(&space, group(1)).unwrap();
    assert_eq!((p0.len(), p1.len()), (8, 8));
    assert_eq!(p0.iter().filter(|s| !s.padded).count(), 7);
    assert!(p1.iter().all(|s| s.padded));
    // Drop cannot give rank 1 a batch.
    let e = Plan::new(&space, group(0).with_equal_length(EqualLength::Drop)).unwrap_err();
    assert!(matches!(e, SamplerError::DropLeavesNothing { shortest: 0, .. }), "{e}");
}

#[test]
fn world_one_is_the_whole_order() {
    let space = IndexSpace::new(50);
    let p = Plan::new(&space, cfg(0, 1).with_equal_length(EqualLength::Uneven)).unwrap();
    let mut ids: Vec<_> = p.iter().map(|s| s.id).collect();
    assert_ne!(ids, (0..50).collect::<Vec<_>>());
    ids.sort_unstable();
    assert_eq!(ids, (0..50).collect::<Vec<_>>());
}

#[test]
fn bad_configs_are_errors() {
    let space = IndexSpace::new(10);
    assert_eq!(Plan::new(&space, cfg(0, 0)).unwrap_err(), SamplerError::ZeroWorld);
    assert_eq!(Plan::new(&space, cfg(3, 3)).unwrap_err(), SamplerError::RankOutOfRange { rank: 3, world: 3 });
    assert_eq!(Plan::new(&space, cfg(0, 1).with_batch_size(0)).unwrap_err(), SamplerError::ZeroBatchSize);
    assert_eq!(
        Plan::new(&space, cfg(0, 1).with_shuffle(Shuffle::TwoLevel { window: 0 })).unwrap_err(),
        SamplerError::ZeroWindow
    );
    assert!(matches!(Plan::new(IndexSpace::new(0), cfg(0, 1)).unwrap_err(), SamplerError::EmptySpace { .. }));
    let p = Plan::new(&space, cfg(0, 1)).unwrap();
    assert_eq!(p.worker(0, 0).unwrap_err(), SamplerError::ZeroWorkers);
    assert_eq!(p.worker(2, 2).unwrap_err(), SamplerError::WorkerOutOfRange { worker: 2, workers: 2 });
}

#[test]
fn resume_errors() {
    let space = IndexSpace::new(100);
    let state = ResumeState { epoch: 0, cursor: 101, world: 2, batch_size: 1 };
    let e = Plan::new(&space, cfg(0, 2).with_resume(state)).unwrap_err();
    assert_eq!(e, SamplerError::CursorOutOfRange { cursor: 101, len: 100 });
    let contiguous = |w| cfg(0, w).with_mode(Mode::Contiguous).with_batch_size(5);
    let state = Plan::new(&space, contiguous(2)).unwrap().checkpoint(3);
    assert_eq!(state.cursor, 30);
    let e = Plan::new(&space, contiguous(4).with_resume(state)).unwrap_err();
    assert!(matches!(e, SamplerError::NotElastic { saved_world: 2, world: 4, .. }), "{e}");
    let e = Plan::new(&space, contiguous(2).with_resume(ResumeState { cursor: 31, ..state })).unwrap_err();
    assert_eq!(e, SamplerError::CursorNotOnStep { cursor: 31, global_batch: 10 });
}

#[test]
fn workers_partition_batches() {
    let space = IndexSpace::new(95);
    let p = Plan::new(&space, cfg(0, 1).with_batch_size(10).with_equal_length(EqualLength::Uneven)).unwrap();
    assert_eq!(p.n_batches(), 10);
    for split in [WorkerSplit::Interleaved, WorkerSplit::Contiguous] {
        let ws: Vec<_> = (0..3).map(|w| p.worker_with(w, 3, split).unwrap()).collect();
        let mut all: Vec<_> = ws.iter().flat_map(WorkerPlan::batches).collect();
        assert_eq!(all.len(), 10);
        assert_eq!(ws.iter().map(WorkerPlan::len).sum::<u64>(), 95);
        for w in &ws {
            assert_eq!(w.len(), w.iter().count() as u64);
            assert_eq!(w.n_batches(), w.batches().count() as u64);
        }
        all.sort_by_key(|b| b.index);
        let flat: Vec<_> = all.into_iter().flat_map(|b| b.samples).collect();
        assert_eq!(flat, p.iter().collect::<Vec<_>>());
    }
}
