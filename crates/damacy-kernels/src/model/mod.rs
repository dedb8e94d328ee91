//! The GPU performance model (issue 30): a kernel launch's time on an `sm_90` GPU (H200, H100)
//! predicted from what the emulator observed while it ran the real `.cu` files.
//!
//! Inputs, per warp of a launch (a cost build: `DAMACY_EMU_COST=1`, see [`crate::cost`]):
//! - **instructions**: every basic block a lane ran (gcc's `-fsanitize-coverage=trace-pc`
//!   callback), in order, merged into one warp instruction stream as a SIMT warp runs them
//!   (`simt_runs` in `kernels/emu/cost.hpp`: lanes at the same block run it together, diverged
//!   lanes take turns, lowest host address first, so a branch's sides meet at their join and
//!   the warp runs each iteration's union of its lanes' paths), each block weighted by the SASS
//!   instructions of the source lines whose host instructions it holds (each line's SASS spread
//!   over its host blocks in proportion to its host instructions in each), and by their **issue
//!   cycles**: the stall count in each SASS instruction's control word (ptxas' static schedule:
//!   the cycles the warp waits before its next issue, so a dependent instruction waits its
//!   pipe's latency and an independent one a cycle or two), plus a consumer's wait on a
//!   scoreboard for an XU result (bit counts, conversions, `MUFU`):
//!   `scripts/gpu_model_sass.py` joins NVRTC's `sm_90` cubins (nvdisasm line info) with the
//!   binary's basic blocks and the source line of each host instruction (`objdump -d -l`,
//!   `addr2line -i`) and writes the table `DAMACY_GPU_MODEL_SASS` names, with the **exposed
//!   shuffles** among them (a `SHFL` that lengthens the longest chain of shuffles through
//!   register dependencies in its straight-line stretch of SASS: independent shuffles overlap);
//! - **memory**: global loads (first touch of a sector in the launch, or a re-touch, with the
//!   re-touch's LRU reuse distance in 128-byte lines), stores, sectors, shared loads and stores
//!   and bank wavefronts (the cost recorder's warp requests: one call site in one run of the
//!   warp).
//!
//! The time (see [`Gpu`] for every constant and its source):
//! - a warp's **serial path**: `issue cycles + exposed shuffles × shuffle latency + cold
//!   loads × HBM latency + warm loads × L1 latency + L2 loads × L2 latency + shared loads ×
//!   shared latency` cycles (a cold load: the first touch of a sector whose 64-byte L2 line no
//!   load of the launch fetched; a miss fetches both sectors of its line, so the first load of
//!   the other one is an L2 load): a warp issues in
//!   order, so a lone warp waits out each load and the schedule's stalls between its
//!   instructions; a load is warm when the launch loaded all of its
//!   sectors before and stored none of them since (global stores write through to L2 and leave
//!   no L1 line, so a decoder re-reading its own output goes to L2), and its reuse distance
//!   fits the block's share of the SM's L1 (the unified 256 KiB less the shared-memory
//!   carve-out the kernel's occupancy needs, over the blocks resident on the SM; a warm load
//!   beyond it was evicted and is an L2 load);
//! - a block lasts as long as its longest warp; where its warps meet at barriers
//!   (`__syncthreads`: the zstd kernel's teams), the emulator records each warp's path between
//!   two barriers as a phase, and the block lasts the sum of its phases' longest paths (a
//!   barrier waits for the slowest warp); a warp is active until its last phase ends; blocks go to SMs as the hardware's block
//!   scheduler places them: the first `SMs × resident blocks` spread over the SMs, each later one
//!   to the slot that frees first (**occupancy**: registers, shared memory, threads and blocks
//!   per SM, [`Gpu::occupancy`]); an SM's time is at least its warps' instructions over its four
//!   schedulers (one instruction per cycle each); the launch's latency part is the last SM's end;
//! - the **memory** part: the launch's distinct sectors (each read or written once) at the
//!   device's copy bandwidth; the launch lasts the longer of the two parts (a roofline: while
//!   its warps wait out their loads the memory system streams other warps' bytes, so the
//!   bandwidth is a floor the latency part overlaps, not a cost added to it);
//! - plus a fixed launch cost; launches of a wave run one after another.
//!
//! Every number is the model's, not a GPU measurement; `benches/results/gpu-model.md` compares
//! them with an H200's.

use std::collections::{BTreeMap, BinaryHeap};

use crate::cost::LaunchCost;

unsafe extern "C" {
    fn dmc_emu_model_record_size() -> u64;
    fn dmc_emu_model_weights() -> u64;
    fn dmc_emu_model_warps(i: u64, out: *mut WarpRec, cap: u64) -> u64;
}

/// One warp of a launch as the emulator recorded it (the C `dmc_emu::cost::WarpRec` of
/// `kernels/emu/cost.hpp`).
#[repr(C)]
#[derive(Clone, Copy, Debug, Default, PartialEq)]
pub struct WarpRec {
    /// Linear block index (x fastest).
    pub block: u64,
    /// Warp of the block.
    pub warp: u64,
    /// The block's barriers (`__syncthreads`) before this record: a warp's path between two
    /// of its block's barriers is one record (a phase), so a warp of a block with barriers has
    /// several; [`Launch::warp_totals`] sums them per warp.
    pub phase: u64,
    /// Host basic blocks the warp ran (its lanes' paths merged in lockstep: diverged lanes
    /// take turns).
    pub bbs: u64,
    /// The same, each weighted by its SASS instructions (= `bbs` without a weight table).
    pub insts: f64,
    /// The exposed shuffles (`SHFL`s that lengthen a chain of dependent shuffles) among those
    /// instructions (0 without a weight table).
    pub shfl: f64,
    /// The same blocks' issue cycles: their SASS instructions' stall counts (the exposed
    /// shuffles' left out) and waits for XU results (4 per block without a weight table).
    pub cycles: f64,
    /// Global loads that wait for HBM: a sector no earlier request of the launch touched, in a
    /// 64-byte L2 line no earlier load fetched.
    pub g_load_cold: u64,
    /// Global loads of sectors the launch loaded before and has not stored since (L1 hits).
    pub g_load_warm: u64,
    /// Global store (and atomic) requests.
    pub g_store: u64,
    /// Global sectors of all its requests.
    pub g_sectors: u64,
    /// Shared-memory load requests.
    pub s_load: u64,
    /// Shared-memory store (and atomic) requests.
    pub s_store: u64,
    /// Shared-memory wavefronts of all its requests.
    pub s_wavefronts: u64,
    /// Global loads (and atomics) served by L2: sectors the launch touched before that are not
    /// in L1 (a store writes through to L2 and leaves no L1 line, so re-reading output is an
    /// L2 hit), or a first touch of a sector whose 64-byte L2 line a load fetched.
    pub g_load_l2: u64,
    /// The warm loads by reuse distance (the distinct 128-byte lines the emulator thread's loads
    /// touched since the request's lines were last touched): bucket 0 under 16 lines, bucket k
    /// `[2^(k+3), 2^(k+4))` lines, the last bucket open. Their sum is `g_load_warm`.
    pub warm_dist: [u64; WARM_BUCKETS],
}

/// Buckets of [`WarpRec::warm_dist`] (the C `WARM_BUCKETS`).
pub const WARM_BUCKETS: usize = 12;

/// The reuse distance, in lines, that stands for bucket `k` of [`WarpRec::warm_dist`]: its
/// geometric middle (the last, open bucket: its lower bound).
#[must_use]
#[allow(clippy::cast_precision_loss, clippy::cast_possible_wrap, clippy::cast_possible_truncation)]
pub fn warm_bucket_lines(k: usize) -> f64 {
    if k == 0 {
        8.0
    } else if k + 1 == WARM_BUCKETS {
        2f64.powi(k as i32 + 3)
    } else {
        2f64.powf(k as f64 + 3.5)
    }
}

/// One recorded launch: the cost recorder's totals and its warps.
#[derive(Clone, Debug)]
pub struct Launch {
    /// The memory totals (and kernel name, grid, block size) of [`crate::cost`].
    pub cost: LaunchCost,
    /// Its warps, in the order their blocks ended.
    pub warps: Vec<WarpRec>,
}

impl WarpRec {
    /// Adds `o`'s counts to this record's (block, warp and phase stay).
    pub fn add(&mut self, o: &WarpRec) {
        self.bbs += o.bbs;
        self.insts += o.insts;
        self.shfl += o.shfl;
        self.cycles += o.cycles;
        self.g_load_cold += o.g_load_cold;
        self.g_load_warm += o.g_load_warm;
        self.g_store += o.g_store;
        self.g_sectors += o.g_sectors;
        self.s_load += o.s_load;
        self.s_store += o.s_store;
        self.s_wavefronts += o.s_wavefronts;
        self.g_load_l2 += o.g_load_l2;
        for (a, b) in self.warm_dist.iter_mut().zip(&o.warm_dist) {
            *a += b;
        }
    }
}

impl Launch {
    /// Each warp's phases summed: one record per warp of the launch (phase 0), in block and
    /// warp order.
    #[must_use]
    pub fn warp_totals(&self) -> Vec<WarpRec> {
        let mut m: BTreeMap<(u64, u64), WarpRec> = BTreeMap::new();
        for w in &self.warps {
            m.entry((w.block, w.warp)).or_insert(WarpRec { block: w.block, warp: w.warp, ..WarpRec::default() }).add(w);
        }
        m.into_values().collect()
    }

    /// The launch `k` times over: its blocks (and their warps) repeated with block indices
    /// shifted by the recorded block count, its distinct bytes `k` times — what a launch of
    /// `k` times the work looks like when the recorded one ran every k-th chunk of it.
    #[must_use]
    pub fn replicate(&self, k: usize) -> Self {
        let k = k.max(1) as u64;
        let n = self.cost.blocks.max(self.warps.iter().map(|w| w.block + 1).max().unwrap_or(0));
        let mut cost = self.cost.clone();
        cost.blocks = n * k;
        cost.footprint_sectors *= k;
        let warps =
            (0..k).flat_map(|i| self.warps.iter().map(move |w| WarpRec { block: w.block + i * n, ..*w })).collect();
        Self { cost, warps }
    }
}

/// How many call sites the SASS weight table holds (0: none loaded, the model counts host
/// basic blocks instead of SASS instructions).
#[must_use]
pub fn weights_loaded() -> u64 {
    // SAFETY: no arguments; the C side reads its own table.
    unsafe { dmc_emu_model_weights() }
}

/// The launches recorded since the last [`take`] (or [`crate::cost::take`]), with their warps.
///
/// # Panics
/// When the C warp record and [`WarpRec`] differ in size: a build defect.
#[must_use]
pub fn take() -> Vec<Launch> {
    if !crate::cost::enabled() {
        return Vec::new();
    }
    // SAFETY: no arguments.
    let size = unsafe { dmc_emu_model_record_size() };
    assert_eq!(
        usize::try_from(size).ok(),
        Some(std::mem::size_of::<WarpRec>()),
        "kernels/emu/cost.hpp's WarpRec and src/model/mod.rs's differ: change both together"
    );
    // every recorded launch has at least one warp: 0 is the end of the record
    let mut warps = Vec::new();
    for i in 0u64.. {
        let mut buf = vec![WarpRec::default(); 1024];
        // SAFETY: `buf` has room for `buf.len()` records; the C side writes at most that many.
        let n = usize::try_from(unsafe { dmc_emu_model_warps(i, buf.as_mut_ptr(), buf.len() as u64) }).unwrap_or(0);
        if n == 0 {
            break;
        }
        if n > buf.len() {
            buf = vec![WarpRec::default(); n];
            // SAFETY: as above, with room for all `n`.
            unsafe { dmc_emu_model_warps(i, buf.as_mut_ptr(), buf.len() as u64) };
        }
        buf.truncate(n);
        warps.push(buf);
    }
    let launches = crate::cost::take();
    launches.into_iter().zip(warps).map(|(cost, warps)| Launch { cost, warps }).collect()
}

/// A kernel's resources from ptxas (registers per thread, static shared memory per block).
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub struct KernelResources {
    /// Registers per thread.
    pub registers: u32,
    /// Static shared memory per block, bytes.
    pub smem_bytes: u32,
    /// SASS instructions of the kernel's code (static).
    pub sass_instructions: u32,
}

/// The `#res kernel registers smem sass` lines of a SASS weight table (the file
/// `scripts/gpu_model_sass.py` writes).
#[must_use]
pub fn parse_resources(table: &str) -> BTreeMap<String, KernelResources> {
    let mut m = BTreeMap::new();
    for line in table.lines() {
        let mut it = line.split_whitespace();
        if it.next() != Some("#res") {
            continue;
        }
        let (Some(k), Some(r), Some(s)) = (it.next(), it.next(), it.next()) else { continue };
        let (Ok(r), Ok(s)) = (r.parse(), s.parse()) else { continue };
        let sass = it.next().and_then(|x| x.parse().ok()).unwrap_or(0);
        m.insert(k.to_string(), KernelResources { registers: r, smem_bytes: s, sass_instructions: sass });
    }
    m
}

/// The resources of the table `DAMACY_GPU_MODEL_SASS` names (empty without one).
#[must_use]
pub fn resources_from_env() -> BTreeMap<String, KernelResources> {
    std::env::var_os("DAMACY_GPU_MODEL_SASS")
        .and_then(|p| std::fs::read_to_string(p).ok())
        .map(|t| parse_resources(&t))
        .unwrap_or_default()
}

/// Bytes moved (read + written) per second by the H200's device-to-device copy: twice the
/// bytes copied per second of the slope between two event-timed `cudaMemcpyAsync` sizes (32 MiB
/// in 24.58 µs, 48 MiB in 32.35 µs; run of aff1452), 16 MiB / 7.77 µs = 2.158 TB/s copied.
const H200_COPY_BYTES_PER_S: f64 = 2.0 * 2.158e12;

/// Cycles of a dependent shuffle on the H200, measured: `benches/gpu/model_cal.py`'s
/// `lat_shfl_step` (one step of `x = shfl(x, x + 1)`: a `SHFL.IDX` and the add that makes its
/// lane, 32.0 cycles) less its dependent add (`lat_imad`, 4.4 cycles), run of a61ddac
/// (`benches/results/gpu-h200-2026-11-28-a61ddac/model_cal.json`). Until that run it was a fit
/// over the decode rows (18.8 cycles).
const SHFL_LATENCY: f64 = 27.6;

/// An `sm_90` GPU and the model's constants. Sources: [`Gpu::h200`] and [`Gpu::sources`].
#[derive(Clone, Debug, PartialEq)]
#[non_exhaustive]
pub struct Gpu {
    /// Name for reports.
    pub name: &'static str,
    /// Streaming multiprocessors.
    pub sms: u32,
    /// SM clock while the kernels run, Hz.
    pub clock_hz: f64,
    /// Warp schedulers per SM (each issues one instruction per cycle).
    pub schedulers: u32,
    /// Resident warps per SM.
    pub max_warps: u32,
    /// Resident blocks per SM.
    pub max_blocks: u32,
    /// Registers per SM (split evenly over the schedulers).
    pub registers: u32,
    /// A warp's registers are allocated in units of this many.
    pub reg_unit: u32,
    /// Shared memory per SM for blocks, bytes.
    pub smem_bytes: u32,
    /// Shared memory the driver reserves per block, bytes.
    pub smem_reserved: u32,
    /// Shared memory allocation unit, bytes.
    pub smem_unit: u32,
    /// The SM's unified L1 data cache and shared memory, bytes: what the shared-memory
    /// carve-out leaves is L1.
    pub l1_smem_bytes: u32,
    /// The shared-memory carve-outs the driver chooses from, KiB (the smallest that holds the
    /// resident blocks' shared memory).
    pub carveouts_kib: &'static [u32],
    /// Cycles of a dependent shuffle (`SHFL`, a variable-latency instruction of the MIO pipe:
    /// charged this instead of its stall count).
    pub shfl_latency: f64,
    /// Cycles of a global load that brings sectors the launch did not touch before from HBM
    /// (the first load of a 64-byte L2 line: the cost recorder's lines; a later first load of
    /// the line's other sector is an L2 hit).
    pub cold_latency: f64,
    /// Cycles of a global load of sectors the launch touched before (an L1 hit: one warp per
    /// chunk re-reads what it read or wrote).
    pub warm_latency: f64,
    /// Cycles of a global load served by L2 (a sector the launch stored, or loaded and lost,
    /// or the other sector of a 64-byte line a load fetched).
    pub l2_latency: f64,
    /// Cycles of a shared-memory load.
    pub shared_latency: f64,
    /// The bandwidth of a device-to-device copy, bytes moved (read + written) per second.
    pub copy_bytes_per_s: f64,
    /// Fixed cost of a launch as event timing sees it, seconds.
    pub launch_s: f64,
}

impl Gpu {
    /// The NVIDIA H200 (SXM, 141 GB of `HBM3e`) the 2026-11-28 run measured.
    #[must_use]
    pub fn h200() -> Self {
        Self {
            name: "H200",
            sms: 132,
            clock_hz: 1.98e9,
            schedulers: 4,
            max_warps: 64,
            max_blocks: 32,
            registers: 65536,
            reg_unit: 256,
            smem_bytes: 228 * 1024,
            smem_reserved: 1024,
            smem_unit: 128,
            l1_smem_bytes: 256 * 1024,
            carveouts_kib: &[0, 8, 16, 32, 64, 100, 132, 164, 196, 228],
            shfl_latency: SHFL_LATENCY,
            cold_latency: 698.0,
            warm_latency: 43.0,
            l2_latency: 351.0,
            shared_latency: 29.0,
            copy_bytes_per_s: H200_COPY_BYTES_PER_S,
            launch_s: 8.8e-6,
        }
    }

    /// The NVIDIA H100 SXM5: the H200's SM (same clocks, same occupancy rules); its HBM3 moves
    /// 3.35 TB/s against the H200's 4.8 TB/s, so its copy bandwidth is the H200's scaled by
    /// 3.35 / 4.8 (not measured).
    #[must_use]
    pub fn h100() -> Self {
        Self { name: "H100", copy_bytes_per_s: H200_COPY_BYTES_PER_S * 3.35 / 4.8, ..Self::h200() }
    }

    /// The same GPU at another SM clock (ncu locks the clock to the base 1.5 GHz on an H200).
    #[must_use]
    pub fn with_clock(mut self, hz: f64) -> Self {
        self.clock_hz = hz;
        self
    }

    /// Where each constant comes from, as Markdown bullet lines.
    #[must_use]
    pub fn sources(&self) -> String {
        format!(
            "- {} SMs, 4 schedulers per SM, 64 warps / 32 blocks / 65536 registers (allocated per warp in units of 256, per scheduler) / 228 KiB shared memory per SM (1 KiB reserved per block, 128-byte units): NVIDIA's Hopper tuning guide and CUDA occupancy rules (datasheet); Nsight's block limits in ncu-kernels.txt agree (lz4 12 blocks by registers, assemble 5)\n\
             - clock {:.2} GHz: the H200's boost clock (datasheet); the ncu rows are predicted at the 1.50 GHz ncu locked (its `SM Frequency`)\n\
             - issue cycles of a lone warp: each SASS instruction's stall count, the 4-bit field at bits 105-108 of its 128-bit encoding (`nvdisasm -hex`; the control information Jia et al. decoded for Volta, \"Dissecting the NVIDIA Volta GPU Architecture via Microbenchmarking\", 2018, which sm_90's encoding keeps): ptxas' static schedule, the cycles before the warp's next issue (a dependent integer instruction 4-6, an independent one 1-2, a predicate read by a branch 13); read from the shipped compiler's cubins, not fitted (it replaced a flat 4.0 cycles per instruction); plus a consumer's wait on a scoreboard for an XU result (`POPC`, `FLO`, `BREV`, conversions, `MUFU`): ready 17.2 cycles after issue, `benches/gpu/model_cal.py`'s `POPC` step (23.19 cycles, runs a61ddac and fd22e7f) less its dependent add's stall count (6); measured for `POPC`, assumed for the pipe's other operations\n\
             - shuffle {:.1} cycles (a dependent `SHFL`, charged instead of its stall count): measured — `benches/gpu/model_cal.py`'s dependent shuffle step (32.0 cycles: a `SHFL.IDX` and the add that makes its lane) less one dependent add (`lat_imad`, 4.4 cycles), run of a61ddac; it was a fit (18.8) before that run; not fitted\n\
             - cold load {:.0} cycles (first touch of a sector in the launch whose 64-byte L2 line no load fetched: HBM), warm load {:.0} cycles (an L1 hit: sectors the warp loaded and has not stored since), L2 load {:.0} cycles (a sector the launch stored: stores write through and leave no L1 line; or the first touch of a sector whose line partner a load fetched), shared load {:.0} cycles: the H200's dependent-load chains of `benches/gpu/model_cal.py` (1 GiB, 8 MiB and 16 KiB working sets, shared memory; run of d5a7030, `model_cal.json`), rounded; not fitted\n\
             - L2 lines of 64 bytes (the cost recorder's, `kernels/emu/cost.hpp`: a load that misses fetches both 32-byte sectors of its line from HBM, so a first load of the other sector is an L2 hit): the L2 line size Jia et al. measured on Volta (\"Dissecting the NVIDIA Volta GPU Architecture via Microbenchmarking\", 2018), assumed unchanged on Hopper — not measured on the H200 yet (`benches/gpu/model_cal.py`'s `lat_dram_pairs` measures it on the next run); not fitted\n\
             - L1: {} KiB of unified L1 and shared memory per SM, shared-memory carve-outs of 0, 8, 16, 32, 64, 100, 132, 164, 196 or 228 KiB (the smallest that holds the resident blocks' shared memory is the L1's complement): NVIDIA's Hopper tuning guide (datasheet); a warm load whose LRU reuse distance exceeds its block's share is charged the L2 latency\n\
             - copy bandwidth {:.2} TB/s of bytes moved: the slope of the H200's device-to-device `cudaMemcpyAsync` between two sizes (32 MiB at 1365.3 GB/s, 48 MiB at 1555.8 GB/s, event-timed, run of aff1452: 16 MiB more copied in 7.77 µs), so that the launch cost is not counted as bandwidth; a microbenchmark of the run, not a kernel row\n\
             - launch {:.1} µs: an empty kernel between two events on the H200 (`benches/gpu/model_cal.py`, `launch_us`, run of d5a7030); the same line's intercept (9.0 µs at zero bytes) agrees\n",
            self.sms,
            self.clock_hz / 1e9,
            self.shfl_latency,
            self.cold_latency,
            self.warm_latency,
            self.l2_latency,
            self.shared_latency,
            self.l1_smem_bytes / 1024,
            self.copy_bytes_per_s / 1e12,
            self.launch_s * 1e6,
        )
    }

    /// Resident blocks per SM for blocks of `threads` threads using `registers` registers per
    /// thread and `smem` bytes of shared memory per block, and what limits them.
    #[must_use]
    pub fn occupancy(&self, threads: u32, registers: u32, smem: u32) -> Occupancy {
        let warps = threads.div_ceil(32).max(1);
        let mut best = (self.max_blocks, Limiter::Blocks);
        let mut limit = |n: u32, why: Limiter| {
            if n < best.0 {
                best = (n, why);
            }
        };
        limit(self.max_warps / warps, Limiter::Warps);
        // registers: a warp's allocation, rounded up to the unit, comes from one scheduler's
        // quarter of the register file; a block's warps spread over the schedulers
        let per_warp = (registers.max(1) * 32).div_ceil(self.reg_unit) * self.reg_unit;
        let per_scheduler = (self.registers / self.schedulers) / per_warp;
        limit((per_scheduler * self.schedulers) / warps, Limiter::Registers);
        if smem > 0 {
            let per_block = (smem + self.smem_reserved).div_ceil(self.smem_unit) * self.smem_unit;
            limit(self.smem_bytes / per_block, Limiter::SharedMemory);
        }
        Occupancy { blocks_per_sm: best.0, warps_per_sm: best.0 * warps, limiter: best.1 }
    }

    /// L1 bytes per SM when `blocks` blocks of `smem` bytes of shared memory each are resident:
    /// the unified array less the smallest carve-out that holds their shared memory (with the
    /// driver's reserve per block).
    #[must_use]
    pub fn l1_bytes(&self, blocks: u32, smem: u32) -> u32 {
        let need = if smem == 0 { 0 } else { blocks * (smem + self.smem_reserved) };
        let carve = self.carveouts_kib.iter().map(|k| k * 1024).find(|&c| c >= need).unwrap_or(self.smem_bytes);
        self.l1_smem_bytes.saturating_sub(carve)
    }

    /// A warp's serial path in cycles (see the module documentation); `l1_lines` is its
    /// block's share of the SM's L1 in 128-byte lines: a warm load whose reuse distance
    /// ([`WarpRec::warm_dist`]) exceeds it was evicted and is an L2 hit.
    #[must_use]
    #[allow(clippy::cast_precision_loss)]
    pub fn warp_cycles(&self, w: &WarpRec, l1_lines: f64) -> f64 {
        let mut evicted = 0u64;
        for (k, &n) in w.warm_dist.iter().enumerate() {
            if warm_bucket_lines(k) > l1_lines {
                evicted += n;
            }
        }
        let evicted = evicted.min(w.g_load_warm);
        w.cycles
            + w.shfl * self.shfl_latency
            + w.g_load_cold as f64 * self.cold_latency
            + (w.g_load_warm - evicted) as f64 * self.warm_latency
            + (w.g_load_l2 + evicted) as f64 * self.l2_latency
            + w.s_load as f64 * self.shared_latency
    }

    /// Per block: its time (its phases between barriers, each as long as its longest warp's
    /// path there, summed), its instructions, its warps, and its warps' active cycles summed.
    fn block_times(&self, l: &Launch, l1_lines: f64) -> BTreeMap<u64, (f64, f64, f64, f64)> {
        // a barrier waits for every warp; a warp is active until the end of its last phase (one
        // waiting at a barrier is resident and active)
        let mut phase_len: BTreeMap<(u64, u64), f64> = BTreeMap::new();
        let mut last: BTreeMap<(u64, u64), (u64, f64)> = BTreeMap::new();
        for w in &l.warps {
            let t = self.warp_cycles(w, l1_lines);
            let e = phase_len.entry((w.block, w.phase)).or_insert(0.0);
            *e = e.max(t);
            let e = last.entry((w.block, w.warp)).or_insert((w.phase, t));
            if w.phase >= e.0 {
                *e = (w.phase, t);
            }
        }
        let mut phase_start: BTreeMap<(u64, u64), f64> = BTreeMap::new();
        let mut blocks: BTreeMap<u64, (f64, f64, f64, f64)> = BTreeMap::new();
        for (&(b, p), &len) in &phase_len {
            let e = blocks.entry(b).or_insert((0.0, 0.0, 0.0, 0.0));
            phase_start.insert((b, p), e.0);
            e.0 += len;
        }
        for w in &l.warps {
            if let Some(e) = blocks.get_mut(&w.block) {
                e.1 += w.insts;
            }
        }
        for (&(b, _), &(p, t)) in &last {
            if let Some(e) = blocks.get_mut(&b) {
                e.2 += 1.0;
                e.3 += phase_start.get(&(b, p)).copied().unwrap_or(0.0) + t;
            }
        }
        blocks
    }

    /// The predicted time of one launch; `res` are the kernel's registers and shared memory
    /// (`None`: 32 registers, the emulator's shared memory).
    #[must_use]
    #[allow(clippy::cast_precision_loss, clippy::cast_possible_truncation, clippy::cast_sign_loss)]
    pub fn predict(&self, l: &Launch, res: Option<&KernelResources>) -> Prediction {
        let c = &l.cost;
        let threads = u32::try_from(c.block_threads).unwrap_or(u32::MAX);
        let reg_count = res.map_or(32, |r| r.registers);
        let smem = u32::try_from(c.smem_bytes).unwrap_or(u32::MAX).max(res.map_or(0, |r| r.smem_bytes));
        let occ = self.occupancy(threads, reg_count, smem);
        // the L1 a block has: the SM's (the carve-out the kernel's occupancy needs) over the
        // blocks resident on it (fewer than the occupancy when the launch cannot fill the SMs)
        let n_blocks = c.blocks.max(l.warps.iter().map(|w| w.block + 1).max().unwrap_or(0));
        let resident = u64::from(occ.blocks_per_sm.max(1)).min(n_blocks.div_ceil(u64::from(self.sms)).max(1));
        let l1_lines = f64::from(self.l1_bytes(occ.blocks_per_sm, smem)) / 128.0 / resident as f64;
        let blocks = self.block_times(l, l1_lines);
        // the longest block, and the warp with the longest path of its own (its phases summed)
        let totals = l.warp_totals();
        let longest = blocks.iter().map(|(&b, v)| (v.0, b)).fold((0.0f64, 0u64), |a, x| if x.0 > a.0 { x } else { a });
        let longest_warp = totals
            .iter()
            .map(|w| (self.warp_cycles(w, l1_lines), w))
            .fold((0.0f64, WarpRec::default()), |a, (t, w)| if t > a.0 { (t, *w) } else { a })
            .1;
        let sms = self.sms as usize;
        let slots = (occ.blocks_per_sm.max(1) as usize) * sms;
        // list scheduling: the first `slots` blocks spread over the SMs round robin, each later
        // block to the slot that frees first; per SM its end and its instructions
        let mut sm_end = vec![0.0f64; sms];
        let mut sm_insts = vec![0.0f64; sms];
        let mut sm_warp_cycles = vec![0.0f64; sms]; // its warps' serial paths, summed
        let mut heap: BinaryHeap<std::cmp::Reverse<(u64, usize)>> = BinaryHeap::new();
        let scale = 1e6; // cycles as integers of a micro-cycle for the heap's order
        for b in 0..n_blocks {
            let (dur, insts, _, warp_cycles) = blocks.get(&b).copied().unwrap_or((0.0, 0.0, 0.0, 0.0));
            let (start, sm) = if (b as usize) < slots {
                (0.0, (b as usize) % sms)
            } else {
                let std::cmp::Reverse((t, sm)) = heap.pop().unwrap_or(std::cmp::Reverse((0, 0)));
                (t as f64 / scale, sm)
            };
            let end = start + dur;
            sm_end[sm] = sm_end[sm].max(end);
            sm_insts[sm] += insts;
            sm_warp_cycles[sm] += warp_cycles;
            heap.push(std::cmp::Reverse(((end * scale) as u64, sm)));
        }
        let issue = |i: f64| i / f64::from(self.schedulers);
        let latency_cycles = sm_end.iter().zip(&sm_insts).map(|(&e, &i)| e.max(issue(i))).fold(0.0, f64::max);
        let issue_cycles = sm_insts.iter().copied().map(issue).fold(0.0, f64::max);
        // achieved occupancy: a warp is active for its serial path, stretched on an SM whose
        // schedulers' issue outlasts its blocks (issue-bound); over all warp slots of the
        // device for the launch's latency
        let active: f64 = (0..sms)
            .map(|i| {
                let stretch = if sm_end[i] > 0.0 { (issue(sm_insts[i]) / sm_end[i]).max(1.0) } else { 1.0 };
                sm_warp_cycles[i] * stretch
            })
            .sum();
        let achieved_occupancy = if latency_cycles > 0.0 {
            (active / (f64::from(self.sms) * f64::from(self.max_warps) * latency_cycles)).min(1.0)
        } else {
            0.0
        };
        let bytes = c.footprint_sectors as f64 * 32.0;
        let memory_s = bytes / self.copy_bytes_per_s;
        let latency_s = latency_cycles / self.clock_hz;
        let insts: f64 = l.warps.iter().map(|w| w.insts).sum();
        let bound = if memory_s > latency_s {
            Bound::Memory
        } else if issue_cycles >= 0.8 * latency_cycles {
            Bound::Issue
        } else if (n_blocks as usize) < slots / 2 || longest.0 > 2.0 * mean_block(&blocks) {
            Bound::SerialPath
        } else {
            Bound::Latency
        };
        let mean_warp = if totals.is_empty() { 0.0 } else { insts / totals.len() as f64 };
        Prediction {
            kernel: c.kernel.clone(),
            total_s: latency_s.max(memory_s) + self.launch_s,
            latency_s,
            memory_s,
            launch_s: self.launch_s,
            longest_warp_s: longest.0 / self.clock_hz,
            occupancy: occ,
            blocks: n_blocks,
            waves: n_blocks as f64 / slots as f64,
            achieved_occupancy,
            warps: totals.len() as u64,
            insts,
            mean_warp_insts: mean_warp,
            max_warp_insts: totals.iter().map(|w| w.insts).fold(0.0, f64::max),
            longest_warp,
            bound,
        }
    }
}

#[allow(clippy::cast_precision_loss)]
fn mean_block(blocks: &BTreeMap<u64, (f64, f64, f64, f64)>) -> f64 {
    if blocks.is_empty() { 0.0 } else { blocks.values().map(|v| v.0).sum::<f64>() / blocks.len() as f64 }
}

/// What limits the resident blocks per SM.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Limiter {
    /// 32 blocks per SM.
    Blocks,
    /// 64 warps per SM.
    Warps,
    /// The register file.
    Registers,
    /// Shared memory.
    SharedMemory,
}

impl Limiter {
    /// A short name for reports.
    #[must_use]
    pub fn name(self) -> &'static str {
        match self {
            Limiter::Blocks => "blocks",
            Limiter::Warps => "warps",
            Limiter::Registers => "registers",
            Limiter::SharedMemory => "shared memory",
        }
    }
}

/// Resident blocks and warps per SM.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct Occupancy {
    /// Resident blocks per SM.
    pub blocks_per_sm: u32,
    /// Resident warps per SM.
    pub warps_per_sm: u32,
    /// What limits them.
    pub limiter: Limiter,
}

/// What bounds a launch's predicted time.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Bound {
    /// The launch's bytes at the copy bandwidth exceed its latency part.
    Memory,
    /// The SMs' schedulers: the busiest SM's instructions over 4 schedulers come near its end.
    Issue,
    /// One warp's serial path: too few blocks to fill the GPU, or the longest warp far above
    /// the mean block (imbalance: the tail of the last wave).
    SerialPath,
    /// Latency with the GPU full (waves of blocks).
    Latency,
}

impl Bound {
    /// A short name for reports.
    #[must_use]
    pub fn name(self) -> &'static str {
        match self {
            Bound::Memory => "memory",
            Bound::Issue => "issue",
            Bound::SerialPath => "serial path",
            Bound::Latency => "latency (full GPU)",
        }
    }
}

/// The model's prediction for one launch (not GPU time).
#[derive(Clone, Debug, PartialEq)]
#[non_exhaustive]
pub struct Prediction {
    /// The kernel.
    pub kernel: String,
    /// `max(latency_s, memory_s) + launch_s`.
    pub total_s: f64,
    /// The last SM's end: list-scheduled blocks of their longest warp's serial path, or its
    /// instructions over its schedulers.
    pub latency_s: f64,
    /// The launch's distinct bytes at the copy bandwidth.
    pub memory_s: f64,
    /// The fixed launch cost.
    pub launch_s: f64,
    /// The longest block's time: its longest warp's serial path, or in a block with barriers
    /// the longest warp's path of each phase between them, summed.
    pub longest_warp_s: f64,
    /// Resident blocks per SM.
    pub occupancy: Occupancy,
    /// Blocks of the launch.
    pub blocks: u64,
    /// Blocks over resident slots (`SMs × blocks per SM`).
    pub waves: f64,
    /// Achieved occupancy, as Nsight Compute reports it: the mean active warps per SM over the
    /// launch's latency part, as a fraction of the SM's warp slots. A warp is active for its own
    /// serial path (stretched by the ratio of issue to the SM's blocks' end where the SM is
    /// issue-bound), so an imbalanced or short launch scores low however many warps could fit.
    pub achieved_occupancy: f64,
    /// Warps recorded.
    pub warps: u64,
    /// SASS instructions (estimated) of all warps.
    pub insts: f64,
    /// Mean instructions per warp.
    pub mean_warp_insts: f64,
    /// The most instructions of one warp.
    pub max_warp_insts: f64,
    /// The record of the warp with the longest serial path (its terms: [`Gpu::warp_cycles`]).
    pub longest_warp: WarpRec,
    /// What bounds it.
    pub bound: Bound,
}

/// Predictions of `launches` on `gpu`, with resources per kernel name.
#[must_use]
pub fn predict_all(gpu: &Gpu, launches: &[Launch], res: &BTreeMap<String, KernelResources>) -> Vec<Prediction> {
    launches.iter().map(|l| gpu.predict(l, res.get(&l.cost.kernel))).collect()
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn occupancy_matches_hand_computed_cases() {
        let g = Gpu::h200();
        // lz4: 128 threads, 40 registers: 1280 registers per warp, 12 warps per scheduler,
        // 48 per SM, 12 blocks (ncu: "Block Limit Registers 12")
        let o = g.occupancy(128, 40, 0);
        assert_eq!((o.blocks_per_sm, o.warps_per_sm, o.limiter), (12, 48, Limiter::Registers));
        // assemble: 256 threads, 48 registers, 240 B static shared: 1536 per warp, 10 per
        // scheduler, 40 warps, 5 blocks (ncu: 5 by registers, 12 by shared memory at 16 KiB)
        let o = g.occupancy(256, 48, 240);
        assert_eq!((o.blocks_per_sm, o.warps_per_sm, o.limiter), (5, 40, Limiter::Registers));
        // zstd: 64 threads, 96 registers: 3072 per warp, 5 per scheduler, 20 warps, 10 blocks
        let o = g.occupancy(64, 96, 12264);
        assert_eq!((o.blocks_per_sm, o.warps_per_sm, o.limiter), (10, 20, Limiter::Registers));
        // 256 threads, 32 registers: 64 warps, 8 blocks (the warp limit)
        let o = g.occupancy(256, 32, 0);
        assert_eq!((o.blocks_per_sm, o.warps_per_sm, o.limiter), (8, 64, Limiter::Warps));
        // 32 threads, 16 registers: 32 blocks (the block limit), 32 warps
        let o = g.occupancy(32, 16, 0);
        assert_eq!((o.blocks_per_sm, o.warps_per_sm, o.limiter), (32, 32, Limiter::Blocks));
        // 64 KiB of shared memory: (65536 + 1024) per block, 3 fit in 228 KiB
        let o = g.occupancy(128, 32, 65536);
        assert_eq!((o.blocks_per_sm, o.limiter), (3, Limiter::SharedMemory));
        // 255 registers: 8160 → 8192 per warp, 2 per scheduler, 8 warps: one block of 256
        let o = g.occupancy(256, 255, 0);
        assert_eq!((o.blocks_per_sm, o.warps_per_sm, o.limiter), (1, 8, Limiter::Registers));
    }

    /// Issue cycles per instruction of the tests' warps (a dependent chain's).
    const CYC: f64 = 4.0;

    fn warp(block: u64, insts: f64, cold: u64) -> WarpRec {
        WarpRec { block, insts, cycles: insts * CYC, g_load_cold: cold, ..WarpRec::default() }
    }

    fn launch(threads: u64, warps: Vec<WarpRec>) -> Launch {
        let cost = LaunchCost {
            kernel: "k".into(),
            block_threads: threads,
            blocks: warps.iter().map(|w| w.block + 1).max().unwrap_or(0),
            ..LaunchCost::default()
        };
        Launch { cost, warps }
    }

    #[test]
    fn one_wave_takes_the_longest_warp_and_a_second_wave_adds_the_slot_that_frees_first() {
        let g = Gpu { launch_s: 0.0, ..Gpu::h200() };
        let res = KernelResources { registers: 32, smem_bytes: 0, sass_instructions: 0 };
        // 132 blocks of one warp, one with 10x the instructions: that warp's path
        let mut w: Vec<WarpRec> = (0..132).map(|b| warp(b, 1000.0, 0)).collect();
        w[7] = warp(7, 10_000.0, 0);
        let p = g.predict(&launch(32, w), Some(&res));
        assert!((p.latency_s * g.clock_hz - 40_000.0).abs() < 1.0, "{}", p.latency_s * g.clock_hz);
        assert_eq!(p.bound, Bound::SerialPath);
        // 32 blocks per SM resident (32 threads, 32 regs): 132 * 32 slots; one more block
        // than slots runs after the first to end (1000 insts = 4000 cycles): 8000 cycles on
        // SM 0, whose 33 warps issue 33 000 instructions over 4 schedulers: 8250 cycles
        let n = 132 * 32 + 1;
        let w: Vec<WarpRec> = (0..n).map(|b| warp(b, 1000.0, 0)).collect();
        let p = g.predict(&launch(32, w), Some(&res));
        assert!((p.latency_s * g.clock_hz - 8250.0).abs() < 1.0, "{}", p.latency_s * g.clock_hz);
        // 132 one-warp blocks of 100 instructions, one per SM: 400 cycles of serial path
        let w: Vec<WarpRec> = (0..132).map(|b| warp(b, 100.0, 0)).collect();
        let p = g.predict(&launch(32, w), Some(&res));
        assert!((p.latency_s * g.clock_hz - 400.0).abs() < 1.0);
        assert!((p.waves - 1.0 / 32.0).abs() < 1e-9, "{}", p.waves);
        // loads add their latency to a warp's path
        let p = g.predict(&launch(32, vec![warp(0, 100.0, 2)]), Some(&res));
        assert!((p.latency_s * g.clock_hz - (400.0 + 2.0 * g.cold_latency)).abs() < 1.0);
    }

    #[test]
    fn achieved_occupancy_counts_active_warps_over_the_launch() {
        let g = Gpu { launch_s: 0.0, ..Gpu::h200() };
        // 64-thread blocks at 96 registers: 10 blocks (20 warps) per SM
        let res = KernelResources { registers: 96, smem_bytes: 0, sass_instructions: 0 };
        let two = |b: u64, insts: f64| [warp(b, insts, 0), WarpRec { warp: 1, ..warp(b, insts, 0) }];
        // one full wave of even warps: every slot the occupancy allows is active throughout
        let w: Vec<WarpRec> = (0..132 * 10).flat_map(|b| two(b, 1000.0)).collect();
        let p = g.predict(&launch(64, w), Some(&res));
        assert!((p.achieved_occupancy - 20.0 / 64.0).abs() < 1e-9, "{}", p.achieved_occupancy);
        // (20 warps of 4000 cycles issue 20 000 instructions on 4 schedulers: 5000 cycles, each
        // warp stretched to it.) The same wave with one block 10x slower (40 000 cycles): its
        // SM's end is the launch's (not issue-bound: 9500 cycles of issue), the others' warps
        // are active for 5000 cycles of it
        let mut w: Vec<WarpRec> = (0..132 * 10).flat_map(|b| two(b, 1000.0)).collect();
        w[0] = warp(0, 10_000.0, 0);
        w[1] = WarpRec { warp: 1, ..warp(0, 10_000.0, 0) };
        let p = g.predict(&launch(64, w), Some(&res));
        let want = (2.0 * 40_000.0 + 18.0 * 4000.0 + 131.0 * 20.0 * 5000.0) / (132.0 * 64.0 * 40_000.0);
        assert!((p.achieved_occupancy - want).abs() < 1e-9, "{} vs {want}", p.achieved_occupancy);
        // 32 blocks on 132 SMs (the 1 MiB rows): at most 2 of 64 slots on a quarter of the SMs
        let w: Vec<WarpRec> = (0..32).flat_map(|b| two(b, 1000.0)).collect();
        let p = g.predict(&launch(64, w), Some(&res));
        assert!((p.achieved_occupancy - 64.0 / (132.0 * 64.0)).abs() < 1e-9, "{}", p.achieved_occupancy);
    }

    #[test]
    fn a_block_with_barriers_waits_each_phase_out_for_its_slowest_warp() {
        let g = Gpu { launch_s: 0.0, ..Gpu::h200() };
        let res = KernelResources { registers: 32, smem_bytes: 0, sass_instructions: 0 };
        let rec = |warp: u64, phase: u64, insts: f64| WarpRec {
            block: 0,
            warp,
            phase,
            insts,
            cycles: insts * CYC,
            ..WarpRec::default()
        };
        // two warps, two phases: warp 0 is slower in phase 0 (100 vs 10), warp 1 in phase 1
        // (100 vs 10); warp 0 then runs alone a third phase (50). Without barriers the block
        // would last 160 instructions (warp 0's own path); with them 100 + 100 + 50
        let w = vec![rec(0, 0, 100.0), rec(1, 0, 10.0), rec(0, 1, 10.0), rec(1, 1, 100.0), rec(0, 2, 50.0)];
        let p = g.predict(&launch(64, w.clone()), Some(&res));
        assert!((p.latency_s * g.clock_hz - 250.0 * CYC).abs() < 1e-6, "{}", p.latency_s * g.clock_hz / CYC);
        // the launch's warps are its two warps, their phases summed
        assert_eq!(p.warps, 2);
        assert!((p.max_warp_insts - 160.0).abs() < 1e-9);
        assert!((p.longest_warp.insts - 160.0).abs() < 1e-9);
        // warp 0 is active all 250, warp 1 until phase 1 ends (200): 450 of one SM's 64 slots
        let want = 450.0 / (f64::from(g.sms) * f64::from(g.max_warps) * 250.0);
        assert!((p.achieved_occupancy - want).abs() < 1e-12, "{} vs {want}", p.achieved_occupancy);
        // the same records as one phase each: the longest warp's own path
        let flat: Vec<WarpRec> = Launch { cost: LaunchCost::default(), warps: w }
            .warp_totals()
            .into_iter()
            .map(|r| WarpRec { phase: 0, ..r })
            .collect();
        let p = g.predict(&launch(64, flat), Some(&res));
        assert!((p.latency_s * g.clock_hz - 160.0 * CYC).abs() < 1e-6);
    }

    #[test]
    fn a_warps_path_charges_shuffles_their_latency_and_each_load_where_it_hits() {
        let g = Gpu::h200();
        let w = WarpRec {
            insts: 100.0,
            shfl: 10.0,
            cycles: 230.0,
            g_load_cold: 1,
            g_load_warm: 2,
            g_load_l2: 3,
            s_load: 4,
            ..WarpRec::default()
        };
        // the 90 other instructions' issue cycles, 10 shuffles at their latency, the loads where
        // they hit
        let want = 230.0
            + 10.0 * g.shfl_latency
            + g.cold_latency
            + 2.0 * g.warm_latency
            + 3.0 * g.l2_latency
            + 4.0 * g.shared_latency;
        assert!((g.warp_cycles(&w, 1e9) - want).abs() < 1e-9);
        assert!(g.warm_latency < g.l2_latency && g.l2_latency < g.cold_latency);
        // the path is the instructions' issue cycles, not their count: the same instructions
        // issued side by side (half the cycles) take 115 fewer
        let wide = WarpRec { cycles: 115.0, ..w };
        assert!((g.warp_cycles(&w, 1e9) - g.warp_cycles(&wide, 1e9) - 115.0).abs() < 1e-9);
    }

    #[test]
    fn a_launch_lasts_the_longer_of_its_latency_and_memory_parts() {
        let g = Gpu::h200();
        let res = KernelResources { registers: 32, smem_bytes: 0, sass_instructions: 0 };
        let mut l = launch(32, (0..132).map(|b| warp(b, 100.0, 0)).collect());
        // 32 MiB of distinct sectors: ~7.8 µs at the copy bandwidth, far above 400 cycles
        l.cost.footprint_sectors = 1 << 20;
        let p = g.predict(&l, Some(&res));
        let mem = f64::from(32u32 << 20) / g.copy_bytes_per_s;
        assert!((p.memory_s - mem).abs() < 1e-12);
        assert!(p.memory_s > p.latency_s);
        assert!((p.total_s - (mem + g.launch_s)).abs() < 1e-12, "{} vs {}", p.total_s, mem + g.launch_s);
        assert_eq!(p.bound, Bound::Memory);
        // a few bytes: the latency part and the launch
        l.cost.footprint_sectors = 1;
        let p = g.predict(&l, Some(&res));
        assert!((p.total_s - (p.latency_s + g.launch_s)).abs() < 1e-12);
        assert_ne!(p.bound, Bound::Memory);
    }

    #[test]
    fn the_l1_is_what_the_shared_memory_carve_out_leaves() {
        let g = Gpu::h200();
        // no shared memory: the whole 256 KiB
        assert_eq!(g.l1_bytes(12, 0), 256 * 1024);
        // zstd: 8 blocks of 20456 + 1024 bytes = 171840 -> the 196 KiB carve-out, 60 KiB of L1
        assert_eq!(g.l1_bytes(8, 20456), 60 * 1024);
        // one block of 1 KiB (+ 1 KiB reserved): the 8 KiB carve-out
        assert_eq!(g.l1_bytes(1, 1024), 248 * 1024);
        // a warm load at a distance of ~181 lines (bucket 4) is a hit in 240 lines, an L2 load in 100
        let mut w = WarpRec { g_load_warm: 1, ..WarpRec::default() };
        w.warm_dist[4] = 1;
        assert!((g.warp_cycles(&w, 240.0) - g.warm_latency).abs() < 1e-9);
        assert!((g.warp_cycles(&w, 100.0) - g.l2_latency).abs() < 1e-9);
    }

    #[test]
    fn the_resource_lines_of_a_weight_table_parse() {
        let t = "# header\n#res dmc_lz4_decode 40 0 2400\n#res dmc_zstd_decode 96 12264 9000\n4a0 3.5\n";
        let r = parse_resources(t);
        assert_eq!(r["dmc_lz4_decode"], KernelResources { registers: 40, smem_bytes: 0, sass_instructions: 2400 });
        assert_eq!(r["dmc_zstd_decode"].smem_bytes, 12264);
        assert_eq!(r.len(), 2);
    }
}
