//! The emulator's memory-access cost model (issue 14): what the emulated kernels asked of
//! global and shared memory, per launch, and an H100 time estimate derived from it.
//!
//! The numbers exist only in a cost build: the crate built with `DAMACY_EMU_COST=1` (and the
//! `emulate` feature; `crates/damacy-kernels/scripts/cost.sh` does both). Its kernels then
//! carry gcc's `ThreadSanitizer` instrumentation without libtsan, and the emulator's own hooks
//! (`kernels/emu/cost.hpp`) group every access into warp requests. [`enabled`] says whether
//! this build records; [`take`] returns the launches recorded since the last call.
//!
//! Every time this module computes is a **model**, not a measurement: see [`H100Model`] for
//! each assumption, and the crate README's "Cost model" section for the limitations.

use std::collections::BTreeMap;
use std::fmt::Write as _;

unsafe extern "C" {
    fn dmc_emu_cost_enabled() -> i32;
    fn dmc_emu_cost_record_size() -> u64;
    fn dmc_emu_cost_take(out: *mut RawLaunchCost, cap: u64) -> u64;
}

/// The C `dmc_emu::cost::LaunchCost` (kernels/emu/cost.hpp): a 48-byte name, then u64s only.
#[repr(C)]
#[derive(Clone, Copy)]
struct RawLaunchCost {
    kernel: [u8; 48],
    grid_x: u64,
    grid_y: u64,
    block_threads: u64,
    smem_bytes: u64,
    warps: u64,
    g_req: [u64; 3],
    g_lanes: [u64; 3],
    g_bytes: [u64; 3],
    g_sectors: [u64; 3],
    g_ideal: [u64; 3],
    g_lines: [u64; 3],
    s_req: [u64; 3],
    s_lanes: [u64; 3],
    s_bytes: [u64; 3],
    s_wavefronts: [u64; 3],
    s_ideal: [u64; 3],
    s_max_wavefronts: u64,
    footprint_sectors: u64,
    g_cold: u64,
    local_accesses: u64,
    local_bytes: u64,
    host_accesses: u64,
    max_warp_g_cold: u64,
    max_warp_g_warm: u64,
    max_warp_s_req: u64,
}

/// Whether this build records memory accesses (built with `DAMACY_EMU_COST=1`).
#[must_use]
pub fn enabled() -> bool {
    // SAFETY: no arguments, no state.
    unsafe { dmc_emu_cost_enabled() == 1 }
}

/// The loads, stores or atomics of one memory space, summed over warp requests.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
#[non_exhaustive]
pub struct Accesses {
    /// Warp requests: the lanes of a warp at the same execution of one call site.
    pub requests: u64,
    /// Active lanes, summed over the requests.
    pub lanes: u64,
    /// Bytes the lanes asked for (a byte two lanes read counts twice).
    pub bytes: u64,
    /// Global: distinct 32-byte sectors per request, summed. Shared: wavefronts (the most
    /// distinct 4-byte words in one of the 32 banks; a broadcast counts once), summed.
    pub units: u64,
    /// The ideal `units`: global `ceil(distinct bytes / 32)`, shared `ceil(distinct words / 32)`.
    pub ideal_units: u64,
    /// Global only: distinct 128-byte lines per request, summed.
    pub lines: u64,
}

impl Accesses {
    fn add(&mut self, o: &Self) {
        self.requests += o.requests;
        self.lanes += o.lanes;
        self.bytes += o.bytes;
        self.units += o.units;
        self.ideal_units += o.ideal_units;
        self.lines += o.lines;
    }

    /// `units / requests` (sectors per request, or wavefronts per request); 0 without requests.
    #[must_use]
    pub fn units_per_request(&self) -> f64 {
        ratio(self.units, self.requests)
    }

    /// `units / ideal_units`: 1.0 is perfectly coalesced (global) or conflict free (shared).
    #[must_use]
    pub fn vs_ideal(&self) -> f64 {
        ratio(self.units, self.ideal_units)
    }

    /// Active lanes per request.
    #[must_use]
    pub fn lanes_per_request(&self) -> f64 {
        ratio(self.lanes, self.requests)
    }
}

#[allow(clippy::cast_precision_loss)]
fn ratio(a: u64, b: u64) -> f64 {
    if b == 0 { 0.0 } else { a as f64 / b as f64 }
}

/// The memory accesses of one kernel launch (or of several, summed: [`LaunchCost::merge`]).
#[derive(Clone, Debug, Default, PartialEq, Eq)]
#[non_exhaustive]
pub struct LaunchCost {
    /// The kernel's name (`dmc_lz4_decode`, …).
    pub kernel: String,
    /// Launches summed into this record.
    pub launches: u64,
    /// Blocks (summed over the launches).
    pub blocks: u64,
    /// Threads per block (of the last launch merged).
    pub block_threads: u64,
    /// Shared memory per block in bytes, static and dynamic (the largest of the launches).
    pub smem_bytes: u64,
    /// Warps launched.
    pub warps: u64,
    /// Global memory, by kind: loads, stores, atomics.
    pub global: [Accesses; 3],
    /// Shared memory, by kind: loads, stores, atomics.
    pub shared: [Accesses; 3],
    /// The most wavefronts of one shared request.
    pub shared_max_wavefronts: u64,
    /// Distinct global sectors a launch touched (summed over launches).
    pub footprint_sectors: u64,
    /// Global requests that touched a sector no earlier request of their launch had.
    pub global_cold_requests: u64,
    /// Accesses to the threads' own stacks (CUDA local memory or registers): not modelled.
    pub local_accesses: u64,
    /// Bytes of those.
    pub local_bytes: u64,
    /// Accesses to emulator bookkeeping (kernel argument captures, fiber objects): ignored.
    pub host_accesses: u64,
    /// The most cold global requests one warp issued (maximum over warps and launches).
    pub max_warp_cold: u64,
    /// The most warm global requests one warp issued.
    pub max_warp_warm: u64,
    /// The most shared requests one warp issued.
    pub max_warp_shared: u64,
}

/// Index of loads, stores and atomics in [`LaunchCost::global`] and [`LaunchCost::shared`].
pub const LOAD: usize = 0;
/// See [`LOAD`].
pub const STORE: usize = 1;
/// See [`LOAD`].
pub const ATOMIC: usize = 2;

impl LaunchCost {
    fn from_raw(r: &RawLaunchCost) -> Self {
        let name_len = r.kernel.iter().position(|&c| c == 0).unwrap_or(r.kernel.len());
        let acc = |req: &[u64; 3],
                   lanes: &[u64; 3],
                   bytes: &[u64; 3],
                   units: &[u64; 3],
                   ideal: &[u64; 3],
                   lines: Option<&[u64; 3]>| {
            std::array::from_fn(|k| Accesses {
                requests: req[k],
                lanes: lanes[k],
                bytes: bytes[k],
                units: units[k],
                ideal_units: ideal[k],
                lines: lines.map_or(0, |l| l[k]),
            })
        };
        Self {
            kernel: String::from_utf8_lossy(&r.kernel[..name_len]).into_owned(),
            launches: 1,
            blocks: r.grid_x * r.grid_y,
            block_threads: r.block_threads,
            smem_bytes: r.smem_bytes,
            warps: r.warps,
            global: acc(&r.g_req, &r.g_lanes, &r.g_bytes, &r.g_sectors, &r.g_ideal, Some(&r.g_lines)),
            shared: acc(&r.s_req, &r.s_lanes, &r.s_bytes, &r.s_wavefronts, &r.s_ideal, None),
            shared_max_wavefronts: r.s_max_wavefronts,
            footprint_sectors: r.footprint_sectors,
            global_cold_requests: r.g_cold,
            local_accesses: r.local_accesses,
            local_bytes: r.local_bytes,
            host_accesses: r.host_accesses,
            max_warp_cold: r.max_warp_g_cold,
            max_warp_warm: r.max_warp_g_warm,
            max_warp_shared: r.max_warp_s_req,
        }
    }

    /// Adds `other` (another launch of the same kernel) into `self`.
    pub fn merge(&mut self, other: &Self) {
        if self.kernel.is_empty() {
            self.kernel.clone_from(&other.kernel);
        }
        self.launches += other.launches;
        self.blocks += other.blocks;
        self.block_threads = other.block_threads;
        self.smem_bytes = self.smem_bytes.max(other.smem_bytes);
        self.warps += other.warps;
        for k in 0..3 {
            self.global[k].add(&other.global[k]);
            self.shared[k].add(&other.shared[k]);
        }
        self.shared_max_wavefronts = self.shared_max_wavefronts.max(other.shared_max_wavefronts);
        self.footprint_sectors += other.footprint_sectors;
        self.global_cold_requests += other.global_cold_requests;
        self.local_accesses += other.local_accesses;
        self.local_bytes += other.local_bytes;
        self.host_accesses += other.host_accesses;
        self.max_warp_cold = self.max_warp_cold.max(other.max_warp_cold);
        self.max_warp_warm = self.max_warp_warm.max(other.max_warp_warm);
        self.max_warp_shared = self.max_warp_shared.max(other.max_warp_shared);
    }

    /// Global loads, stores and atomics together.
    #[must_use]
    pub fn global_total(&self) -> Accesses {
        let mut t = Accesses::default();
        self.global.iter().for_each(|a| t.add(a));
        t
    }

    /// Shared loads, stores and atomics together.
    #[must_use]
    pub fn shared_total(&self) -> Accesses {
        let mut t = Accesses::default();
        self.shared.iter().for_each(|a| t.add(a));
        t
    }

    /// Global and shared warp requests per byte of `bytes` (e.g. the decoded bytes): the
    /// model's proxy for instructions per byte (it counts memory instructions only).
    #[must_use]
    pub fn requests_per_byte(&self, bytes: u64) -> f64 {
        ratio(self.global_total().requests + self.shared_total().requests, bytes)
    }
}

/// Empties the record of launches.
pub fn reset() {
    drop(take());
}

/// The launches recorded since the last call (every OS thread's, in the order they ended);
/// empty when this is no cost build.
///
/// # Panics
/// When the C record (`kernels/emu/cost.hpp`) and its Rust twin differ in size: a build defect.
#[must_use]
pub fn take() -> Vec<LaunchCost> {
    if !enabled() {
        return Vec::new();
    }
    // SAFETY: no arguments.
    let size = unsafe { dmc_emu_cost_record_size() };
    assert_eq!(
        usize::try_from(size).ok(),
        Some(std::mem::size_of::<RawLaunchCost>()),
        "kernels/emu/cost.hpp's LaunchCost and src/cost.rs's RawLaunchCost differ: change both together"
    );
    let mut out = Vec::new();
    let mut buf = vec![std::mem::MaybeUninit::<RawLaunchCost>::uninit(); 256];
    loop {
        // SAFETY: `buf` has room for `buf.len()` records; the C side writes at most that many.
        let n = unsafe { dmc_emu_cost_take(buf.as_mut_ptr().cast(), buf.len() as u64) };
        let n = usize::try_from(n).unwrap_or(0).min(buf.len());
        for r in &buf[..n] {
            // SAFETY: the C side wrote the first `n` records.
            out.push(LaunchCost::from_raw(unsafe { r.assume_init_ref() }));
        }
        if n < buf.len() {
            return out;
        }
    }
}

/// The launches of `launches` summed per kernel, by name.
#[must_use]
pub fn per_kernel(launches: &[LaunchCost]) -> BTreeMap<String, LaunchCost> {
    let mut m: BTreeMap<String, LaunchCost> = BTreeMap::new();
    for l in launches {
        m.entry(l.kernel.clone()).or_default().merge(l);
    }
    m
}

/// A kernel's resources as ptxas reports them (`--ptxas-options=-v`), for occupancy.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
#[non_exhaustive]
pub struct Resources {
    /// Registers per thread.
    pub registers: u32,
    /// Bytes of spill stores (0 is expected; the compile check fails on spills).
    pub spill_bytes: u32,
    /// Bytes of stack frame per thread: local memory, which the emulator's model does not see
    /// (per-thread arrays indexed at run time live there); 0 is expected of every kernel.
    pub stack_bytes: u32,
    /// Static shared memory per block, bytes.
    pub smem_bytes: u32,
}

impl Resources {
    /// Resources from the counts themselves.
    #[must_use]
    pub fn new(registers: u32, spill_bytes: u32, stack_bytes: u32, smem_bytes: u32) -> Self {
        Self { registers, spill_bytes, stack_bytes, smem_bytes }
    }

    /// Parses ptxas' verbose log for `kernel`: the `Used N registers` line after the
    /// `Compiling entry function 'kernel'` line, and the stack and spill line between them.
    #[must_use]
    pub fn from_ptxas_log(log: &str, kernel: &str) -> Option<Self> {
        let mut inside = false;
        let mut r = Self::default();
        for line in log.lines() {
            if line.contains("Compiling entry function") {
                inside = line.contains(&format!("'{kernel}'"));
                continue;
            }
            if !inside {
                continue;
            }
            if let Some(at) = line.find("bytes spill stores") {
                r.spill_bytes = number_before(&line[..at]).unwrap_or(0);
            }
            if let Some(at) = line.find("bytes stack frame") {
                r.stack_bytes = number_before(&line[..at]).unwrap_or(0);
            }
            if let Some(at) = line.find("Used ") {
                let rest = &line[at + 5..];
                r.registers = rest.split_whitespace().next()?.parse().ok()?;
                if let Some(s) = rest.find(" bytes smem") {
                    r.smem_bytes = number_before(&rest[..s]).unwrap_or(0);
                }
                return Some(r);
            }
        }
        None
    }
}

fn number_before(s: &str) -> Option<u32> {
    s.trim_end().rsplit(|c: char| !c.is_ascii_digit()).next()?.parse().ok()
}

/// How many blocks and warps of a kernel fit on one SM, and what limits them.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
#[non_exhaustive]
pub struct Occupancy {
    /// Resident blocks per SM.
    pub blocks_per_sm: u32,
    /// Resident warps per SM (of the model's 64).
    pub warps_per_sm: u32,
    /// `threads`, `registers`, `shared memory` or `blocks`.
    pub limiter: &'static str,
}

/// The H100 (SXM5, `sm_90`) the model assumes, and the time estimate. Every number is an
/// assumption of the model, stated here and in the report; none is measured.
#[derive(Clone, Copy, Debug, PartialEq)]
#[non_exhaustive]
pub struct H100Model {
    /// SMs (132 on the SXM5 H100).
    pub sms: u32,
    /// SM clock, Hz (1.755 GHz boost).
    pub clock_hz: f64,
    /// HBM3 bandwidth, bytes/s (3.35 TB/s).
    pub hbm_bytes_per_s: f64,
    /// L2 bandwidth, bytes/s (assumed 5.5 TB/s).
    pub l2_bytes_per_s: f64,
    /// Memory requests (global requests + shared wavefronts) one SM issues per cycle (1).
    pub lsu_per_cycle: f64,
    /// Global sectors one SM's L1 moves per cycle (4 = 128 B).
    pub l1_sectors_per_cycle: f64,
    /// Cycles of a global request that brings a sector first touched (HBM; 600).
    pub cold_latency: f64,
    /// Cycles of a global request whose sectors the launch touched before (an L2 hit; 250).
    pub warm_latency: f64,
    /// Cycles of a shared-memory request (30).
    pub shared_latency: f64,
    /// Fixed cost of a launch, seconds (3 µs).
    pub launch_s: f64,
    /// Warps per SM (64), threads per SM (2048), blocks per SM (32).
    pub max_warps: u32,
    /// See `max_warps`.
    pub max_blocks: u32,
    /// Registers per SM (65536), allocated per warp in units of 256.
    pub registers: u32,
    /// Shared memory per SM usable by blocks, bytes (228 KiB), 1 KiB reserved per block.
    pub smem_bytes: u32,
}

impl Default for H100Model {
    fn default() -> Self {
        Self {
            sms: 132,
            clock_hz: 1.755e9,
            hbm_bytes_per_s: 3.35e12,
            l2_bytes_per_s: 5.5e12,
            lsu_per_cycle: 1.0,
            l1_sectors_per_cycle: 4.0,
            cold_latency: 600.0,
            warm_latency: 250.0,
            shared_latency: 30.0,
            launch_s: 3e-6,
            max_warps: 64,
            max_blocks: 32,
            registers: 65536,
            smem_bytes: 228 * 1024,
        }
    }
}

/// The model's time estimate of a kernel's launches, and its terms (seconds). Not GPU time.
#[derive(Clone, Copy, Debug, PartialEq)]
#[non_exhaustive]
pub struct Estimate {
    /// Distinct sectors (the footprint) from HBM.
    pub hbm_s: f64,
    /// Every requested sector through L2.
    pub l2_s: f64,
    /// Issue: memory requests and L1 sector throughput of the SMs in use.
    pub issue_s: f64,
    /// Latency: request latencies over the warps in flight, or the slowest warp's chain.
    pub latency_s: f64,
    /// The largest term plus the launch cost, per launch, summed.
    pub total_s: f64,
    /// Which term dominates: `hbm`, `l2`, `issue` or `latency`.
    pub bound: &'static str,
    /// Occupancy the resources allow.
    pub occupancy: Occupancy,
}

impl H100Model {
    /// Occupancy of blocks of `threads` threads with `res`' registers and `smem` bytes of shared
    /// memory per block (`res` unknown: registers do not limit).
    #[must_use]
    pub fn occupancy(&self, threads: u64, registers: Option<u32>, smem: u64) -> Occupancy {
        let warps = u32::try_from(threads.div_ceil(32)).unwrap_or(u32::MAX).max(1);
        let mut best = (self.max_blocks, "blocks");
        let mut limit = |n: u32, why: &'static str| {
            if n < best.0 {
                best = (n, why);
            }
        };
        limit(self.max_warps / warps, "threads");
        if let Some(r) = registers {
            let per_warp = (r.max(1) * 32).div_ceil(256) * 256;
            limit((self.registers / per_warp) / warps, "registers");
        }
        let per_block = u32::try_from((smem + 1024).div_ceil(128) * 128).unwrap_or(u32::MAX);
        if smem > 0 {
            limit(self.smem_bytes / per_block, "shared memory");
        }
        Occupancy { blocks_per_sm: best.0, warps_per_sm: best.0 * warps, limiter: best.1 }
    }

    /// The estimate for `c`'s launches (each launch alike: the record's totals divided by its
    /// launches), with `res` for the occupancy.
    #[must_use]
    #[allow(clippy::cast_precision_loss)]
    pub fn estimate(&self, c: &LaunchCost, res: Option<&Resources>) -> Estimate {
        let launches = c.launches.max(1) as f64;
        let occ = self.occupancy(c.block_threads, res.map(|r| r.registers), c.smem_bytes);
        let g = c.global_total();
        let s = c.shared_total();
        let blocks = (c.blocks as f64 / launches).max(1.0);
        let sms = blocks.min(f64::from(self.sms));
        let warps_per_block = c.block_threads.div_ceil(32).max(1) as f64;
        let in_flight =
            (blocks.min(f64::from(self.sms) * f64::from(occ.blocks_per_sm.max(1))) * warps_per_block).max(1.0);
        let per = |x: u64| x as f64 / launches;
        let hbm = per(c.footprint_sectors) * 32.0 / self.hbm_bytes_per_s;
        let l2 = per(g.units) * 32.0 / self.l2_bytes_per_s;
        let issue_cycles = (per(g.requests) + per(s.units)) / self.lsu_per_cycle;
        let l1_cycles = per(g.units) / self.l1_sectors_per_cycle;
        let issue = issue_cycles.max(l1_cycles) / (sms * self.clock_hz);
        let cold = per(c.global_cold_requests);
        let warm = per(g.requests) - cold;
        let all = cold * self.cold_latency + warm * self.warm_latency + per(s.requests) * self.shared_latency;
        let chain = c.max_warp_cold as f64 * self.cold_latency
            + c.max_warp_warm as f64 * self.warm_latency
            + c.max_warp_shared as f64 * self.shared_latency;
        let latency = (all / in_flight).max(chain) / self.clock_hz;
        let terms = [(hbm, "hbm"), (l2, "l2"), (issue, "issue"), (latency, "latency")];
        let (top, bound) = terms.iter().copied().fold((0.0, "hbm"), |a, t| if t.0 > a.0 { t } else { a });
        Estimate {
            hbm_s: hbm * launches,
            l2_s: l2 * launches,
            issue_s: issue * launches,
            latency_s: latency * launches,
            total_s: (top + self.launch_s) * launches,
            bound,
            occupancy: occ,
        }
    }

    /// The model's assumptions as Markdown bullet lines, for reports.
    #[must_use]
    pub fn assumptions(&self) -> String {
        format!(
            "- H100 SXM5 (sm_90): {} SMs at {:.3} GHz; per SM {} warps, {} blocks, {} registers (allocated per warp in units of 256), {} KiB shared memory (1 KiB reserved per block, 128-byte granularity)\n\
             - hbm term: the launch's distinct global sectors × 32 B at {:.2} TB/s (every sector read or written once from/to HBM; re-touches hit the 50 MB L2)\n\
             - l2 term: every requested sector × 32 B at an assumed {:.1} TB/s of L2 bandwidth (no L1 hits)\n\
             - issue term: (global requests + shared wavefronts) at {} per cycle per SM, or global sectors at {} per cycle per SM (L1), whichever is larger, over the SMs the blocks occupy (ALU instructions are not counted at all)\n\
             - latency term: every global request waits {} cycles if it touches a sector new to the launch (HBM), else {} cycles (L2 hit), a shared request {} cycles; one request in flight per warp (no memory-level parallelism inside a warp); the sum over the warps in flight (occupancy × SMs in use), or the slowest warp's chain (its maxima of each kind), whichever is larger\n\
             - a launch takes the largest term plus {:.0} µs; launches of a kernel run one after another\n",
            self.sms,
            self.clock_hz / 1e9,
            self.max_warps,
            self.max_blocks,
            self.registers,
            self.smem_bytes / 1024,
            self.hbm_bytes_per_s / 1e12,
            self.l2_bytes_per_s / 1e12,
            self.lsu_per_cycle,
            self.l1_sectors_per_cycle,
            self.cold_latency,
            self.warm_latency,
            self.shared_latency,
            self.launch_s * 1e6,
        )
    }
}

/// One Markdown table row of the cost of `c` for `bytes` decoded (or processed) bytes.
#[must_use]
pub fn markdown_row(case: &str, c: &LaunchCost, bytes: u64, res: Option<&Resources>, model: &H100Model) -> String {
    let g = c.global_total();
    let s = c.shared_total();
    let e = model.estimate(c, res);
    let mut row = String::new();
    #[allow(clippy::cast_precision_loss)]
    let gbps = if e.total_s > 0.0 { bytes as f64 / e.total_s / 1e9 } else { 0.0 };
    let _ = write!(
        row,
        "| {case} | {} | {} | {} | {} | {:.2} ({:.2}× ideal) | {:.1} | {:.2} | {} | {:.2} | {:.4} | {} | {}/{} ({}) | {:.1} µs ({}) | {:.1} |",
        c.kernel,
        c.launches,
        bytes,
        g.requests,
        g.units_per_request(),
        g.vs_ideal(),
        g.lanes_per_request(),
        ratio(g.lines, g.requests),
        s.requests,
        if s.requests == 0 { 0.0 } else { s.vs_ideal() },
        c.requests_per_byte(bytes),
        res.map_or_else(
            || "?".to_string(),
            |r| format!("{} regs, {} B spill, {} B stack", r.registers, r.spill_bytes, r.stack_bytes)
        ),
        e.occupancy.warps_per_sm,
        model.max_warps,
        e.occupancy.limiter,
        e.total_s * 1e6,
        e.bound,
        gbps,
    );
    row
}

/// The header of [`markdown_row`]'s table.
pub const MARKDOWN_HEADER: &str = "| case | kernel | launches | bytes | global requests | sectors/request | lanes/request | lines/request | shared requests | bank wavefronts vs ideal | warp-requests/byte | resources (sm_90) | occupancy warps/SM | model time (bound) | model GB/s |\n\
|---|---|---|---|---|---|---|---|---|---|---|---|---|---|---|";

#[cfg(test)]
mod tests {
    use super::Resources;

    #[test]
    fn the_ptxas_log_gives_registers_spills_stack_and_shared_memory_of_the_kernel_asked_for() {
        let log = "ptxas info    : Compiling entry function 'a' for 'sm_90'
ptxas info    : Function properties for a
ptxas         .     8 bytes stack frame, 0 bytes spill stores, 0 bytes spill loads
ptxas info    : Used 32 registers, used 0 barriers
ptxas info    : Compiling entry function 'b' for 'sm_90'
ptxas info    : Function properties for b
ptxas         .     656 bytes stack frame, 4 bytes spill stores, 4 bytes spill loads
ptxas info    : Used 80 registers, used 0 barriers, 656 bytes cumulative stack size, 17784 bytes smem
";
        assert_eq!(Resources::from_ptxas_log(log, "b"), Some(Resources::new(80, 4, 656, 17784)));
        assert_eq!(Resources::from_ptxas_log(log, "a"), Some(Resources::new(32, 0, 8, 0)));
        assert_eq!(Resources::from_ptxas_log(log, "c"), None);
    }
}
