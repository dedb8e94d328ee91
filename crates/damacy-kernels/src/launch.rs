//! One typed launcher per kernel, shared by both backends.
//!
//! Each kernel's parameter list is written once, in the [`kernel_launchers!`] table below. From
//! it the macro makes the launcher's argument struct (typed: a [`DevPtr<StreamDesc>`] cannot be
//! passed where the kernel takes `dmc_u32*`), the emulator's `extern "C"` declaration, and the
//! CUDA argument list. The build script reads the `extern "C" __global__` definitions of
//! `kernels/*.cu` into `KERNEL_SIGNATURES`, and a `const` assertion per launcher checks the
//! table against them, so a kernel whose parameters change without its launcher fails the build.

use std::marker::PhantomData;

use crate::device::{Device, DeviceBuffer, Stream};
use crate::error::Result;
use crate::kernel::Kernel;
use crate::wire::{AssembleJobDesc, ShuffleJobDesc, StreamDesc};

/// The kind of one kernel parameter, as the C ABI sees it.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub(crate) enum Param {
    /// A pointer; the C name of the type it points to (`dmc_u8`, `dmc_stream`, …).
    Ptr(&'static str),
    /// `dmc_u32`.
    U32,
    /// `dmc_u64`.
    U64,
}

include!(concat!(env!("OUT_DIR"), "/kernel_signatures.rs"));

/// The device address of a `T` (a host address on the emulator): what a kernel's `T*`
/// parameter receives. Made by `DeviceBuffer::ptr`, which checks the offset and the alignment.
#[repr(transparent)]
pub(crate) struct DevPtr<T> {
    addr: u64,
    _pointee: PhantomData<fn() -> T>,
}

impl<T> DevPtr<T> {
    /// Wraps a device address.
    pub(crate) const fn new(addr: u64) -> Self {
        Self { addr, _pointee: PhantomData }
    }
}

impl<T> Clone for DevPtr<T> {
    fn clone(&self) -> Self {
        *self
    }
}
impl<T> Copy for DevPtr<T> {}
impl<T> std::fmt::Debug for DevPtr<T> {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        write!(f, "{:#x}", self.addr)
    }
}

#[cfg(feature = "cuda")]
// SAFETY: `DevPtr` is `repr(transparent)` over a `u64`, which is what a CUDA kernel's pointer
// parameter is on every 64-bit platform CUDA supports.
unsafe impl<T> cudarc::driver::DeviceRepr for DevPtr<T> {}

/// A Rust type with a C twin a kernel pointer can address.
pub(crate) trait CType {
    /// The C type name in `kernels/`.
    const C_NAME: &'static str;
}

macro_rules! c_types {
    ($($rust:ty => $c:literal),* $(,)?) => {
        $(impl CType for $rust {
            const C_NAME: &'static str = $c;
        })*
    };
}
c_types! {
    u8 => "dmc_u8",
    u32 => "dmc_u32",
    StreamDesc => "dmc_stream",
    ShuffleJobDesc => "dmc_shuffle_job",
    AssembleJobDesc => "dmc_assemble_job",
}

/// A type a kernel parameter can have.
pub(crate) trait KernelParam: Copy + Send + 'static {
    /// Its kind, compared with the `.cu` signature at compile time.
    const PARAM: Param;
}
impl KernelParam for u32 {
    const PARAM: Param = Param::U32;
}
impl KernelParam for u64 {
    const PARAM: Param = Param::U64;
}
impl<T: CType + 'static> KernelParam for DevPtr<T> {
    const PARAM: Param = Param::Ptr(T::C_NAME);
}

/// The typed argument list of one kernel.
pub(crate) trait KernelArgs: DynKernelArgs + Copy + 'static {
    /// The parameter kinds, in order.
    const PARAMS: &'static [Param];

    /// Launches the kernel on `stream` on a `grid.0 × grid.1` grid of
    /// `block_threads()`-thread blocks of its kernel; `uses` are the buffers the pointers
    /// address, which then wait for this launch before they are freed.
    ///
    /// # Safety
    /// As [`crate::Device::launch_on`].
    unsafe fn launch(self, device: &Device, stream: &Stream, grid: (u32, u32), uses: &[&DeviceBuffer]) -> Result<()> {
        // SAFETY: forwarded contract.
        unsafe { device.launch_on(stream, grid, self, uses) }
    }
}

/// A launcher's arguments as a trait object: what a device backend launches.
pub(crate) trait DynKernelArgs: Send + std::fmt::Debug {
    /// The kernel these arguments are for.
    #[cfg(any(feature = "emulate", feature = "cuda"))]
    fn kernel(&self) -> Kernel;

    /// A copy, for the emulator's stream worker to own until it runs the launch.
    #[cfg(feature = "emulate")]
    fn boxed(&self) -> Box<dyn DynKernelArgs>;

    /// Runs the kernel on the host emulator, on the calling thread; the launcher's return code
    /// (0 on success).
    ///
    /// # Safety
    /// As [`crate::Device::launch_on`].
    #[cfg(feature = "emulate")]
    unsafe fn run_emulated(&self, grid: (u32, u32), block: u32, seed: u64) -> i32;

    /// Pushes the arguments, in order, onto a CUDA launch.
    #[cfg(feature = "cuda")]
    fn push_args<'a>(&'a self, launch: &mut cudarc::driver::LaunchArgs<'a>);
}

const fn str_eq(a: &str, b: &str) -> bool {
    let (a, b) = (a.as_bytes(), b.as_bytes());
    if a.len() != b.len() {
        return false;
    }
    let mut i = 0;
    while i < a.len() {
        if a[i] != b[i] {
            return false;
        }
        i += 1;
    }
    true
}

const fn params_eq(lhs: &[Param], rhs: &[Param]) -> bool {
    if lhs.len() != rhs.len() {
        return false;
    }
    let mut k = 0;
    while k < lhs.len() {
        let same = match (lhs[k], rhs[k]) {
            (Param::Ptr(l), Param::Ptr(r)) => str_eq(l, r),
            (Param::U32, Param::U32) | (Param::U64, Param::U64) => true,
            _ => false,
        };
        if !same {
            return false;
        }
        k += 1;
    }
    true
}

/// Whether `kernels/` defines kernel `name` with exactly these parameters.
const fn matches_source(name: &str, params: &[Param]) -> bool {
    let mut i = 0;
    while i < KERNEL_SIGNATURES.len() {
        if str_eq(KERNEL_SIGNATURES[i].0, name) {
            return params_eq(KERNEL_SIGNATURES[i].1, params);
        }
        i += 1;
    }
    false
}

const _: () = assert!(
    KERNEL_SIGNATURES.len() == Kernel::ALL.len(),
    "kernels/*.cu define a different number of kernels than `Kernel::ALL` lists"
);

macro_rules! kernel_launchers {
    ($(
        $(#[$meta:meta])*
        $args:ident => $kernel:ident $cname:literal ( $( $field:ident : $ty:ty ),* $(,)? );
    )*) => {$(
        $(#[$meta])*
        #[derive(Clone, Copy, Debug)]
        // Only a backend reads the arguments: built with neither, they are written, never read.
        #[cfg_attr(not(any(feature = "emulate", feature = "cuda")), allow(dead_code))]
        pub(crate) struct $args {
            $(
                #[doc = concat!("Parameter `", stringify!($field), "`.")]
                pub(crate) $field: $ty,
            )*
        }

        const _: () = assert!(
            str_eq(Kernel::$kernel.name(), $cname),
            concat!("`Kernel::", stringify!($kernel), "` is not named ", $cname)
        );
        const _: () = assert!(
            matches_source($cname, <$args as KernelArgs>::PARAMS),
            concat!(
                "the typed launcher `", stringify!($args), "` (src/launch.rs) does not match the parameters of `",
                $cname, "` in kernels/: change both together"
            )
        );

        impl KernelArgs for $args {
            const PARAMS: &'static [Param] = &[$(<$ty as KernelParam>::PARAM),*];
        }

        impl DynKernelArgs for $args {
            #[cfg(any(feature = "emulate", feature = "cuda"))]
            fn kernel(&self) -> Kernel {
                Kernel::$kernel
            }

            #[cfg(feature = "emulate")]
            fn boxed(&self) -> Box<dyn DynKernelArgs> {
                Box::new(*self)
            }

            #[cfg(feature = "emulate")]
            unsafe fn run_emulated(&self, grid: (u32, u32), block: u32, seed: u64) -> i32 {
                // Pointer parameters are passed as their `u64` address: on the supported hosts
                // (64-bit, checked in the device module) a pointer and a `u64` are passed alike.
                unsafe extern "C" {
                    #[link_name = concat!("dmc_emu_", $cname)]
                    fn launcher(gx: u32, gy: u32, bx: u32, seed: u64 $(, $field: $ty)*) -> i32;
                }
                // SAFETY: the caller's contract: every pointer addresses a live buffer whose size
                // is the one passed beside it.
                unsafe { launcher(grid.0, grid.1, block, seed $(, self.$field)*) }
            }

            #[cfg(feature = "cuda")]
            fn push_args<'a>(&'a self, launch: &mut cudarc::driver::LaunchArgs<'a>) {
                use cudarc::driver::PushKernelArg as _;
                $(launch.arg(&self.$field);)*
            }
        }
    )*};
}

kernel_launchers! {
    /// `dmc_lz4_decode` (lz4.cu): one warp per stream of `ids`.
    Lz4DecodeArgs => Lz4Decode "dmc_lz4_decode" (
        src_base: DevPtr<u8>, src_total: u64, dst_base: DevPtr<u8>, dst_total: u64,
        streams: DevPtr<StreamDesc>, ids: DevPtr<u32>, n_ids: u32, status: DevPtr<u32>, actual: DevPtr<u32>,
    );
    /// `dmc_blosclz_decode` (blosclz.cu): one warp per stream of `ids`.
    BloscLzDecodeArgs => BloscLzDecode "dmc_blosclz_decode" (
        src_base: DevPtr<u8>, src_total: u64, dst_base: DevPtr<u8>, dst_total: u64,
        streams: DevPtr<StreamDesc>, ids: DevPtr<u32>, n_ids: u32, status: DevPtr<u32>, actual: DevPtr<u32>,
    );
    /// `dmc_zstd_decode` (zstd.cu): a team of warps (a block) for each of the first `n_team`
    /// streams (a run of frames) of `ids`, one warp for each later one (four to a block);
    /// `seq_half`: how far the other half of the output buffer lies (a team's sequence scratch
    /// is its job's output range mirrored there; 0: no scratch).
    ZstdDecodeArgs => ZstdDecode "dmc_zstd_decode" (
        src_base: DevPtr<u8>, src_total: u64, dst_base: DevPtr<u8>, dst_total: u64,
        streams: DevPtr<StreamDesc>, ids: DevPtr<u32>, n_ids: u32, status: DevPtr<u32>, actual: DevPtr<u32>,
        seq_half: u64, n_team: u32,
    );
    /// `dmc_inflate_decode` (inflate.cu): a team of warps (a block) for each of the first
    /// `n_team` streams (a gzip/zlib/raw deflate stream) of `ids`, one warp for each later one
    /// (four to a block).
    InflateDecodeArgs => InflateDecode "dmc_inflate_decode" (
        src_base: DevPtr<u8>, src_total: u64, dst_base: DevPtr<u8>, dst_total: u64,
        streams: DevPtr<StreamDesc>, ids: DevPtr<u32>, n_ids: u32, status: DevPtr<u32>, actual: DevPtr<u32>,
        n_team: u32,
    );
    /// `dmc_memcpy` (memcpy.cu): grid (streams of `ids`, parts per stream).
    MemcpyArgs => Memcpy "dmc_memcpy" (
        src_base: DevPtr<u8>, src_total: u64, dst_base: DevPtr<u8>, dst_total: u64,
        streams: DevPtr<StreamDesc>, ids: DevPtr<u32>, n_ids: u32, status: DevPtr<u32>, actual: DevPtr<u32>,
    );
    /// `dmc_unshuffle` (shuffle.cu): grid (jobs, parts per job).
    UnshuffleArgs => Unshuffle "dmc_unshuffle" (
        src_base: DevPtr<u8>, src_total: u64, dst_base: DevPtr<u8>, dst_total: u64,
        jobs: DevPtr<ShuffleJobDesc>, n_jobs: u32, status: DevPtr<u32>,
    );
    /// `dmc_crc32c` (crc32c.cu): one block per stream of `ids`.
    Crc32cArgs => Crc32c "dmc_crc32c" (
        base: DevPtr<u8>, total: u64, streams: DevPtr<StreamDesc>, ids: DevPtr<u32>, n_ids: u32,
        status: DevPtr<u32>, actual: DevPtr<u32>,
    );
    /// `dmc_assemble` (assemble.cu): grid (blocks per job, jobs).
    AssembleArgs => Assemble "dmc_assemble" (
        src: DevPtr<u8>, src_total: u64, dst: DevPtr<u8>, dst_total: u64,
        jobs: DevPtr<AssembleJobDesc>, n_jobs: u32, status: DevPtr<u32>,
    );
}

/// The parameter list the stream-decoding kernels share (lz4, blosclz, zstd, inflate, memcpy):
/// the wave's source and output, its stream table, the ids of the streams this launch decodes,
/// and the status and actual-size words.
#[derive(Clone, Copy, Debug)]
pub(crate) struct StreamArgs {
    pub(crate) src_base: DevPtr<u8>,
    pub(crate) src_total: u64,
    pub(crate) dst_base: DevPtr<u8>,
    pub(crate) dst_total: u64,
    pub(crate) streams: DevPtr<StreamDesc>,
    pub(crate) ids: DevPtr<u32>,
    pub(crate) n_ids: u32,
    pub(crate) status: DevPtr<u32>,
    pub(crate) actual: DevPtr<u32>,
    /// Bytes from the output's first half to its second, the unshuffle scratch (0: the output
    /// has one half); only `dmc_zstd_decode` takes it.
    pub(crate) half: u64,
    /// The first `n_team` ids get a team of warps (`dmc_zstd_decode` and `dmc_inflate_decode`
    /// take it).
    pub(crate) n_team: u32,
}

/// A launcher whose kernel takes [`StreamArgs`].
pub(crate) trait StreamKernelArgs: KernelArgs {
    /// The launcher's arguments from the shared list.
    fn from_stream_args(a: StreamArgs) -> Self;
}

/// `StreamKernelArgs` for launchers that take the shared list's first nine fields, and each
/// `{ field: shared_field }` more that it lists.
macro_rules! stream_kernel_args {
    ($($args:ident $({ $($field:ident: $from:ident),* })?),* $(,)?) => {$(
        impl StreamKernelArgs for $args {
            fn from_stream_args(a: StreamArgs) -> Self {
                let StreamArgs { src_base, src_total, dst_base, dst_total, streams, ids, n_ids, status, actual, half: _, n_team: _ } = a;
                Self { src_base, src_total, dst_base, dst_total, streams, ids, n_ids, status, actual $($(, $field: a.$from)*)? }
            }
        }
    )*};
}
stream_kernel_args!(
    Lz4DecodeArgs,
    BloscLzDecodeArgs,
    MemcpyArgs,
    InflateDecodeArgs { n_team: n_team },
    ZstdDecodeArgs { seq_half: half, n_team: n_team },
);

/// Launches `A`'s kernel with the shared stream arguments (one entry of the decoder's launch
/// table).
///
/// # Safety
/// As [`crate::device::Device::launch_on`].
pub(crate) unsafe fn launch_streams<A: StreamKernelArgs>(
    device: &Device,
    stream: &Stream,
    args: StreamArgs,
    grid: (u32, u32),
    uses: &[&DeviceBuffer],
) -> Result<()> {
    // SAFETY: forwarded contract.
    unsafe { A::from_stream_args(args).launch(device, stream, grid, uses) }
}
