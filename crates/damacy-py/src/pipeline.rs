//! `damacy.Pipeline` (the Rust [`Pipeline`] behind `damacy._damacy._Pipeline`), `damacy.Batch`
//! with `DLPack` export, `damacy.BatchInfo` and the typed statistics.
//!
//! The Python `damacy.Config` (a frozen dataclass in `python/damacy/_config.py`) hands its
//! fields over as a dict; [`ConfigArgs`] reads it and builds the Rust [`Config`].
//!
//! Lifetimes of a batch's memory: a `damacy.Batch` and every `DLPack` capsule made from it
//! share one [`Held`]; the batch's buffers go back to the pipeline's pool only when the last of
//! them lets go (`Batch.release()` or the Batch's collection, and each consumer's deleter). So
//! `release()` while a tensor made with `from_dlpack` is alive is safe: the tensor keeps the
//! memory, and the buffers come back when it is freed (fenced by the consumer's stream on a
//! GPU).

use std::ffi::{CStr, c_void};
use std::ptr::NonNull;
use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::{Arc, Mutex, PoisonError};
use std::time::Duration;

use damacy::dlpack::{
    self, DLDevice, DLManagedTensor, DLManagedTensorVersioned, DLPACK_FLAG_BITMASK_IS_COPIED, DlpackTensor, TensorSpec,
};
use damacy::{
    Batch, BatchStats, Config, Device, Dtype, Event, ExecutorKind, OnError, OutOfBounds, OutputDtype, Pipeline,
    PipelineStats, Place, Region, Sample, StageStats, StoreOptions,
};
use pyo3::exceptions::{PyBufferError, PyTypeError, PyValueError};
use pyo3::prelude::*;
use pyo3::types::{PyDict, PyList, PyTuple};
use pyo3::{IntoPyObjectExt, ffi};

use crate::engine::stats_dict;
use crate::errors::{Error as PyDamacyError, InvalidArgument, codec_err, damacy_err, guard};

// ------------------------------------------------------------------------------- the config

/// Remote-store options of `Config.store_options` (the keywords of `damacy.Store.open`), as
/// the Python side passes them: `(endpoint, region, access_key_id, secret_access_key,
/// anonymous, retries)`.
type StoreArgs = (Option<String>, Option<String>, Option<String>, Option<String>, bool, Option<usize>);

/// The fields of a `damacy.Config`, as the dict its `_args()` makes.
#[derive(FromPyObject)]
#[pyo3(from_item_all)]
pub(crate) struct ConfigArgs {
    batch_size: usize,
    sample_shape: Option<Vec<u64>>,
    dtype: Option<String>,
    allow_lossy_cast: bool,
    executor: String,
    device: Option<usize>,
    host_buffer_bytes: u64,
    device_buffer_bytes: u64,
    max_gpu_memory_bytes: Option<u64>,
    n_io_threads: usize,
    n_compute_threads: usize,
    arrays_per_sample: usize,
    reads_in_flight: usize,
    n_workers: usize,
    lanes: Option<usize>,
    lookahead: Option<usize>,
    depth: usize,
    validate_checksums: bool,
    out_of_bounds: String,
    on_error: String,
    drop_last: bool,
    pop_timeout: f64,
    shard_index_cache_bytes: Option<u64>,
    store_options: Option<StoreArgs>,
}

fn parse<T: std::str::FromStr>(what: &str, s: &str) -> PyResult<T>
where
    T::Err: std::fmt::Display,
{
    s.parse().map_err(|e: T::Err| InvalidArgument::new_err(format!("{what}: {e}")))
}

/// Seconds as a duration; `what` names the argument in the error.
fn seconds(what: &str, s: f64) -> PyResult<Duration> {
    if s > 0.0
        && let Ok(d) = Duration::try_from_secs_f64(s)
    {
        return Ok(d);
    }
    Err(InvalidArgument::new_err(format!("{what} is {s}: give a positive number of seconds")))
}

impl ConfigArgs {
    fn build(self) -> PyResult<Config> {
        let mut c = Config::new(self.batch_size)
            .with_dtype(match &self.dtype {
                None => OutputDtype::Native,
                Some(d) => parse::<OutputDtype>("Config.dtype", d)?,
            })
            .with_lossy_cast(self.allow_lossy_cast)
            .with_executor(parse::<ExecutorKind>("Config.executor", &self.executor)?)
            .with_host_buffer_bytes(self.host_buffer_bytes)
            .with_device_buffer_bytes(self.device_buffer_bytes)
            .with_io_threads(self.n_io_threads)
            .with_compute_threads(self.n_compute_threads)
            .with_reads_in_flight(self.reads_in_flight)
            .with_workers(self.n_workers)
            .with_depth(self.depth)
            .with_validate_checksums(self.validate_checksums)
            .with_out_of_bounds(match self.out_of_bounds.as_str() {
                "error" => OutOfBounds::Error,
                "fill" => OutOfBounds::Fill,
                other => {
                    return Err(InvalidArgument::new_err(format!(
                        "Config.out_of_bounds is {other:?}: use \"error\" or \"fill\""
                    )));
                }
            })
            .with_on_error(parse::<OnError>("Config.on_error", &self.on_error)?)
            .with_drop_last(self.drop_last)
            .with_pop_timeout(seconds("Config.pop_timeout", self.pop_timeout)?)
            .with_arrays_per_sample(self.arrays_per_sample);
        c.sample_shape = self.sample_shape;
        c.device = self.device;
        c.max_gpu_memory_bytes = self.max_gpu_memory_bytes;
        c.lookahead = self.lookahead;
        c.lanes = self.lanes;
        c.shard_index_cache_bytes = self.shard_index_cache_bytes;
        if let Some((endpoint, region, key, secret, anonymous, retries)) = self.store_options {
            let mut o = StoreOptions::default().with_anonymous(anonymous);
            if let Some(e) = endpoint {
                o = o.with_endpoint(e);
            }
            if let Some(r) = region {
                o = o.with_region(r);
            }
            match (key, secret) {
                (Some(k), Some(v)) => o = o.with_credentials(k, v),
                (None, None) => {}
                _ => {
                    return Err(InvalidArgument::new_err(
                        "Config.store_options: give access_key_id and secret_access_key together",
                    ));
                }
            }
            if let Some(n) = retries {
                o = o.with_retries(n);
            }
            c = c.with_store_options(o);
        }
        Ok(c)
    }
}

/// The defaults of every knob of the Rust `Config` (the Python `Config`'s field defaults).
#[pyfunction]
pub(crate) fn _config_defaults(py: Python<'_>) -> PyResult<Bound<'_, PyDict>> {
    let c = Config::default();
    let d = PyDict::new(py);
    d.set_item("host_buffer_bytes", c.host_buffer_bytes)?;
    d.set_item("device_buffer_bytes", c.device_buffer_bytes)?;
    d.set_item("n_io_threads", c.n_io_threads)?;
    d.set_item("n_compute_threads", c.n_compute_threads)?;
    d.set_item("reads_in_flight", c.reads_in_flight)?;
    d.set_item("n_workers", c.n_workers)?;
    d.set_item("depth", c.depth)?;
    d.set_item("validate_checksums", c.validate_checksums)?;
    d.set_item("drop_last", c.drop_last)?;
    d.set_item("pop_timeout", c.pop_timeout.as_secs_f64())?;
    d.set_item("allow_lossy_cast", c.allow_lossy_cast)?;
    Ok(d)
}

/// Validates a `Config`'s fields and returns the sizes they imply (`damacy.Config.sizes`).
#[pyfunction]
pub(crate) fn _config_sizes(py: Python<'_>, args: ConfigArgs) -> PyResult<Bound<'_, PyDict>> {
    let config = args.build()?;
    let sizes = config.validate().map_err(|e| damacy_err(&e))?;
    let d = PyDict::new(py);
    d.set_item("lookahead", sizes.lookahead)?;
    d.set_item("slots", sizes.slots)?;
    d.set_item("batch_bytes", sizes.batch_bytes().map(|b| b.iter().sum::<u64>()))?;
    d.set_item("pool_bytes", sizes.pool_bytes())?;
    d.set_item("shard_index_cache_bytes", sizes.shard_index_cache_bytes)?;
    d.set_item("shard_index_floor", sizes.shard_index_floor)?;
    d.set_item("metadata_cache_entries", sizes.metadata_cache_entries)?;
    Ok(d)
}

/// Every size a `Config` implies, one per line (`damacy.Config.describe()`).
#[pyfunction]
pub(crate) fn _config_describe(args: ConfigArgs) -> PyResult<String> {
    Ok(args.build()?.describe())
}

// ------------------------------------------------------------------------------- pushing

/// What the pushed Python iterators share with the pipeline object: a stop flag (set by
/// `close`) and the first error an iterator raised (re-raised by the next `pop`).
#[derive(Default)]
struct Feed {
    stop: AtomicBool,
    error: Mutex<Option<PyErr>>,
}

impl Feed {
    fn take_error(&self) -> Option<PyErr> {
        self.error.lock().unwrap_or_else(PoisonError::into_inner).take()
    }

    fn has_error(&self) -> bool {
        self.error.lock().unwrap_or_else(PoisonError::into_inner).is_some()
    }

    fn set_error(&self, e: PyErr) {
        let mut slot = self.error.lock().unwrap_or_else(PoisonError::into_inner);
        if slot.is_none() {
            *slot = Some(e);
        }
    }
}

/// A Python iterator of `damacy.Sample`s as the Rust iterator `Pipeline::push` pulls lazily on
/// its feeder thread (attaching to the interpreter for each item). An exception, or an item
/// that is not a sample, ends the iterator and is kept for the next `pop`.
struct PySamples {
    iter: Option<Py<PyAny>>,
    feed: Arc<Feed>,
    index: u64,
}

/// One Python `damacy.Sample` (anything with `uris` or `uri`, `start` and `shape`) as a Rust
/// sample.
fn sample_from_py(item: &Bound<'_, PyAny>, index: u64) -> PyResult<Sample> {
    let fields = (|| -> PyResult<(Vec<String>, Vec<u64>, Vec<u64>)> {
        let uris = match item.getattr("uris") {
            Ok(u) => u.extract()?,
            Err(_) => vec![item.getattr("uri")?.extract()?],
        };
        Ok((uris, item.getattr("start")?.extract()?, item.getattr("shape")?.extract()?))
    })();
    let (uris, start, shape) = fields.map_err(|_| {
        let repr = item.repr().map_or_else(|_| "?".to_owned(), |r| r.to_string());
        PyTypeError::new_err(format!(
            "push(): item {index} of the iterable is {repr}, not a damacy.Sample; push an iterable of damacy.Sample(uri, region)"
        ))
    })?;
    if uris.is_empty() {
        return Err(InvalidArgument::new_err(format!("push(): item {index} of the iterable names no array")));
    }
    Ok(Sample::multi(uris, Region::new(start, shape)))
}

impl Iterator for PySamples {
    type Item = Sample;

    fn next(&mut self) -> Option<Sample> {
        if self.feed.stop.load(Ordering::Acquire) {
            self.iter = None;
        }
        let iter = self.iter.as_ref()?;
        let index = self.index;
        // `try_attach`: no Python once the interpreter shuts down; the push just ends.
        let got = Python::try_attach(|py| {
            guard("Pipeline.push (pulling the iterable)", || {
                let it = iter.bind(py);
                match it.call_method0("__next__") {
                    Ok(item) => sample_from_py(&item, index).map(Some),
                    Err(e) if e.is_instance_of::<pyo3::exceptions::PyStopIteration>(py) => Ok(None),
                    Err(e) => Err(e),
                }
            })
        });
        match got {
            Some(Ok(Some(sample))) => {
                self.index += 1;
                Some(sample)
            }
            Some(Ok(None)) | None => {
                self.iter = None;
                None
            }
            Some(Err(e)) => {
                self.feed.set_error(e);
                self.iter = None;
                None
            }
        }
    }
}

impl Drop for PySamples {
    fn drop(&mut self) {
        // Release the Python iterator while attached when we can (a generator's `finally`
        // runs now); otherwise PyO3 defers the decref until the interpreter is next entered.
        if let Some(iter) = self.iter.take() {
            let _ = Python::try_attach(move |_py| drop(iter));
        }
    }
}

// ------------------------------------------------------------------------------- the pipeline

/// The Rust pipeline behind `damacy.Pipeline` (see `python/damacy/_pipeline.py`).
#[pyclass(module = "damacy._damacy", name = "_Pipeline", frozen)]
pub(crate) struct PyPipeline {
    inner: Arc<Pipeline>,
    feed: Arc<Feed>,
    timeout: Duration,
}

#[pymethods]
impl PyPipeline {
    #[new]
    fn new(py: Python<'_>, config: ConfigArgs) -> PyResult<Self> {
        let config = config.build()?;
        let timeout = config.pop_timeout;
        let inner = py.detach(|| guard("Pipeline()", || Pipeline::new(config).map_err(|e| damacy_err(&e))))?;
        Ok(Self { inner: Arc::new(inner), feed: Arc::new(Feed::default()), timeout })
    }

    /// Setup warnings to raise as `UserWarning` (e.g. `LOCAL_RANK` names another device).
    fn warnings(&self) -> Vec<String> {
        self.inner.warnings().to_vec()
    }

    /// The configuration's sizes plus what the pipeline decided (executor, batch layout).
    fn describe(&self, py: Python<'_>) -> String {
        let inner = self.inner.clone();
        py.detach(move || inner.describe())
    }

    /// Which executor decodes, and why.
    #[getter]
    fn executor(&self) -> String {
        self.inner.reader().executor_note().to_owned()
    }

    /// Queue an iterator of samples; it is pulled lazily on the pipeline's feeder thread.
    fn push(&self, py: Python<'_>, samples: &Bound<'_, PyAny>) -> PyResult<()> {
        let iter = samples.try_iter()?.into_any().unbind();
        let pulled = PySamples { iter: Some(iter), feed: self.feed.clone(), index: 0 };
        let inner = self.inner.clone();
        py.detach(move || guard("Pipeline.push", || inner.push(pulled).map_err(|e| damacy_err(&e))))
    }

    /// The next batch. Waits without the GIL, in slices that check for signals (Ctrl-C).
    #[pyo3(signature = (timeout = None))]
    fn pop(&self, py: Python<'_>, timeout: Option<f64>) -> PyResult<PyBatch> {
        let timeout = match timeout {
            None => self.timeout,
            Some(t) => seconds("pop(timeout=…)", t)?,
        };
        if let Some(e) = self.feed.take_error() {
            return Err(e);
        }
        let (inner, feed) = (self.inner.clone(), self.feed.clone());
        let mut signal: Option<PyErr> = None;
        let popped = py.detach(|| {
            guard("Pipeline.pop", || {
                Ok(inner.pop_with(timeout, &mut || {
                    if feed.has_error() {
                        return true;
                    }
                    Python::attach(|py| match py.check_signals() {
                        Ok(()) => false,
                        Err(e) => {
                            signal = Some(e);
                            true
                        }
                    })
                }))
            })
        })?;
        match popped {
            Ok(batch) => Ok(PyBatch::new(batch)),
            Err(damacy::Error::Interrupted) => Err(signal
                .or_else(|| self.feed.take_error())
                .unwrap_or_else(|| PyDamacyError::new_err("pop was interrupted"))),
            // The iterable failing ends its push: its error, kept by the feeder thread while
            // this pop waited, is why nothing more came.
            Err(e @ (damacy::Error::Exhausted(_) | damacy::Error::Timeout(_))) => {
                Err(self.feed.take_error().unwrap_or_else(|| damacy_err(&e)))
            }
            Err(e) => Err(damacy_err(&e)),
        }
    }

    /// Batches still to come (formed and not popped, plus one while a push may yield more).
    #[getter]
    fn pending(&self) -> usize {
        self.inner.pending()
    }

    /// What the pipeline did since it was built or since `stats_reset()`.
    fn stats(&self) -> PyPipelineStats {
        PyPipelineStats { stats: self.inner.stats() }
    }

    /// Start the counters of `stats()` afresh.
    fn stats_reset(&self) {
        self.inner.stats_reset();
    }

    /// Stop pulling, free queued batches and join the threads. Held batches stay valid.
    fn close(&self, py: Python<'_>) {
        self.feed.stop.store(true, Ordering::Release);
        let inner = self.inner.clone();
        py.detach(move || inner.close());
    }
}

// ------------------------------------------------------------------------------- batches

/// A popped batch shared by its `damacy.Batch` and the `DLPack` exports made from it: the
/// buffers return to the pool when the last of them drops this, after the consumers' release
/// events.
struct Held {
    batch: Option<Batch>,
    release: Mutex<Vec<Event>>,
}

impl Held {
    /// Add an event the next write into these buffers must wait for.
    fn fence(&self, event: Event) {
        self.release.lock().unwrap_or_else(PoisonError::into_inner).push(event);
    }
}

impl Drop for Held {
    fn drop(&mut self) {
        let Some(batch) = self.batch.take() else { return };
        let mut events = std::mem::take(self.release.get_mut().unwrap_or_else(PoisonError::into_inner));
        // One event for the pipeline: with several, the batch's stream waits on each and the
        // event recorded after them covers all; if that fails, the host waits for each.
        let event = if events.len() > 1 {
            let joined = batch.stream().and_then(|s| {
                events.iter().try_for_each(|e| s.wait(e)).ok()?;
                s.record(false).ok()
            });
            if joined.is_none() {
                for e in &events {
                    let _ = e.synchronize();
                }
            }
            joined
        } else {
            events.pop()
        };
        batch.release(event);
    }
}

/// Where a batch's tensor lives, as `DLPack` names it: CUDA memory, or host memory (host
/// batches, and the kernel emulator's device memory, which is host memory).
fn dl_device_of(place: Place) -> DLDevice {
    match place {
        Place::Device { ordinal: Some(n) } => DLDevice::cuda(n),
        _ => DLDevice::CPU,
    }
}

/// A batch popped from a `damacy.Pipeline`: one tensor of shape `(len, *sample_shape)` per
/// array of the samples (one for single-array samples), in host memory (the CPU executor) or
/// on the GPU. Consume a single-tensor batch (or each of `batch.tensors`) with any `DLPack`
/// consumer (`numpy.from_dlpack`, `torch.from_dlpack`, `cupy.from_dlpack`,
/// `jax.dlpack.from_dlpack`), zero-copy; give it back with `release()` (or
/// `with pipeline.pop() as batch:`).
#[pyclass(module = "damacy", name = "Batch", frozen)]
pub(crate) struct PyBatch {
    held: Mutex<Option<Arc<Held>>>,
    index: u64,
    shape: Vec<u64>,
    tensors: Vec<TensorMeta>,
    place: Place,
    ready_stream: Option<u64>,
    ready_event: Option<u64>,
    samples: Vec<Sample>,
    mask: Option<Vec<bool>>,
    stats: BatchStats,
    device: Option<Device>,
}

/// Where one tensor of a batch lives and what it holds.
struct TensorMeta {
    ptr: u64,
    dtype: Dtype,
    nbytes: usize,
}

impl PyBatch {
    fn new(batch: Batch) -> Self {
        let place = batch.place();
        let tensors = (0..batch.num_tensors())
            .map(|t| TensorMeta {
                ptr: batch
                    .device_ptr(t)
                    .or_else(|| batch.host_bytes(t).map(|b| b.as_ptr() as usize as u64))
                    .unwrap_or(0),
                dtype: batch.dtype(t),
                nbytes: batch.nbytes(t),
            })
            .collect();
        let device = batch.device().cloned();
        Self {
            index: batch.index(),
            shape: batch.shape(),
            tensors,
            place,
            ready_stream: batch.stream().map(damacy::Stream::raw_handle).filter(|&h| h != 0),
            ready_event: batch.ready_event().map(Event::raw_handle).filter(|&h| h != 0),
            samples: batch.samples().to_vec(),
            mask: batch.mask().map(<[bool]>::to_vec),
            stats: batch.stats(),
            device,
            held: Mutex::new(Some(Arc::new(Held { batch: Some(batch), release: Mutex::new(Vec::new()) }))),
        }
    }

    fn held(&self) -> PyResult<Arc<Held>> {
        self.held
            .lock()
            .unwrap_or_else(PoisonError::into_inner)
            .clone()
            .ok_or_else(|| PyBufferError::new_err("the batch was released; its memory went back to the pipeline"))
    }

    fn is_cuda(&self) -> bool {
        matches!(self.place, Place::Device { ordinal: Some(_) })
    }

    fn place_name(&self) -> String {
        match self.place {
            Place::Host => "cpu".to_owned(),
            Place::Device { ordinal: Some(n) } => format!("cuda:{n}"),
            _ => "emulated".to_owned(),
        }
    }

    /// Make the batch ready for a `DLPack` consumer: on CUDA, the consumer's `stream` waits on
    /// the batch's ready event (returned, with the device, to fence the reuse of the buffers
    /// when the consumer frees the tensor); host-visible device memory (the emulator) is
    /// waited for on the host.
    /// `stream` is the consumer's, as [`consumer_stream`] checked it for kDLCUDA (`None`: -1,
    /// no ordering).
    fn order_consumer(&self, py: Python<'_>, batch: &Batch, stream: Option<u64>) -> PyResult<Option<(Device, u64)>> {
        let device_err =
            |e| codec_err(&damacy::CodecError::Device { context: "__dlpack__".into(), source: Arc::new(e) });
        let Some(ready) = batch.ready_event() else { return Ok(None) };
        let (true, Some(device)) = (self.is_cuda(), &self.device) else {
            py.detach(|| ready.synchronize()).map_err(device_err)?;
            return Ok(None);
        };
        let Some(s) = stream else { return Ok(None) };
        // SAFETY: `s` is the consumer's stream of this device, live during the call (the
        // DLPack protocol's contract for `stream`).
        unsafe { ready.make_raw_stream_wait(s) }.map_err(device_err)?;
        Ok(Some((device.clone(), s)))
    }

    /// Python `damacy.Sample`s of the batch.
    fn py_samples<'py>(&self, py: Python<'py>) -> PyResult<Bound<'py, PyList>> {
        let module = py.import("damacy._sample")?;
        let (cls, region_cls) = (module.getattr("Sample")?, module.getattr("Region")?);
        let list = PyList::empty(py);
        for s in &self.samples {
            // By start and shape: a bare tuple would mean (start, stop) per axis.
            let region = region_cls.call1((s.region.start.clone(), s.region.shape.clone()))?;
            let sample = match s.uris.as_slice() {
                [uri] => cls.call1((uri, region))?,
                uris => cls.call1((PyTuple::new(py, uris)?, region))?,
            };
            list.append(sample)?;
        }
        Ok(list)
    }

    /// Tensor `t`'s metadata (`t` < the batch's tensor count, checked by the callers).
    fn tensor(&self, t: usize) -> PyResult<&TensorMeta> {
        self.tensors.get(t).ok_or_else(|| {
            pyo3::exceptions::PyIndexError::new_err(format!("tensor {t}: the batch holds {}", self.tensors.len()))
        })
    }

    /// A `DLPack` capsule of tensor `t` (see `__dlpack__`).
    fn export(
        &self,
        py: Python<'_>,
        t: usize,
        stream: Option<i64>,
        max_version: Option<(u32, u32)>,
        dl_device: Option<(i32, i32)>,
        copy: Option<bool>,
    ) -> PyResult<Py<PyAny>> {
        let held = self.held()?;
        let batch = held.batch.as_ref().ok_or_else(|| PyBufferError::new_err("the batch was released"))?;
        let meta = self.tensor(t)?;
        let ours = dl_device_of(self.place);
        let to_host = match dl_device {
            Some((ty, id)) if (ty, id) != (ours.device_type.0, ours.device_id) => {
                if (ty, id) == (DLDevice::CPU.device_type.0, 0) && copy != Some(false) {
                    true
                } else {
                    return Err(PyBufferError::new_err(format!(
                        "the batch is on device {:?}; it cannot be exported to dl_device={:?}{}",
                        (ours.device_type.0, ours.device_id),
                        (ty, id),
                        if copy == Some(false) { " without a copy (copy=False)" } else { "" }
                    )));
                }
            }
            _ => copy == Some(true),
        };
        let exported_to = if to_host { DLDevice::CPU } else { ours };
        let stream = consumer_stream(exported_to.device_type.0 == DLDevice::CPU.device_type.0, stream)?;
        let versioned = max_version.is_some_and(|(major, _)| major >= 1);
        let dtype = dlpack::dl_dtype(meta.dtype);
        let (owner, spec) = if to_host {
            // A copy in host memory (waits for the batch on the device).
            let mut bytes = vec![0u8; meta.nbytes];
            py.detach(|| batch.copy_to_host(t, &mut bytes)).map_err(|e| damacy_err(&e))?;
            let spec = TensorSpec::c_contiguous(bytes.as_mut_ptr().cast(), DLDevice::CPU, dtype, &self.shape);
            (Exported { held: None, copy: Some(bytes), consumer: None }, spec)
        } else {
            let consumer = self.order_consumer(py, batch, stream)?;
            let data = if meta.nbytes == 0 {
                NonNull::<u64>::dangling().as_ptr().cast()
            } else {
                meta.ptr as usize as *mut c_void
            };
            let spec = TensorSpec::c_contiguous(data, ours, dtype, &self.shape);
            (Exported { held: Some(held.clone()), copy: None, consumer }, spec)
        };
        let copied = owner.copy.is_some();
        if versioned {
            // SAFETY: `spec` describes memory `owner` keeps alive and unmoved: the batch's buffer
            // (held through the shared `Held`, never returned to the pool before it drops) or
            // the copy's heap buffer; C-contiguous, exactly the tensor's `nbytes`; ready for
            // the consumer (its stream waits on the batch, or the host waited).
            let raw = unsafe { dlpack::export_versioned(owner, spec) }.into_raw();
            if copied {
                // SAFETY: `raw` is the live export just made (a pointer from `Box::into_raw`),
                // not yet handed to anyone; only its flags change.
                unsafe { (*raw.as_ptr()).flags |= DLPACK_FLAG_BITMASK_IS_COPIED };
            }
            // SAFETY: `raw` came from `into_raw` just above and nobody else deletes it.
            capsule(py, unsafe { DlpackTensor::from_raw(raw) }, VERSIONED, drop_versioned_capsule)
        } else {
            // SAFETY: as above.
            let tensor = unsafe { dlpack::export(owner, spec) };
            capsule(py, tensor, LEGACY, drop_legacy_capsule)
        }
    }
}

/// The consumer's `__dlpack__(stream=…)` as the array-API standard defines it for the device
/// the tensor is exported to. kDLCPU (host batches, the emulator's, and copies to the host)
/// has no streams: only `None`. kDLCUDA: `None` or 1 is the legacy default stream, 2 the
/// per-thread default stream, an integer above 2 a `CUstream` handle, and -1 asks for no
/// ordering (`Ok(None)`); 0 is disallowed as ambiguous, like anything below -1 (`ValueError`).
fn consumer_stream(host: bool, stream: Option<i64>) -> PyResult<Option<u64>> {
    match (host, stream) {
        // The host has nothing to order; -1 asks the device for nothing.
        (true, None) | (false, Some(-1)) => Ok(None),
        (true, Some(s)) => Err(PyValueError::new_err(format!(
            "__dlpack__(stream={s}): the tensor is exported to the host (kDLCPU), which has no streams; pass stream=None"
        ))),
        (false, None) => Ok(Some(1)),
        (false, Some(0)) => Err(PyValueError::new_err(
            "__dlpack__(stream=0): 0 is ambiguous for CUDA and disallowed by the array-API standard; pass 1 (the legacy default stream), 2 (the per-thread default stream), a CUstream handle, -1 (no synchronisation) or None",
        )),
        (false, Some(s)) if s > 0 => Ok(Some(s.unsigned_abs())),
        (false, Some(s)) => Err(PyValueError::new_err(format!(
            "__dlpack__(stream={s}): pass 1 (the legacy default stream), 2 (the per-thread default stream), a CUstream handle, -1 (no synchronisation) or None"
        ))),
    }
}

/// A foreign CUDA event handle from `release(event)`'s argument: an int (a `CUevent`), an
/// event object (`torch.cuda.Event.cuda_event`, `cupy.cuda.Event.ptr`), or a stream object
/// (`torch.cuda.Stream`, `cupy.cuda.Stream`), on which an event is recorded now.
fn raw_event(obj: &Bound<'_, PyAny>) -> PyResult<u64> {
    let what = || {
        PyTypeError::new_err(format!(
            "release(event=…) takes a CUevent handle (int), a torch/cupy Event or Stream, or an object with .cuda_event or .ptr; got {}",
            obj.repr().map_or_else(|_| "?".to_owned(), |r| r.to_string())
        ))
    };
    let handle: u64 = if obj.is_instance_of::<pyo3::types::PyInt>() {
        obj.extract()?
    } else if obj.hasattr("cuda_event")? {
        obj.getattr("cuda_event")?.extract()?
    } else if obj.hasattr("cuda_stream")? && obj.hasattr("record_event")? {
        obj.call_method0("record_event")?.getattr("cuda_event")?.extract()?
    } else if obj.get_type().name()?.to_string().ends_with("Stream") && obj.hasattr("record")? {
        obj.call_method0("record")?.getattr("ptr")?.extract()?
    } else if obj.hasattr("ptr")? {
        obj.getattr("ptr")?.extract()?
    } else {
        return Err(what());
    };
    if handle == 0 {
        return Err(InvalidArgument::new_err(
            "release(event=…): the event handle is 0 (an event that was never recorded); record it on the stream that reads the batch",
        ));
    }
    Ok(handle)
}

/// What a `DLPack` export owns: the batch (shared), or a host copy; on a GPU, the consumer's
/// stream, whose work queued by the time the consumer frees the tensor fences the reuse of the
/// buffers.
struct Exported {
    held: Option<Arc<Held>>,
    copy: Option<Vec<u8>>,
    consumer: Option<(Device, u64)>,
}

impl Drop for Exported {
    fn drop(&mut self) {
        if let (Some(held), Some((device, stream))) = (&self.held, &self.consumer) {
            // SAFETY: `stream` is the consumer's stream handle from `__dlpack__(stream=…)`, of the
            // batch's device; DLPack consumers free the tensor (calling this deleter) while
            // the stream they named is alive.
            match unsafe { device.record_raw_stream(*stream) } {
                Ok(event) => held.fence(event),
                // No event can fence the consumer's reads (the context is failing): keep the
                // buffers out of the pool for good rather than let a later batch overwrite
                // memory the consumer's stream may still read.
                Err(_) => std::mem::forget(held.clone()),
            }
        }
    }
}

const LEGACY: &CStr = c"dltensor";
const VERSIONED: &CStr = c"dltensor_versioned";

/// The capsule destructor of a legacy export: frees the tensor unless a consumer took it
/// (renamed the capsule to `used_dltensor`, and calls the deleter itself).
unsafe extern "C" fn drop_legacy_capsule(capsule: *mut ffi::PyObject) {
    // SAFETY: called by Python with a live capsule; `PyCapsule_IsValid` does not raise.
    if unsafe { ffi::PyCapsule_IsValid(capsule, LEGACY.as_ptr()) } == 1 {
        // SAFETY: a valid capsule of that name holds the pointer we stored.
        let ptr = unsafe { ffi::PyCapsule_GetPointer(capsule, LEGACY.as_ptr()) }.cast::<DLManagedTensor>();
        if let Some(p) = NonNull::new(ptr) {
            // SAFETY: the pointer came from `DlpackTensor::into_raw` and nobody consumed it.
            drop(unsafe { DlpackTensor::from_raw(p) });
        }
    }
}

/// As [`drop_legacy_capsule`], for a versioned export (`used_dltensor_versioned` once taken).
unsafe extern "C" fn drop_versioned_capsule(capsule: *mut ffi::PyObject) {
    // SAFETY: as in `drop_legacy_capsule`.
    if unsafe { ffi::PyCapsule_IsValid(capsule, VERSIONED.as_ptr()) } == 1 {
        // SAFETY: as in `drop_legacy_capsule`.
        let ptr = unsafe { ffi::PyCapsule_GetPointer(capsule, VERSIONED.as_ptr()) }.cast::<DLManagedTensorVersioned>();
        if let Some(p) = NonNull::new(ptr) {
            // SAFETY: as in `drop_legacy_capsule`.
            drop(unsafe { DlpackTensor::from_raw(p) });
        }
    }
}

/// A capsule around `ptr` with `name` and `destructor`; on failure the tensor is freed.
fn capsule<M: dlpack::ManagedTensor>(
    py: Python<'_>,
    tensor: DlpackTensor<M>,
    name: &'static CStr,
    destructor: unsafe extern "C" fn(*mut ffi::PyObject),
) -> PyResult<Py<PyAny>> {
    let ptr = tensor.into_raw();
    // SAFETY: `ptr` is a live export; `name` is a static C string; the destructor matches it.
    let obj = unsafe { ffi::PyCapsule_New(ptr.as_ptr().cast::<c_void>(), name.as_ptr(), Some(destructor)) };
    if obj.is_null() {
        // SAFETY: the capsule was not made, so we still own the export.
        drop(unsafe { DlpackTensor::from_raw(ptr) });
        return Err(PyErr::fetch(py));
    }
    // SAFETY: `obj` is a new reference returned by `PyCapsule_New`.
    Ok(unsafe { Bound::from_owned_ptr(py, obj) }.unbind())
}

#[pymethods]
impl PyBatch {
    /// The batch's device pointer, shape, dtype, samples and ready stream.
    #[getter]
    fn info(&self, py: Python<'_>) -> PyResult<PyBatchInfo> {
        let first = self.tensor(0)?;
        Ok(PyBatchInfo {
            device_ptr: first.ptr,
            device_ptrs: self.tensors.iter().map(|m| m.ptr).collect(),
            shape: self.shape.clone(),
            dtype: first.dtype.name(),
            dtypes: self.dtypes(),
            samples: self.py_samples(py)?.unbind(),
            ready_stream: self.ready_stream,
            ready_event: self.ready_event,
            device: self.place_name(),
            index: self.index,
            nbytes: first.nbytes,
            tensor_nbytes: self.tensors.iter().map(|m| m.nbytes).collect(),
            mask: self.mask.clone(),
        })
    }

    /// The shape: `(len, *sample_shape)`.
    #[getter]
    fn shape<'py>(&self, py: Python<'py>) -> PyResult<Bound<'py, PyTuple>> {
        PyTuple::new(py, &self.shape)
    }

    /// The element type (`"uint16"`, `"float32"`, `"bfloat16"`, …); of the first tensor when
    /// the samples name several arrays (`dtypes` gives each).
    #[getter]
    fn dtype(&self) -> PyResult<&'static str> {
        Ok(self.tensor(0)?.dtype.name())
    }

    /// `"cpu"`, `"cuda:N"` or `"emulated"` (the kernel emulator; host memory).
    #[getter]
    fn device(&self) -> String {
        self.place_name()
    }

    /// The batch's position in the stream of batches (0 for the first pop).
    #[getter]
    fn index(&self) -> u64 {
        self.index
    }

    /// The samples, in order, as `damacy.Sample`.
    #[getter]
    fn samples<'py>(&self, py: Python<'py>) -> PyResult<Bound<'py, PyList>> {
        self.py_samples(py)
    }

    /// Whether `release()` was called (the Batch no longer gives access to the memory).
    #[getter]
    fn released(&self) -> bool {
        self.held.lock().unwrap_or_else(PoisonError::into_inner).is_none()
    }

    /// Seconds spent planning and reading the batch, and waiting to be popped.
    #[getter]
    fn timings<'py>(&self, py: Python<'py>) -> PyResult<Bound<'py, PyDict>> {
        let d = PyDict::new(py);
        d.set_item("plan_s", self.stats.plan.as_secs_f64())?;
        d.set_item("read_s", self.stats.read.as_secs_f64())?;
        d.set_item("queued_s", self.stats.queued.as_secs_f64())?;
        d.set_item("bytes", self.stats.bytes)?;
        d.set_item("skipped", self.stats.skipped)?;
        Ok(d)
    }

    fn __len__(&self) -> usize {
        self.samples.len()
    }

    /// Give the buffers back to the pipeline. `event` (GPU batches; ignored on the host): a
    /// `CUevent` handle (int), a `torch.cuda.Event`/`cupy.cuda.Event` recorded after the work
    /// that reads the batch, or a `torch`/`cupy` Stream (an event is recorded on it now); the
    /// next write into the buffers waits for it on the device. Idempotent. Tensors made with
    /// `from_dlpack` stay valid: the buffers come back when the last of them is freed (until
    /// then they count against `Config.depth`).
    #[pyo3(signature = (event = None))]
    fn release(&self, event: Option<&Bound<'_, PyAny>>) -> PyResult<()> {
        let fence = match (event, self.is_cuda()) {
            (Some(obj), true) if !obj.is_none() => Some(raw_event(obj)?),
            _ => None,
        };
        let Some(held) = self.held.lock().unwrap_or_else(PoisonError::into_inner).take() else { return Ok(()) };
        if let (Some(raw), Some(stream)) = (fence, held.batch.as_ref().and_then(Batch::stream)) {
            // SAFETY: `raw` is the consumer's event handle of this device (the caller's
            // contract, as for any CUDA API taking a handle); it is waited for before return.
            unsafe { stream.wait_raw_event(raw) }.and_then(|()| stream.record(false)).map(|e| held.fence(e)).map_err(
                |e| codec_err(&damacy::CodecError::Device { context: "release(event)".into(), source: Arc::new(e) }),
            )?;
        }
        drop(held);
        Ok(())
    }

    /// The batch itself: `with pipeline.pop() as batch:`.
    fn __enter__(slf: Py<Self>) -> Py<Self> {
        slf
    }

    /// `release()` (without an event) when the `with` block ends; exceptions propagate.
    #[pyo3(signature = (*_exc))]
    fn __exit__(&self, _exc: &Bound<'_, PyTuple>) -> PyResult<bool> {
        self.release(None)?;
        Ok(false)
    }

    /// `(device_type, device_id)`: `(1, 0)` (kDLCPU) for host batches, `(2, N)` (kDLCUDA)
    /// for batches on CUDA device N.
    fn __dlpack_device__(&self) -> (i32, i32) {
        let d = dl_device_of(self.place);
        (d.device_type.0, d.device_id)
    }

    /// A `DLPack` capsule of the batch's tensor (the array-API protocol); a batch of samples
    /// naming several arrays holds several tensors and raises `BufferError`: export each of
    /// `batch.tensors`. `max_version >= (1, 0)` gets a versioned capsule
    /// (`dltensor_versioned`), otherwise a legacy one (`dltensor`). On CUDA,
    /// `stream` (an int: the consumer's `CUstream`, 1 the legacy default, 2 per-thread; `None`
    /// the legacy default; -1 no ordering: the consumer orders its own work and finishes
    /// reading before it frees the tensor; 0 is disallowed, `ValueError`) is made to wait on the
    /// batch's ready event, and the work queued on it by the time the consumer frees the tensor
    /// fences the buffers' reuse. A tensor exported to the host (kDLCPU) takes `stream=None`
    /// only (`ValueError` otherwise), as the standard says for devices without streams.
    /// `dl_device=(1, 0)` with a device batch copies to the host (unless `copy=False`);
    /// `copy=True` copies a host batch. The capsule keeps the buffers out of the pool until the
    /// consumer frees the tensor.
    #[pyo3(signature = (stream = None, *, max_version = None, dl_device = None, copy = None))]
    fn __dlpack__(
        &self,
        py: Python<'_>,
        stream: Option<i64>,
        max_version: Option<(u32, u32)>,
        dl_device: Option<(i32, i32)>,
        copy: Option<bool>,
    ) -> PyResult<Py<PyAny>> {
        if self.tensors.len() != 1 {
            return Err(PyBufferError::new_err(format!(
                "the batch holds {} tensors (one per array of each sample); DLPack exports one: use batch.tensors[i]",
                self.tensors.len()
            )));
        }
        self.export(py, 0, stream, max_version, dl_device, copy)
    }

    /// The batch's tensors, one per array of the samples, in the order of each sample's
    /// `uris`: each a `DLPack` producer (`torch.from_dlpack(batch.tensors[1])`).
    #[getter]
    fn tensors<'py>(slf: &Bound<'py, Self>) -> PyResult<Bound<'py, PyTuple>> {
        let py = slf.py();
        let n = slf.get().tensors.len();
        let items =
            (0..n).map(|t| Py::new(py, PyTensor { batch: slf.clone().unbind(), t })).collect::<PyResult<Vec<_>>>()?;
        PyTuple::new(py, items)
    }

    /// The element type of each tensor.
    #[getter]
    fn dtypes(&self) -> Vec<&'static str> {
        self.tensors.iter().map(|m| m.dtype.name()).collect()
    }

    fn __repr__(&self) -> String {
        format!(
            "damacy.Batch(index={}, shape={:?}, dtype={}, device={}{})",
            self.index,
            self.shape,
            self.dtypes().join("+"),
            self.place_name(),
            if self.released() { ", released" } else { "" }
        )
    }
}

/// What a consumer that bypasses `DLPack` needs: the memory, its layout and its fence.
#[pyclass(module = "damacy", name = "BatchInfo", frozen)]
pub(crate) struct PyBatchInfo {
    device_ptr: u64,
    device_ptrs: Vec<u64>,
    shape: Vec<u64>,
    dtype: &'static str,
    dtypes: Vec<&'static str>,
    samples: Py<PyList>,
    ready_stream: Option<u64>,
    ready_event: Option<u64>,
    device: String,
    index: u64,
    nbytes: usize,
    tensor_nbytes: Vec<usize>,
    mask: Option<Vec<bool>>,
}

#[pymethods]
impl PyBatchInfo {
    /// The address of the (first) tensor: a CUDA device pointer for GPU batches, a host
    /// address for host batches. Valid until the batch is released.
    #[getter]
    fn device_ptr(&self) -> u64 {
        self.device_ptr
    }

    /// The address of each tensor (one per array of the samples).
    #[getter]
    fn device_ptrs(&self) -> Vec<u64> {
        self.device_ptrs.clone()
    }

    /// The element type of each tensor.
    #[getter]
    fn dtypes(&self) -> Vec<&'static str> {
        self.dtypes.clone()
    }

    /// Bytes of each tensor.
    #[getter]
    fn tensor_nbytes(&self) -> Vec<usize> {
        self.tensor_nbytes.clone()
    }

    /// `(len, *sample_shape)`, C order.
    #[getter]
    fn shape<'py>(&self, py: Python<'py>) -> PyResult<Bound<'py, PyTuple>> {
        PyTuple::new(py, &self.shape)
    }

    /// The element type name (`"uint16"`, `"bfloat16"`, …) of the (first) tensor.
    #[getter]
    fn dtype(&self) -> &'static str {
        self.dtype
    }

    /// The samples, in order (`damacy.Sample`).
    #[getter]
    fn samples(&self, py: Python<'_>) -> Py<PyList> {
        self.samples.clone_ref(py)
    }

    /// The `CUstream` the batch was written on (GPU batches; `None` on the host): order work
    /// after `ready_event`, or on this stream.
    #[getter]
    fn ready_stream(&self) -> Option<u64> {
        self.ready_stream
    }

    /// The `CUevent` recorded once the batch is written (GPU batches; `None` on the host).
    #[getter]
    fn ready_event(&self) -> Option<u64> {
        self.ready_event
    }

    /// `"cpu"`, `"cuda:N"` or `"emulated"`.
    #[getter]
    fn device(&self) -> &str {
        &self.device
    }

    /// The batch's position in the stream of batches.
    #[getter]
    fn index(&self) -> u64 {
        self.index
    }

    /// Bytes of the (first) tensor.
    #[getter]
    fn nbytes(&self) -> usize {
        self.nbytes
    }

    /// `True` per real sample, `False` for sampler padding; `None` when there is none.
    #[getter]
    fn mask(&self) -> Option<Vec<bool>> {
        self.mask.clone()
    }

    fn __repr__(&self) -> String {
        format!(
            "damacy.BatchInfo(device_ptr={:#x}, shape={:?}, dtype={}, device={}, ready_stream={:?}, index={})",
            self.device_ptr, self.shape, self.dtype, self.device, self.ready_stream, self.index
        )
    }
}

/// One tensor of a `damacy.Batch` (`batch.tensors[t]`): the batch's tensor for array `t` of
/// each sample, shape `(len, *sample_shape)`, a `DLPack` producer sharing the batch's memory
/// and lifetime rules (the batch's `release()` and every export must let go before its buffers
/// are reused).
#[pyclass(module = "damacy", name = "Tensor", frozen)]
pub(crate) struct PyTensor {
    batch: Py<PyBatch>,
    t: usize,
}

#[pymethods]
impl PyTensor {
    /// Which array of each sample this tensor holds (its position in `Sample.uris`).
    #[getter]
    fn index(&self) -> usize {
        self.t
    }

    /// `(len, *sample_shape)`.
    #[getter]
    fn shape<'py>(&self, py: Python<'py>) -> PyResult<Bound<'py, PyTuple>> {
        PyTuple::new(py, &self.batch.get().shape)
    }

    /// The element type name.
    #[getter]
    fn dtype(&self) -> PyResult<&'static str> {
        Ok(self.batch.get().tensor(self.t)?.dtype.name())
    }

    /// `"cpu"`, `"cuda:N"` or `"emulated"`.
    #[getter]
    fn device(&self) -> String {
        self.batch.get().place_name()
    }

    /// The tensor's address (device pointer or host address), valid until the batch is
    /// released.
    #[getter]
    fn device_ptr(&self) -> PyResult<u64> {
        Ok(self.batch.get().tensor(self.t)?.ptr)
    }

    /// Bytes of the tensor.
    #[getter]
    fn nbytes(&self) -> PyResult<usize> {
        Ok(self.batch.get().tensor(self.t)?.nbytes)
    }

    /// As `Batch.__dlpack_device__`.
    fn __dlpack_device__(&self) -> (i32, i32) {
        let d = dl_device_of(self.batch.get().place);
        (d.device_type.0, d.device_id)
    }

    /// As `Batch.__dlpack__`, for this tensor.
    #[pyo3(signature = (stream = None, *, max_version = None, dl_device = None, copy = None))]
    fn __dlpack__(
        &self,
        py: Python<'_>,
        stream: Option<i64>,
        max_version: Option<(u32, u32)>,
        dl_device: Option<(i32, i32)>,
        copy: Option<bool>,
    ) -> PyResult<Py<PyAny>> {
        self.batch.get().export(py, self.t, stream, max_version, dl_device, copy)
    }

    fn __repr__(&self) -> PyResult<String> {
        let b = self.batch.get();
        Ok(format!(
            "damacy.Tensor(batch={}, index={}, shape={:?}, dtype={}, device={})",
            b.index,
            self.t,
            b.shape,
            b.tensor(self.t)?.dtype.name(),
            b.place_name()
        ))
    }
}

// ------------------------------------------------------------------------------- stats

/// One stage of a pipeline: runs, time (seconds), best run, bytes in and out.
#[pyclass(module = "damacy", name = "StageStats", frozen)]
pub(crate) struct PyStageStats {
    s: StageStats,
}

#[pymethods]
impl PyStageStats {
    /// Runs (batches, requests or chunks, depending on the stage).
    #[getter]
    fn count(&self) -> u64 {
        self.s.count
    }

    /// Total seconds (for the engine's stages, summed over its threads).
    #[getter]
    fn time_s(&self) -> f64 {
        self.s.time.as_secs_f64()
    }

    /// The shortest single run in seconds (stages timed per batch), else `None`.
    #[getter]
    fn best_s(&self) -> Option<f64> {
        self.s.best.map(|d| d.as_secs_f64())
    }

    /// Mean seconds per run (`None` without runs).
    #[getter]
    fn mean_s(&self) -> Option<f64> {
        (self.s.count > 0).then(|| self.s.time.as_secs_f64() / self.s.count as f64)
    }

    /// Bytes in.
    #[getter]
    fn bytes_in(&self) -> u64 {
        self.s.bytes_in
    }

    /// Bytes out.
    #[getter]
    fn bytes_out(&self) -> u64 {
        self.s.bytes_out
    }

    fn __repr__(&self) -> String {
        format!(
            "damacy.StageStats(count={}, time_s={:.6}, bytes_in={}, bytes_out={})",
            self.s.count,
            self.s.time.as_secs_f64(),
            self.s.bytes_in,
            self.s.bytes_out
        )
    }
}

/// What a pipeline did since it was built or since `stats_reset()`: per-stage metrics
/// (`plan`, `read`, `io`, `input_transfer`, `parse`, `decode`, `assemble`, `pop_wait`),
/// totals, caches, errors, routes. `print(stats)` shows a table.
#[pyclass(module = "damacy", name = "PipelineStats", frozen)]
pub(crate) struct PyPipelineStats {
    stats: PipelineStats,
}

#[pymethods]
impl PyPipelineStats {
    /// Planning, per batch (chunks, shard indexes, coalesced reads).
    #[getter]
    fn plan(&self) -> PyStageStats {
        PyStageStats { s: self.stats.plan }
    }

    /// Reading, per batch, wall time (I/O, decode and assemble into the batch buffers).
    #[getter]
    fn read(&self) -> PyStageStats {
        PyStageStats { s: self.stats.read }
    }

    /// Storage reads (count: requests after coalescing; bytes in: bytes read).
    #[getter]
    fn io(&self) -> PyStageStats {
        PyStageStats { s: self.stats.io }
    }

    /// Host-to-device copies of encoded bytes (device route; bytes only).
    #[getter]
    fn input_transfer(&self) -> PyStageStats {
        PyStageStats { s: self.stats.input_transfer }
    }

    /// Host parse of the device route.
    #[getter]
    fn parse(&self) -> PyStageStats {
        PyStageStats { s: self.stats.parse }
    }

    /// Decoding (count: chunks; bytes out: decoded bytes).
    #[getter]
    fn decode(&self) -> PyStageStats {
        PyStageStats { s: self.stats.decode }
    }

    /// Assembling batches from decoded chunks (crop, fill, cast).
    #[getter]
    fn assemble(&self) -> PyStageStats {
        PyStageStats { s: self.stats.assemble }
    }

    /// Time spent waiting in `pop` (count: pops).
    #[getter]
    fn pop_wait(&self) -> PyStageStats {
        PyStageStats { s: self.stats.pop_wait }
    }

    /// Seconds covered.
    #[getter]
    fn elapsed_s(&self) -> f64 {
        self.stats.elapsed.as_secs_f64()
    }

    /// Batches popped.
    #[getter]
    fn batches(&self) -> u64 {
        self.stats.batches
    }

    /// Samples in the popped batches.
    #[getter]
    fn samples(&self) -> u64 {
        self.stats.samples
    }

    /// Samples pulled from the pushed iterables.
    #[getter]
    fn samples_pulled(&self) -> u64 {
        self.stats.samples_pulled
    }

    /// Bytes in the popped batches.
    #[getter]
    fn bytes_delivered(&self) -> u64 {
        self.stats.bytes_delivered
    }

    /// Samples per second delivered.
    #[getter]
    fn samples_per_s(&self) -> f64 {
        self.stats.samples_per_s()
    }

    /// Gigabytes (10⁹ bytes) per second delivered.
    #[getter]
    fn gb_per_s(&self) -> f64 {
        self.stats.gb_per_s()
    }

    /// Arrays opened (metadata read).
    #[getter]
    fn array_opens(&self) -> u64 {
        self.stats.array_opens
    }

    /// Samples whose arrays were already open.
    #[getter]
    fn array_cache_hits(&self) -> u64 {
        self.stats.array_cache_hits
    }

    /// Shard-index cache hits.
    #[getter]
    fn index_hits(&self) -> u64 {
        self.stats.index_hits
    }

    /// Shard-index cache misses.
    #[getter]
    fn index_misses(&self) -> u64 {
        self.stats.index_misses
    }

    /// Chunks decoded by device kernels.
    #[getter]
    fn units_decoded_device(&self) -> u64 {
        self.stats.units_decoded_device
    }

    /// Chunks that were missing and became fill values.
    #[getter]
    fn units_filled(&self) -> u64 {
        self.stats.units_filled
    }

    /// Samples left out under `on_error="skip"`.
    #[getter]
    fn skipped(&self) -> u64 {
        self.stats.skipped
    }

    /// The first 1000 skipped samples, named, with the reason.
    #[getter]
    fn skipped_samples(&self) -> Vec<String> {
        self.stats.skipped_samples.clone()
    }

    /// Pops that raised a sample's error.
    #[getter]
    fn failed_batches(&self) -> u64 {
        self.stats.failed_batches
    }

    /// Samples dropped with a short last batch (`drop_last`).
    #[getter]
    fn dropped_last(&self) -> u64 {
        self.stats.dropped_last
    }

    /// `(uri, route)` per array opened: `device (…)` or `cpu (reason)`.
    #[getter]
    fn routes(&self) -> Vec<(String, String)> {
        self.stats.routes.clone()
    }

    /// The read engine's own counters over the same time (a dict; durations in seconds).
    #[getter]
    fn engine<'py>(&self, py: Python<'py>) -> PyResult<Bound<'py, PyDict>> {
        stats_dict(py, &self.stats.engine)
    }

    /// Everything as a dict (stages as dicts of their fields).
    fn as_dict<'py>(&self, py: Python<'py>) -> PyResult<Bound<'py, PyDict>> {
        let d = PyDict::new(py);
        let s = &self.stats;
        for (name, st) in [
            ("plan", s.plan),
            ("read", s.read),
            ("io", s.io),
            ("input_transfer", s.input_transfer),
            ("parse", s.parse),
            ("decode", s.decode),
            ("assemble", s.assemble),
            ("pop_wait", s.pop_wait),
        ] {
            let e = PyDict::new(py);
            e.set_item("count", st.count)?;
            e.set_item("time_s", st.time.as_secs_f64())?;
            e.set_item("best_s", st.best.map(|b| b.as_secs_f64()))?;
            e.set_item("bytes_in", st.bytes_in)?;
            e.set_item("bytes_out", st.bytes_out)?;
            d.set_item(name, e)?;
        }
        d.set_item("elapsed_s", s.elapsed.as_secs_f64())?;
        d.set_item("batches", s.batches)?;
        d.set_item("samples", s.samples)?;
        d.set_item("samples_pulled", s.samples_pulled)?;
        d.set_item("bytes_delivered", s.bytes_delivered)?;
        d.set_item("array_opens", s.array_opens)?;
        d.set_item("array_cache_hits", s.array_cache_hits)?;
        d.set_item("index_hits", s.index_hits)?;
        d.set_item("index_misses", s.index_misses)?;
        d.set_item("units_decoded_device", s.units_decoded_device)?;
        d.set_item("units_filled", s.units_filled)?;
        d.set_item("skipped", s.skipped)?;
        d.set_item("failed_batches", s.failed_batches)?;
        d.set_item("dropped_last", s.dropped_last)?;
        d.set_item("routes", s.routes.clone().into_py_any(py)?)?;
        d.set_item("engine", stats_dict(py, &s.engine)?)?;
        Ok(d)
    }

    fn __str__(&self) -> String {
        self.stats.to_string()
    }

    fn __repr__(&self) -> String {
        format!(
            "damacy.PipelineStats(batches={}, samples={}, bytes_delivered={}, elapsed_s={:.3})",
            self.stats.batches,
            self.stats.samples,
            self.stats.bytes_delivered,
            self.stats.elapsed.as_secs_f64()
        )
    }
}

/// Registers the pipeline's classes and functions on the module.
pub(crate) fn register(m: &Bound<'_, PyModule>) -> PyResult<()> {
    m.add_class::<PyPipeline>()?;
    m.add_class::<PyBatch>()?;
    m.add_class::<PyBatchInfo>()?;
    m.add_class::<PyTensor>()?;
    m.add_class::<PyPipelineStats>()?;
    m.add_class::<PyStageStats>()?;
    m.add_function(wrap_pyfunction!(_config_defaults, m)?)?;
    m.add_function(wrap_pyfunction!(_config_sizes, m)?)?;
    m.add_function(wrap_pyfunction!(_config_describe, m)?)?;
    Ok(())
}
