//! Stage 3, decode: encoded units to decoded bytes, behind one [`Executor`] trait with two
//! implementations. [`cpu::CpuExecutor`] decodes with zarrs' codec chains on rayon and scatters
//! each unit into the output as it is decoded (fused read-decode-scatter);
//! [`device::DeviceExecutor`] turns units into stream tables for damacy's kernels (on a CUDA GPU
//! or the host emulator) and assembles on the device when the batch fits.

use damacy_kernels::{DeviceBuffer, Stream};

use crate::error::{Error, Result};
use crate::plan::BatchPlan;
use crate::stats::Stats;

pub(crate) mod cpu;
pub(crate) mod device;

/// What an executor runs a batch with: the reader's counters and threads.
pub(crate) struct Ctx<'a> {
    pub(crate) stats: &'a Stats,
    /// Decode and assemble threads (and the local store's reads, fused with decoding).
    pub(crate) compute: &'a rayon::ThreadPool,
    /// Reads a remote store keeps in flight.
    pub(crate) in_flight: usize,
    /// Remote reads queued on `compute` or being decoded by it or by a batch's own thread, over
    /// every batch of the reader: a batch's thread decodes a read itself only while this leaves
    /// a compute thread idle.
    pub(crate) decoding: &'a std::sync::atomic::AtomicUsize,
}

/// Runs a planned batch: fetch (through [`crate::fetch`]), decode, and assemble into the output.
pub(crate) trait Executor: Send + Sync {
    /// Read `plan` into host memory (`plan.nbytes()` bytes, C order).
    fn read_host(&self, ctx: &Ctx<'_>, plan: &BatchPlan, out: &mut [u8]) -> Result<()>;

    /// Read `plan` into a device buffer at `offset`, in stream order with `stream`.
    fn read_device(
        &self,
        ctx: &Ctx<'_>,
        plan: &BatchPlan,
        (buffer, offset): (&mut DeviceBuffer, usize),
        stream: &Stream,
    ) -> Result<()> {
        let _ = (ctx, buffer, offset, stream);
        Err(Error::invalid(format!(
            "array {} decodes on the CPU and this reader has no device to copy it to: read into host memory",
            plan.array.path
        )))
    }
}
