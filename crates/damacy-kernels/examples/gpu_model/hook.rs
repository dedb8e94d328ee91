//! kernel_bench's hook into the GPU performance model (issue 30; `damacy_kernels::model`): in a
//! cost build (`DAMACY_EMU_COST=1`, feature `emulate`) with `--model h200|h100`, each timed run's
//! launches are predicted, and the rows get `predicted_kernel_s`, `predicted_gbps` and the
//! per-launch terms (`model`). Elsewhere `Model::new` says why there is no model.

use serde_json::{Value, json};

#[cfg(feature = "emulate")]
pub(crate) struct Model {
    gpu: damacy_kernels::model::Gpu,
    res: std::collections::BTreeMap<String, damacy_kernels::model::KernelResources>,
}

#[cfg(feature = "emulate")]
impl Model {
    /// The model of `gpu` (`h200`, `h100`), or why none can run.
    pub(crate) fn new(gpu: &str) -> Result<Self, String> {
        use damacy_kernels::model;
        if !damacy_kernels::cost::enabled() {
            return Err("--model needs a cost build: DAMACY_EMU_COST=1 (scripts/gpu_model.sh builds one)".into());
        }
        let gpu = match gpu {
            "h200" => model::Gpu::h200(),
            "h100" => model::Gpu::h100(),
            other => return Err(format!("--model {other:?}: expected h200 or h100")),
        };
        if model::weights_loaded() == 0 {
            eprintln!(
                "kernel_bench: no SASS weight table (DAMACY_GPU_MODEL_SASS): the model counts host basic blocks \
                 as instructions (scripts/gpu_model.sh makes the table)"
            );
        }
        Ok(Self { gpu, res: model::resources_from_env() })
    }

    /// Forgets the launches recorded so far.
    #[allow(clippy::unused_self)]
    pub(crate) fn reset(&self) {
        drop(damacy_kernels::model::take());
    }

    /// The predicted time of the launches recorded since [`Model::reset`] (one after another),
    /// and their terms.
    pub(crate) fn collect(&self) -> (f64, Value) {
        self.collect_scaled(1)
    }

    /// As [`Model::collect`], each recorded launch standing for `k` (a sample of every k-th
    /// chunk: its blocks and bytes repeated `k` times).
    pub(crate) fn collect_scaled(&self, k: usize) -> (f64, Value) {
        use damacy_kernels::model;
        let launches: Vec<model::Launch> = model::take().iter().map(|l| l.replicate(k)).collect();
        if std::env::var_os("DAMACY_GPU_MODEL_PHASES").is_some() {
            for l in &launches {
                eprint!("{}", self.phases(l));
            }
        }
        let preds = model::predict_all(&self.gpu, &launches, &self.res);
        let total: f64 = preds.iter().map(|p| p.total_s).sum();
        // the same launches at the 1.5 GHz Nsight Compute locks the H200's SM clock to
        let ncu = self.gpu.clone().with_clock(1.5e9);
        let at_ncu: f64 = model::predict_all(&ncu, &launches, &self.res).iter().map(|p| p.total_s).sum();
        let detail: Vec<Value> = preds
            .iter()
            .map(|p| {
                json!({
                    "kernel": p.kernel, "gpu": self.gpu.name, "total_us": p.total_s * 1e6,
                    "latency_us": p.latency_s * 1e6, "memory_us": p.memory_s * 1e6, "launch_us": p.launch_s * 1e6,
                    "longest_warp_us": p.longest_warp_s * 1e6, "blocks": p.blocks, "warps": p.warps,
                    "blocks_per_sm": p.occupancy.blocks_per_sm, "warps_per_sm": p.occupancy.warps_per_sm,
                    "occupancy_limiter": p.occupancy.limiter.name(), "waves": p.waves,
                    "achieved_occupancy": p.achieved_occupancy,
                    "sass_insts": p.insts, "mean_warp_insts": p.mean_warp_insts, "max_warp_insts": p.max_warp_insts,
                    "bound": p.bound.name(),
                    "longest_warp": {
                        "insts": p.longest_warp.insts, "shfl": p.longest_warp.shfl, "cycles": p.longest_warp.cycles,
                        "g_load_cold": p.longest_warp.g_load_cold, "g_load_warm": p.longest_warp.g_load_warm,
                        "g_load_l2": p.longest_warp.g_load_l2, "g_store": p.longest_warp.g_store,
                        "g_sectors": p.longest_warp.g_sectors, "s_load": p.longest_warp.s_load,
                        "s_store": p.longest_warp.s_store, "s_wavefronts": p.longest_warp.s_wavefronts,
                        "warm_dist": p.longest_warp.warm_dist,
                    },
                })
            })
            .collect();
        (total, json!({"launches": detail, "ncu_total_s": at_ncu}))
    }

    /// The model's constants and their sources (Markdown).
    pub(crate) fn constants(&self) -> String {
        self.gpu.sources()
    }

    /// `DAMACY_GPU_MODEL_PHASES` set: where the slowest block of `l` spends its time — per warp
    /// of the block, the phases (paths between barriers) whose longest path is that warp's, their
    /// cycles, and that path's terms summed. The serial path cycles are taken without L1
    /// evictions (the launch's L1 share is the prediction's business), so they can fall a little
    /// short of the predicted time.
    #[allow(clippy::cast_precision_loss)]
    fn phases(&self, l: &damacy_kernels::model::Launch) -> String {
        use damacy_kernels::model::WarpRec;
        use std::collections::BTreeMap;
        use std::fmt::Write as _;
        let mut by_phase: BTreeMap<(u64, u64), (f64, WarpRec)> = BTreeMap::new();
        for w in &l.warps {
            let t = self.gpu.warp_cycles(w, f64::INFINITY);
            let e = by_phase.entry((w.block, w.phase)).or_insert((-1.0, *w));
            if t > e.0 {
                *e = (t, *w);
            }
        }
        let mut blocks: BTreeMap<u64, f64> = BTreeMap::new();
        for (&(b, _), &(t, _)) in &by_phase {
            *blocks.entry(b).or_insert(0.0) += t;
        }
        let Some((&slow, &total)) = blocks.iter().max_by(|a, b| a.1.total_cmp(b.1)) else { return String::new() };
        let mut per_warp: BTreeMap<u64, (u64, f64, WarpRec)> = BTreeMap::new();
        for (&(b, _), (t, w)) in &by_phase {
            if b == slow {
                let e = per_warp.entry(w.warp).or_insert((0, 0.0, WarpRec { warp: w.warp, ..WarpRec::default() }));
                e.0 += 1;
                e.1 += t;
                e.2.add(w);
            }
        }
        let mut s = format!(
            "phases {}: block {slow} of {}, {:.0} cycles ({:.1} us at {:.2} GHz)\n",
            l.cost.kernel,
            blocks.len(),
            total,
            total / self.gpu.clock_hz * 1e6,
            self.gpu.clock_hz / 1e9
        );
        for (w, (n, t, r)) in &per_warp {
            let _ = writeln!(
                s,
                "  warp {w}: longest in {n} phases, {t:.0} cycles ({:.1} %): insts {:.0} issue cycles {:.0} shfl {:.0} cold {} l2 {} warm {} shared {}",
                100.0 * t / total,
                r.insts,
                r.cycles,
                r.shfl,
                r.g_load_cold,
                r.g_load_l2,
                r.g_load_warm,
                r.s_load
            );
        }
        s
    }
}

#[cfg(not(feature = "emulate"))]
pub(crate) struct Model;

#[cfg(not(feature = "emulate"))]
#[allow(clippy::unused_self)] // the emulate build's methods, without a model behind them
impl Model {
    pub(crate) fn new(_gpu: &str) -> Result<Self, String> {
        Err("--model needs the emulator (feature `emulate`, a DAMACY_EMU_COST=1 build)".into())
    }
    #[allow(clippy::unused_self)]
    pub(crate) fn reset(&self) {}
    pub(crate) fn collect(&self) -> (f64, Value) {
        (0.0, Value::Null)
    }
    pub(crate) fn collect_scaled(&self, _k: usize) -> (f64, Value) {
        (0.0, Value::Null)
    }
    pub(crate) fn constants(&self) -> String {
        String::new()
    }
}

/// Sets a row's model fields from the predictions of its timed runs (the last one's terms).
pub(crate) fn fill_row(row: &mut Value, predicted: &[(f64, Value)], bytes: usize) {
    let Some((t, detail)) = predicted.last() else { return };
    row["predicted_kernel_s"] = json!(t);
    #[allow(clippy::cast_precision_loss)]
    let gbps = if *t > 0.0 { bytes as f64 / t / 1e9 } else { 0.0 };
    row["predicted_gbps"] = json!(gbps);
    row["predicted_ncu_s"] = detail["ncu_total_s"].clone();
    row["model"] = detail["launches"].clone();
}

/// The model's table: predicted µs and GB/s per case, and each launch's bound and achieved
/// occupancy.
pub(crate) fn table(rows: &[Value]) -> String {
    use std::fmt::Write as _;
    let mut s = String::new();
    if !rows.iter().any(|r| r.get("predicted_kernel_s").is_some()) {
        return s;
    }
    let gpu = rows.iter().find_map(|r| r["model"][0]["gpu"].as_str()).unwrap_or("?");
    let _ = writeln!(s, "\nGPU model ({gpu}; predicted kernel time of each case's wave, not a measurement):");
    let _ = writeln!(
        s,
        "{:<28} {:>14} {:>14}  launches (kernel: µs, bound, achieved occupancy)",
        "case", "predicted µs", "predicted GB/s"
    );
    for r in rows.iter().filter(|r| r.get("predicted_kernel_s").is_some()) {
        let launches: Vec<String> = r["model"]
            .as_array()
            .map(|a| {
                a.iter()
                    .map(|l| {
                        format!(
                            "{}: {:.1}, {}, {:.1} %",
                            l["kernel"].as_str().unwrap_or("?"),
                            l["total_us"].as_f64().unwrap_or(0.0),
                            l["bound"].as_str().unwrap_or("?"),
                            100.0 * l["achieved_occupancy"].as_f64().unwrap_or(0.0)
                        )
                    })
                    .collect()
            })
            .unwrap_or_default();
        let _ = writeln!(
            s,
            "{:<28} {:>14.1} {:>14.2}  {}",
            r["name"].as_str().unwrap_or("?"),
            r["predicted_kernel_s"].as_f64().unwrap_or(0.0) * 1e6,
            r["predicted_gbps"].as_f64().unwrap_or(0.0),
            launches.join("; ")
        );
    }
    s
}
