//! The cost model (`damacy_kernels::cost`): probe kernels with known access patterns give
//! exactly the sectors, lines and bank wavefronts the hardware rules say, and the real kernels
//! stay within the budgets of `cost_budgets.toml`. Needs the cost build
//! (`crates/damacy-kernels/scripts/cost.sh`, run by `make kernel-cost`); other builds skip with
//! the reason.
#![allow(clippy::doc_markdown, clippy::missing_panics_doc)]

use std::fmt::Write as _;

use damacy_kernels::cost::{self, LOAD, LaunchCost, STORE};
use damacy_kernels::model;

unsafe extern "C" {
    fn dmc_emu_dmc_cost_strided(
        gx: u32,
        gy: u32,
        bx: u32,
        seed: u64,
        stride: u32,
        input: *const u32,
        out: *mut u32,
    ) -> i32;
    fn dmc_emu_dmc_cost_banks(gx: u32, gy: u32, bx: u32, seed: u64, stride: u32, out: *mut u32) -> i32;
    fn dmc_emu_dmc_cost_diverge(
        gx: u32,
        gy: u32,
        bx: u32,
        seed: u64,
        rounds: u32,
        input: *const u32,
        out: *mut u32,
    ) -> i32;
    fn dmc_emu_dmc_cost_reuse(gx: u32, gy: u32, bx: u32, seed: u64, gap: u32, input: *const u32, out: *mut u32) -> i32;
    fn dmc_emu_dmc_cost_sectors(
        gx: u32,
        gy: u32,
        bx: u32,
        seed: u64,
        n: u32,
        step: u32,
        input: *const u32,
        out: *mut u32,
    ) -> i32;
}

/// The launches of `kernel` among those recorded, summed; the record is emptied.
fn recorded(kernel: &str) -> LaunchCost {
    cost::per_kernel(&cost::take()).remove(kernel).unwrap_or_else(|| panic!("no launch of {kernel} was recorded"))
}

fn skip() -> bool {
    if cost::enabled() {
        return false;
    }
    assert!(
        std::env::var_os("DAMACY_EMU_COST_REQUIRED").is_none(),
        "DAMACY_EMU_COST_REQUIRED is set but this is no cost build (DAMACY_EMU_COST=1 at build time)"
    );
    eprintln!("SKIPPED kernel_cost: not a cost build (run crates/damacy-kernels/scripts/cost.sh, or make kernel-cost)");
    true
}

/// `len` words starting at a 128-byte boundary (the backing vector, the offset of the start).
fn aligned(len: usize, f: impl Fn(usize) -> u32) -> (Vec<u32>, usize) {
    let mut v = vec![0u32; len + 32];
    let off = v.as_ptr().align_offset(128);
    for i in 0..len {
        v[off + i] = f(i);
    }
    (v, off)
}

/// One test at a time: the record of launches is process-wide.
static SERIAL: std::sync::Mutex<()> = std::sync::Mutex::new(());

#[test]
fn strided_loads_touch_the_sectors_the_stride_implies() {
    if skip() {
        return;
    }
    let _g = SERIAL.lock().unwrap_or_else(std::sync::PoisonError::into_inner);
    // 2 blocks of 64 threads: 4 warps, each one load and one store request.
    for (stride, sectors, lines) in [(1u32, 4u64, 1u64), (2, 8, 2), (8, 32, 8), (32, 32, 32)] {
        let (input, i0) = aligned(128 * stride as usize, |i| i as u32);
        let (mut out, o0) = aligned(128, |_| 0);
        cost::reset();
        // SAFETY: `input` holds 128 * stride words from i0, `out` the 128 results from o0.
        assert_eq!(
            unsafe { dmc_emu_dmc_cost_strided(2, 1, 64, 0, stride, input.as_ptr().add(i0), out.as_mut_ptr().add(o0)) },
            0
        );
        assert!(out[o0..o0 + 128].iter().enumerate().all(|(i, &v)| v == i as u32 * stride));
        let c = recorded("dmc_cost_strided");
        let (ld, st) = (c.global[LOAD], c.global[STORE]);
        assert_eq!((ld.requests, st.requests), (4, 4), "stride {stride}: {c:?}");
        assert_eq!(ld.lanes, 128);
        assert_eq!(ld.bytes, 512);
        assert_eq!(ld.units, 4 * sectors, "stride {stride}: sectors of the loads");
        assert_eq!(ld.lines, 4 * lines, "stride {stride}: lines of the loads");
        assert_eq!(ld.ideal_units, 16, "128 distinct bytes per request: 4 sectors ideal");
        assert_eq!((st.units, st.ideal_units, st.lines), (16, 16, 4), "the stores are coalesced");
        assert_eq!(c.shared_total().requests, 0);
        assert_eq!(c.host_accesses, 0, "emulator bookkeeping leaked into the record");
        assert_eq!(c.footprint_sectors, 4 * sectors + 16);
    }
}

#[test]
fn misaligned_coalesced_loads_cost_one_more_sector() {
    if skip() {
        return;
    }
    let _g = SERIAL.lock().unwrap_or_else(std::sync::PoisonError::into_inner);
    // The input starts 16 bytes into a sector: each warp's 128 bytes span 5 sectors, 2 lines.
    let (backing, b0) = aligned(256, |i| i as u32);
    let (mut out, o0) = aligned(64, |_| 0);
    cost::reset();
    // SAFETY: 64 words from b0 + 4 lie inside `backing`; `out` holds 64 from o0.
    assert_eq!(
        unsafe { dmc_emu_dmc_cost_strided(1, 1, 64, 0, 1, backing.as_ptr().add(b0 + 4), out.as_mut_ptr().add(o0)) },
        0
    );
    let ld = recorded("dmc_cost_strided").global[LOAD];
    assert_eq!((ld.requests, ld.units, ld.ideal_units, ld.lines), (2, 10, 8, 4));
}

/// Runs a one-warp probe `kernel` through `launch` (given `words` input words 0, 1, 2, … and 32
/// output words, both 128-byte aligned) and returns its recorded launch with its warps.
fn one_warp_probe(kernel: &str, words: usize, launch: impl FnOnce(*const u32, *mut u32) -> i32) -> model::Launch {
    let (input, i0) = aligned(words, |i| i as u32);
    let (mut out, o0) = aligned(32, |_| 0);
    drop(model::take());
    // `input` and `out` outlive the launch, which runs to its end before `launch` returns
    assert_eq!(launch(input[i0..].as_ptr(), out[o0..].as_mut_ptr()), 0, "{kernel}");
    model::take().into_iter().find(|l| l.cost.kernel == kernel).unwrap_or_else(|| panic!("{kernel} was not recorded"))
}

#[test]
fn diverged_lanes_take_turns_in_the_warps_instruction_stream_and_requests() {
    if skip() {
        return;
    }
    let _g = SERIAL.lock().unwrap_or_else(std::sync::PoisonError::into_inner);
    let rounds = 64u32;
    let l = one_warp_probe("dmc_cost_diverge", 32 * rounds as usize, |input, out| {
        // SAFETY: `input` holds 32 * rounds words, `out` 32 (one_warp_probe).
        unsafe { dmc_emu_dmc_cost_diverge(1, 1, 32, 0, rounds, input, out) }
    });
    let w = &l.warps[0];
    // side A runs in every iteration (half the lanes each time): one request per iteration
    let ld = l.cost.global[LOAD];
    assert_eq!((ld.requests, ld.lanes), (u64::from(rounds), 16 * u64::from(rounds)), "{:?}", l.cost);
    assert_eq!(w.g_load_cold + w.g_load_warm + w.g_load_l2, u64::from(rounds));
    // both sides every iteration: more blocks than the iterations' one side each
    assert!(w.bbs >= 3 * u64::from(rounds), "{w:?}");
}

#[test]
fn a_warm_loads_reuse_distance_is_the_lines_loaded_since() {
    if skip() {
        return;
    }
    let _g = SERIAL.lock().unwrap_or_else(std::sync::PoisonError::into_inner);
    // gap lines between the two loads of line 0: bucket 0 below 16, bucket k for [2^(k+3), 2^(k+4))
    for (gap, bucket) in [(5u32, 0usize), (20, 1), (100, 3), (600, 6)] {
        let l = one_warp_probe("dmc_cost_reuse", 32 * (gap as usize + 1), |input, out| {
            // SAFETY: `input` holds 32 * (gap + 1) words, `out` 32 (one_warp_probe).
            unsafe { dmc_emu_dmc_cost_reuse(1, 1, 32, 0, gap, input, out) }
        });
        let w = &l.warps[0];
        assert_eq!((w.g_load_cold, w.g_load_warm), (u64::from(gap) + 1, 1), "gap {gap}: {w:?}");
        let mut want = [0u64; model::WARM_BUCKETS];
        want[bucket] = 1;
        assert_eq!(w.warm_dist, want, "gap {gap}");
        // an L1 share of more lines than the gap keeps it a hit; of fewer, an L2 load
        let g = model::Gpu::h200();
        let hit = g.warp_cycles(w, 1e6);
        let evicted = g.warp_cycles(w, 4.0);
        assert!((evicted - hit - (g.l2_latency - g.warm_latency)).abs() < 1e-9, "gap {gap}");
    }
}

#[test]
fn a_loads_miss_fetches_its_whole_64_byte_l2_line() {
    if skip() {
        return;
    }
    let _g = SERIAL.lock().unwrap_or_else(std::sync::PoisonError::into_inner);
    // (words between two loads, loads) -> (HBM, L2, L1) loads: a sector's first load waits for
    // HBM unless a load already fetched the other sector of its 64-byte line
    for (step, n, want) in [(8u32, 16u32, (8u64, 8u64, 0u64)), (16, 16, (16, 0, 0)), (4, 32, (8, 8, 16))] {
        let l = one_warp_probe("dmc_cost_sectors", (step * n) as usize, |input, out| {
            // SAFETY: `input` holds step * n words, `out` 32 (one_warp_probe).
            unsafe { dmc_emu_dmc_cost_sectors(1, 1, 32, 0, n, step, input, out) }
        });
        let w = &l.warps[0];
        assert_eq!((w.g_load_cold, w.g_load_l2, w.g_load_warm), want, "step {step}: {w:?}");
        assert_eq!(l.cost.global[LOAD].requests, u64::from(n));
    }
}

#[test]
fn bank_conflicts_have_the_degree_of_the_stride() {
    if skip() {
        return;
    }
    let _g = SERIAL.lock().unwrap_or_else(std::sync::PoisonError::into_inner);
    // (stride, wavefronts of the 32-lane read, ideal): 0 is a broadcast of one word
    for (stride, wavefronts, ideal) in
        [(0u32, 1u64, 1u64), (1, 1, 1), (2, 2, 1), (3, 1, 1), (8, 8, 1), (32, 32, 1), (33, 1, 1)]
    {
        let (mut out, o0) = aligned(64, |_| 0);
        cost::reset();
        // SAFETY: two warps write their 64 results to `out` from o0.
        assert_eq!(unsafe { dmc_emu_dmc_cost_banks(1, 1, 64, 0, stride, out.as_mut_ptr().add(o0)) }, 0);
        for (t, &v) in out[o0..o0 + 64].iter().enumerate() {
            assert_eq!(v, if stride == 0 { 7 } else { t as u32 % 32 });
        }
        let c = recorded("dmc_cost_banks");
        let ld = c.shared[LOAD];
        assert_eq!(ld.requests, 2, "stride {stride}: {c:?}");
        assert_eq!((ld.units, ld.ideal_units), (2 * wavefronts, 2 * ideal), "stride {stride}: wavefronts of the reads");
        assert_eq!(ld.lanes, 64);
        assert_eq!(c.shared_max_wavefronts, wavefronts.max(if stride == 0 { 1 } else { wavefronts }));
        let st = c.shared[STORE];
        assert_eq!(st.units, if stride == 0 { 2 } else { 2 * wavefronts }, "stride {stride}: the writes");
        assert_eq!(st.lanes, if stride == 0 { 2 } else { 64 });
        assert_eq!(c.global[STORE].units, 8, "the global stores are coalesced");
        // the __syncwarp is no memory access (its call site's record was once counted as loads)
        assert_eq!(c.global[LOAD].requests, 0, "stride {stride}: no global loads");
        assert_eq!(c.host_accesses, 0);
    }
}

mod common;

/// The GPU performance model's figures (issue 30) of one kernel's launches in a workload, on
/// the H200: the predicted time in µs (launches one after another; the launch cost included)
/// and the estimated SASS instructions per byte. `None` without a SASS weight table
/// (`DAMACY_GPU_MODEL_SASS`, which scripts/cost.sh makes): then the model's budgets are not
/// checked, and DAMACY_GPU_MODEL_REQUIRED makes that a failure.
fn model_metrics(
    recorded: &[damacy_kernels::model::Launch],
    kernel: &str,
    bytes: u64,
) -> Option<[(&'static str, f64); 2]> {
    if model::weights_loaded() == 0 {
        assert!(
            std::env::var_os("DAMACY_GPU_MODEL_REQUIRED").is_none(),
            "DAMACY_GPU_MODEL_REQUIRED is set but no SASS weight table is loaded (DAMACY_GPU_MODEL_SASS)"
        );
        return None;
    }
    let gpu = model::Gpu::h200();
    let res = model::resources_from_env();
    let mine: Vec<model::Launch> = recorded.iter().filter(|l| l.cost.kernel == kernel).cloned().collect();
    let preds = model::predict_all(&gpu, &mine, &res);
    let us: f64 = preds.iter().map(|p| p.total_s).sum::<f64>() * 1e6;
    let insts: f64 = preds.iter().map(|p| p.insts).sum();
    #[allow(clippy::cast_precision_loss)]
    Some([("model_h200_us", us), ("model_insts_per_byte", insts / bytes.max(1) as f64)])
}

/// The metrics a budget bounds, for one kernel in one workload.
fn metrics(c: &LaunchCost, bytes: u64) -> Vec<(&'static str, f64)> {
    let mut m = vec![
        ("sectors_per_request", c.global_total().units_per_request()),
        ("sectors_vs_ideal", c.global_total().vs_ideal()),
        ("requests_per_byte", c.requests_per_byte(bytes)),
    ];
    let s = c.shared_total();
    if s.requests > 0 {
        m.push(("bank_wavefronts_vs_ideal", s.vs_ideal()));
    }
    m
}

/// `cost_budgets.toml`: `["case/kernel"]` sections of `metric = number` lines.
fn budgets() -> std::collections::BTreeMap<String, Vec<(String, f64)>> {
    let path = concat!(env!("CARGO_MANIFEST_DIR"), "/cost_budgets.toml");
    let text = std::fs::read_to_string(path).unwrap_or_else(|e| panic!("{path}: {e}"));
    let mut out: std::collections::BTreeMap<String, Vec<(String, f64)>> = std::collections::BTreeMap::new();
    let mut section = None;
    for (n, raw) in text.lines().enumerate() {
        let line = raw.split('#').next().unwrap_or("").trim();
        if line.is_empty() {
            continue;
        }
        if let Some(s) = line.strip_prefix('[').and_then(|l| l.strip_suffix(']')) {
            let s = s.trim().trim_matches('"').to_string();
            out.entry(s.clone()).or_default();
            section = Some(s);
            continue;
        }
        let (k, v) = line.split_once('=').unwrap_or_else(|| panic!("{path}:{}: expected `metric = number`", n + 1));
        let v: f64 = v.trim().parse().unwrap_or_else(|_| panic!("{path}:{}: `{}` is not a number", n + 1, v.trim()));
        let s = section.as_ref().unwrap_or_else(|| panic!("{path}:{}: a metric before any [case/kernel]", n + 1));
        out.get_mut(s).expect("section inserted").push((k.trim().to_string(), v));
    }
    out
}

#[test]
fn kernels_stay_within_their_budgets() {
    if skip() {
        return;
    }
    let _g = SERIAL.lock().unwrap_or_else(std::sync::PoisonError::into_inner);
    let budgets = budgets();
    let mut failures = Vec::new();
    let mut measured = String::new();
    let mut seen = std::collections::BTreeSet::new();
    for case in common::cost_cases::cost_cases() {
        for (kernel, c) in cost::per_kernel(&case.launches) {
            let key = format!("{}/{kernel}", case.name);
            let mut m = metrics(&c, case.bytes);
            let model = model_metrics(&case.recorded, &kernel, case.bytes);
            if let Some(mm) = model {
                m.extend(mm);
            }
            let _ = writeln!(measured, "[\"{key}\"]");
            for (name, v) in &m {
                let _ = writeln!(measured, "{name} = {v:.4}");
            }
            eprintln!("{key}: {m:?}");
            let Some(b) = budgets.get(&key) else {
                failures.push(format!("{key}: no budget in cost_budgets.toml"));
                continue;
            };
            seen.insert(key.clone());
            for (name, limit) in b {
                match m.iter().find(|(n, _)| n == name) {
                    None if model.is_none() && name.starts_with("model_") => {}
                    Some((_, v)) if *v > *limit => {
                        failures.push(format!("{key}: {name} = {v:.4} exceeds the budget {limit}"));
                    }
                    Some(_) => {}
                    None => failures.push(format!("{key}: unknown metric `{name}` (or no shared accesses)")),
                }
            }
            assert_eq!(c.host_accesses, 0, "{key}: emulator bookkeeping leaked into the record");
        }
    }
    for key in budgets.keys() {
        if !seen.contains(key) {
            failures.push(format!("{key}: budgeted, but the workload did not launch it"));
        }
    }
    assert!(
        failures.is_empty(),
        "cost budgets (model numbers; see the README's cost model):\n{}\n\nmeasured now:\n{measured}",
        failures.join("\n")
    );
}

/// The GPU performance model's pipeline on a small case (issue 30): a batch of fixture LZ4
/// chunks decoded, every warp recorded with instructions, issue cycles and loads, and a
/// prediction made from them that is consistent with its own terms.
#[test]
fn the_gpu_model_predicts_a_small_lz4_batch_from_its_recorded_warps() {
    if skip() {
        return;
    }
    let _g = SERIAL.lock().unwrap_or_else(std::sync::PoisonError::into_inner);
    let device = damacy_kernels::Device::emulated(0);
    let case = common::cost_cases::decode_case(&device, "lz4", "v3/blosc_lz4_byte_ts4_large", |b| {
        damacy_kernels::ChunkInput::blosc(b)
    });
    let l =
        case.recorded.iter().find(|l| l.cost.kernel == "dmc_lz4_decode").expect("the lz4 case launches dmc_lz4_decode");
    // one record per warp of the grid; the warps that decoded a stream (they stored output)
    // ran basic blocks weighing instructions, and loaded their input
    let per_block = l.cost.block_threads.div_ceil(32);
    assert_eq!(l.warps.len() as u64, l.cost.blocks * per_block);
    let busy: Vec<&model::WarpRec> = l.warps.iter().filter(|w| w.g_store > 0).collect();
    assert!(!busy.is_empty(), "no warp stored output");
    assert!(busy.iter().all(|w| w.bbs > 0 && w.insts > 0.0 && w.cycles > 0.0 && w.g_load_cold > 0), "{busy:?}");
    let gpu = model::Gpu::h200();
    let res = model::resources_from_env();
    let p = gpu.predict(l, res.get("dmc_lz4_decode"));
    // the latency part is at least the longest warp's serial path; the launch lasts the longer
    // of it and the memory part, plus the launch cost
    // (every warm load an L1 hit: the least it can be)
    let longest = l.warps.iter().map(|w| gpu.warp_cycles(w, f64::INFINITY)).fold(0.0, f64::max) / gpu.clock_hz;
    assert!(p.latency_s >= longest - 1e-12 && longest > 0.0, "{} < {longest}", p.latency_s);
    assert!((p.total_s - (p.latency_s.max(p.memory_s) + p.launch_s)).abs() < 1e-12);
    // a few chunks cannot fill 132 SMs: the serial path bounds it
    assert_eq!(p.bound, model::Bound::SerialPath);
    // the same launch standing for 4: 4 times the blocks, the same warps (their paths no
    // shorter: more blocks per SM share its L1), no faster
    let p4 = gpu.predict(&l.replicate(4), res.get("dmc_lz4_decode"));
    assert_eq!(p4.blocks, 4 * p.blocks);
    assert!(p4.longest_warp_s >= p.longest_warp_s - 1e-12);
    assert!(p4.total_s >= p.total_s);
}
