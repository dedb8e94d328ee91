//! Backpressure: an endless iterator is pulled only as batches are popped, and resident memory
//! stays flat. A test binary of its own, so no other test's allocations move the RSS.

#[path = "../../damacy-codec/tests/common/mod.rs"]
mod common;

use std::sync::Arc;
use std::sync::atomic::{AtomicU64, Ordering::Relaxed};

use damacy::{Config, ExecutorKind, Pipeline, Region, Sample};

fn uri(path: &str) -> String {
    common::fixtures_dir().join(path).to_str().unwrap().to_owned()
}

/// Resident set size in bytes (Linux).
fn rss() -> u64 {
    let statm = std::fs::read_to_string("/proc/self/statm").unwrap_or_default();
    statm.split_whitespace().nth(1).and_then(|p| p.parse::<u64>().ok()).unwrap_or(0) * 4096
}

#[test]
fn an_endless_iterator_stays_within_memory() {
    let pulled = Arc::new(AtomicU64::new(0));
    let counter = pulled.clone();
    // 5 KiB samples, 80 KiB batches: a buffer kept per batch would show as ~50 MiB.
    let u = uri("v3/sharded_zstd_index_end");
    let batch = 16;
    let p = Pipeline::new(
        Config::new(batch)
            .with_executor(ExecutorKind::Cpu)
            .with_io_threads(1)
            .with_compute_threads(1)
            .with_lookahead(48),
    )
    .unwrap();
    let endless = (0u64..).map(move |i| {
        counter.fetch_add(1, Relaxed);
        Sample::new(u.clone(), Region::new(vec![i % 32, (i * 7) % 56, 0], vec![8, 16, 20])).with_id(i)
    });
    p.push(endless).unwrap();
    let slots = p.config().depth + p.config().n_workers;
    let mut popped = 0u64;
    let mut rss_early = 0;
    for n in 0..(10_000 / batch) {
        let b = p.pop().unwrap();
        assert_eq!(b.samples()[0].id, Some(popped), "push order");
        popped += b.len() as u64;
        drop(b);
        // Pulled never runs ahead of what was popped by more than the lookahead and the
        // batches being read or waiting.
        let ahead = pulled.load(Relaxed) - popped;
        assert!(ahead <= (48 + slots * batch) as u64, "pulled {ahead} samples ahead");
        if n == 100 {
            rss_early = rss();
        }
    }
    assert_eq!(popped, 10_000);
    let growth = rss().saturating_sub(rss_early);
    assert!(growth < 16 << 20, "resident memory grew by {growth} bytes over 10,000 samples");
    assert_eq!(p.stats().samples, 10_000);
}
