//! Plan throughput and memory, against materialising and shuffling the index vector.
//!
//! `cargo bench -p damacy-sampler --bench plan`
//!
//! - Throughput (criterion, one thread): entries per second of a rank's plan
//!   over N = 10⁸ samples, 10⁷ entries per iteration; the baseline builds
//!   `Vec<u64>` of 0..N and Fisher–Yates shuffles it (N = 10⁷ under
//!   criterion, plus one timed N = 10⁸ run).
//! - Memory: a counting allocator records the peak heap bytes of building a
//!   plan and walking 10⁶ of its entries, for N from 10⁴ to 10⁸, next to the
//!   baseline's; and `size_of::<Plan<IndexSpace>>()`.

// criterion_group! generates an undocumented public function.
#![allow(missing_docs)]

use std::alloc::{GlobalAlloc, Layout, System};
use std::hint::black_box;
use std::sync::atomic::{AtomicUsize, Ordering};
use std::time::{Duration, Instant};

use criterion::{Criterion, Throughput, criterion_group, criterion_main};
use damacy_sampler::{EqualLength, Granularity, IndexSpace, Mode, Plan, PlanConfig, RankSource, Shuffle, splitmix64};

/// Counts live and peak heap bytes.
struct Counting;

static LIVE: AtomicUsize = AtomicUsize::new(0);
static PEAK: AtomicUsize = AtomicUsize::new(0);

// SAFETY: forwards every call to the system allocator unchanged; the counters
// are plain atomics and never affect the returned memory.
unsafe impl GlobalAlloc for Counting {
    unsafe fn alloc(&self, layout: Layout) -> *mut u8 {
        // SAFETY: same contract as the caller's: `layout` has non-zero size.
        let p = unsafe { System.alloc(layout) };
        if !p.is_null() {
            let live = LIVE.fetch_add(layout.size(), Ordering::Relaxed) + layout.size();
            PEAK.fetch_max(live, Ordering::Relaxed);
        }
        p
    }

    unsafe fn dealloc(&self, ptr: *mut u8, layout: Layout) {
        // SAFETY: `ptr` was returned by `alloc` above with this `layout`.
        unsafe { System.dealloc(ptr, layout) };
        LIVE.fetch_sub(layout.size(), Ordering::Relaxed);
    }
}

#[global_allocator]
static ALLOC: Counting = Counting;

const N: u64 = 100_000_000;
const ENTRIES: u64 = 10_000_000;
const BASELINE_N: u64 = 10_000_000;

fn config(shuffle: Shuffle) -> PlanConfig {
    PlanConfig::new()
        .with_rank(RankSource::new(3, 8))
        .with_batch_size(256)
        .with_shuffle(shuffle)
        .with_equal_length(EqualLength::Drop)
        .with_seed(1234)
        .with_epoch(7)
}

fn sum_entries(plan: &Plan<&IndexSpace>, n: u64) -> u64 {
    plan.iter().take(n as usize).fold(0u64, |acc, s| acc.wrapping_add(s.id))
}

/// Materialise 0..n and Fisher–Yates shuffle it (the baseline).
fn materialise_and_shuffle(n: u64, seed: u64) -> Vec<u64> {
    let mut v: Vec<u64> = (0..n).collect();
    let mut state = seed;
    for i in (1..v.len()).rev() {
        state = state.wrapping_add(0x9E37_79B9_7F4A_7C15);
        let j = ((u128::from(splitmix64(state)) * (i as u128 + 1)) >> 64) as usize;
        v.swap(i, j);
    }
    v
}

fn throughput(c: &mut Criterion) {
    let flat = IndexSpace::new(N);
    let chunked = IndexSpace::chunked(N, 1000).expect("valid space");
    let mut g = c.benchmark_group("plan_throughput");
    g.throughput(Throughput::Elements(ENTRIES));

    let plan = Plan::new(&flat, config(Shuffle::Full)).expect("valid plan");
    g.bench_function("full_shuffle_strided_N1e8", |b| {
        b.iter(|| black_box(sum_entries(&plan, ENTRIES)));
    });
    let plan = Plan::new(&flat, config(Shuffle::Full).with_mode(Mode::Contiguous)).expect("valid plan");
    g.bench_function("full_shuffle_contiguous_N1e8", |b| {
        b.iter(|| black_box(sum_entries(&plan, ENTRIES)));
    });
    let plan = Plan::new(&flat, config(Shuffle::None)).expect("valid plan");
    g.bench_function("no_shuffle_strided_N1e8", |b| {
        b.iter(|| black_box(sum_entries(&plan, ENTRIES)));
    });
    let plan = Plan::new(&chunked, config(Shuffle::TwoLevel { window: 16 })).expect("valid plan");
    g.bench_function("two_level_w16_chunk1000_strided_N1e8", |b| {
        b.iter(|| black_box(sum_entries(&plan, ENTRIES)));
    });
    let plan = Plan::new(&chunked, config(Shuffle::Full).with_granularity(Granularity::Group)).expect("valid plan");
    g.bench_function("chunk_granular_full_chunk1000_N1e8", |b| {
        b.iter(|| black_box(sum_entries(&plan, ENTRIES)));
    });

    g.throughput(Throughput::Elements(BASELINE_N));
    g.bench_function("baseline_materialise_fisher_yates_N1e7", |b| {
        b.iter(|| black_box(materialise_and_shuffle(BASELINE_N, 1234)));
    });
    g.finish();

    let mut g = c.benchmark_group("plan_build");
    g.bench_function("chunk_granular_build_N1e8_100k_chunks", |b| {
        b.iter(|| {
            black_box(
                Plan::new(&chunked, config(Shuffle::Full).with_granularity(Granularity::Group))
                    .expect("valid plan")
                    .len(),
            )
        });
    });
    g.finish();
}

/// Peak heap bytes (above the level at entry) while running `f`.
fn peak_heap<T>(f: impl FnOnce() -> T) -> (T, usize) {
    let base = LIVE.load(Ordering::Relaxed);
    PEAK.store(base, Ordering::Relaxed);
    let out = f();
    (out, PEAK.load(Ordering::Relaxed) - base)
}

fn memory_and_baseline_1e8() {
    println!("\n## memory (peak heap above start, counting allocator)\n");
    println!("size_of::<Plan<IndexSpace>>() = {} bytes", std::mem::size_of::<Plan<IndexSpace>>());
    println!(
        "\n| N | plan: build + walk 10^6 entries (full shuffle) | plan: two-level, chunk 1000 | baseline Vec + shuffle |"
    );
    println!("|---|---|---|---|");
    for n in [10_000u64, 1_000_000, 100_000_000] {
        let (_, flat) = peak_heap(|| {
            let plan = Plan::new(IndexSpace::new(n), config(Shuffle::Full).with_equal_length(EqualLength::Pad))
                .expect("valid plan");
            plan.iter().take(1_000_000).fold(0u64, |a, s| a ^ s.id)
        });
        let (_, two) = peak_heap(|| {
            let plan = Plan::new(
                IndexSpace::chunked(n, 1000).expect("valid space"),
                config(Shuffle::TwoLevel { window: 16 }).with_equal_length(EqualLength::Pad),
            )
            .expect("valid plan");
            plan.iter().take(1_000_000).fold(0u64, |a, s| a ^ s.id)
        });
        let base = if n <= BASELINE_N {
            let (_, b) = peak_heap(|| materialise_and_shuffle(n, 1).len());
            format!("{b}")
        } else {
            format!("{} (8·N, not run here; run below)", 8 * n)
        };
        println!("| {n} | {flat} B | {two} B | {base} |");
    }

    println!("\n## one timed run at N = 10^8 (single run, wall clock)\n");
    let t = Instant::now();
    let ((), peak) = peak_heap(|| {
        let v = materialise_and_shuffle(N, 1234);
        black_box(v.len());
    });
    let dt = t.elapsed();
    println!(
        "baseline materialise + Fisher–Yates, N = 10^8: {:.2} s = {:.1} M samples/s, peak heap {} MB",
        dt.as_secs_f64(),
        N as f64 / dt.as_secs_f64() / 1e6,
        peak / 1_000_000
    );
    let flat = IndexSpace::new(N);
    let t = Instant::now();
    let (sum, peak) = peak_heap(|| {
        let plan = Plan::new(&flat, PlanConfig::new().with_seed(1234)).expect("valid plan");
        plan.iter().fold(0u64, |a, s| a.wrapping_add(s.id))
    });
    let dt = t.elapsed();
    black_box(sum);
    println!(
        "sampler full shuffle, world 1, all N = 10^8 entries: {:.2} s = {:.1} M samples/s, peak heap {} B",
        dt.as_secs_f64(),
        N as f64 / dt.as_secs_f64() / 1e6,
        peak
    );
}

fn benches(c: &mut Criterion) {
    throughput(c);
    memory_and_baseline_1e8();
}

criterion_group! {
    name = plan;
    config = Criterion::default()
        .sample_size(10)
        .warm_up_time(Duration::from_secs(1))
        .measurement_time(Duration::from_secs(4));
    targets = benches
}
criterion_main!(plan);
