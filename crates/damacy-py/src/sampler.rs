//! The sampler crate in Python: index and crop spaces and per-rank plans. The Python module
//! `damacy.samplers` builds its `DistributedSampler` on these.

use std::sync::Arc;

use damacy::sampler::{
    ArrayGeometry, CropOptions, CropPlacement, CropSpace, EqualLength, Granularity, GroupLevel, IndexOptions,
    IndexSpace, Mode, Plan, PlanConfig, PlannedSample, RankSource, ResumeState, SampleSpace, Shuffle, WorkerSplit,
};
use pyo3::prelude::*;
use pyo3::types::{PyList, PyTuple};

use crate::errors::{InvalidArgument, guard, sampler_err};

/// Rows of one or more arrays, grouped into chunks (and shards) of rows.
#[pyclass(module = "damacy._damacy", name = "IndexSpace", frozen)]
pub(crate) struct PyIndexSpace {
    space: Arc<IndexSpace>,
}

/// Crop positions in N-D chunked (and sharded) arrays, on a grid or at random.
#[pyclass(module = "damacy._damacy", name = "CropSpace", frozen)]
pub(crate) struct PyCropSpace {
    space: Arc<CropSpace>,
}

/// One array of a crop space: `(shape, chunk_shape, shard_shape or None, element_size)`.
type GeometryArg = (Vec<u64>, Vec<u64>, Option<Vec<u64>>, u64);

#[pymethods]
impl PyIndexSpace {
    #[new]
    #[pyo3(signature = (lengths, *, chunk_size = 1, chunks_per_shard = 1, row_bytes = 1))]
    #[allow(clippy::needless_pass_by_value)] // pyo3 extracts a list into a Vec, not a slice
    fn new(lengths: Vec<u64>, chunk_size: u64, chunks_per_shard: u64, row_bytes: u64) -> PyResult<Self> {
        let options = IndexOptions::new()
            .with_chunk_size(chunk_size)
            .with_chunks_per_shard(chunks_per_shard)
            .with_row_bytes(row_bytes);
        let space = IndexSpace::with_options(&lengths, options).map_err(|e| sampler_err(&e))?;
        Ok(Self { space: Arc::new(space) })
    }

    fn __len__(&self) -> usize {
        usize::try_from(self.space.len()).unwrap_or(usize::MAX)
    }

    /// The number of arrays.
    #[getter]
    fn array_count(&self) -> usize {
        self.space.array_count()
    }
}

#[pymethods]
impl PyCropSpace {
    #[new]
    #[pyo3(signature = (arrays, crop_shape, *, count = None, stride = None, placement = "anywhere"))]
    fn new(
        arrays: Vec<GeometryArg>,
        crop_shape: Vec<u64>,
        count: Option<u64>,
        stride: Option<Vec<u64>>,
        placement: &str,
    ) -> PyResult<Self> {
        let geometries = arrays
            .into_iter()
            .map(|(shape, chunks, shards, size)| {
                let g = ArrayGeometry::new(shape, chunks).with_element_size(size);
                match shards {
                    Some(s) => g.with_shard_shape(s),
                    None => g,
                }
            })
            .collect();
        let mut options = match count {
            Some(n) => CropOptions::random(crop_shape, n),
            None => CropOptions::grid(crop_shape),
        };
        if let Some(s) = stride {
            options = options.with_stride(s);
        }
        options = options.with_placement(match placement {
            "anywhere" => CropPlacement::Anywhere,
            "chunk" => CropPlacement::WithinChunk,
            "shard" => CropPlacement::WithinShard,
            other => {
                return Err(InvalidArgument::new_err(format!(
                    "placement={other:?}: use \"anywhere\", \"chunk\" or \"shard\""
                )));
            }
        });
        let space = CropSpace::new(geometries, options).map_err(|e| sampler_err(&e))?;
        Ok(Self { space: Arc::new(space) })
    }

    fn __len__(&self) -> usize {
        usize::try_from(self.space.len()).unwrap_or(usize::MAX)
    }

    /// The crop shape.
    #[getter]
    fn crop_shape(&self) -> Vec<u64> {
        self.space.crop_shape().to_vec()
    }
}

enum AnyPlan {
    Index(Plan<Arc<IndexSpace>>),
    Crop(Plan<Arc<CropSpace>>),
}

/// Calls `$body` with `$p` bound to the plan, whatever its space.
macro_rules! with_plan {
    ($plan:expr, $p:ident => $body:expr) => {
        match $plan {
            AnyPlan::Index($p) => $body,
            AnyPlan::Crop($p) => $body,
        }
    };
}

/// One rank's plan for one epoch (see the sampler crate): lazily computed, O(1) memory.
#[pyclass(module = "damacy._damacy", name = "Plan", frozen)]
pub(crate) struct PyPlan {
    plan: AnyPlan,
}

fn pick<T: Copy>(what: &str, value: &str, options: &[(&str, T)]) -> PyResult<T> {
    options.iter().find(|(name, _)| *name == value).map(|(_, v)| *v).ok_or_else(|| {
        let names: Vec<String> = options.iter().map(|(n, _)| format!("{n:?}")).collect();
        InvalidArgument::new_err(format!("{what}={value:?}: use one of {}", names.join(", ")))
    })
}

fn entries<S: SampleSpace>(plan: &Plan<S>, start: u64, count: u64) -> Vec<(u64, bool)> {
    let mut it = plan.iter();
    it.seek(start);
    it.take(usize::try_from(count).unwrap_or(usize::MAX)).map(|s: PlannedSample| (s.id, s.padded)).collect()
}

#[pymethods]
impl PyPlan {
    #[new]
    #[pyo3(signature = (space, *, rank = 0, world = 1, batch_size = 1, mode = "strided", granularity = "sample",
        group_level = "chunk", shuffle = "full", window = 1, equal_length = "pad", seed = 0, epoch = 0, resume = None))]
    #[allow(clippy::too_many_arguments)]
    fn new(
        py: Python<'_>,
        space: &Bound<'_, PyAny>,
        rank: u32,
        world: u32,
        batch_size: u64,
        mode: &str,
        granularity: &str,
        group_level: &str,
        shuffle: &str,
        window: u64,
        equal_length: &str,
        seed: u64,
        epoch: u64,
        resume: Option<(u64, u64, u32, u64)>,
    ) -> PyResult<Self> {
        let mut config = PlanConfig::new()
            .with_rank(RankSource::new(rank, world))
            .with_batch_size(batch_size)
            .with_mode(pick("mode", mode, &[("strided", Mode::Strided), ("contiguous", Mode::Contiguous)])?)
            .with_granularity(pick(
                "granularity",
                granularity,
                &[("sample", Granularity::Sample), ("chunk", Granularity::Group), ("group", Granularity::Group)],
            )?)
            .with_group_level(pick(
                "group_level",
                group_level,
                &[("chunk", GroupLevel::Chunk), ("shard", GroupLevel::Shard)],
            )?)
            .with_shuffle(pick(
                "shuffle",
                shuffle,
                &[("none", Shuffle::None), ("full", Shuffle::Full), ("two_level", Shuffle::TwoLevel { window })],
            )?)
            .with_equal_length(pick(
                "equal_length",
                equal_length,
                &[("pad", EqualLength::Pad), ("drop", EqualLength::Drop), ("uneven", EqualLength::Uneven)],
            )?)
            .with_seed(seed)
            .with_epoch(epoch);
        if let Some((epoch, cursor, world, batch_size)) = resume {
            config = config.with_resume(ResumeState { epoch, cursor, world, batch_size });
        }
        let plan = if let Ok(s) = space.cast::<PyIndexSpace>() {
            let space = s.get().space.clone();
            py.detach(|| guard("Plan()", || Plan::new(space, config).map(AnyPlan::Index).map_err(|e| sampler_err(&e))))?
        } else if let Ok(s) = space.cast::<PyCropSpace>() {
            let space = s.get().space.clone();
            py.detach(|| guard("Plan()", || Plan::new(space, config).map(AnyPlan::Crop).map_err(|e| sampler_err(&e))))?
        } else {
            return Err(InvalidArgument::new_err("space must be an IndexSpace or a CropSpace"));
        };
        Ok(Self { plan })
    }

    fn __len__(&self) -> usize {
        usize::try_from(with_plan!(&self.plan, p => p.len())).unwrap_or(usize::MAX)
    }

    /// Batches in this rank's plan (equal on every rank under "pad" and "drop").
    #[getter]
    fn n_batches(&self) -> u64 {
        with_plan!(&self.plan, p => p.n_batches())
    }

    /// The per-rank batch size.
    #[getter]
    fn batch_size(&self) -> u64 {
        with_plan!(&self.plan, p => p.batch_size())
    }

    /// The epoch the plan covers.
    #[getter]
    fn epoch(&self) -> u64 {
        with_plan!(&self.plan, p => p.epoch())
    }

    /// Whether the plan's order and checkpoints do not depend on the world size.
    #[getter]
    fn is_elastic(&self) -> bool {
        with_plan!(&self.plan, p => p.is_elastic())
    }

    /// The checkpoint after `batches_done` batches: `(epoch, cursor, world, batch_size)`.
    fn checkpoint(&self, batches_done: u64) -> (u64, u64, u32, u64) {
        let s = with_plan!(&self.plan, p => p.checkpoint(batches_done));
        (s.epoch, s.cursor, s.world, s.batch_size)
    }

    /// Up to `count` entries from position `start`: `(ids, padded)` lists.
    fn entries(&self, py: Python<'_>, start: u64, count: u64) -> PyResult<(Vec<u64>, Vec<bool>)> {
        let list = py.detach(|| guard("Plan.entries", || Ok(with_plan!(&self.plan, p => entries(p, start, count)))))?;
        Ok(list.into_iter().unzip())
    }

    /// The plan-position range of batch `b`.
    fn batch_bounds(&self, b: u64) -> (u64, u64) {
        let r = with_plan!(&self.plan, p => p.batch_bounds(b));
        (r.start, r.end)
    }

    /// The batch indexes of worker `worker` of `workers` (split "interleaved" or "contiguous").
    #[pyo3(signature = (worker, workers, split = "interleaved"))]
    fn worker_batches(&self, worker: u32, workers: u32, split: &str) -> PyResult<Vec<u64>> {
        let split = pick(
            "split",
            split,
            &[("interleaved", WorkerSplit::Interleaved), ("contiguous", WorkerSplit::Contiguous)],
        )?;
        with_plan!(&self.plan, p => p
            .worker_with(worker, workers, split)
            .map(|w| w.batch_indices().collect())
            .map_err(|e| sampler_err(&e)))
    }

    /// What sample `id` is: `(array, row)` for an index space, `(array, start, shape)` for a
    /// crop space.
    fn resolve<'py>(&self, py: Python<'py>, id: u64) -> PyResult<Bound<'py, PyTuple>> {
        match &self.plan {
            AnyPlan::Index(p) => {
                let s = p.resolve(PlannedSample { id, padded: false });
                (s.array, s.row).into_pyobject(py)
            }
            AnyPlan::Crop(p) => {
                let s = p.resolve(PlannedSample { id, padded: false });
                (s.array, PyTuple::new(py, s.start)?, PyTuple::new(py, s.shape)?).into_pyobject(py)
            }
        }
    }

    /// `resolve` for many ids at once.
    fn resolve_many<'py>(&self, py: Python<'py>, ids: Vec<u64>) -> PyResult<Bound<'py, PyList>> {
        let items = ids.into_iter().map(|id| self.resolve(py, id)).collect::<PyResult<Vec<_>>>()?;
        PyList::new(py, items)
    }
}

/// `(rank, world, local_rank)` from torchrun's environment (`RANK`, `WORLD_SIZE`,
/// `LOCAL_RANK`); `(0, 1, None)` when neither `RANK` nor `WORLD_SIZE` is set.
#[pyfunction]
fn rank_from_env() -> PyResult<(u32, u32, Option<u32>)> {
    let r = RankSource::from_env().map_err(|e| sampler_err(&e))?;
    Ok((r.rank(), r.world(), r.local_rank()))
}

/// Registers the sampler classes.
pub(crate) fn register(m: &Bound<'_, PyModule>) -> PyResult<()> {
    m.add_function(wrap_pyfunction!(rank_from_env, m)?)?;
    m.add_class::<PyIndexSpace>()?;
    m.add_class::<PyCropSpace>()?;
    m.add_class::<PyPlan>()?;
    Ok(())
}
