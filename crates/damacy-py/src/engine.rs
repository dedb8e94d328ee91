//! The read engine in Python: `Reader`, `Store`, `Array` and chunk-level reads into a caller's
//! strided buffer (what `damacy.GpuCodecPipeline` calls for zarr-python's `read`).

use std::ffi::CStr;

use damacy::{
    ArrayHandle, ArrayMeta, ArrayOptions, AxisSelection, ChunkSelection, DeviceArrayMut, DeviceKind, Dtype,
    ExecutorKind, HostArrayMut, OutOfBounds, OutputDtype, Reader, ReaderConfig, StatsSnapshot, Store, StoreKind,
    StoreOptions,
};
use pyo3::buffer::PyUntypedBuffer;
use pyo3::prelude::*;
use pyo3::types::PyDict;

use crate::errors::{InvalidArgument, codec_err, guard};

/// Reads zarr arrays: the engine's thread pools, caches and executor (`damacy::Reader`).
#[pyclass(module = "damacy._damacy", name = "Reader", frozen)]
pub(crate) struct PyReader {
    reader: Reader,
}

/// An open store (`damacy::Store`): a local folder, `s3://`, `gs://`, `az://`, `http(s)://`.
#[pyclass(module = "damacy._damacy", name = "Store", frozen)]
pub(crate) struct PyStore {
    store: Store,
}

/// An open array of a store with its output options (`damacy::ArrayHandle`).
#[pyclass(module = "damacy._damacy", name = "Array", frozen)]
pub(crate) struct PyArray {
    array: ArrayHandle,
}

/// One chunk of a chunk-level read: grid coordinates, then per axis `(start, step, count)` in
/// the chunk and in the output.
type ChunkArg = (Vec<u64>, Vec<(u64, u64, u64)>, Vec<(u64, u64, u64)>);

fn parse<T: std::str::FromStr>(s: &str) -> PyResult<T>
where
    T::Err: std::fmt::Display,
{
    s.parse().map_err(|e: T::Err| crate::errors::InvalidArgument::new_err(e.to_string()))
}

#[pymethods]
impl PyReader {
    #[new]
    #[pyo3(signature = (*, executor = "auto", device = None, n_io_threads = None, n_compute_threads = None,
        reads_in_flight = None, shard_index_cache_bytes = None, metadata_cache_entries = None,
        device_buffer_bytes = None, host_buffer_bytes = None))]
    #[allow(clippy::too_many_arguments)]
    fn new(
        py: Python<'_>,
        executor: &str,
        device: Option<usize>,
        n_io_threads: Option<usize>,
        n_compute_threads: Option<usize>,
        reads_in_flight: Option<usize>,
        shard_index_cache_bytes: Option<u64>,
        metadata_cache_entries: Option<u64>,
        device_buffer_bytes: Option<u64>,
        host_buffer_bytes: Option<u64>,
    ) -> PyResult<Self> {
        let mut c = ReaderConfig::default().with_executor(parse::<ExecutorKind>(executor)?);
        if let Some(d) = device {
            c = c.with_device(d);
        }
        if let Some(n) = n_io_threads {
            c = c.with_io_threads(n);
        }
        if let Some(n) = n_compute_threads {
            c = c.with_compute_threads(n);
        }
        if let Some(n) = reads_in_flight {
            c = c.with_reads_in_flight(n);
        }
        if let Some(n) = shard_index_cache_bytes {
            c = c.with_shard_index_cache_bytes(n);
        }
        if let Some(n) = metadata_cache_entries {
            c.metadata_cache_entries = n;
        }
        if device_buffer_bytes.is_some() || host_buffer_bytes.is_some() {
            let (d, h) = (c.device_buffer_bytes, c.host_buffer_bytes);
            c = c.with_buffer_bytes(device_buffer_bytes.unwrap_or(d), host_buffer_bytes.unwrap_or(h));
        }
        let reader = py.detach(|| guard("Reader()", || Reader::new(c).map_err(|e| codec_err(&e))))?;
        Ok(Self { reader })
    }

    /// Which executor decodes, and why (`device kernels on …` or `cpu (reason)`).
    #[getter]
    fn executor_note(&self) -> String {
        self.reader.executor_note().to_owned()
    }

    /// The engine's counters so far, as a dict (durations in seconds).
    fn stats<'py>(&self, py: Python<'py>) -> PyResult<Bound<'py, PyDict>> {
        stats_dict(py, &self.reader.stats())
    }

    /// Opens the array at `path` of `store`. With `metadata` (the JSON of its `zarr.json` or
    /// `.zarray`) the metadata is taken from the caller instead of read from the store.
    #[pyo3(signature = (store, path, *, metadata = None, output_dtype = None, validate_checksums = true,
        out_of_bounds = "error"))]
    #[allow(clippy::too_many_arguments)]
    fn open_array(
        &self,
        py: Python<'_>,
        store: &PyStore,
        path: &str,
        metadata: Option<&str>,
        output_dtype: Option<&str>,
        validate_checksums: bool,
        out_of_bounds: &str,
    ) -> PyResult<PyArray> {
        let output_dtype = match output_dtype {
            None => OutputDtype::Native,
            Some(s) => parse::<OutputDtype>(s)?,
        };
        let out_of_bounds = match out_of_bounds {
            "error" => OutOfBounds::Error,
            "fill" => OutOfBounds::Fill,
            other => {
                return Err(InvalidArgument::new_err(format!("out_of_bounds={other:?}: use \"error\" or \"fill\"")));
            }
        };
        let options = ArrayOptions::default()
            .with_output_dtype(output_dtype)
            .with_validate_checksums(validate_checksums)
            .with_out_of_bounds(out_of_bounds);
        let store = store.store.clone();
        py.detach(|| {
            guard("Reader.open_array", || {
                let array = match metadata {
                    None => self.reader.open_array(&store, path, options),
                    Some(json) => ArrayMeta::from_metadata_json(&store, path, json)
                        .and_then(|meta| ArrayHandle::new(store.clone(), meta, options)),
                };
                array.map(|array| PyArray { array }).map_err(|e| codec_err(&e))
            })
        })
    }

    /// Decodes parts of chunks into `out` (any writable buffer of the array's output dtype),
    /// seen through `shape` and byte `strides` from its first element: one axis per array axis
    /// (a dropped axis has extent 1 and stride 0). Each chunk is `(coords, selection,
    /// out_selection)` with `(start, step, count)` per axis. The GIL is released while reading.
    fn read_chunks_into(
        &self,
        py: Python<'_>,
        array: &PyArray,
        chunks: Vec<ChunkArg>,
        out: &Bound<'_, PyAny>,
        shape: Vec<u64>,
        strides: Vec<isize>,
    ) -> PyResult<()> {
        let chunks = chunk_selections(chunks);
        let buffer = PyUntypedBuffer::get(out)?;
        if buffer.readonly() {
            return Err(InvalidArgument::new_err("the output buffer is read-only"));
        }
        let item = buffer.item_size();
        let dtype = dtype_of_format(buffer.format(), item)?;
        if buffer.shape().contains(&0) || shape.contains(&0) {
            return Ok(());
        }
        // The bytes the buffer spans, relative to its first element.
        let (mut lo, mut hi) = (0isize, 0isize);
        for (&n, &s) in buffer.shape().iter().zip(buffer.strides()) {
            let span = (n as isize - 1) * s;
            if span < 0 { lo += span } else { hi += span }
        }
        let len = (hi - lo) as usize + item;
        let base = buffer.buf_ptr().cast::<u8>();
        // SAFETY: the exporter keeps the `len` bytes from `base + lo` (every element the
        // buffer's shape and strides reach) alive and writable while `buffer` is held, which is
        // until this function returns; no other Rust reference to them exists, and the engine
        // writes only inside the view, which `HostArrayMut` checks against this slice.
        let data = unsafe { std::slice::from_raw_parts_mut(base.offset(lo), len) };
        let array = array.array.clone();
        let result = py.detach(|| {
            guard("Reader.read_chunks_into", || {
                let mut host = HostArrayMut::strided(data, lo.unsigned_abs(), shape, strides, dtype);
                self.reader.read_chunks_into(&array, &chunks, &mut host).map_err(|e| codec_err(&e))
            })
        });
        drop(buffer);
        result
    }

    /// The device the reader decodes on: `("cuda", ordinal)`, `("emulated", 0)`, or `None`
    /// when it decodes on the CPU only.
    #[getter]
    fn device(&self) -> Option<(&'static str, usize)> {
        self.reader.device().map(|d| match d.kind() {
            DeviceKind::Cuda => ("cuda", d.ordinal()),
            _ => ("emulated", 0),
        })
    }

    /// [`read_chunks_into`] for an array in device memory of the reader's device (a `CuPy`
    /// array's `__cuda_array_interface__`): `ptr` is the address of its first element, `shape`
    /// and byte `strides` as there, `dtype` its element type. The read is ordered after the
    /// work queued on the `CUstream` `stream` (0: the legacy default stream) and finished when
    /// this returns. The GIL is released while reading.
    #[pyo3(signature = (array, chunks, ptr, shape, strides, dtype, stream = 0))]
    #[allow(clippy::too_many_arguments)]
    fn read_chunks_into_device(
        &self,
        py: Python<'_>,
        array: &PyArray,
        chunks: Vec<ChunkArg>,
        ptr: u64,
        shape: Vec<u64>,
        strides: Vec<isize>,
        dtype: &str,
        stream: u64,
    ) -> PyResult<()> {
        let Some(device) = self.reader.device().cloned() else {
            return Err(InvalidArgument::new_err(format!(
                "an output in device memory needs a device executor; this reader runs {}",
                self.reader.executor_note()
            )));
        };
        let dtype = parse::<Dtype>(dtype)?;
        let chunks = chunk_selections(chunks);
        if shape.contains(&0) {
            return Ok(());
        }
        if strides.len() != shape.len() || ptr == 0 {
            return Err(InvalidArgument::new_err(format!(
                "a device array of shape {shape:?} needs one stride per axis and a non-null address"
            )));
        }
        // The bytes the array spans, relative to its first element.
        let (mut lo, mut hi) = (0isize, 0isize);
        for (&n, &s) in shape.iter().zip(&strides) {
            let span = (n as isize - 1) * s;
            if span < 0 { lo += span } else { hi += span }
        }
        let len = (hi - lo) as usize + dtype.size();
        let base = ptr.checked_add_signed(lo as i64).ok_or_else(|| {
            InvalidArgument::new_err(format!("a device array at {ptr:#x} with strides {strides:?} wraps around"))
        })?;
        let array = array.array.clone();
        py.detach(|| {
            guard("Reader.read_chunks_into_device", || {
                let dev_err =
                    |what: &str, e: &damacy::DeviceError| crate::errors::DeviceError::new_err(format!("{what}: {e}"));
                // SAFETY: the caller's array spans `len` bytes from `base` (every element its
                // shape and strides reach) in memory of this device, kept alive by the caller
                // for this call, which returns only after the work on it finished (dropping the
                // borrowed buffer waits for it).
                let mut memory = unsafe { device.borrow_memory(base, len) };
                // SAFETY: `stream` is the caller's stream of this device, live for this call.
                let before = unsafe { device.record_raw_stream(stream) }
                    .map_err(|e| dev_err("recording the caller's stream", &e))?;
                let ours = device.default_stream();
                ours.wait(&before).map_err(|e| dev_err("ordering the read after the caller's stream", &e))?;
                let mut out = DeviceArrayMut::strided(&mut memory, lo.unsigned_abs(), shape, strides, dtype);
                self.reader.read_chunks_into_device(&array, &chunks, &mut out, ours).map_err(|e| codec_err(&e))?;
                let done = ours.record(false).map_err(|e| dev_err("recording the read", &e))?;
                // SAFETY: as above.
                unsafe { done.make_raw_stream_wait(stream) }
                    .map_err(|e| dev_err("ordering the caller's stream after the read", &e))?;
                drop(memory);
                Ok(())
            })
        })
    }
}

fn chunk_selections(chunks: Vec<ChunkArg>) -> Vec<ChunkSelection> {
    let axis = |&(start, step, count): &(u64, u64, u64)| AxisSelection { start, step, count };
    chunks
        .into_iter()
        .map(|(chunk, sel, out_sel)| ChunkSelection {
            chunk,
            selection: sel.iter().map(axis).collect(),
            out_selection: out_sel.iter().map(axis).collect(),
        })
        .collect()
}

/// The element type a buffer's `struct` format names, in native byte order.
fn dtype_of_format(format: &CStr, item: usize) -> PyResult<Dtype> {
    let f = format.to_string_lossy();
    let (order, code) = match f.chars().next() {
        Some(c @ ('@' | '=' | '<' | '>' | '!')) => (Some(c), &f[1..]),
        _ => (None, &f[..]),
    };
    let native_little = cfg!(target_endian = "little");
    if matches!(order, Some('>' | '!')) && native_little || matches!(order, Some('<')) && !native_little {
        return Err(InvalidArgument::new_err(format!(
            "the output buffer has byte order {f:?}; damacy writes native byte order"
        )));
    }
    let dtype = match (code, item) {
        ("?", 1) => Dtype::Bool,
        ("b", 1) => Dtype::I8,
        ("B", 1) => Dtype::U8,
        ("h", 2) => Dtype::I16,
        ("H", 2) => Dtype::U16,
        ("i" | "l", 4) => Dtype::I32,
        ("I" | "L", 4) => Dtype::U32,
        ("l" | "q", 8) => Dtype::I64,
        ("L" | "Q", 8) => Dtype::U64,
        ("e", 2) => Dtype::F16,
        ("f", 4) => Dtype::F32,
        ("d", 8) => Dtype::F64,
        _ => {
            return Err(InvalidArgument::new_err(format!(
                "the output buffer's element format {f:?} ({item} bytes) is not a type damacy writes"
            )));
        }
    };
    Ok(dtype)
}

pub(crate) fn stats_dict<'py>(py: Python<'py>, s: &StatsSnapshot) -> PyResult<Bound<'py, PyDict>> {
    let d = PyDict::new(py);
    d.set_item("regions", s.regions)?;
    d.set_item("batches", s.batches)?;
    d.set_item("units_decoded", s.units_decoded)?;
    d.set_item("units_filled", s.units_filled)?;
    d.set_item("units_decoded_device", s.units_decoded_device)?;
    d.set_item("storage_requests", s.storage_requests)?;
    d.set_item("bytes_read", s.bytes_read)?;
    d.set_item("bytes_decoded", s.bytes_decoded)?;
    d.set_item("index_hits", s.index_hits)?;
    d.set_item("index_misses", s.index_misses)?;
    d.set_item("index_evictions", s.index_evictions)?;
    d.set_item("index_fetches", s.index_fetches)?;
    d.set_item("index_cache_bytes", s.index_cache_bytes)?;
    d.set_item("io_s", s.io.as_secs_f64())?;
    d.set_item("decode_s", s.decode.as_secs_f64())?;
    d.set_item("assemble_s", s.assemble.as_secs_f64())?;
    Ok(d)
}

#[pymethods]
impl PyStore {
    /// Opens the store a URL names: a local path or `file://`, `s3://bucket/prefix`,
    /// `gs://`, `az://`, `http(s)://host/prefix`, `memory://`.
    #[staticmethod]
    #[pyo3(signature = (url, *, endpoint = None, region = None, access_key_id = None, secret_access_key = None,
        anonymous = false, retries = None))]
    #[allow(clippy::too_many_arguments)]
    fn open(
        py: Python<'_>,
        url: &str,
        endpoint: Option<String>,
        region: Option<String>,
        access_key_id: Option<String>,
        secret_access_key: Option<String>,
        anonymous: bool,
        retries: Option<usize>,
    ) -> PyResult<Self> {
        let mut options = StoreOptions::default().with_anonymous(anonymous);
        if let Some(e) = endpoint {
            options = options.with_endpoint(e);
        }
        if let Some(r) = region {
            options = options.with_region(r);
        }
        if let (Some(k), Some(s)) = (access_key_id, secret_access_key) {
            options = options.with_credentials(k, s);
        }
        if let Some(n) = retries {
            options = options.with_retries(n);
        }
        py.detach(|| guard("Store.open", || Store::open(url, &options).map_err(|e| codec_err(&e))))
            .map(|store| Self { store })
    }

    /// The URL the store was opened with.
    #[getter]
    fn url(&self) -> String {
        self.store.url().to_owned()
    }

    /// `local`, `s3`, `gcs`, `azure`, `http` or `memory`.
    #[getter]
    fn kind(&self) -> &'static str {
        match self.store.kind() {
            StoreKind::Local => "local",
            StoreKind::S3 => "s3",
            StoreKind::Gcs => "gcs",
            StoreKind::Azure => "azure",
            StoreKind::Http => "http",
            StoreKind::Memory => "memory",
            _ => "other",
        }
    }

    fn __repr__(&self) -> String {
        format!("damacy.Store({:?})", self.store.url())
    }
}

#[pymethods]
impl PyArray {
    /// The array's path in its store.
    #[getter]
    fn path(&self) -> String {
        self.array.path.clone()
    }

    /// The array's shape.
    #[getter]
    fn shape(&self) -> Vec<u64> {
        self.array.shape.clone()
    }

    /// The chunk shape of the grid (the shard shape of a sharded array).
    #[getter]
    fn chunk_shape(&self) -> Vec<u64> {
        self.array.chunk_shape.clone()
    }

    /// Chunks (shards) per axis.
    #[getter]
    fn grid_shape(&self) -> Vec<u64> {
        self.array.grid_shape.clone()
    }

    /// The stored data type (`uint16`, `float32`, …).
    #[getter]
    fn dtype(&self) -> &'static str {
        self.array.dtype.name()
    }

    /// The element type reads produce.
    #[getter]
    fn out_dtype(&self) -> &'static str {
        self.array.out_dtype().name()
    }

    /// 2 or 3.
    #[getter]
    fn zarr_format(&self) -> u8 {
        self.array.zarr_format
    }

    /// How chunks decode: `device (…)` or `cpu (reason)`.
    #[getter]
    fn route(&self) -> String {
        self.array.route.to_string()
    }

    /// The same array, read as `dtype` (its other options kept; nothing is read). A
    /// floating-point `dtype` takes every source type, rounded to nearest even; an integer one
    /// that cannot hold the array's values is `InvalidArgument`.
    fn with_output_dtype(&self, dtype: &str) -> PyResult<PyArray> {
        let options = self.array.options().with_output_dtype(parse::<OutputDtype>(dtype)?);
        self.array.with_options(options).map(|array| PyArray { array }).map_err(|e| codec_err(&e))
    }

    fn __repr__(&self) -> String {
        format!(
            "damacy.Array(path={:?}, shape={:?}, dtype={}, chunk_shape={:?})",
            self.array.path,
            self.array.shape,
            self.array.dtype.name(),
            self.array.chunk_shape
        )
    }
}
