//! The batch buffers ([`Slot`]s, allocated once) and the [`Batch`] a pop hands out.

use std::sync::{Arc, Weak};
use std::time::Duration;

use damacy_codec::{Device, DeviceBuffer, Dtype, Element, Event, Output, Stream};

use crate::pipeline::Sample;
use crate::pipeline::worker::Shared;
use crate::{CodecError, Error};

/// A cache line of host memory: host batch buffers are vectors of these, so every tensor is
/// 64-byte aligned and viewable as any element type.
#[derive(Clone, Copy, bytemuck::Pod, bytemuck::Zeroable)]
#[repr(C, align(64))]
struct Line([u8; 64]);

/// The layout every batch of a pipeline has: the sample shape and one dtype per array.
#[derive(Debug, Clone, PartialEq, Eq)]
pub(crate) struct Layout {
    pub(crate) sample_shape: Vec<u64>,
    pub(crate) dtypes: Vec<Dtype>,
}

impl Layout {
    /// Bytes of one sample of tensor `t`.
    pub(crate) fn sample_bytes(&self, t: usize) -> usize {
        self.sample_shape.iter().product::<u64>() as usize * self.dtypes[t].size()
    }
}

/// The memory of one tensor of a batch.
enum Buffer {
    Host(Vec<Line>),
    Device(DeviceBuffer),
}

/// One batch's memory (a tensor buffer per array, each for a full batch), with the stream its
/// device writes are ordered on and the consumer's release event. Allocated once; moved between
/// the pool, a worker, the ready queue and a [`Batch`], never copied or reallocated.
pub(crate) struct Slot {
    buffers: Vec<Buffer>,
    pub(crate) stream: Option<Stream>,
    /// Recorded on `stream` once the batch is written (device route).
    pub(crate) ready: Option<Event>,
    /// The consumer's event from [`Batch::release`]: the next write waits for it.
    pub(crate) release: Option<Event>,
}

impl Slot {
    /// Allocate `n` slots for `layout` and batches of `batch_size`: host memory, or device
    /// memory and a stream each when `device` is given.
    pub(crate) fn allocate(
        n: usize,
        layout: &Layout,
        batch_size: usize,
        device: Option<&Device>,
    ) -> Result<Vec<Self>, Error> {
        let mut slots = Vec::with_capacity(n);
        for _ in 0..n {
            let mut buffers = Vec::with_capacity(layout.dtypes.len());
            for t in 0..layout.dtypes.len() {
                let len = layout.sample_bytes(t) * batch_size;
                buffers.push(if let Some(d) = device {
                    Buffer::Device(d.alloc(len).map_err(|e| device_error("allocating a batch buffer", e))?)
                } else {
                    let mut v = Vec::new();
                    v.try_reserve_exact(len.div_ceil(64)).map_err(|_| {
                        Error::Codec(CodecError::OutOfMemory(format!(
                            "the host has no {len} bytes for a batch buffer ({n} slots): lower batch_size or depth"
                        )))
                    })?;
                    v.resize(len.div_ceil(64), Line([0; 64]));
                    Buffer::Host(v)
                });
            }
            let stream =
                device.map(Device::new_stream).transpose().map_err(|e| device_error("creating a stream", e))?;
            slots.push(Slot { buffers, stream, ready: None, release: None });
        }
        Ok(slots)
    }

    /// Where the engine writes tensor `t` of a batch of `len` bytes: the first `len` bytes of a
    /// host buffer, or the device buffer with the slot's stream.
    pub(crate) fn output(&mut self, t: usize, len: usize) -> Result<Output<'_>, CodecError> {
        let Slot { buffers, stream, .. } = self;
        match (&mut buffers[t], stream.as_ref()) {
            (Buffer::Host(v), _) => bytemuck::cast_slice_mut::<Line, u8>(v)
                .get_mut(..len)
                .map(Output::Host)
                .ok_or_else(|| CodecError::InvalidArgument("a batch larger than its buffer".into())),
            (Buffer::Device(buffer), Some(stream)) => Ok(Output::Device { buffer, offset: 0, stream }),
            (Buffer::Device(_), None) => Err(CodecError::InvalidArgument("a device buffer without a stream".into())),
        }
    }
}

pub(crate) fn device_error(context: &str, e: damacy_codec::DeviceError) -> Error {
    Error::Codec(CodecError::Device { context: context.to_owned(), source: Arc::new(e) })
}

/// Timings and sizes of one batch.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq)]
#[non_exhaustive]
pub struct BatchStats {
    /// Planning its reads (chunks, shard indexes, coalescing).
    pub plan: Duration,
    /// Reading it: I/O, decode and assemble into its buffers.
    pub read: Duration,
    /// From ready to popped.
    pub queued: Duration,
    /// Bytes delivered (all tensors).
    pub bytes: u64,
    /// Samples left out of it under [`crate::OnError::Skip`].
    pub skipped: u64,
}

/// Where a batch's tensors live.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
#[non_exhaustive]
pub enum Place {
    /// Host memory (the CPU executor).
    Host,
    /// Device memory of the reader's device; `ordinal` is `None` on the kernel emulator.
    Device {
        /// The CUDA device ordinal.
        ordinal: Option<usize>,
    },
}

/// A batch popped from a [`crate::Pipeline`]: one tensor per array of its samples, each of
/// shape `[len, sample shape…]`, C order, in host memory or on the device. The buffers return
/// to the pipeline when the batch is released or dropped; until then nothing overwrites them.
pub struct Batch {
    pub(crate) slot: Option<Slot>,
    pub(crate) index: u64,
    pub(crate) layout: Arc<Layout>,
    pub(crate) samples: Vec<Sample>,
    pub(crate) mask: Option<Vec<bool>>,
    pub(crate) stats: BatchStats,
    pub(crate) device: Option<Device>,
    pub(crate) home: Weak<Shared>,
}

impl std::fmt::Debug for Batch {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("Batch")
            .field("index", &self.index)
            .field("len", &self.len())
            .field("sample_shape", &self.layout.sample_shape)
            .field("dtypes", &self.layout.dtypes)
            .field("place", &self.place())
            .finish_non_exhaustive()
    }
}

impl Batch {
    /// The batch's position in the stream of batches (0 for the first pop's batch).
    #[must_use]
    pub fn index(&self) -> u64 {
        self.index
    }

    /// Samples in the batch: `batch_size`, or fewer for the short last batch of a push and for
    /// a batch that lost samples under [`crate::OnError::Skip`].
    #[must_use]
    pub fn len(&self) -> usize {
        self.samples.len()
    }

    /// Whether the batch holds no sample (never true for a popped batch).
    #[must_use]
    pub fn is_empty(&self) -> bool {
        self.samples.is_empty()
    }

    /// Tensors in the batch: one per array each sample names.
    #[must_use]
    pub fn num_tensors(&self) -> usize {
        self.layout.dtypes.len()
    }

    /// The shape of every tensor: `[len, sample shape…]`.
    #[must_use]
    pub fn shape(&self) -> Vec<u64> {
        let mut s = vec![self.len() as u64];
        s.extend_from_slice(&self.layout.sample_shape);
        s
    }

    /// The element type of tensor `t` (panics if `t >= num_tensors()`, like indexing).
    #[must_use]
    pub fn dtype(&self, t: usize) -> Dtype {
        self.layout.dtypes[t]
    }

    /// Bytes of tensor `t`.
    #[must_use]
    pub fn nbytes(&self, t: usize) -> usize {
        self.layout.sample_bytes(t) * self.len()
    }

    /// Where the tensors live.
    #[must_use]
    pub fn place(&self) -> Place {
        match &self.device {
            None => Place::Host,
            Some(d) => Place::Device { ordinal: d.cuda_ordinal() },
        }
    }

    /// The device a device batch lives on (`None` for a host batch): what bindings need to
    /// fence a consumer's foreign stream ([`Device::record_raw_stream`]).
    #[must_use]
    pub fn device(&self) -> Option<&Device> {
        self.device.as_ref()
    }

    /// The samples, in order.
    #[must_use]
    pub fn samples(&self) -> &[Sample] {
        &self.samples
    }

    /// `true` for each real sample and `false` for padding the sampler added
    /// ([`Sample::padded`]); `None` when no sample of the batch is padding.
    #[must_use]
    pub fn mask(&self) -> Option<&[bool]> {
        self.mask.as_deref()
    }

    /// This batch's timings and sizes.
    #[must_use]
    pub fn stats(&self) -> BatchStats {
        self.stats
    }

    fn slot(&self) -> Result<&Slot, Error> {
        self.slot.as_ref().ok_or_else(|| Error::invalid("the batch was released"))
    }

    fn check_tensor(&self, t: usize) -> Result<(), Error> {
        if t >= self.num_tensors() {
            return Err(Error::invalid(format!("tensor {t} of a batch of {} tensors", self.num_tensors())));
        }
        Ok(())
    }

    /// The bytes of tensor `t`, for a host batch; `None` for a device batch (use
    /// [`Batch::copy_to_host`] or [`Batch::device_ptr`]).
    #[must_use]
    pub fn host_bytes(&self, t: usize) -> Option<&[u8]> {
        match self.slot.as_ref()?.buffers.get(t)? {
            Buffer::Host(v) => Some(&bytemuck::cast_slice::<Line, u8>(v)[..self.nbytes(t)]),
            Buffer::Device(_) => None,
        }
    }

    /// The elements of tensor `t` of a host batch, viewed as `T`; an error for a device batch
    /// or when `T` is not the tensor's dtype.
    pub fn as_slice<T: Element>(&self, t: usize) -> Result<&[T], Error> {
        self.check_tensor(t)?;
        if T::DTYPE != self.dtype(t) {
            return Err(Error::invalid(format!("tensor {t} holds {}, not {}", self.dtype(t), T::DTYPE)));
        }
        let bytes =
            self.host_bytes(t).ok_or_else(|| Error::invalid("the batch is in device memory: use copy_to_host"))?;
        let n = bytes.len() / std::mem::size_of::<T>();
        // SAFETY: host buffers are vectors of 64-byte aligned lines (alignment ≥ align_of::<T>()),
        // `bytes` holds `n * size_of::<T>()` initialised bytes (a whole number of elements of the
        // tensor's dtype, which is `T`'s), and every bit pattern is a valid `T` for the element
        // types `Element` is implemented for (integers, IEEE floats).
        Ok(unsafe { std::slice::from_raw_parts(bytes.as_ptr().cast::<T>(), n) })
    }

    /// The device address of tensor `t` of a device batch (a host address on the kernel
    /// emulator); `None` for a host batch. Valid until the batch is released; work reading it
    /// must be ordered after [`Batch::ready_event`].
    #[must_use]
    pub fn device_ptr(&self, t: usize) -> Option<u64> {
        match self.slot.as_ref()?.buffers.get(t)? {
            Buffer::Device(b) => Some(b.device_ptr()),
            Buffer::Host(_) => None,
        }
    }

    /// The stream the batch was written on (device batches).
    #[must_use]
    pub fn stream(&self) -> Option<&Stream> {
        self.slot.as_ref()?.stream.as_ref()
    }

    /// The event that marks the batch ready on the device: make the consumer's stream wait on
    /// it before reading ([`Stream::wait`]). `None` for host batches (ready when popped).
    #[must_use]
    pub fn ready_event(&self) -> Option<&Event> {
        self.slot.as_ref()?.ready.as_ref()
    }

    /// Copy tensor `t` into host memory (`out` holds exactly [`Batch::nbytes`]); waits for the
    /// batch on the device.
    pub fn copy_to_host(&self, t: usize, out: &mut [u8]) -> Result<(), Error> {
        self.check_tensor(t)?;
        let len = self.nbytes(t);
        if out.len() != len {
            return Err(Error::invalid(format!("tensor {t} has {len} bytes; the output holds {}", out.len())));
        }
        let slot = self.slot()?;
        match (&slot.buffers[t], &self.device, &slot.stream) {
            (Buffer::Host(lines), _, _) => {
                out.copy_from_slice(&bytemuck::cast_slice::<Line, u8>(lines)[..len]);
                Ok(())
            }
            (Buffer::Device(buffer), Some(device), Some(stream)) => {
                device.download_on(stream, buffer, 0, out).map_err(|e| device_error("copying a batch to the host", e))
            }
            _ => Err(Error::invalid("a device batch without its device")),
        }
    }

    /// Tensor `t` copied into a new host vector.
    pub fn to_vec(&self, t: usize) -> Result<Vec<u8>, Error> {
        self.check_tensor(t)?;
        let mut v = vec![0; self.nbytes(t)];
        self.copy_to_host(t, &mut v)?;
        Ok(v)
    }

    /// Give the buffers back to the pipeline. `event`, recorded by the consumer on the stream
    /// that reads the batch, makes the next write into these buffers wait for that work on the
    /// device, without blocking the host. Without an event the buffers are reused at once
    /// (right for host batches and for consumers that synchronised). Dropping a batch is
    /// `release(None)`.
    pub fn release(mut self, event: Option<Event>) {
        self.give_back(event);
    }

    fn give_back(&mut self, event: Option<Event>) {
        if let Some(mut slot) = self.slot.take() {
            slot.release = event;
            if let Some(shared) = self.home.upgrade() {
                shared.return_slot(slot);
            }
        }
    }
}

impl Drop for Batch {
    fn drop(&mut self) {
        self.give_back(None);
    }
}
