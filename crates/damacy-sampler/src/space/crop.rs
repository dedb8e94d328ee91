//! Crop spaces: crop positions in N-D chunked (and sharded) arrays.
//!
//! # Numbering
//!
//! The valid crop starts of an array form a lattice: along each dimension the
//! multiples of the stride at which the crop fits (see [`CropPlacement`]).
//! Lattice points are numbered *shard-major*: shards in C order, then the
//! chunks inside a shard in C order, then the points inside a chunk in C order
//! (a point belongs to the chunk holding its start corner). So every chunk's
//! points and every shard's points are contiguous ranges of ids, which is what
//! group-granular plans need. Arrays follow one another.
//!
//! Per dimension the space keeps one entry per chunk, never one per sample:
//! memory is O(Σ chunks per dimension), independent of the number of crops.

// Per-dimension loops index several parallel arrays (box corners, extents,
// axes); an index reads better than zipped iterators here.
#![allow(clippy::needless_range_loop)]

use std::ops::Range;

use super::{ChunkFootprint, ChunkRef, GroupLevel, SampleSpace};
use crate::error::SamplerError;
use crate::hash::{EpochKey, reduce, stream};

/// The most dimensions an array of a [`CropSpace`] may have.
pub const MAX_DIMS: usize = 16;

/// The shape, chunk shape and optional shard shape of one array.
///
/// ```
/// use damacy_sampler::ArrayGeometry;
/// let a = ArrayGeometry::new(vec![512, 512, 512], vec![32, 64, 64])
///     .with_shard_shape(vec![256, 256, 512])
///     .with_element_size(2);
/// assert_eq!(a.chunk_bytes(), 32 * 64 * 64 * 2);
/// ```
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct ArrayGeometry {
    shape: Vec<u64>,
    chunk_shape: Vec<u64>,
    shard_shape: Option<Vec<u64>>,
    element_size: u64,
}

impl ArrayGeometry {
    /// An unsharded array of `shape` in chunks of `chunk_shape`, 1 byte per element.
    /// Checked when a [`CropSpace`] is built from it.
    #[must_use]
    pub fn new(shape: Vec<u64>, chunk_shape: Vec<u64>) -> Self {
        Self { shape, chunk_shape, shard_shape: None, element_size: 1 }
    }

    /// Shards of `shard_shape` (a whole number of chunks per dimension).
    /// Default: no sharding (a shard is a chunk).
    #[must_use]
    pub fn with_shard_shape(mut self, shard_shape: Vec<u64>) -> Self {
        self.shard_shape = Some(shard_shape);
        self
    }

    /// Bytes per element, for read amplification. Default 1.
    #[must_use]
    pub fn with_element_size(mut self, bytes: u64) -> Self {
        self.element_size = bytes;
        self
    }

    /// The array's shape.
    #[must_use]
    pub fn shape(&self) -> &[u64] {
        &self.shape
    }

    /// The chunk shape.
    #[must_use]
    pub fn chunk_shape(&self) -> &[u64] {
        &self.chunk_shape
    }

    /// The shard shape (the chunk shape when unsharded).
    #[must_use]
    pub fn shard_shape(&self) -> &[u64] {
        self.shard_shape.as_deref().unwrap_or(&self.chunk_shape)
    }

    /// Bytes per element.
    #[must_use]
    pub fn element_size(&self) -> u64 {
        self.element_size
    }

    /// Bytes of one decoded chunk (saturating).
    #[must_use]
    pub fn chunk_bytes(&self) -> u64 {
        self.chunk_shape.iter().fold(self.element_size, |acc, &c| acc.saturating_mul(c))
    }
}

/// How crop positions are chosen.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default)]
pub enum CropSampling {
    /// Every lattice point once per epoch: tiles of the array (with the default
    /// stride = crop shape) or overlapping windows (a smaller stride). The default.
    #[default]
    Grid,
    /// `count` crops per epoch at random lattice points (default stride 1).
    ///
    /// The draw is a systematic sample of the lattice with a random phase per
    /// epoch, then a uniform jitter inside the chunk: crop `id` lies in the
    /// chunk holding lattice point `⌊(id·M + φ)/count⌋` (M lattice points, φ
    /// drawn per epoch) at a uniform point of that chunk, drawn from the RNG
    /// keyed by `(seed, epoch, id)`. So each chunk gets its share of crops in
    /// proportion to its lattice points, chunks get contiguous id ranges (which
    /// chunk-granular plans need), and a crop depends only on `(seed, epoch,
    /// id)`: not on the world size, the worker count or the plan.
    Random {
        /// Crops per epoch.
        count: u64,
    },
}

/// Which starts count as valid for a crop.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default)]
pub enum CropPlacement {
    /// Anywhere the crop fits inside the array. The default. Crops may span
    /// chunk and shard boundaries.
    #[default]
    Anywhere,
    /// Only where the crop fits inside one chunk, so a chunk-granular plan
    /// reads each chunk on one rank only. Needs crop ≤ chunk.
    WithinChunk,
    /// Only where the crop fits inside one shard. Needs crop ≤ shard.
    WithinShard,
}

/// Options of a [`CropSpace`]: the crop shape, grid or random sampling, the
/// stride of the lattice and the placement rule.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct CropOptions {
    crop_shape: Vec<u64>,
    sampling: CropSampling,
    stride: Option<Vec<u64>>,
    placement: CropPlacement,
}

impl CropOptions {
    /// Grid crops of `crop_shape`; default stride = `crop_shape` (non-overlapping tiles).
    #[must_use]
    pub fn grid(crop_shape: Vec<u64>) -> Self {
        Self { crop_shape, sampling: CropSampling::Grid, stride: None, placement: CropPlacement::Anywhere }
    }

    /// `count` random crops of `crop_shape` per epoch; default stride 1.
    #[must_use]
    pub fn random(crop_shape: Vec<u64>, count: u64) -> Self {
        Self { crop_shape, sampling: CropSampling::Random { count }, stride: None, placement: CropPlacement::Anywhere }
    }

    /// The lattice stride, one value per dimension.
    #[must_use]
    pub fn with_stride(mut self, stride: Vec<u64>) -> Self {
        self.stride = Some(stride);
        self
    }

    /// The placement rule. Default [`CropPlacement::Anywhere`].
    #[must_use]
    pub fn with_placement(mut self, placement: CropPlacement) -> Self {
        self.placement = placement;
        self
    }

    /// The crop shape.
    #[must_use]
    pub fn crop_shape(&self) -> &[u64] {
        &self.crop_shape
    }

    /// Grid or random sampling.
    #[must_use]
    pub fn sampling(&self) -> CropSampling {
        self.sampling
    }

    /// The placement rule.
    #[must_use]
    pub fn placement(&self) -> CropPlacement {
        self.placement
    }
}

/// A region of one array: what the damacy `Pipeline` reads for a sample.
///
/// `start` and `shape` are in elements, one entry per dimension.
#[derive(Debug, Clone, PartialEq, Eq, Hash)]
pub struct Region {
    /// The array's index in the space (the Pipeline maps it to an array URI).
    pub array: usize,
    /// The region's start corner.
    pub start: Vec<u64>,
    /// The region's extent.
    pub shape: Vec<u64>,
}

/// One crop of a [`CropSpace`].
#[derive(Debug, Clone, PartialEq, Eq, Hash)]
pub struct CropSample {
    /// The global sample id.
    pub id: u64,
    /// The array the crop is taken from.
    pub array: usize,
    /// The crop's start corner.
    pub start: Vec<u64>,
    /// The crop's shape.
    pub shape: Vec<u64>,
}

impl CropSample {
    /// The crop as a [`Region`].
    #[must_use]
    pub fn region(&self) -> Region {
        Region { array: self.array, start: self.start.clone(), shape: self.shape.clone() }
    }
}

impl From<CropSample> for Region {
    fn from(s: CropSample) -> Self {
        Region { array: s.array, start: s.start, shape: s.shape }
    }
}

/// The lattice along one dimension of one array.
#[derive(Debug, Clone, PartialEq, Eq)]
struct Axis {
    stride: u64,
    /// First lattice coordinate of each non-empty chunk cell.
    cell_first: Vec<u64>,
    /// `cell_pos[i]..cell_pos[i + 1]`: the position indices of cell `i`.
    cell_pos: Vec<u64>,
    /// `run_cell[s]..run_cell[s + 1]`: the cells of shard run `s`.
    run_cell: Vec<u64>,
}

impl Axis {
    fn positions(&self) -> u64 {
        self.cell_pos.last().copied().unwrap_or(0)
    }

    fn cells(&self) -> u64 {
        self.cell_pos.len() as u64 - 1
    }

    fn runs(&self) -> u64 {
        self.run_cell.len() as u64 - 1
    }

    /// The cell holding position index `q`.
    fn cell_at(&self, q: u64) -> usize {
        self.cell_pos.partition_point(|&p| p <= q) - 1
    }

    /// The run holding cell `i`.
    fn run_of_cell(&self, i: u64) -> usize {
        self.run_cell.partition_point(|&c| c <= i) - 1
    }

    /// `(first position, positions)` of cell `i`.
    fn cell_box(&self, i: usize) -> (u64, u64) {
        (self.cell_pos[i], self.cell_pos[i + 1] - self.cell_pos[i])
    }

    /// `(first position, positions)` of run `s`.
    fn run_box(&self, s: usize) -> (u64, u64) {
        let a = self.cell_pos[self.run_cell[s] as usize];
        let b = self.cell_pos[self.run_cell[s + 1] as usize];
        (a, b - a)
    }

    /// `(first cell, cells)` of run `s`.
    fn run_cells(&self, s: usize) -> (u64, u64) {
        (self.run_cell[s], self.run_cell[s + 1] - self.run_cell[s])
    }

    /// The element coordinate of position index `q` in cell `i`.
    fn coord(&self, i: usize, q: u64) -> u64 {
        self.cell_first[i] + (q - self.cell_pos[i]) * self.stride
    }
}

type Dims = [u64; MAX_DIMS];

/// A box in a per-dimension index space: `lo[d]..lo[d] + len[d]`.
struct Boxed {
    nd: usize,
    lo: Dims,
    len: Dims,
}

impl Boxed {
    fn new(nd: usize, len: impl Fn(usize) -> u64) -> Self {
        let mut b = Self { nd, lo: [0; MAX_DIMS], len: [0; MAX_DIMS] };
        for d in 0..nd {
            b.len[d] = len(d);
        }
        b
    }

    fn inner(&self) -> Dims {
        let mut inner = [1u64; MAX_DIMS];
        for d in (0..self.nd.saturating_sub(1)).rev() {
            inner[d] = inner[d + 1] * self.len[d + 1];
        }
        inner
    }

    /// One level of the hierarchical C order: the box is tiled per dimension by
    /// units (`unit(d, index) -> (lo, len, unit id)`), ordered unit-major in C
    /// order. Moves `x` (a rank inside the box) to the unit holding it, leaves
    /// the rank inside that unit in `x` and the unit ids in `ids`.
    fn narrow(&mut self, x: &mut u64, ids: &mut [usize; MAX_DIMS], unit: impl Fn(usize, u64) -> (u64, u64, usize)) {
        let inner = self.inner();
        let mut outer = 1u64;
        for d in 0..self.nd {
            let per = outer * inner[d];
            let q = *x / per;
            let (ulo, ulen, id) = unit(d, self.lo[d] + q);
            *x -= (ulo - self.lo[d]) * per;
            self.lo[d] = ulo;
            self.len[d] = ulen;
            ids[d] = id;
            outer *= ulen;
        }
    }

    /// The inverse of [`narrow`](Self::narrow): moves to the unit `unit(d)` and
    /// returns the rank of that unit's first element inside the old box.
    fn enter(&mut self, unit: impl Fn(usize) -> (u64, u64)) -> u64 {
        let inner = self.inner();
        let mut outer = 1u64;
        let mut x = 0;
        for d in 0..self.nd {
            let per = outer * inner[d];
            let (ulo, ulen) = unit(d);
            x += (ulo - self.lo[d]) * per;
            self.lo[d] = ulo;
            self.len[d] = ulen;
            outer *= ulen;
        }
        x
    }

    /// Splits a rank in C order over the box.
    fn split(&self, mut x: u64, out: &mut Dims) {
        for d in (0..self.nd).rev() {
            out[d] = self.lo[d] + x % self.len[d];
            x /= self.len[d];
        }
    }

    /// The C-order rank of index `q` inside the box.
    fn rank_of(&self, q: &Dims) -> u64 {
        let mut x = 0;
        for d in 0..self.nd {
            x = x * self.len[d] + (q[d] - self.lo[d]);
        }
        x
    }

    fn volume(&self) -> u64 {
        self.len[..self.nd].iter().product()
    }
}

/// The lattice of one array.
#[derive(Debug, Clone, PartialEq, Eq)]
struct Lattice {
    axes: Vec<Axis>,
    positions: u64,
    cells: u64,
    runs: u64,
    /// Chunks per dimension (all chunks, empty ones too).
    chunk_grid: Vec<u64>,
    /// Shards per dimension.
    shard_grid: Vec<u64>,
    /// Chunks per shard per dimension.
    chunks_per_shard: Vec<u64>,
}

impl Lattice {
    fn nd(&self) -> usize {
        self.axes.len()
    }

    /// Position indices and cell ids of lattice point `x` (shard-major order).
    fn decode(&self, mut x: u64, q: &mut Dims, cells: &mut [usize; MAX_DIMS]) {
        let mut b = Boxed::new(self.nd(), |d| self.axes[d].positions());
        let mut ids = [0usize; MAX_DIMS];
        b.narrow(&mut x, &mut ids, |d, p| {
            let axis = &self.axes[d];
            let s = axis.run_of_cell(axis.cell_at(p) as u64);
            let (lo, len) = axis.run_box(s);
            (lo, len, s)
        });
        b.narrow(&mut x, cells, |d, p| {
            let i = self.axes[d].cell_at(p);
            let (lo, len) = self.axes[d].cell_box(i);
            (lo, len, i)
        });
        b.split(x, q);
    }

    /// The lattice id of the point with position indices `q`.
    fn encode(&self, q: &Dims) -> u64 {
        let mut b = Boxed::new(self.nd(), |d| self.axes[d].positions());
        let mut x = b.enter(|d| {
            let axis = &self.axes[d];
            axis.run_box(axis.run_of_cell(axis.cell_at(q[d]) as u64))
        });
        x += b.enter(|d| self.axes[d].cell_box(self.axes[d].cell_at(q[d])));
        x + b.rank_of(q)
    }

    /// The cell ids of chunk group `g` (shard-major order of cells).
    fn chunk_group_cells(&self, mut g: u64, cells: &mut Dims) {
        let mut b = Boxed::new(self.nd(), |d| self.axes[d].cells());
        let mut ids = [0usize; MAX_DIMS];
        b.narrow(&mut g, &mut ids, |d, c| {
            let s = self.axes[d].run_of_cell(c);
            let (lo, len) = self.axes[d].run_cells(s);
            (lo, len, s)
        });
        b.split(g, cells);
    }

    /// Lattice-id range of chunk group `g` (local to the array).
    fn chunk_group_range(&self, g: u64) -> Range<u64> {
        let mut cells = [0u64; MAX_DIMS];
        self.chunk_group_cells(g, &mut cells);
        let mut q = [0u64; MAX_DIMS];
        let mut size = 1u64;
        for d in 0..self.nd() {
            let (lo, len) = self.axes[d].cell_box(cells[d] as usize);
            q[d] = lo;
            size *= len;
        }
        let start = self.encode(&q);
        start..start + size
    }

    /// Lattice-id range of shard group `g` (local to the array).
    fn shard_group_range(&self, g: u64) -> Range<u64> {
        let b = Boxed::new(self.nd(), |d| self.axes[d].runs());
        let mut runs = [0u64; MAX_DIMS];
        b.split(g, &mut runs);
        let mut q = [0u64; MAX_DIMS];
        let mut size = 1u64;
        for d in 0..self.nd() {
            let (lo, len) = self.axes[d].run_box(runs[d] as usize);
            q[d] = lo;
            size *= len;
        }
        let start = self.encode(&q);
        start..start + size
    }
}

/// Crop positions in one or more N-D arrays: tiles on a grid, or random crops.
///
/// Built once from the arrays' geometry and [`CropOptions`], checked then.
/// A sample resolves to a [`CropSample`] (array, start, shape), which converts
/// into the [`Region`] the damacy Pipeline reads.
///
/// ```
/// use damacy_sampler::{ArrayGeometry, CropOptions, CropSpace, SampleSpace, GroupLevel, EpochKey};
/// let arrays = vec![ArrayGeometry::new(vec![64, 64], vec![32, 32])];
/// let space = CropSpace::new(arrays, CropOptions::grid(vec![16, 16]))?;
/// assert_eq!(space.len(), 16);                         // 4 × 4 tiles
/// assert_eq!(space.group_count(GroupLevel::Chunk), 4); // 4 tiles per chunk
/// let key = EpochKey::new(0, 0);
/// // Ids are chunk-major: the first chunk's four tiles come first.
/// let starts: Vec<_> = (0..4).map(|i| space.resolve(i, key).start).collect();
/// assert_eq!(starts, vec![vec![0, 0], vec![0, 16], vec![16, 0], vec![16, 16]]);
/// # Ok::<(), damacy_sampler::SamplerError>(())
/// ```
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct CropSpace {
    arrays: Vec<ArrayGeometry>,
    options: CropOptions,
    stride: Vec<u64>,
    lattices: Vec<Lattice>,
    /// `lattice_offsets[a]`: global lattice id of array `a`'s first point.
    lattice_offsets: Vec<u64>,
    chunk_offsets: Vec<u64>,
    shard_offsets: Vec<u64>,
    len: u64,
}

fn loc(array: usize, dim: usize) -> String {
    format!(" (array {array}, dim {dim})")
}

fn check_nd(array: usize, what: &'static str, expected: usize, got: usize) -> Result<(), SamplerError> {
    if expected == got { Ok(()) } else { Err(SamplerError::DimensionMismatch { array, what, expected, got }) }
}

fn build_axis(shape: u64, chunk: u64, per_shard: u64, crop: u64, stride: u64, placement: CropPlacement) -> Axis {
    let mut axis = Axis { stride, cell_first: vec![], cell_pos: vec![0], run_cell: vec![0] };
    let mut last_shard = None;
    for i in 0..shape.div_ceil(chunk) {
        let lo = i * chunk;
        let hi = (lo + chunk).min(shape);
        let limit = match placement {
            CropPlacement::Anywhere => shape,
            CropPlacement::WithinChunk => hi,
            CropPlacement::WithinShard => ((i / per_shard + 1) * per_shard * chunk).min(shape),
        };
        let Some(max_start) = limit.checked_sub(crop) else {
            continue;
        };
        let last = (hi - 1).min(max_start);
        let first = lo.div_ceil(stride) * stride;
        if first > last {
            continue;
        }
        let count = (last - first) / stride + 1;
        let shard = i / per_shard;
        if last_shard.is_some_and(|s| s != shard) {
            axis.run_cell.push(axis.cell_first.len() as u64);
        }
        last_shard = Some(shard);
        axis.cell_first.push(first);
        let end = axis.cell_pos.last().copied().unwrap_or(0) + count;
        axis.cell_pos.push(end);
    }
    if !axis.cell_first.is_empty() {
        axis.run_cell.push(axis.cell_first.len() as u64);
    }
    axis
}

impl CropSpace {
    /// Builds the space and checks everything: matching dimensions, non-zero
    /// extents, shards made of whole chunks, crops that fit the placement rule,
    /// and at least one valid crop position.
    pub fn new(arrays: Vec<ArrayGeometry>, options: CropOptions) -> Result<Self, SamplerError> {
        if arrays.is_empty() {
            return Err(SamplerError::EmptySpace { what: "arrays" });
        }
        let nd = options.crop_shape.len();
        if nd > MAX_DIMS {
            return Err(SamplerError::TooManyDimensions { array: 0, ndim: nd, max: MAX_DIMS });
        }
        if nd == 0 {
            return Err(SamplerError::ZeroSize { what: "crop dimensionality", location: String::new() });
        }
        let stride = match (&options.stride, options.sampling) {
            (Some(s), _) => s.clone(),
            (None, CropSampling::Grid) => options.crop_shape.clone(),
            (None, CropSampling::Random { .. }) => vec![1; nd],
        };
        if stride.len() != nd {
            return Err(SamplerError::DimensionMismatch { array: 0, what: "stride", expected: nd, got: stride.len() });
        }
        for d in 0..nd {
            if options.crop_shape[d] == 0 {
                return Err(SamplerError::ZeroSize { what: "crop extent", location: format!(" (dim {d})") });
            }
            if stride[d] == 0 {
                return Err(SamplerError::ZeroSize { what: "stride", location: format!(" (dim {d})") });
            }
        }
        if let CropSampling::Random { count: 0 } = options.sampling {
            return Err(SamplerError::ZeroSize { what: "random crop count", location: String::new() });
        }
        let mut lattices = Vec::with_capacity(arrays.len());
        let mut lattice_offsets = vec![0u64];
        let mut chunk_offsets = vec![0u64];
        let mut shard_offsets = vec![0u64];
        for (a, g) in arrays.iter().enumerate() {
            let lattice = Self::build_lattice(a, g, &options, &stride)?;
            let push = |v: &mut Vec<u64>, n: u64, what| -> Result<(), SamplerError> {
                let last = v.last().copied().unwrap_or(0);
                v.push(last.checked_add(n).ok_or(SamplerError::Overflow { what })?);
                Ok(())
            };
            push(&mut lattice_offsets, lattice.positions, "crop positions")?;
            push(&mut chunk_offsets, lattice.cells, "chunk groups")?;
            push(&mut shard_offsets, lattice.runs, "shard groups")?;
            lattices.push(lattice);
        }
        let total = lattice_offsets.last().copied().unwrap_or(0);
        if total == 0 {
            return Err(SamplerError::EmptySpace { what: "crop positions" });
        }
        let len = match options.sampling {
            CropSampling::Grid => total,
            CropSampling::Random { count } => count,
        };
        Ok(Self { arrays, options, stride, lattices, lattice_offsets, chunk_offsets, shard_offsets, len })
    }

    fn build_lattice(
        array: usize,
        geometry: &ArrayGeometry,
        options: &CropOptions,
        stride: &[u64],
    ) -> Result<Lattice, SamplerError> {
        let nd = options.crop_shape.len();
        check_nd(array, "shape", geometry.shape.len(), nd).map_err(|_| SamplerError::DimensionMismatch {
            array,
            what: "crop shape",
            expected: geometry.shape.len(),
            got: nd,
        })?;
        check_nd(array, "chunk shape", nd, geometry.chunk_shape.len())?;
        let shard = geometry.shard_shape().to_vec();
        check_nd(array, "shard shape", nd, shard.len())?;
        if geometry.element_size == 0 {
            return Err(SamplerError::ZeroSize { what: "element size", location: format!(" (array {array})") });
        }
        let mut axes = Vec::with_capacity(nd);
        let mut chunk_grid = Vec::with_capacity(nd);
        let mut shard_grid = Vec::with_capacity(nd);
        let mut chunks_per_shard = Vec::with_capacity(nd);
        let (mut positions, mut cells, mut runs) = (1u64, 1u64, 1u64);
        let (mut chunk_total, mut shard_total) = (1u64, 1u64);
        let overflow = |what| SamplerError::Overflow { what };
        for d in 0..nd {
            let (c, s, w) = (geometry.chunk_shape[d], shard[d], options.crop_shape[d]);
            if c == 0 {
                return Err(SamplerError::ZeroSize { what: "chunk extent", location: loc(array, d) });
            }
            if s == 0 || s % c != 0 {
                return Err(SamplerError::ShardNotMultipleOfChunk { array, dim: d, shard: s, chunk: c });
            }
            let (level, extent) = match options.placement {
                CropPlacement::Anywhere => ("", u64::MAX),
                CropPlacement::WithinChunk => ("chunk", c),
                CropPlacement::WithinShard => ("shard", s),
            };
            if w > extent {
                return Err(SamplerError::CropLargerThanCell { array, dim: d, crop: w, level, extent });
            }
            let built = build_axis(geometry.shape[d], c, s / c, w, stride[d], options.placement);
            positions = positions.checked_mul(built.positions()).ok_or(overflow("crop positions"))?;
            cells = cells.checked_mul(built.cells()).ok_or(overflow("chunk groups"))?;
            runs = runs.checked_mul(built.runs()).ok_or(overflow("shard groups"))?;
            let n_chunks = geometry.shape[d].div_ceil(c);
            chunk_total = chunk_total.checked_mul(n_chunks).ok_or(overflow("chunks"))?;
            shard_total = shard_total.checked_mul(n_chunks.div_ceil(s / c)).ok_or(overflow("shards"))?;
            chunk_grid.push(n_chunks);
            shard_grid.push(n_chunks.div_ceil(s / c));
            chunks_per_shard.push(s / c);
            axes.push(built);
        }
        if positions == 0 {
            // Some dimension has no valid start: the array contributes nothing.
            cells = 0;
            runs = 0;
        }
        Ok(Lattice { axes, positions, cells, runs, chunk_grid, shard_grid, chunks_per_shard })
    }

    /// The arrays.
    #[must_use]
    pub fn arrays(&self) -> &[ArrayGeometry] {
        &self.arrays
    }

    /// The options the space was built with.
    #[must_use]
    pub fn options(&self) -> &CropOptions {
        &self.options
    }

    /// The crop shape.
    #[must_use]
    pub fn crop_shape(&self) -> &[u64] {
        &self.options.crop_shape
    }

    /// The lattice stride in use (the default filled in).
    #[must_use]
    pub fn stride(&self) -> &[u64] {
        &self.stride
    }

    /// The number of valid crop starts (lattice points) over all arrays. For
    /// grid sampling this is the number of samples.
    #[must_use]
    pub fn lattice_len(&self) -> u64 {
        self.lattice_offsets.last().copied().unwrap_or(0)
    }

    fn array_of(offsets: &[u64], x: u64) -> usize {
        if offsets.len() == 2 {
            0
        } else {
            offsets.partition_point(|&o| o <= x).saturating_sub(1).min(offsets.len() - 2)
        }
    }

    /// The crop at global lattice point `u`, or (for random sampling) a uniform
    /// point of the chunk holding `u`.
    fn crop_at(&self, id: u64, point: u64, jitter: Option<EpochKey>) -> CropSample {
        let array = Self::array_of(&self.lattice_offsets, point);
        let lattice = &self.lattices[array];
        let nd = lattice.nd();
        let mut q = [0u64; MAX_DIMS];
        let mut cells = [0usize; MAX_DIMS];
        lattice.decode(point - self.lattice_offsets[array], &mut q, &mut cells);
        if let Some(key) = jitter {
            let mut b = Boxed::new(nd, |_| 0);
            for d in 0..nd {
                let (lo, len) = lattice.axes[d].cell_box(cells[d]);
                b.lo[d] = lo;
                b.len[d] = len;
            }
            let r = key.sample_rng(id).below(b.volume());
            b.split(r, &mut q);
        }
        let start = (0..nd).map(|d| lattice.axes[d].coord(cells[d], q[d])).collect();
        CropSample { id, array, start, shape: self.options.crop_shape.clone() }
    }

    /// For random sampling: the epoch's phase φ in `0..M`.
    fn phase(&self, key: EpochKey) -> u64 {
        reduce(key.stream(stream::CROP_PHASE), self.lattice_len())
    }

    /// The chunk flat index and shard flat index of chunk coordinates `c`.
    fn flat_chunk(lattice: &Lattice, c: &Dims) -> (u64, u64) {
        let (mut chunk, mut shard) = (0u64, 0u64);
        for d in 0..lattice.nd() {
            chunk = chunk * lattice.chunk_grid[d] + c[d];
            shard = shard * lattice.shard_grid[d] + c[d] / lattice.chunks_per_shard[d];
        }
        (chunk, shard)
    }
}

impl SampleSpace for CropSpace {
    type Sample = CropSample;

    fn len(&self) -> u64 {
        self.len
    }

    fn group_count(&self, level: GroupLevel) -> u64 {
        match level {
            GroupLevel::Chunk => self.chunk_offsets.last().copied().unwrap_or(0),
            GroupLevel::Shard => self.shard_offsets.last().copied().unwrap_or(0),
        }
    }

    fn group_range(&self, level: GroupLevel, group: u64, key: EpochKey) -> Range<u64> {
        let offsets = match level {
            GroupLevel::Chunk => &self.chunk_offsets,
            GroupLevel::Shard => &self.shard_offsets,
        };
        let a = Self::array_of(offsets, group);
        let local = group - offsets[a];
        let lattice = &self.lattices[a];
        let r = match level {
            GroupLevel::Chunk => lattice.chunk_group_range(local),
            GroupLevel::Shard => lattice.shard_group_range(local),
        };
        let base = self.lattice_offsets[a];
        let (lo, hi) = (base + r.start, base + r.end);
        match self.options.sampling {
            CropSampling::Grid => lo..hi,
            CropSampling::Random { count } => {
                // Crop j lies in lattice cell ⌊(j·M + φ)/count⌋; invert for the bounds.
                let m = u128::from(self.lattice_len());
                let phi = u128::from(self.phase(key));
                let first = |x: u64| -> u64 {
                    let num = u128::from(x) * u128::from(count);
                    if num <= phi { 0 } else { (num - phi).div_ceil(m) as u64 }
                };
                first(lo)..first(hi)
            }
        }
    }

    fn resolve(&self, id: u64, key: EpochKey) -> CropSample {
        match self.options.sampling {
            CropSampling::Grid => self.crop_at(id, id, None),
            CropSampling::Random { count } => {
                let m = u128::from(self.lattice_len());
                let u = (u128::from(id) * m + u128::from(self.phase(key))) / u128::from(count);
                self.crop_at(id, u as u64, Some(key))
            }
        }
    }
}

impl ChunkFootprint for CropSpace {
    fn sample_bytes(&self, id: u64, key: EpochKey) -> u64 {
        let a = self.resolve(id, key).array;
        self.options.crop_shape.iter().fold(self.arrays[a].element_size, |acc, &w| acc.saturating_mul(w))
    }

    fn visit_chunks(&self, id: u64, key: EpochKey, visit: &mut dyn FnMut(ChunkRef)) {
        let s = self.resolve(id, key);
        let g = &self.arrays[s.array];
        let lattice = &self.lattices[s.array];
        let nd = lattice.nd();
        let mut b = Boxed::new(nd, |_| 0);
        for d in 0..nd {
            let c = g.chunk_shape[d];
            let first = s.start[d] / c;
            let last = (s.start[d] + s.shape[d] - 1) / c;
            b.lo[d] = first;
            b.len[d] = last - first + 1;
        }
        let bytes = g.chunk_bytes();
        let mut c = [0u64; MAX_DIMS];
        for r in 0..b.volume() {
            b.split(r, &mut c);
            let (chunk, shard) = Self::flat_chunk(lattice, &c);
            visit(ChunkRef { array: s.array, chunk, shard, bytes });
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use std::collections::HashSet;

    fn key() -> EpochKey {
        EpochKey::new(3, 1)
    }

    fn check_partition(space: &CropSpace) {
        for level in [GroupLevel::Chunk, GroupLevel::Shard] {
            let mut next = 0;
            for g in 0..space.group_count(level) {
                let r = space.group_range(level, g, key());
                assert_eq!(r.start, next, "{level:?} group {g}");
                next = r.end;
            }
            assert_eq!(next, space.len(), "{level:?}");
        }
    }

    /// Brute force: every lattice point, by coordinates.
    fn all_starts(space: &CropSpace) -> HashSet<(usize, Vec<u64>)> {
        let mut out = HashSet::new();
        for (a, g) in space.arrays().iter().enumerate() {
            let nd = g.shape().len();
            let mut ranges = vec![];
            for d in 0..nd {
                let w = space.crop_shape()[d];
                let s = space.stride()[d];
                let mut v = vec![];
                let mut p = 0;
                while p + w <= g.shape()[d] {
                    let ok = match space.options().placement() {
                        CropPlacement::Anywhere => true,
                        CropPlacement::WithinChunk => p / g.chunk_shape()[d] == (p + w - 1) / g.chunk_shape()[d],
                        CropPlacement::WithinShard => p / g.shard_shape()[d] == (p + w - 1) / g.shard_shape()[d],
                    };
                    if ok {
                        v.push(p);
                    }
                    p += s;
                }
                ranges.push(v);
            }
            let total: usize = ranges.iter().map(Vec::len).product();
            for mut r in 0..total {
                let mut start = vec![0; nd];
                for d in (0..nd).rev() {
                    start[d] = ranges[d][r % ranges[d].len()];
                    r /= ranges[d].len();
                }
                out.insert((a, start));
            }
        }
        out
    }

    fn geometry() -> Vec<ArrayGeometry> {
        vec![
            ArrayGeometry::new(vec![40, 30, 20], vec![8, 10, 6]).with_shard_shape(vec![16, 20, 12]),
            ArrayGeometry::new(vec![9, 50, 7], vec![4, 16, 7]),
        ]
    }

    #[test]
    fn grid_enumerates_every_lattice_point_once() {
        for placement in [CropPlacement::Anywhere, CropPlacement::WithinChunk, CropPlacement::WithinShard] {
            for stride in [vec![1, 3, 2], vec![4, 4, 4], vec![3, 7, 5]] {
                let space = CropSpace::new(
                    geometry(),
                    CropOptions::grid(vec![3, 4, 5]).with_stride(stride.clone()).with_placement(placement),
                )
                .unwrap();
                let expect = all_starts(&space);
                let got: Vec<_> = (0..space.len())
                    .map(|i| {
                        let s = space.resolve(i, key());
                        (s.array, s.start)
                    })
                    .collect();
                let set: HashSet<_> = got.iter().cloned().collect();
                assert_eq!(set.len(), got.len(), "{placement:?} {stride:?}: duplicates");
                assert_eq!(set, expect, "{placement:?} {stride:?}");
                check_partition(&space);
                // Encode inverts decode.
                for (a, lattice) in space.lattices.iter().enumerate() {
                    for x in 0..lattice.positions {
                        let mut q = [0; MAX_DIMS];
                        let mut c = [0; MAX_DIMS];
                        lattice.decode(x, &mut q, &mut c);
                        assert_eq!(lattice.encode(&q), x, "array {a}");
                    }
                }
            }
        }
    }

    #[test]
    fn groups_hold_the_crops_of_one_chunk_and_shard() {
        let space = CropSpace::new(geometry(), CropOptions::grid(vec![2, 3, 2]).with_stride(vec![3, 4, 3])).unwrap();
        for (level, shape_of) in [
            (GroupLevel::Chunk, ArrayGeometry::chunk_shape as fn(&ArrayGeometry) -> &[u64]),
            (GroupLevel::Shard, ArrayGeometry::shard_shape),
        ] {
            let mut seen = HashSet::new();
            for g in 0..space.group_count(level) {
                let r = space.group_range(level, g, key());
                assert!(!r.is_empty());
                let cell = |i| {
                    let s = space.resolve(i, key());
                    let cs = shape_of(&space.arrays()[s.array]);
                    let c: Vec<u64> = s.start.iter().zip(cs).map(|(p, c)| p / c).collect();
                    (s.array, c)
                };
                let first = cell(r.start);
                for i in r.clone() {
                    assert_eq!(cell(i), first, "{level:?} group {g}");
                }
                assert!(seen.insert(first), "{level:?}: a cell split over two groups");
            }
        }
    }

    #[test]
    fn random_crops_are_valid_stable_and_in_their_group() {
        let space = CropSpace::new(geometry(), CropOptions::random(vec![5, 6, 4], 500)).unwrap();
        check_partition(&space);
        assert_eq!(space.len(), 500);
        let valid = all_starts(
            &CropSpace::new(geometry(), CropOptions::grid(vec![5, 6, 4]).with_stride(vec![1, 1, 1])).unwrap(),
        );
        for g in 0..space.group_count(GroupLevel::Chunk) {
            let r = space.group_range(GroupLevel::Chunk, g, key());
            for i in r {
                let s = space.resolve(i, key());
                assert!(valid.contains(&(s.array, s.start.clone())), "{s:?}");
                assert_eq!(s, space.resolve(i, key()));
                let cs = space.arrays()[s.array].chunk_shape();
                let first = space.resolve(space.group_range(GroupLevel::Chunk, g, key()).start, key());
                let c = |v: &CropSample| -> Vec<u64> { v.start.iter().zip(cs).map(|(p, c)| p / c).collect() };
                assert_eq!((s.array, c(&s)), (first.array, c(&first)));
            }
        }
        // Another epoch gives other crops.
        let other = EpochKey::new(3, 2);
        let differ = (0..500).filter(|&i| space.resolve(i, key()) != space.resolve(i, other)).count();
        assert!(differ > 450, "{differ}");
    }

    #[test]
    fn random_crops_with_fewer_crops_than_chunks_move_between_epochs() {
        let arrays = vec![ArrayGeometry::new(vec![1000], vec![10])];
        let space = CropSpace::new(arrays, CropOptions::random(vec![5], 7)).unwrap();
        let chunks = |e| -> Vec<u64> { (0..7).map(|i| space.resolve(i, EpochKey::new(0, e)).start[0] / 10).collect() };
        assert_ne!(chunks(0), chunks(1));
        check_partition(&space);
    }

    #[test]
    fn footprint_counts_spanned_chunks() {
        let arrays =
            vec![ArrayGeometry::new(vec![64, 64], vec![16, 16]).with_shard_shape(vec![32, 32]).with_element_size(4)];
        let space = CropSpace::new(arrays, CropOptions::grid(vec![20, 8]).with_stride(vec![4, 4])).unwrap();
        let id = (0..space.len()).find(|&i| space.resolve(i, key()).start == vec![12, 28]).unwrap();
        let mut got = vec![];
        space.visit_chunks(id, key(), &mut |c| got.push((c.chunk, c.shard, c.bytes)));
        // rows 12..32 -> chunk rows 0,1; cols 28..36 -> chunk cols 1,2.
        assert_eq!(got, vec![(1, 0, 1024), (2, 1, 1024), (5, 0, 1024), (6, 1, 1024)]);
        assert_eq!(space.sample_bytes(id, key()), 20 * 8 * 4);
    }

    #[test]
    fn errors_name_the_problem() {
        let e =
            CropSpace::new(vec![ArrayGeometry::new(vec![10, 10], vec![5])], CropOptions::grid(vec![2, 2])).unwrap_err();
        assert!(e.to_string().contains("chunk shape has 1 dimensions but array 0 has 2"), "{e}");
        let e = CropSpace::new(
            vec![ArrayGeometry::new(vec![10], vec![4]).with_shard_shape(vec![6])],
            CropOptions::grid(vec![2]),
        )
        .unwrap_err();
        assert!(matches!(e, SamplerError::ShardNotMultipleOfChunk { shard: 6, chunk: 4, .. }), "{e}");
        let e = CropSpace::new(
            vec![ArrayGeometry::new(vec![10], vec![4])],
            CropOptions::grid(vec![5]).with_placement(CropPlacement::WithinChunk),
        )
        .unwrap_err();
        assert!(e.to_string().contains("larger than the chunk extent 4"), "{e}");
        let e = CropSpace::new(vec![ArrayGeometry::new(vec![3], vec![4])], CropOptions::grid(vec![5])).unwrap_err();
        assert!(matches!(e, SamplerError::EmptySpace { .. }), "{e}");
        let e =
            CropSpace::new(vec![ArrayGeometry::new(vec![3], vec![4])], CropOptions::random(vec![1], 0)).unwrap_err();
        assert!(e.to_string().contains("random crop count is 0"), "{e}");
    }

    #[test]
    fn arrays_where_the_crop_does_not_fit_are_skipped() {
        let arrays = vec![ArrayGeometry::new(vec![3], vec![4]), ArrayGeometry::new(vec![20], vec![4])];
        let space = CropSpace::new(arrays, CropOptions::grid(vec![5])).unwrap();
        assert_eq!(space.len(), 4);
        assert!((0..4).all(|i| space.resolve(i, key()).array == 1));
        check_partition(&space);
    }
}
