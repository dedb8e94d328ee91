//! The cost model's report (issue 14): every kernel on the workloads of
//! `tests/common/cost_cases.rs` (fixture lz4 / blosclz / zstd chunks with their unshuffle, a
//! crc32c-checked raw chunk, assemble crops), with the memory-access numbers the emulator
//! recorded, the resources ptxas reports for sm_90 (when NVRTC is installed), and the model's
//! H100 time — a model, not GPU time.
//!
//! ```text
//! bash crates/damacy-kernels/scripts/cost.sh --report [--out FILE]
//! ```
//!
//! (the script builds the cost variant, `DAMACY_EMU_COST=1`, and runs this example; `make bench`
//! runs it through `benches/run.sh`). Writes `benches/results/kernel_cost.md` unless `--out`
//! names another file; prints the same Markdown.
#![allow(clippy::doc_markdown, clippy::missing_panics_doc)]

use std::collections::BTreeMap;
use std::fmt::Write as _;
use std::process::{Command, ExitCode};

use damacy_kernels::Kernel;
use damacy_kernels::cost::{self, H100Model, MARKDOWN_HEADER, Resources, markdown_row};

#[path = "../tests/common/mod.rs"]
mod common;

/// The heading of the report's hand-kept section of measured changes, carried over when the
/// report is regenerated.
const HISTORY_HEADER: &str = "## Changes measured with the model";

fn sh(cmd: &str, args: &[&str]) -> String {
    Command::new(cmd)
        .args(args)
        .output()
        .ok()
        .filter(|o| o.status.success())
        .map_or_else(|| "unknown".into(), |o| String::from_utf8_lossy(&o.stdout).trim().to_string())
}

/// Registers, spills and static shared memory per kernel from ptxas (NVRTC, sm_90).
fn resources() -> (BTreeMap<String, Resources>, String) {
    let mut out = BTreeMap::new();
    if let Err(reason) = damacy_kernels::nvrtc::load() {
        return (out, format!("not obtained: {reason}"));
    }
    let mut notes = Vec::new();
    for k in Kernel::ALL {
        match damacy_kernels::nvrtc::compile(k, "sm_90", &["--ptxas-options=-v"]) {
            Ok(c) => match Resources::from_ptxas_log(&c.log, k.name()) {
                Some(r) => {
                    out.insert(k.name().to_string(), r);
                }
                None => notes.push(format!("{}: no `Used N registers` line in the ptxas log", k.name())),
            },
            Err(e) => notes.push(format!("{}: {e}", k.name())),
        }
    }
    let (maj, min) = damacy_kernels::nvrtc::version().unwrap_or((0, 0));
    let mut s = format!("ptxas via NVRTC {maj}.{min} for sm_90 (`--ptxas-options=-v`)");
    if !notes.is_empty() {
        let _ = write!(s, "; {}", notes.join("; "));
    }
    (out, s)
}

/// Report-only cases (no budget): batches of gzip chunks of 64 KiB, 256 KiB and 1 MiB (issue
/// 15's sizes), two chunks each, compressed by flate2 at level 6 from a smooth u16 field with
/// noise in the low bits (microscopy-like: literals and short matches).
fn gzip_batches(device: &damacy_kernels::Device) -> Vec<common::cost_cases::CostCase> {
    [(64usize << 10, "gzip-64KiB"), (256 << 10, "gzip-256KiB"), (1 << 20, "gzip-1MiB")]
        .into_iter()
        .map(|(size, name)| {
            let fields: Vec<Vec<u8>> = (0..2u64).map(|k| common::cost_cases::smooth_u16_field(size, k)).collect();
            let chunks: Vec<Vec<u8>> = fields.iter().map(|f| common::cost_cases::gzip(f, 6)).collect();
            common::cost_cases::batch_case(
                device,
                name,
                "gzip (flate2 level 6)",
                common::cost_cases::SMOOTH,
                common::cost_cases::REPORT_ONLY,
                &fields,
                &chunks,
                |b| damacy_kernels::ChunkInput::gzip(b),
            )
        })
        .collect()
}

/// Report-only cases with the trailer's checksum verified (issue 15): two gzip chunks of 256 KiB
/// (CRC32 and ISIZE) and two zlib chunks of 256 KiB (Adler-32; zlib has no size field, so the
/// chunk's size is given), flate2 level 6 of the same smooth u16 field as the gzip batches.
fn checksum_batches(device: &damacy_kernels::Device) -> Vec<common::cost_cases::CostCase> {
    use std::io::Write as _;
    let size = 256usize << 10;
    let fields: Vec<Vec<u8>> = (0..2u64).map(|k| common::cost_cases::smooth_u16_field(size, k)).collect();
    let gz: Vec<Vec<u8>> = fields.iter().map(|f| common::cost_cases::gzip(f, 6)).collect();
    let zl: Vec<Vec<u8>> = fields
        .iter()
        .map(|f| {
            let mut enc = flate2::write::ZlibEncoder::new(Vec::new(), flate2::Compression::new(6));
            enc.write_all(f).expect("compressing into memory");
            enc.finish().expect("compressing into memory")
        })
        .collect();
    vec![
        common::cost_cases::batch_case(
            device,
            "gzip-256KiB-crc",
            "gzip (flate2 level 6, CRC32 verified)",
            common::cost_cases::SMOOTH,
            common::cost_cases::REPORT_ONLY,
            &fields,
            &gz,
            |b| damacy_kernels::ChunkInput::gzip(b).with_checksum_verification(),
        ),
        common::cost_cases::batch_case(
            device,
            "zlib-256KiB-adler",
            "zlib (flate2 level 6, Adler-32 verified)",
            common::cost_cases::SMOOTH,
            common::cost_cases::REPORT_ONLY,
            &fields,
            &zl,
            |b| damacy_kernels::ChunkInput::zlib(b).with_expected_len(256 << 10).with_checksum_verification(),
        ),
    ]
}

fn main() -> ExitCode {
    let mut args = std::env::args().skip(1);
    let mut out_path = concat!(env!("CARGO_MANIFEST_DIR"), "/../../benches/results/kernel_cost.md").to_string();
    while let Some(a) = args.next() {
        if let ("--out", Some(p)) = (a.as_str(), args.next()) {
            out_path = p;
        } else {
            eprintln!("usage: kernel_cost [--out FILE]");
            return ExitCode::from(2);
        }
    }
    if !cost::enabled() {
        eprintln!(
            "kernel_cost: this build does not record memory accesses; run `bash crates/damacy-kernels/scripts/cost.sh --report` (builds with DAMACY_EMU_COST=1)"
        );
        return ExitCode::from(3);
    }
    let model = H100Model::default();
    let (res, res_note) = resources();
    let mut cases = common::cost_cases::cost_cases();
    let device = damacy_kernels::Device::emulated(0);
    cases.extend(gzip_batches(&device));
    cases.extend(checksum_batches(&device));
    cases.extend(common::cost_cases::zstd_batches(&device));
    let mut md = String::new();
    let _ = writeln!(md, "# kernel_cost — the emulator's memory-access cost model (model, not GPU time)\n");
    let _ = writeln!(md, "- date: {}", sh("date", &["-u", "+%Y-%m-%d"]));
    let _ = writeln!(md, "- commit: {}", sh("git", &["rev-parse", "--short", "HEAD"]));
    let cpu = std::fs::read_to_string("/proc/cpuinfo")
        .ok()
        .and_then(|c| {
            c.lines()
                .find(|l| l.starts_with("model name"))
                .map(|l| l.split(':').nth(1).unwrap_or("").trim().to_string())
        })
        .unwrap_or_default();
    let _ = writeln!(md, "- machine: {} cores, {cpu} (the emulator; no GPU was used)", sh("nproc", &[]));
    let _ = writeln!(md, "- command: `bash crates/damacy-kernels/scripts/cost.sh --report`");
    let _ = writeln!(md, "- resources: {res_note}");
    let _ = writeln!(
        md,
        "\nEvery number below comes from the host emulator's record of the kernels' memory accesses \
         (a `DAMACY_EMU_COST=1` build), grouped into warp requests; the times and GB/s are the \
         **model**'s estimate for an H100, not measurements. Warp-requests/byte counts global and \
         shared memory requests per output byte: a proxy for instructions (memory instructions \
         only). Model assumptions:\n"
    );
    md.push_str(&model.assumptions());
    let _ = writeln!(md, "\n## Per kernel and workload\n");
    let _ = writeln!(md, "{MARKDOWN_HEADER}");
    let mut details = String::new();
    for case in &cases {
        let _ = writeln!(details, "- `{}`: {}, {} bytes out", case.name, case.what, case.bytes);
        for (kernel, c) in cost::per_kernel(&case.launches) {
            let _ = writeln!(md, "{}", markdown_row(case.name, &c, case.bytes, res.get(&kernel), &model));
            let e = model.estimate(&c, res.get(&kernel));
            let (g, s) = (c.global_total(), c.shared_total());
            let _ = writeln!(
                details,
                "  - `{kernel}`: {} blocks × {} threads, {} B shared/block; global loads {} req ({:.2} sectors/req), stores {} req ({:.2} sectors/req), atomics {} req; {} footprint sectors, {} cold requests; shared {} req, {:.2} wavefronts/req (worst {}); local (stack) accesses {} ({} B), not modelled; model terms: hbm {:.2} µs, l2 {:.2} µs, issue {:.2} µs, latency {:.2} µs; occupancy {} blocks/SM ({} warps, limited by {})",
                c.blocks,
                c.block_threads,
                c.smem_bytes,
                c.global[cost::LOAD].requests,
                c.global[cost::LOAD].units_per_request(),
                c.global[cost::STORE].requests,
                c.global[cost::STORE].units_per_request(),
                c.global[cost::ATOMIC].requests,
                c.footprint_sectors,
                c.global_cold_requests,
                s.requests,
                s.units_per_request(),
                c.shared_max_wavefronts,
                c.local_accesses,
                c.local_bytes,
                e.hbm_s * 1e6,
                e.l2_s * 1e6,
                e.issue_s * 1e6,
                e.latency_s * 1e6,
                e.occupancy.blocks_per_sm,
                e.occupancy.warps_per_sm,
                e.occupancy.limiter,
            );
            let _ = g;
        }
    }
    let _ = writeln!(md, "\n## Workloads and model terms\n\n{details}");
    // The hand-kept record of measured changes (before/after numbers with both commits) stays.
    if let Ok(old) = std::fs::read_to_string(&out_path)
        && let Some(at) = old.find(HISTORY_HEADER)
    {
        let _ = write!(md, "\n{}", &old[at..]);
    }
    print!("{md}");
    if let Err(e) = std::fs::write(&out_path, &md) {
        eprintln!("kernel_cost: cannot write {out_path}: {e}");
        return ExitCode::FAILURE;
    }
    eprintln!("kernel_cost: wrote {out_path}");
    ExitCode::SUCCESS
}
