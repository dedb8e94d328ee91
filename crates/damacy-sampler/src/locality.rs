//! Locality metrics: how many chunks and shards a plan reads per batch, how
//! many chunks two ranks both read, and the read amplification (chunk bytes
//! decoded ÷ sample bytes used).
//!
//! The model: a batch decodes each chunk it touches once (no cache across
//! batches) and a full chunk is decoded even when a sample uses part of it.

use std::collections::{HashMap, HashSet};

use crate::plan::Plan;
use crate::space::ChunkFootprint;

/// Locality of a set of rank plans over one space (see [`measure`]).
#[derive(Debug, Clone, PartialEq)]
pub struct LocalityReport {
    /// Plans measured (normally one per rank).
    pub ranks: usize,
    /// Batches over all plans.
    pub batches: u64,
    /// Entries over all plans (padded ones included: they are read too).
    pub samples: u64,
    /// Mean distinct chunks per batch.
    pub chunks_per_batch: f64,
    /// Most distinct chunks in one batch.
    pub max_chunks_per_batch: u64,
    /// Mean distinct shards per batch.
    pub shards_per_batch: f64,
    /// Most distinct shards in one batch.
    pub max_shards_per_batch: u64,
    /// Distinct chunks read by any plan.
    pub distinct_chunks: u64,
    /// Chunks read by two or more plans.
    pub shared_chunks: u64,
    /// Shards read by two or more plans.
    pub shared_shards: u64,
    /// Chunk bytes decoded (each chunk once per batch that touches it).
    pub bytes_decoded: u64,
    /// Sample bytes used.
    pub bytes_used: u64,
}

impl LocalityReport {
    /// Chunk bytes decoded ÷ sample bytes used (1.0 is ideal; 0.0 when nothing was used).
    #[must_use]
    pub fn read_amplification(&self) -> f64 {
        if self.bytes_used == 0 { 0.0 } else { self.bytes_decoded as f64 / self.bytes_used as f64 }
    }

    /// The header of a markdown table of reports (see [`markdown_row`](Self::markdown_row)).
    #[must_use]
    pub fn markdown_header() -> &'static str {
        "| plan | chunks/batch (mean, max) | shards/batch (mean, max) | chunks read | chunks shared by ranks | shards shared by ranks | read amplification |\n\
         |---|---|---|---|---|---|---|"
    }

    /// One markdown table row, labelled `label`.
    #[must_use]
    pub fn markdown_row(&self, label: &str) -> String {
        format!(
            "| {label} | {:.2}, {} | {:.2}, {} | {} | {} | {} | {:.2} |",
            self.chunks_per_batch,
            self.max_chunks_per_batch,
            self.shards_per_batch,
            self.max_shards_per_batch,
            self.distinct_chunks,
            self.shared_chunks,
            self.shared_shards,
            self.read_amplification(),
        )
    }
}

const SHARED: usize = usize::MAX;

fn claim<K: std::hash::Hash + Eq>(owners: &mut HashMap<K, usize>, key: K, plan: usize) {
    owners
        .entry(key)
        .and_modify(|o| {
            if *o != plan {
                *o = SHARED;
            }
        })
        .or_insert(plan);
}

/// Measures the locality of `plans` (normally every rank's plan of one epoch,
/// built in one process). Walks every entry: O(total samples × chunks per
/// sample) time, memory O(distinct chunks).
///
/// ```
/// use damacy_sampler::{locality, Granularity, IndexOptions, IndexSpace, Plan, PlanConfig, RankSource};
/// let space = IndexSpace::with_options(&[1000], IndexOptions::new().with_chunk_size(50))?;
/// let plans: Vec<_> = (0..4)
///     .map(|r| Plan::new(&space, PlanConfig::new().with_rank(RankSource::new(r, 4))
///         .with_granularity(Granularity::Group).with_batch_size(25)))
///     .collect::<Result<_, _>>()?;
/// let report = locality::measure(&plans);
/// assert_eq!(report.shared_chunks, 0);
/// # Ok::<(), damacy_sampler::SamplerError>(())
/// ```
#[must_use]
pub fn measure<S: ChunkFootprint>(plans: &[Plan<S>]) -> LocalityReport {
    let mut chunk_owner: HashMap<(usize, u64), usize> = HashMap::new();
    let mut shard_owner: HashMap<(usize, u64), usize> = HashMap::new();
    let mut report = LocalityReport {
        ranks: plans.len(),
        batches: 0,
        samples: 0,
        chunks_per_batch: 0.0,
        max_chunks_per_batch: 0,
        shards_per_batch: 0.0,
        max_shards_per_batch: 0,
        distinct_chunks: 0,
        shared_chunks: 0,
        shared_shards: 0,
        bytes_decoded: 0,
        bytes_used: 0,
    };
    let (mut chunk_sum, mut shard_sum) = (0u64, 0u64);
    let mut chunks = HashMap::new();
    let mut shards = HashSet::new();
    for (p, plan) in plans.iter().enumerate() {
        let space = plan.space();
        let key = plan.key();
        for batch in plan.batches() {
            chunks.clear();
            shards.clear();
            for s in &batch.samples {
                report.samples += 1;
                report.bytes_used += space.sample_bytes(s.id, key);
                space.visit_chunks(s.id, key, &mut |c| {
                    chunks.insert((c.array, c.chunk), c.bytes);
                    shards.insert((c.array, c.shard));
                });
            }
            report.batches += 1;
            report.bytes_decoded += chunks.values().sum::<u64>();
            chunk_sum += chunks.len() as u64;
            shard_sum += shards.len() as u64;
            report.max_chunks_per_batch = report.max_chunks_per_batch.max(chunks.len() as u64);
            report.max_shards_per_batch = report.max_shards_per_batch.max(shards.len() as u64);
            for &c in chunks.keys() {
                claim(&mut chunk_owner, c, p);
            }
            for &s in &shards {
                claim(&mut shard_owner, s, p);
            }
        }
    }
    if report.batches > 0 {
        report.chunks_per_batch = chunk_sum as f64 / report.batches as f64;
        report.shards_per_batch = shard_sum as f64 / report.batches as f64;
    }
    report.distinct_chunks = chunk_owner.len() as u64;
    report.shared_chunks = chunk_owner.values().filter(|&&o| o == SHARED).count() as u64;
    report.shared_shards = shard_owner.values().filter(|&&o| o == SHARED).count() as u64;
    report
}
