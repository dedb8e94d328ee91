//! What a batch runs with: the reader's counters and threads, lent to every stage of a read.
//! Owned by the [`crate::Reader`], which builds one per batch; a leaf every stage may import.

use crate::stats::Stats;

/// What a batch runs with: the reader's counters and threads.
pub(crate) struct Ctx<'a> {
    pub(crate) stats: &'a Stats,
    /// Decode and assemble threads (and the local store's reads, fused with decoding).
    pub(crate) compute: &'a rayon::ThreadPool,
    /// Reads a remote store keeps in flight.
    pub(crate) in_flight: usize,
    /// Remote reads queued on `compute` or being decoded by it or by a batch's own thread, over
    /// every batch of the reader: a batch's thread decodes a read itself only while this leaves
    /// a compute thread idle.
    pub(crate) decoding: &'a std::sync::atomic::AtomicUsize,
}
