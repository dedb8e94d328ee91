//! Stage 3, decode: encoded units to decoded bytes, behind one [`Executor`] trait with two
//! implementations. [`cpu::CpuExecutor`] decodes with zarrs' codec chains on rayon and scatters
//! each unit into the output as it is decoded (fused read-decode-scatter);
//! [`device::DeviceExecutor`] turns units into stream tables for damacy's kernels (on a CUDA GPU
//! or the host emulator) and assembles on the device when the batch fits.

use damacy_kernels::{DeviceBuffer, Stream};

use crate::ctx::Ctx;
use crate::error::{Error, Result};
use crate::plan::BatchPlan;

pub(crate) mod cpu;
pub(crate) mod device;

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
