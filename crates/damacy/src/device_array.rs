//! [`DeviceArray`]: a decoded array in device memory (a CUDA GPU, or the host emulator) or, from
//! the CPU executor, in host memory; with its shape, element type, a copy to the host and
//! `DLPack` export.

use std::sync::Arc;

use crate::dlpack::{self, DLDevice, DLManagedTensor, DLManagedTensorVersioned, DlpackTensor, TensorSpec};
use crate::{CodecError, Device, DeviceBuffer, DeviceKind, Dtype, Element, Error, Event, ReadBatch as Batch, Stream};

/// An array read by damacy: C order, native byte order, of one element type. Its memory is
/// a device buffer (when the reader has a device) or an aligned host allocation (the CPU
/// executor), freed on drop, never while damacy's work on it may still run.
///
/// Device memory is written in stream order: [`DeviceArray::ready_stream`] sees the data;
/// other streams [`Stream::wait`] on [`DeviceArray::ready_event`] (the `DLPack` exports do this
/// for the consumer's stream), and the host reads through [`DeviceArray::to_host`].
pub struct DeviceArray {
    shape: Vec<u64>,
    dtype: Dtype,
    memory: Memory,
}

enum Memory {
    /// Host memory from the CPU executor; `None` for an array without elements.
    Host(Option<Batch>),
    Device(DeviceMemory),
}

struct DeviceMemory {
    device: Device,
    buffer: DeviceBuffer,
    stream: Stream,
    ready: Arc<Event>,
}

impl std::fmt::Debug for DeviceArray {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("DeviceArray")
            .field("shape", &self.shape)
            .field("dtype", &self.dtype)
            .field("device", &self.dl_device())
            .finish_non_exhaustive()
    }
}

fn device_err(context: &str, source: crate::DeviceError) -> Error {
    Error::Codec(CodecError::Device { context: context.to_owned(), source: Arc::new(source) })
}

impl DeviceArray {
    /// A host array from a batch the reader allocated, viewed with `shape` (whose element
    /// count must be the batch's).
    pub fn from_batch(batch: Batch, shape: Vec<u64>) -> Result<Self, Error> {
        let n: u64 = shape.iter().product();
        if n as usize * batch.dtype.size() != batch.bytes().len() {
            return Err(CodecError::InvalidArgument(format!(
                "shape {shape:?} of {} does not fit a batch of {} bytes",
                batch.dtype,
                batch.bytes().len()
            ))
            .into());
        }
        Ok(Self { dtype: batch.dtype, shape, memory: Memory::Host(Some(batch)) })
    }

    /// An array with no elements (an extent of 0), in host memory.
    #[must_use]
    pub fn empty(shape: Vec<u64>, dtype: Dtype) -> Self {
        Self { shape, dtype, memory: Memory::Host(None) }
    }

    /// A device array over `buffer` (exactly the array's bytes, C order), written by work queued
    /// on `stream` before this call: an event recorded now marks it ready.
    pub fn from_device_buffer(
        device: Device,
        buffer: DeviceBuffer,
        stream: Stream,
        shape: Vec<u64>,
        dtype: Dtype,
    ) -> Result<Self, Error> {
        let n: u64 = shape.iter().product();
        if n as usize * dtype.size() != buffer.len() {
            return Err(CodecError::InvalidArgument(format!(
                "shape {shape:?} of {dtype} does not fit a device buffer of {} bytes",
                buffer.len()
            ))
            .into());
        }
        let ready = Arc::new(stream.record(false).map_err(|e| device_err("recording the array's ready event", e))?);
        Ok(Self { shape, dtype, memory: Memory::Device(DeviceMemory { device, buffer, stream, ready }) })
    }

    /// The array's shape.
    #[must_use]
    pub fn shape(&self) -> &[u64] {
        &self.shape
    }

    /// The element type.
    #[must_use]
    pub fn dtype(&self) -> Dtype {
        self.dtype
    }

    /// Elements in the array.
    #[must_use]
    pub fn num_elements(&self) -> u64 {
        self.shape.iter().product()
    }

    /// Bytes the array holds.
    #[must_use]
    pub fn nbytes(&self) -> usize {
        self.num_elements() as usize * self.dtype.size()
    }

    /// The backend of the device memory, `None` for host memory.
    #[must_use]
    pub fn device_kind(&self) -> Option<DeviceKind> {
        match &self.memory {
            Memory::Host(_) => None,
            Memory::Device(d) => Some(d.device.kind()),
        }
    }

    /// Where the memory is, as `DLPack` says it: `kDLCUDA` and the ordinal for CUDA memory,
    /// `kDLCPU` for host memory and for the emulator's device memory (which is host memory).
    #[must_use]
    pub fn dl_device(&self) -> DLDevice {
        match &self.memory {
            Memory::Device(d) if d.device.kind() == DeviceKind::Cuda => DLDevice::cuda(d.device.ordinal()),
            _ => DLDevice::CPU,
        }
    }

    /// The bytes, for an array in host memory (`None` for device memory: use
    /// [`DeviceArray::to_host`]).
    #[must_use]
    pub fn host_bytes(&self) -> Option<&[u8]> {
        match &self.memory {
            Memory::Host(Some(b)) => Some(b.bytes()),
            Memory::Host(None) => Some(&[]),
            Memory::Device(_) => None,
        }
    }

    /// The device buffer, for an array in device memory.
    #[must_use]
    pub fn device_buffer(&self) -> Option<&DeviceBuffer> {
        match &self.memory {
            Memory::Device(d) => Some(&d.buffer),
            Memory::Host(_) => None,
        }
    }

    /// The stream whose later work sees the data, for an array in device memory.
    #[must_use]
    pub fn ready_stream(&self) -> Option<&Stream> {
        match &self.memory {
            Memory::Device(d) => Some(&d.stream),
            Memory::Host(_) => None,
        }
    }

    /// The event after which the data is complete, for an array in device memory.
    #[must_use]
    pub fn ready_event(&self) -> Option<&Event> {
        match &self.memory {
            Memory::Device(d) => Some(&d.ready),
            Memory::Host(_) => None,
        }
    }

    /// Block until the data is complete (a no-op for host memory); reports a failure of the
    /// device work that wrote it.
    pub fn synchronize(&self) -> Result<(), Error> {
        match &self.memory {
            Memory::Device(d) => d.ready.synchronize().map_err(|e| device_err("waiting for the array", e)),
            Memory::Host(_) => Ok(()),
        }
    }

    /// A copy of the bytes in host memory (C order, native byte order).
    pub fn to_host(&self) -> Result<Vec<u8>, Error> {
        match &self.memory {
            Memory::Host(Some(b)) => Ok(b.bytes().to_vec()),
            Memory::Host(None) => Ok(Vec::new()),
            Memory::Device(d) => {
                let mut out = vec![0u8; d.buffer.len()];
                d.device
                    .download_on(&d.stream, &d.buffer, 0, &mut out)
                    .map_err(|e| device_err("copying the array to the host", e))?;
                Ok(out)
            }
        }
    }

    /// A copy of the elements in host memory, as `T`; an error naming both types when `T` is
    /// not the array's element type.
    pub fn to_vec<T: Element>(&self) -> Result<Vec<T>, Error> {
        if T::DTYPE != self.dtype {
            return Err(CodecError::InvalidArgument(format!("the array holds {}, not {}", self.dtype, T::DTYPE)).into());
        }
        let bytes = self.to_host()?;
        let n = bytes.len() / std::mem::size_of::<T>();
        let mut out: Vec<T> = Vec::with_capacity(n);
        // SAFETY: `out` has room for `n` elements, i.e. `bytes.len()` bytes (the array holds
        // whole elements of `T`'s size); every bit pattern is a valid `T` for the `Element`
        // types (integers, IEEE floats, and bool arrays hold 0 or 1 per byte as zarr writes
        // them); the regions do not overlap.
        unsafe {
            std::ptr::copy_nonoverlapping(bytes.as_ptr(), out.as_mut_ptr().cast::<u8>(), n * std::mem::size_of::<T>());
            out.set_len(n);
        }
        Ok(out)
    }

    /// Make the memory ready for a consumer: on `consumer`'s stream (device-side, the host does
    /// not wait), or for the host when there is none or the memory is host-visible.
    fn make_ready(&self, consumer: Option<&Stream>) -> Result<(), Error> {
        let Memory::Device(d) = &self.memory else { return Ok(()) };
        match consumer {
            Some(s) if d.device.kind() == DeviceKind::Cuda => {
                s.wait(&d.ready).map_err(|e| device_err("ordering the consumer's stream after the array", e))
            }
            _ => self.synchronize(),
        }
    }

    fn spec(&self) -> TensorSpec {
        let data = match &self.memory {
            Memory::Host(Some(b)) => b.bytes().as_ptr().cast_mut().cast(),
            Memory::Host(None) => std::ptr::NonNull::<u64>::dangling().as_ptr().cast(),
            Memory::Device(d) => d.buffer.device_ptr() as usize as *mut std::ffi::c_void,
        };
        TensorSpec::c_contiguous(data, self.dl_device(), dlpack::dl_dtype(self.dtype), &self.shape)
    }

    /// Export as a legacy `DLManagedTensor`, handing the memory to the consumer: its deleter frees
    /// it. With a `consumer` stream the consumer's later work is ordered after the array on the
    /// device, and the memory is freed only after the work queued on that stream by the time
    /// the deleter runs; without one the call waits until the data is complete.
    pub fn into_dlpack(self, consumer: Option<&Stream>) -> Result<DlpackTensor<DLManagedTensor>, Error> {
        self.make_ready(consumer)?;
        let spec = self.spec();
        let owner = Exported { array: self, consumer: consumer.cloned() };
        // SAFETY: `spec` describes the memory of `owner.array` (its batch or device buffer,
        // which do not move when the array is moved: both are heap allocations), C-contiguous,
        // exactly `nbytes` long; the data is ready per `make_ready`.
        Ok(unsafe { dlpack::export(owner, spec) })
    }

    /// Export as a `DLPack` 1.x `DLManagedTensorVersioned` (see [`DeviceArray::into_dlpack`]).
    pub fn into_dlpack_versioned(
        self,
        consumer: Option<&Stream>,
    ) -> Result<DlpackTensor<DLManagedTensorVersioned>, Error> {
        self.make_ready(consumer)?;
        let spec = self.spec();
        let owner = Exported { array: self, consumer: consumer.cloned() };
        // SAFETY: as in `into_dlpack`.
        Ok(unsafe { dlpack::export_versioned(owner, spec) })
    }
}

/// What an export owns: the array, and the consumer stream whose work must finish before the
/// memory is freed.
struct Exported {
    array: DeviceArray,
    consumer: Option<Stream>,
}

impl Drop for Exported {
    fn drop(&mut self) {
        if let (Some(stream), Memory::Device(_)) = (&self.consumer, &self.array.memory) {
            // The consumer's queued reads of the memory finish before it is freed. A failure
            // here belongs to the consumer's work; waiting on the whole stream is the fallback.
            match stream.record(false) {
                Ok(event) => {
                    if event.synchronize().is_err() {
                        let _ = stream.synchronize();
                    }
                }
                Err(_) => {
                    let _ = stream.synchronize();
                }
            }
        }
    }
}

const _: () = {
    const fn send_sync<T: Send + Sync>() {}
    send_sync::<DeviceArray>();
};
