//! Assemble: copy regions of decoded chunks into the batch tensor on the device — crop, fill
//! value, byte order, transpose (any axis permutation, as strides) and dtype cast in one kernel.

use crate::consts as c;
use crate::device::{Device, DeviceBuffer, Event, PinnedBuffer, Stream};
use crate::dtype::Dtype;
use crate::error::{Error, Result, StreamStatus};
use crate::kernel::Kernel;
use crate::launch::{AssembleArgs, KernelArgs};
use crate::wire::{AssembleJobDesc, MAX_RANK};

/// The assemble kernel's code of an element type (`DMC_DTYPE_*` in `kernels/common.cuh`).
fn code(d: Dtype) -> u32 {
    match d {
        Dtype::Bool => c::DMC_DTYPE_BOOL,
        Dtype::U8 => c::DMC_DTYPE_U8,
        Dtype::I8 => c::DMC_DTYPE_I8,
        Dtype::U16 => c::DMC_DTYPE_U16,
        Dtype::I16 => c::DMC_DTYPE_I16,
        Dtype::U32 => c::DMC_DTYPE_U32,
        Dtype::I32 => c::DMC_DTYPE_I32,
        Dtype::U64 => c::DMC_DTYPE_U64,
        Dtype::I64 => c::DMC_DTYPE_I64,
        Dtype::F16 => c::DMC_DTYPE_F16,
        Dtype::BF16 => c::DMC_DTYPE_BF16,
        Dtype::F32 => c::DMC_DTYPE_F32,
        Dtype::F64 => c::DMC_DTYPE_F64,
    }
}

/// One region to copy (or fill) into the batch buffer.
///
/// Element `(i_0, …, i_{r-1})` of the region (C order over `shape`) is read at byte
/// `src_offset + Σ i_k·src_strides[k]·src_dtype.size()` and written at byte
/// `dst_offset + Σ i_k·dst_strides[k]·dst_dtype.size()`. Strides are in elements and may be
/// any permutation (a zarr `transpose` codec is a stride choice, see [`AssembleJob::chunk_region`]).
#[derive(Clone, Debug, PartialEq)]
pub struct AssembleJob {
    /// Byte offset of the region's origin in the source (decoded chunk) buffer.
    pub src_offset: usize,
    /// Byte offset of the region's origin in the destination (batch) buffer.
    pub dst_offset: usize,
    /// Region extent per dimension (at most 8 dimensions).
    pub shape: Vec<u64>,
    /// Source strides in elements.
    pub src_strides: Vec<i64>,
    /// Destination strides in elements.
    pub dst_strides: Vec<i64>,
    /// Stored element type.
    pub src_dtype: Dtype,
    /// Output element type.
    pub dst_dtype: Dtype,
    /// Whether stored elements are big-endian.
    pub big_endian: bool,
    /// `Some(bits)`: ignore the source and write this value (little-endian bits of the value in
    /// `dst_dtype`) to every element — the fill value of missing chunks.
    pub fill_bits: Option<u64>,
}

fn c_strides(shape: &[u64]) -> Vec<i64> {
    let mut s = vec![0i64; shape.len()];
    let mut acc: i64 = 1;
    for k in (0..shape.len()).rev() {
        s[k] = acc;
        acc = acc.saturating_mul(shape[k] as i64);
    }
    s
}

impl AssembleJob {
    /// The job that copies `region_shape` elements starting at `region_start` of a decoded
    /// chunk (logical shape `chunk_shape`, stored at byte `chunk_offset` of the source) to
    /// `out_start` of an output tensor of shape `out_shape` stored C-order at byte `out_offset`.
    /// `transpose_order` is the zarr `transpose` codec's `order` when the chunk was stored
    /// transposed (stored axis k is logical axis `order[k]`).
    #[allow(clippy::too_many_arguments)]
    pub fn chunk_region(
        chunk_offset: usize,
        chunk_shape: &[u64],
        transpose_order: Option<&[usize]>,
        region_start: &[u64],
        region_shape: &[u64],
        out_offset: usize,
        out_shape: &[u64],
        out_start: &[u64],
        src_dtype: Dtype,
        dst_dtype: Dtype,
        big_endian: bool,
    ) -> Result<Self> {
        let r = chunk_shape.len();
        if [region_start.len(), region_shape.len(), out_shape.len(), out_start.len()].iter().any(|&l| l != r) {
            return Err(Error::InvalidArgument("chunk_region: all shapes and starts need the same rank".into()));
        }
        let logical_strides = match transpose_order {
            None => c_strides(chunk_shape),
            Some(order) => {
                if order.len() != r || !(0..r).all(|a| order.contains(&a)) {
                    return Err(Error::InvalidArgument(format!(
                        "transpose order {order:?} is not a permutation of 0..{r}"
                    )));
                }
                let stored_shape: Vec<u64> = order.iter().map(|&a| chunk_shape[a]).collect();
                let ss = c_strides(&stored_shape);
                let mut ls = vec![0i64; r];
                for (k, &a) in order.iter().enumerate() {
                    ls[a] = ss[k];
                }
                ls
            }
        };
        let os = c_strides(out_shape);
        let src_origin: i64 = region_start.iter().zip(&logical_strides).map(|(&i, &s)| i as i64 * s).sum();
        let dst_origin: i64 = out_start.iter().zip(&os).map(|(&i, &s)| i as i64 * s).sum();
        Ok(Self {
            src_offset: chunk_offset + src_origin as usize * src_dtype.size(),
            dst_offset: out_offset + dst_origin as usize * dst_dtype.size(),
            shape: region_shape.to_vec(),
            src_strides: logical_strides,
            dst_strides: os,
            src_dtype,
            dst_dtype,
            big_endian,
            fill_bits: None,
        })
    }

    fn n_elems(&self) -> u64 {
        self.shape.iter().product()
    }

    /// The lowest and one-past-highest byte touched, relative to the buffer start.
    fn span(offset: usize, shape: &[u64], strides: &[i64], size: usize) -> Option<(i128, i128)> {
        let mut lo: i128 = offset as i128;
        let mut hi: i128 = offset as i128;
        for (&n, &s) in shape.iter().zip(strides) {
            if n == 0 {
                return None;
            }
            let d = i128::from(n - 1) * i128::from(s) * size as i128;
            if d < 0 { lo += d } else { hi += d }
        }
        Some((lo, hi + size as i128))
    }

    fn validate(&self, src_len: usize, dst_len: usize) -> Result<()> {
        let r = self.shape.len();
        if r == 0 || r > c::DMC_ASSEMBLE_MAX_RANK as usize || self.src_strides.len() != r || self.dst_strides.len() != r
        {
            return Err(Error::InvalidArgument(format!(
                "assemble job of rank {r}: needs 1..=8 dims and matching strides"
            )));
        }
        if self.n_elems() > u64::from(u32::MAX) {
            return Err(Error::InvalidArgument(format!(
                "assemble job of {} elements: split regions above 2^32 elements",
                self.n_elems()
            )));
        }
        if let Some((lo, hi)) = Self::span(self.dst_offset, &self.shape, &self.dst_strides, self.dst_dtype.size())
            && (lo < 0 || hi > dst_len as i128)
        {
            return Err(Error::InvalidArgument(format!(
                "assemble job writes bytes {lo}..{hi} outside the {dst_len}-byte output"
            )));
        }
        if self.fill_bits.is_none()
            && let Some((lo, hi)) = Self::span(self.src_offset, &self.shape, &self.src_strides, self.src_dtype.size())
            && (lo < 0 || hi > src_len as i128)
        {
            return Err(Error::InvalidArgument(format!(
                "assemble job reads bytes {lo}..{hi} outside the {src_len}-byte source"
            )));
        }
        Ok(())
    }

    /// The job's axes as (extent, source stride, destination stride), fewest first: axes of
    /// extent 1 dropped and neighbours merged where both strides (the destination's only, for
    /// a fill) continue from the inner axis to the outer. The same elements in the same C order,
    /// with the longest contiguous innermost runs. Empty regions keep their axes.
    fn merged_axes(&self) -> Vec<(u64, i64, i64)> {
        let axes = self.shape.iter().zip(&self.src_strides).zip(&self.dst_strides).map(|((&n, &s), &d)| (n, s, d));
        if self.n_elems() == 0 {
            return axes.collect();
        }
        let fill = self.fill_bits.is_some();
        let mut out: Vec<(u64, i64, i64)> = Vec::with_capacity(self.shape.len());
        for (n, s, d) in axes.filter(|a| a.0 != 1) {
            match out.last_mut() {
                Some(last)
                    if i128::from(last.2) == i128::from(n) * i128::from(d)
                        && (fill || i128::from(last.1) == i128::from(n) * i128::from(s)) =>
                {
                    *last = (last.0 * n, s, d);
                }
                _ => out.push((n, s, d)),
            }
        }
        if out.is_empty() {
            out.push((1, 1, 1));
        }
        out
    }

    /// The kernel's work items for this job on its wide path: 16-byte destination words of its
    /// rows (`Some`), or `None` for the element path (one element each). The wide path takes
    /// jobs without a cast or a byte swap (of elements wider than a byte) whose merged innermost
    /// axis is contiguous in the destination (and the source, unless a fill) and at least
    /// [`WIDE_MIN_ROW_BYTES`] long; the kernel checks this again (and that a fill's elements are
    /// aligned in the destination), taking the element path where it does not hold. The count
    /// is the most a row's words can be at any offset, which sizes the grid; the kernel counts
    /// them exactly when its rows start at the same offset in a word (`dmc_asm_rows_in_step`),
    /// one fewer a row where that offset allows.
    fn wide_items(&self, axes: &[(u64, i64, i64)]) -> Option<u64> {
        let &(len, s, d) = axes.last()?;
        let row_bytes = len.checked_mul(self.dst_dtype.size() as u64)?;
        let words = (row_bytes + 30) / 16; // the 16-byte words a row can touch, at most
        let items = (self.n_elems() / len.max(1)).checked_mul(words)?;
        let fill = self.fill_bits.is_some();
        let no_cast = fill || (self.src_dtype == self.dst_dtype && (!self.big_endian || self.dst_dtype.size() == 1));
        (no_cast
            && d == 1
            && (s == 1 || fill)
            && row_bytes >= WIDE_MIN_ROW_BYTES
            && u32::try_from(row_bytes).is_ok()
            && u32::try_from(items).is_ok())
        .then_some(items)
    }

    /// The kernel's work items for this job on its vector cast path: groups of 8 destination
    /// elements of its rows (`Some`), or `None`. It takes jobs (not fills, not on the wide path)
    /// whose dtypes are a pair [`vec_pair`] names and whose merged innermost axis is contiguous
    /// in both buffers and at least [`VEC_MIN_ROW_ELEMS`] long; the kernel checks this again
    /// (and that the destination's elements are aligned), taking the element path where it
    /// does not hold. Like [`Self::wide_items`], a bound the kernel's exact count of a job whose
    /// rows start in step does not exceed.
    fn vec_items(&self, axes: &[(u64, i64, i64)]) -> Option<u64> {
        let &(len, s, d) = axes.last()?;
        let groups = (len + 14) / 8; // the 8-element groups a row can touch, at most
        let items = (self.n_elems() / len.max(1)).checked_mul(groups)?;
        (self.fill_bits.is_none()
            && vec_pair(self.src_dtype, self.dst_dtype, self.big_endian)
            && d == 1
            && s == 1
            && (VEC_MIN_ROW_ELEMS..1 << 28).contains(&len)
            && u32::try_from(items).is_ok())
        .then_some(items)
    }

    /// The job's device descriptor (`struct dmc_assemble_job`) and its work items; the job was
    /// validated (rank at most [`MAX_RANK`], strides of the same rank).
    fn desc(&self) -> (AssembleJobDesc, u64) {
        let axes = self.merged_axes();
        let wide = self.wide_items(&axes);
        let vec = if wide.is_some() { None } else { self.vec_items(&axes) };
        let r = axes.len().min(MAX_RANK);
        let mut d = AssembleJobDesc {
            src_off: self.src_offset as u64,
            dst_off: self.dst_offset as u64,
            shape: [1; MAX_RANK],
            n_elems: self.n_elems(),
            fill_bits: self.fill_bits.unwrap_or(0),
            rank: r as u32,
            src_dtype: code(self.src_dtype),
            dst_dtype: code(self.dst_dtype),
            flags: if self.big_endian { c::DMC_ASM_BYTESWAP } else { 0 }
                | if self.fill_bits.is_some() { c::DMC_ASM_FILL } else { 0 }
                | if wide.is_some() { c::DMC_ASM_WIDE } else { 0 }
                | if vec.is_some() { c::DMC_ASM_VEC } else { 0 },
            ..AssembleJobDesc::default()
        };
        for (k, &(n, s, t)) in axes.iter().take(r).enumerate() {
            d.shape[k] = n;
            d.src_stride[k] = s;
            d.dst_stride[k] = t;
        }
        (d, wide.or(vec).unwrap_or_else(|| self.n_elems()))
    }
}

/// The dtype pairs of the kernel's vector cast path (`dmc_asm_vec_any` in kernels/assemble.cu):
/// a 1- or 2-byte integer to float32, bfloat16 or float16, and a 2-byte integer byte swap alone.
fn vec_pair(src: Dtype, dst: Dtype, big_endian: bool) -> bool {
    matches!((src, dst), (Dtype::U8 | Dtype::I8 | Dtype::U16 | Dtype::I16, Dtype::F32 | Dtype::BF16 | Dtype::F16))
        || (big_endian && src == dst && matches!(src, Dtype::U16 | Dtype::I16))
}

/// Rows shorter than this (in elements) stay on the element path: a row's first and last
/// groups store element by element, which a short row does not repay.
const VEC_MIN_ROW_ELEMS: u64 = 8;

/// Rows shorter than this (in bytes) stay on the element path: a row's head and tail words
/// take up to eight narrow stores, which a short row does not repay.
const WIDE_MIN_ROW_BYTES: u64 = 32;

/// Device bytes per job: its descriptor and its status word.
const JOB_BYTES: usize = size_of::<AssembleJobDesc>() + size_of::<u32>();
/// Jobs per launch (grid.y limit of CUDA).
const JOBS_PER_LAUNCH: usize = 65_535;

/// Threads an H100 keeps resident (132 SMs × 2048), the largest device targeted: a launch with
/// fewer work items than this runs one item per thread.
const RESIDENT_THREADS: u64 = 132 * 2048;
/// The most work items (elements, or 16-byte words on the wide path) of a job one thread of
/// `dmc_assemble` takes (grid-stride).
const MAX_ELEMS_PER_THREAD: u64 = 8;

/// Work items per thread for a launch of `total` items: one while the device is not full, more
/// when it is (each thread reads its job's fields once, so more items per thread read them
/// fewer times per item), at most [`MAX_ELEMS_PER_THREAD`].
fn elems_per_thread(total: u64) -> u64 {
    (total / RESIDENT_THREADS).clamp(1, MAX_ELEMS_PER_THREAD)
}

/// Runs assemble jobs; owns a preallocated job table so the hot path allocates no device memory.
///
/// Jobs are queued without waiting ([`Assembler::queue`]: host validation, the job table's
/// part staged in pinned memory and uploaded on the assembler's stream, the launch), and their
/// statuses are read back together ([`Assembler::finish`]: one wait). [`Assembler::run`] does
/// both for one set of jobs.
#[derive(Debug)]
pub struct Assembler {
    device: Device,
    stream: Stream,
    /// Per job position: its descriptor, then (after all descriptors) its status word.
    table: DeviceBuffer,
    /// The host's mirror of `table`, the source of its uploads.
    staging: PinnedBuffer,
    /// Status words read back.
    readback: PinnedBuffer,
    max_jobs: usize,
    /// Table positions used since the last read-back, and the job number of each.
    seqs: Vec<usize>,
    /// Jobs passed to `queue` since the last `finish` (the next job's number).
    next_seq: usize,
    /// Failures read back since the last `finish`.
    failed: Vec<Error>,
    /// The first start and the last end of the kernels since the last `finish`.
    timing: Option<(Event, Event)>,
    kernel_time: std::time::Duration,
    /// Each launch is shaped for this many times its work (1: its own), see
    /// [`Assembler::shape_as_scaled`].
    work_scale: u64,
}

impl Assembler {
    /// Preallocates room for `max_jobs` jobs per call, and compiles (or loads from the kernel
    /// caches) the assemble kernel so that the first call does not pay NVRTC. Runs on the
    /// device's default stream.
    pub fn new(device: &Device, max_jobs: usize) -> Result<Self> {
        Self::on_stream(device, max_jobs, device.default_stream().clone())
    }

    /// Shapes every later launch as if it held `k` times its jobs' work (the elements each
    /// thread takes follow the launch's total work): for the GPU performance model's sampled
    /// runs, which run every k-th job and let each recorded block stand for `k`
    /// ([`crate::model::Launch::replicate`]), so that the recorded blocks are the measured
    /// launch's. `k = 1` (the default) is the real shape.
    #[cfg(feature = "emulate")]
    pub fn shape_as_scaled(&mut self, k: u64) {
        self.work_scale = k.max(1);
    }

    /// [`Assembler::new`] running on `stream`.
    pub fn on_stream(device: &Device, max_jobs: usize, stream: Stream) -> Result<Self> {
        let max_jobs = max_jobs.max(1);
        device.prepare(&[Kernel::Assemble])?;
        Ok(Self {
            table: device.alloc(Self::device_bytes(max_jobs))?,
            staging: device.alloc_pinned(Self::device_bytes(max_jobs))?,
            readback: device.alloc_pinned(max_jobs * size_of::<u32>())?,
            device: device.clone(),
            stream,
            max_jobs,
            seqs: Vec::with_capacity(max_jobs),
            next_seq: 0,
            failed: Vec::new(),
            work_scale: 1,
            timing: None,
            kernel_time: std::time::Duration::ZERO,
        })
    }

    /// Device bytes an assembler for `max_jobs` jobs allocates (its job table and status
    /// words), for budget planners; it allocates as much pinned host memory again, plus a
    /// status word per job.
    #[must_use]
    pub const fn device_bytes(max_jobs: usize) -> usize {
        let jobs = if max_jobs == 0 { 1 } else { max_jobs };
        jobs.saturating_mul(JOB_BYTES)
    }

    /// The stream the kernels run on: work queued there after [`Assembler::queue`] sees the
    /// assembled bytes.
    #[must_use]
    pub fn stream(&self) -> &Stream {
        &self.stream
    }

    /// Device time of the kernels of the last [`Assembler::run`] or of the jobs queued before
    /// the last [`Assembler::finish`] (timing events on CUDA, wall clock on the emulator); zero
    /// before the first or when there was no valid job.
    #[must_use]
    pub fn kernel_time(&self) -> std::time::Duration {
        self.kernel_time
    }

    /// Copies every job's region from `src` into `dst`. The outer error is a device failure;
    /// per job, an invalid job (out of bounds, bad rank) is reported as
    /// [`Error::InvalidArgument`] and skipped, and a job the kernel reports failing is
    /// [`Error::Assemble`].
    pub fn run(&mut self, src: &DeviceBuffer, dst: &mut DeviceBuffer, jobs: &[AssembleJob]) -> Result<Vec<Result<()>>> {
        if jobs.len() > self.max_jobs {
            return Err(Error::InvalidArgument(format!(
                "{} jobs but the assembler holds {}",
                jobs.len(),
                self.max_jobs
            )));
        }
        let base = self.next_seq;
        let mut results = self.queue(src, dst, jobs)?;
        for e in self.finish()? {
            if let Error::Assemble { job, .. } = &e
                && let Some(r) = job.checked_sub(base).and_then(|i| results.get_mut(i))
            {
                *r = Err(e);
            }
        }
        Ok(results)
    }

    /// Queues `jobs` (copies of regions of `src` into `dst`) on the assembler's stream and
    /// returns without waiting; per job, an invalid job is [`Error::InvalidArgument`] here and
    /// is not run. Jobs are numbered in the order they are queued since the last
    /// [`Assembler::finish`], which reports those the kernel failed. Jobs of one call must
    /// write disjoint bytes. When the table is full, the statuses of the jobs queued so far
    /// are read back first (one wait).
    pub fn queue(
        &mut self,
        src: &DeviceBuffer,
        dst: &mut DeviceBuffer,
        jobs: &[AssembleJob],
    ) -> Result<Vec<Result<()>>> {
        self.queue_from(Some(src), dst, jobs)
    }

    /// [`Assembler::queue`] for fill jobs only (they read no source); any other job is
    /// [`Error::InvalidArgument`].
    pub fn queue_fills(&mut self, dst: &mut DeviceBuffer, jobs: &[AssembleJob]) -> Result<Vec<Result<()>>> {
        self.queue_from(None, dst, jobs)
    }

    fn queue_from(
        &mut self,
        src: Option<&DeviceBuffer>,
        dst: &mut DeviceBuffer,
        jobs: &[AssembleJob],
    ) -> Result<Vec<Result<()>>> {
        let src_len = src.map_or(0, DeviceBuffer::len);
        let results: Vec<Result<()>> = jobs.iter().map(|j| j.validate(src_len, dst.len())).collect();
        let valid: Vec<usize> = (0..jobs.len()).filter(|&i| results[i].is_ok()).collect();
        let base = self.next_seq;
        self.next_seq += jobs.len();
        let mut first = 0usize;
        while first < valid.len() {
            if self.seqs.len() == self.max_jobs {
                self.read_back()?;
            }
            let n = (valid.len() - first).min(self.max_jobs - self.seqs.len()).min(JOBS_PER_LAUNCH);
            let part = &valid[first..first + n];
            self.launch(src, dst, jobs, part, base)?;
            first += n;
        }
        Ok(results)
    }

    /// Stages, uploads and launches the jobs `part` (indexes into `jobs`, numbered from
    /// `base`) at the next table positions.
    fn launch(
        &mut self,
        src: Option<&DeviceBuffer>,
        dst: &DeviceBuffer,
        jobs: &[AssembleJob],
        part: &[usize],
        base: usize,
    ) -> Result<()> {
        let at = self.seqs.len();
        let n = part.len();
        let (descs, work): (Vec<AssembleJobDesc>, Vec<u64>) = part.iter().map(|&i| jobs[i].desc()).unzip();
        let desc_size = size_of::<AssembleJobDesc>();
        let status_base = self.max_jobs * desc_size;
        let (desc_at, status_at) = (at * desc_size, status_base + 4 * at);
        {
            // SAFETY: these positions of the staging mirror are not in any copy in flight:
            // positions are used once between two read-backs, and a read-back waits for every
            // copy queued before it.
            let stage = unsafe { self.staging.as_mut_slice() };
            stage[desc_at..desc_at + n * desc_size].copy_from_slice(bytemuck::cast_slice(&descs));
            // The kernel writes a job's status only when the job fails.
            stage[status_at..status_at + 4 * n].copy_from_slice(bytemuck::cast_slice(&vec![c::DMC_STATUS_OK; n]));
        }
        // SAFETY (both copies): the buffers record the copies as uses, and the host writes
        // these staging positions again only after a read-back, which waits for them.
        unsafe {
            self.stream.copy_to_device(&self.staging, desc_at, &self.table, desc_at, n * desc_size)?;
            self.stream.copy_to_device(&self.staging, status_at, &self.table, status_at, 4 * n)?;
        }
        let max_work = work.iter().copied().max().unwrap_or(0);
        let total_work: u64 = work.iter().sum();
        let per_block = u64::from(c::DMC_ASSEMBLE_THREADS) * elems_per_thread(total_work * self.work_scale);
        let bx = max_work.div_ceil(per_block).clamp(1, u64::from(c::DMC_MAX_BLOCKS_PER_JOB)) as u32;
        let started = self.stream.record(true)?;
        // Fill jobs read nothing: without a source, the kernel gets the destination's address.
        let src = src.unwrap_or(dst);
        let args = AssembleArgs {
            src: src.ptr(0)?,
            src_total: src.len() as u64,
            dst: dst.ptr(0)?,
            dst_total: dst.len() as u64,
            jobs: self.table.ptr(desc_at)?,
            n_jobs: n as u32,
            status: self.table.ptr(status_at)?,
        };
        // SAFETY: src/dst are live buffers of this device with their true lengths, passed as
        // `uses` with the job table; the table and status positions were uploaded just before
        // on this stream; every job was validated against the buffer lengths (and the kernel
        // re-checks each element).
        unsafe { args.launch(&self.device, &self.stream, (bx, n as u32), &[src, dst, &self.table])? };
        let ended = self.stream.record(true)?;
        self.timing = Some(match self.timing.take() {
            Some((first, _)) => (first, ended),
            None => (started, ended),
        });
        self.seqs.extend(part.iter().map(|&i| base + i));
        Ok(())
    }

    /// Reads the status words of every position used back (one wait) and frees the table.
    fn read_back(&mut self) -> Result<()> {
        let n = self.seqs.len();
        if n == 0 {
            return Ok(());
        }
        let status_at = self.max_jobs * size_of::<AssembleJobDesc>();
        // SAFETY: the host reads `readback` only after the event below is complete.
        unsafe { self.stream.copy_to_host(&self.table, status_at, &self.readback, 0, 4 * n)? };
        self.stream.record(false)?.synchronize()?;
        // SAFETY: the copy into it finished (synchronised above).
        let words = unsafe { self.readback.range(0, 4 * n) }?;
        for (k, &seq) in self.seqs.iter().enumerate() {
            let code = words
                .get(4 * k..4 * k + 4)
                .and_then(|b| b.try_into().ok())
                .map_or(c::DMC_STATUS_PENDING, u32::from_le_bytes);
            if code != c::DMC_STATUS_OK {
                self.failed.push(Error::Assemble { job: seq, status: StreamStatus::from_code(code) });
            }
        }
        self.seqs.clear();
        Ok(())
    }

    /// Waits for the jobs queued since the last call and reads their statuses back: the jobs
    /// the kernel failed ([`Error::Assemble`], numbered as [`Assembler::queue`] says).
    pub fn finish(&mut self) -> Result<Vec<Error>> {
        self.read_back()?;
        self.next_seq = 0;
        if let Some((started, ended)) = self.timing.take() {
            self.kernel_time = ended.elapsed_since(&started)?;
        } else {
            self.kernel_time = std::time::Duration::ZERO;
        }
        Ok(std::mem::take(&mut self.failed))
    }

    /// Drops what was queued since the last [`Assembler::finish`] after an error: waits for
    /// the stream (ignoring its error, which the failed call reported) and forgets the jobs.
    pub fn abandon(&mut self) {
        let _ = self.stream.synchronize();
        self.seqs.clear();
        self.failed.clear();
        self.next_seq = 0;
        self.timing = None;
    }
}

/// Convenience: runs `jobs` with a one-off [`Assembler`] (allocates its job table).
pub fn assemble(
    device: &Device,
    src: &DeviceBuffer,
    dst: &mut DeviceBuffer,
    jobs: &[AssembleJob],
) -> Result<Vec<Result<()>>> {
    Assembler::new(device, jobs.len())?.run(src, dst, jobs)
}

#[cfg(test)]
mod tests {
    use super::*;

    fn job(shape: &[u64], src_strides: &[i64], dst_strides: &[i64], src: Dtype, dst: Dtype) -> AssembleJob {
        AssembleJob {
            src_offset: 3,
            dst_offset: 5,
            shape: shape.to_vec(),
            src_strides: src_strides.to_vec(),
            dst_strides: dst_strides.to_vec(),
            src_dtype: src,
            dst_dtype: dst,
            big_endian: false,
            fill_bits: None,
        }
    }

    #[test]
    fn axes_merge_where_both_strides_continue() {
        // a full-width crop: one run of 4 * 10 elements
        let whole = job(&[4, 1, 10], &[10, 10, 1], &[10, 10, 1], Dtype::U16, Dtype::U16);
        assert_eq!(whole.merged_axes(), vec![(40, 1, 1)]);
        // a crop of 7 of 10 columns into a tensor of rows of 7: the source rows do not continue
        let crop = job(&[4, 7], &[10, 1], &[7, 1], Dtype::U16, Dtype::U16);
        assert_eq!(crop.merged_axes(), vec![(4, 10, 7), (7, 1, 1)]);
        // a fill ignores the source strides
        let fill = AssembleJob { fill_bits: Some(0), ..crop.clone() };
        assert_eq!(fill.merged_axes(), vec![(28, 1, 1)]);
        // one element, and an empty region
        assert_eq!(job(&[1, 1], &[5, 1], &[5, 1], Dtype::U8, Dtype::U8).merged_axes(), vec![(1, 1, 1)]);
        assert_eq!(job(&[0, 3], &[3, 1], &[3, 1], Dtype::U8, Dtype::U8).merged_axes(), vec![(0, 3, 3), (3, 1, 1)]);
    }

    #[test]
    fn the_wide_path_takes_contiguous_rows_without_a_cast() {
        let wide = |j: &AssembleJob| {
            let (d, items) = j.desc();
            (d.flags & c::DMC_ASM_WIDE != 0).then_some(items)
        };
        // 4 rows of 17 u16 (34 bytes): up to 4 words each
        let rows = job(&[4, 17], &[40, 1], &[20, 1], Dtype::U16, Dtype::U16);
        assert_eq!(wide(&rows), Some(4 * 4));
        assert_eq!(rows.desc().0.rank, 2);
        // a fill (src strides ignored) and a one-byte element in big-endian order stay wide
        assert!(wide(&AssembleJob { fill_bits: Some(7), src_strides: vec![40, 3], ..rows.clone() }).is_some());
        let bytes = job(&[4, 40], &[40, 1], &[40, 1], Dtype::U8, Dtype::U8);
        assert_eq!(wide(&AssembleJob { big_endian: true, ..bytes.clone() }), Some((160 + 30) / 16));
        // casts, byte swaps, strided rows and short rows take the element path
        assert_eq!(wide(&job(&[4, 17], &[40, 1], &[20, 1], Dtype::U16, Dtype::I16)), None);
        assert_eq!(wide(&AssembleJob { big_endian: true, ..rows.clone() }), None);
        assert_eq!(wide(&job(&[4, 17], &[1, 4], &[20, 1], Dtype::U16, Dtype::U16)), None);
        assert_eq!(wide(&job(&[4, 17], &[40, 1], &[1, 4], Dtype::U16, Dtype::U16)), None);
        assert_eq!(wide(&job(&[4, 15], &[40, 1], &[20, 1], Dtype::U16, Dtype::U16)), None);
        assert_eq!(job(&[4, 15], &[40, 1], &[20, 1], Dtype::U16, Dtype::U16).desc().1, 60);
    }

    #[test]
    fn the_vector_path_takes_contiguous_rows_of_small_integers_cast_to_floats() {
        let vec = |j: &AssembleJob| {
            let (d, items) = j.desc();
            (d.flags & c::DMC_ASM_VEC != 0).then_some(items)
        };
        // 4 rows of 17 u16 → f32: up to ceil((17 + 7) / 8) = 3 groups each
        let rows = job(&[4, 17], &[40, 1], &[20, 1], Dtype::U16, Dtype::F32);
        assert_eq!(vec(&rows), Some(4 * 3));
        assert_eq!(rows.desc().0.flags & c::DMC_ASM_WIDE, 0);
        for (s, d) in [(Dtype::I16, Dtype::BF16), (Dtype::U8, Dtype::F16), (Dtype::I8, Dtype::F32)] {
            assert!(vec(&job(&[4, 17], &[40, 1], &[20, 1], s, d)).is_some(), "{s:?} -> {d:?}");
        }
        // a 2-byte byte swap alone; big-endian casts too
        assert!(
            vec(&AssembleJob { big_endian: true, ..job(&[4, 17], &[40, 1], &[20, 1], Dtype::U16, Dtype::U16) })
                .is_some()
        );
        assert!(vec(&AssembleJob { big_endian: true, ..rows.clone() }).is_some());
        // no swap and no cast: the wide path; other pairs, strided or short rows, fills: neither
        assert_eq!(vec(&job(&[4, 17], &[40, 1], &[20, 1], Dtype::U16, Dtype::U16)), None);
        assert_eq!(vec(&job(&[4, 17], &[40, 1], &[20, 1], Dtype::U32, Dtype::F32)), None);
        assert_eq!(vec(&job(&[4, 17], &[40, 1], &[20, 1], Dtype::U16, Dtype::F64)), None);
        assert_eq!(vec(&job(&[4, 17], &[1, 4], &[20, 1], Dtype::U16, Dtype::F32)), None);
        assert_eq!(vec(&job(&[4, 17], &[40, 1], &[1, 4], Dtype::U16, Dtype::F32)), None);
        assert_eq!(vec(&job(&[4, 7], &[40, 1], &[20, 1], Dtype::U16, Dtype::F32)), None);
        assert_eq!(vec(&AssembleJob { fill_bits: Some(0), ..rows.clone() }), None);
    }

    #[test]
    fn threads_take_more_elements_only_when_the_device_is_full() {
        assert_eq!(elems_per_thread(0), 1);
        assert_eq!(elems_per_thread(RESIDENT_THREADS - 1), 1);
        assert_eq!(elems_per_thread(2 * RESIDENT_THREADS), 2);
        assert_eq!(elems_per_thread(5 * RESIDENT_THREADS + 7), 5);
        assert_eq!(elems_per_thread(u64::MAX), MAX_ELEMS_PER_THREAD);
    }
}
