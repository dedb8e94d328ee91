//! Per-stage statistics of a pipeline ([`PipelineStats`]), printable as a table.

use std::fmt;
use std::time::{Duration, Instant};

use damacy_codec::StatsSnapshot;

use crate::pipeline::config::bytes;

/// Skipped samples named in [`PipelineStats::skipped_samples`]; later ones are only counted.
pub(crate) const SKIPPED_NAMED: usize = 1000;

/// One stage: how often it ran, for how long, its best single run, and the bytes it took in
/// and gave out (0 where the stage has no such bytes).
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq)]
#[non_exhaustive]
pub struct StageStats {
    /// Runs (batches, requests or chunks; the table's column says which).
    pub count: u64,
    /// Total time; for the engine's stages summed over the threads that ran them.
    pub time: Duration,
    /// The shortest single run, for stages timed per batch.
    pub best: Option<Duration>,
    /// Bytes in.
    pub bytes_in: u64,
    /// Bytes out.
    pub bytes_out: u64,
}

impl StageStats {
    pub(crate) fn add(&mut self, time: Duration, bytes_in: u64, bytes_out: u64) {
        self.count += 1;
        self.time += time;
        self.best = Some(self.best.map_or(time, |b| b.min(time)));
        self.bytes_in += bytes_in;
        self.bytes_out += bytes_out;
    }

    fn engine(count: u64, time: Duration, bytes_in: u64, bytes_out: u64) -> Self {
        Self { count, time, best: None, bytes_in, bytes_out }
    }
}

/// What a pipeline did since it was built or since [`crate::Pipeline::stats_reset`].
#[derive(Debug, Clone, Default, PartialEq)]
#[non_exhaustive]
pub struct PipelineStats {
    /// Wall time covered.
    pub elapsed: Duration,
    /// Batches popped.
    pub batches: u64,
    /// Samples in the popped batches.
    pub samples: u64,
    /// Samples pulled from the pushed iterators.
    pub samples_pulled: u64,
    /// Bytes in the popped batches (all tensors).
    pub bytes_delivered: u64,
    /// Planning (per batch: chunks, shard indexes through the cache, coalesced reads).
    pub plan: StageStats,
    /// Reading (per batch, wall time: I/O, decode and assemble into the batch buffers).
    pub read: StageStats,
    /// Storage reads (count: requests after coalescing; bytes in: bytes read, shard indexes
    /// included).
    pub io: StageStats,
    /// Host-to-device copies of encoded bytes on the device route (bytes only: the copies
    /// overlap the kernels on their own stream).
    pub input_transfer: StageStats,
    /// Host parse of the device route (blosc headers into stream tables).
    pub parse: StageStats,
    /// Decoding (count: chunks; bytes out: decoded bytes).
    pub decode: StageStats,
    /// Assembling batches from decoded chunks (crop, fill, cast).
    pub assemble: StageStats,
    /// Time the consumer waited in [`crate::Pipeline::pop`] (count: pops).
    pub pop_wait: StageStats,
    /// Arrays opened (metadata read).
    pub array_opens: u64,
    /// Samples whose arrays were already open.
    pub array_cache_hits: u64,
    /// Shard-index cache hits.
    pub index_hits: u64,
    /// Shard-index cache misses.
    pub index_misses: u64,
    /// Chunks decoded by device kernels (of `decode.count`).
    pub units_decoded_device: u64,
    /// Chunks that were missing or empty and became fill values without a read.
    pub units_filled: u64,
    /// Samples left out under [`crate::OnError::Skip`].
    pub skipped: u64,
    /// The first 1000 of them, named, with the reason.
    pub skipped_samples: Vec<String>,
    /// Batches whose pop returned an error under [`crate::OnError::Raise`].
    pub failed_batches: u64,
    /// Samples dropped with a short last batch ([`crate::Config::drop_last`]).
    pub dropped_last: u64,
    /// Each array opened and how its chunks decode: `device (…)` or `cpu (reason)`.
    pub routes: Vec<(String, String)>,
    /// The read engine's own counters over the same time.
    pub engine: StatsSnapshot,
}

impl PipelineStats {
    /// Samples delivered per second of [`PipelineStats::elapsed`].
    #[must_use]
    pub fn samples_per_s(&self) -> f64 {
        self.samples as f64 / self.elapsed.as_secs_f64().max(1e-9)
    }

    /// Gigabytes (10⁹ bytes) delivered per second of [`PipelineStats::elapsed`].
    #[must_use]
    pub fn gb_per_s(&self) -> f64 {
        self.bytes_delivered as f64 / 1e9 / self.elapsed.as_secs_f64().max(1e-9)
    }
}

fn ms(d: Duration) -> String {
    let ms = d.as_secs_f64() * 1e3;
    if ms >= 1e4 { format!("{:.1} s", ms / 1e3) } else { format!("{ms:.1} ms") }
}

fn or_dash(b: u64) -> String {
    if b == 0 { "—".to_owned() } else { bytes(b) }
}

impl fmt::Display for PipelineStats {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        writeln!(
            f,
            "{:<16} {:>10} {:>10} {:>10} {:>10} {:>11} {:>11}",
            "stage", "count", "time", "best", "mean", "bytes in", "bytes out"
        )?;
        let rows: [(&str, &StageStats, &str); 8] = [
            ("plan", &self.plan, "batches"),
            ("read", &self.read, "batches"),
            ("io", &self.io, "requests"),
            ("input transfer", &self.input_transfer, "waves"),
            ("parse", &self.parse, ""),
            ("decode", &self.decode, "chunks"),
            ("assemble", &self.assemble, ""),
            ("pop wait", &self.pop_wait, "pops"),
        ];
        for (name, s, _) in rows {
            let timed = !s.time.is_zero();
            let mean = if s.count > 0 && s.best.is_some() { ms(s.time / s.count as u32) } else { "—".into() };
            writeln!(
                f,
                "{:<16} {:>10} {:>10} {:>10} {:>10} {:>11} {:>11}",
                name,
                s.count,
                if timed { ms(s.time) } else { "—".into() },
                s.best.map_or_else(|| "—".into(), ms),
                mean,
                or_dash(s.bytes_in),
                or_dash(s.bytes_out),
            )?;
        }
        writeln!(
            f,
            "delivered: {} batches, {} samples, {} in {:.2} s = {:.1} samples/s, {:.3} GB/s ({} samples pulled)",
            self.batches,
            self.samples,
            bytes(self.bytes_delivered),
            self.elapsed.as_secs_f64(),
            self.samples_per_s(),
            self.gb_per_s(),
            self.samples_pulled
        )?;
        writeln!(
            f,
            "caches: arrays opened {} (hits {}); shard indexes hits {}, misses {}, fetched {}",
            self.array_opens, self.array_cache_hits, self.index_hits, self.index_misses, self.engine.index_fetches
        )?;
        writeln!(
            f,
            "chunks: decoded {} ({} by device kernels), filled {}",
            self.decode.count, self.units_decoded_device, self.units_filled
        )?;
        write!(
            f,
            "errors: skipped {} samples, {} failed batches, {} dropped by drop_last",
            self.skipped, self.failed_batches, self.dropped_last
        )?;
        for s in self.skipped_samples.iter().take(10) {
            write!(f, "\n  skipped {s}")?;
        }
        if self.skipped_samples.len() > 10 {
            write!(f, "\n  … and {} more", self.skipped as usize - 10)?;
        }
        for (uri, route) in &self.routes {
            write!(f, "\nroute: {uri} → {route}")?;
        }
        Ok(())
    }
}

/// The counters a pipeline keeps itself; the engine's come from the reader.
#[derive(Debug)]
pub(crate) struct Collector {
    pub(crate) since: Instant,
    pub(crate) baseline: StatsSnapshot,
    pub(crate) opens_base: u64,
    pub(crate) hits_base: u64,
    pub(crate) plan: StageStats,
    pub(crate) read: StageStats,
    pub(crate) pop_wait: StageStats,
    pub(crate) batches: u64,
    pub(crate) samples: u64,
    pub(crate) pulled: u64,
    pub(crate) bytes: u64,
    pub(crate) skipped: u64,
    pub(crate) skipped_samples: Vec<String>,
    pub(crate) failed_batches: u64,
    pub(crate) dropped_last: u64,
}

impl Collector {
    pub(crate) fn new(baseline: StatsSnapshot, opens_base: u64, hits_base: u64) -> Self {
        Self {
            since: Instant::now(),
            baseline,
            opens_base,
            hits_base,
            plan: StageStats::default(),
            read: StageStats::default(),
            pop_wait: StageStats::default(),
            batches: 0,
            samples: 0,
            pulled: 0,
            bytes: 0,
            skipped: 0,
            skipped_samples: Vec::new(),
            failed_batches: 0,
            dropped_last: 0,
        }
    }

    pub(crate) fn skip(&mut self, name: String) {
        self.skipped += 1;
        if self.skipped_samples.len() < SKIPPED_NAMED {
            self.skipped_samples.push(name);
        }
    }

    /// The snapshot: the pipeline's counters with the engine's since the baseline.
    pub(crate) fn snapshot(
        &self,
        now: StatsSnapshot,
        opens: u64,
        hits: u64,
        routes: Vec<(String, String)>,
    ) -> PipelineStats {
        let e = now.since(&self.baseline);
        PipelineStats {
            elapsed: self.since.elapsed(),
            batches: self.batches,
            samples: self.samples,
            samples_pulled: self.pulled,
            bytes_delivered: self.bytes,
            plan: self.plan,
            read: self.read,
            io: StageStats::engine(e.storage_requests, e.io, e.bytes_read, 0),
            input_transfer: StageStats::engine(0, Duration::ZERO, e.bytes_uploaded, 0),
            parse: StageStats::engine(0, e.decompress_parse, 0, 0),
            decode: StageStats::engine(e.units_decoded, e.decode, 0, e.bytes_decoded),
            assemble: StageStats::engine(e.batches, e.assemble, 0, 0),
            pop_wait: self.pop_wait,
            array_opens: opens - self.opens_base,
            array_cache_hits: hits - self.hits_base,
            index_hits: e.index_hits,
            index_misses: e.index_misses,
            units_decoded_device: e.units_decoded_device,
            units_filled: e.units_filled,
            skipped: self.skipped,
            skipped_samples: self.skipped_samples.clone(),
            failed_batches: self.failed_batches,
            dropped_last: self.dropped_last,
            routes,
            engine: e,
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn stages_keep_their_best_run() {
        let mut s = StageStats::default();
        s.add(Duration::from_millis(5), 10, 20);
        s.add(Duration::from_millis(2), 1, 2);
        assert_eq!((s.count, s.time, s.best), (2, Duration::from_millis(7), Some(Duration::from_millis(2))));
        assert_eq!((s.bytes_in, s.bytes_out), (11, 22));
    }

    #[test]
    fn the_table_names_every_stage() {
        let mut c = Collector::new(StatsSnapshot::default(), 0, 0);
        c.plan.add(Duration::from_millis(1), 0, 0);
        c.skip("#3 /a.zarr/x [0:1]: decode error".into());
        let t = c.snapshot(StatsSnapshot::default(), 2, 5, vec![("/a.zarr/x".into(), "cpu (zstd)".into())]).to_string();
        for needle in [
            "plan",
            "read",
            "io",
            "input transfer",
            "decode",
            "assemble",
            "pop wait",
            "skipped 1 samples",
            "skipped #3",
            "route: /a.zarr/x → cpu (zstd)",
            "arrays opened 2 (hits 5)",
        ] {
            assert!(t.contains(needle), "{needle} missing from\n{t}");
        }
    }
}
