//! The exception hierarchy (`damacy.Error` and its subclasses), the mapping from the engine's
//! errors onto it, and the guard that keeps Rust panics from crossing into Python.

use std::panic::{AssertUnwindSafe, catch_unwind};

use damacy::{CodecError, StorageErrorKind};
use pyo3::exceptions::PyException;
use pyo3::prelude::*;
use pyo3::{PyErr, create_exception};

create_exception!(damacy, Error, PyException, "Base class of every error damacy raises.");
create_exception!(
    damacy,
    InvalidArgument,
    Error,
    "An argument or configuration value is invalid; the message says which and why."
);
create_exception!(
    damacy,
    Unsupported,
    InvalidArgument,
    "The array uses something damacy does not read (a data type, a chunk grid, a codec)."
);
create_exception!(damacy, NotFound, Error, "A store, an array or an object does not exist.");
create_exception!(
    damacy,
    StorageError,
    Error,
    "A storage read failed after the store's retries; `kind` says how (not_found, permission_denied, transient, range_not_satisfied, config, other)."
);
create_exception!(
    damacy,
    DecodeError,
    Error,
    "Bytes or metadata could not be decoded: a corrupt or truncated chunk, a bad checksum, invalid metadata."
);
create_exception!(damacy, DeviceError, Error, "The device (a CUDA driver call, a kernel launch, NVRTC) failed.");
create_exception!(damacy, OutOfMemory, Error, "A configured memory budget is too small for what was asked.");
create_exception!(damacy, Timeout, Error, "A blocking call waited longer than its timeout.");
create_exception!(damacy, Closed, Error, "The object was closed and cannot be used any more.");
create_exception!(
    damacy,
    PoolStarved,
    Error,
    "`Pipeline.pop` while you hold `Config.depth` batches: release (or drop) a batch, or raise `Config.depth`."
);
create_exception!(
    damacy,
    Exhausted,
    Error,
    "`Pipeline.pop` with nothing left: every pushed sample was popped; push more samples."
);

/// The `kind` attribute of a `StorageError`, in words a Python caller compares against.
fn kind_name(kind: StorageErrorKind) -> &'static str {
    match kind {
        StorageErrorKind::NotFound => "not_found",
        StorageErrorKind::PermissionDenied => "permission_denied",
        StorageErrorKind::Transient => "transient",
        StorageErrorKind::RangeNotSatisfied => "range_not_satisfied",
        StorageErrorKind::Config => "config",
        _ => "other",
    }
}

/// The Python exception for an engine error, the message kept whole.
pub(crate) fn codec_err(e: &CodecError) -> PyErr {
    codec_err_with(e, e.to_string())
}

/// The Python exception of `e`'s kind with `message` (e.g. one that names the sample too).
fn codec_err_with(e: &CodecError, message: String) -> PyErr {
    match e {
        CodecError::InvalidArgument(_) => InvalidArgument::new_err(message),
        CodecError::Unsupported(_) => Unsupported::new_err(message),
        CodecError::NotFound(_) => NotFound::new_err(message),
        CodecError::Storage { kind, .. } => {
            let err = StorageError::new_err(message);
            Python::attach(|py| {
                // Setting an attribute on a fresh exception instance cannot fail in practice;
                // if it did, the exception would still carry the message.
                let _ = err.value(py).setattr("kind", kind_name(*kind));
            });
            err
        }
        CodecError::Decode { .. } | CodecError::Metadata { .. } => DecodeError::new_err(message),
        CodecError::Device { .. } => DeviceError::new_err(message),
        CodecError::OutOfMemory(_) => OutOfMemory::new_err(message),
        _ => Error::new_err(message),
    }
}

/// The Python exception for a facade error: the engine's kinds as in [`codec_err`] (a sample's
/// error keeps its cause's kind and names the sample), pipeline states as `Timeout`,
/// `PoolStarved`, `Exhausted`, `Closed`.
pub(crate) fn damacy_err(e: &damacy::Error) -> PyErr {
    match e {
        damacy::Error::Codec(c) => codec_err(c),
        damacy::Error::Sample { source, .. } => codec_err_with(source, e.to_string()),
        damacy::Error::Sampler(s) => sampler_err(s),
        damacy::Error::Timeout(_) => Timeout::new_err(e.to_string()),
        damacy::Error::PoolStarved(_) => PoolStarved::new_err(e.to_string()),
        damacy::Error::Exhausted(_) => Exhausted::new_err(e.to_string()),
        damacy::Error::Closed => Closed::new_err(e.to_string()),
        _ => Error::new_err(e.to_string()),
    }
}

/// A sampler error as `damacy.InvalidArgument` (every sampler error is a bad argument).
pub(crate) fn sampler_err(e: &damacy::sampler::SamplerError) -> PyErr {
    InvalidArgument::new_err(e.to_string())
}

/// Run `f`, turning a panic into `damacy.Error` so that no panic unwinds into the interpreter.
pub(crate) fn guard<T>(what: &str, f: impl FnOnce() -> PyResult<T>) -> PyResult<T> {
    match catch_unwind(AssertUnwindSafe(f)) {
        Ok(result) => result,
        Err(payload) => {
            let detail = payload
                .downcast_ref::<&str>()
                .map(|s| (*s).to_owned())
                .or_else(|| payload.downcast_ref::<String>().cloned())
                .unwrap_or_else(|| "no message".to_owned());
            Err(Error::new_err(format!("internal error in {what} (a bug in damacy; please report it): {detail}")))
        }
    }
}

/// An engine error of `kind`, raised as its Python exception: shows (in tests) which class each
/// kind of engine error maps to (`tests/python/test_errors.py`).
#[pyfunction]
pub(crate) fn _engine_error_for_tests(kind: &str) -> PyResult<()> {
    use std::sync::Arc;
    let location = || Box::new(damacy::Location::array("file:///s", "/a"));
    let source = || -> Arc<dyn std::error::Error + Send + Sync> { Arc::new(std::io::Error::other("the source")) };
    let e = match kind {
        "invalid_argument" => CodecError::InvalidArgument("bad".into()),
        "not_found" => CodecError::NotFound("nothing".into()),
        "storage" => {
            CodecError::Storage { kind: StorageErrorKind::PermissionDenied, location: location(), source: source() }
        }
        "io_driver_stopped" => CodecError::Storage {
            kind: StorageErrorKind::Other,
            location: location(),
            source: Arc::new(damacy::IoDriverStopped),
        },
        "decode" => CodecError::Decode { location: location(), message: "corrupt".into(), source: Some(source()) },
        "metadata" => CodecError::Metadata { path: "/a".into(), message: "not zarr".into(), source: None },
        "unsupported" => CodecError::Unsupported("a codec".into()),
        "device" => CodecError::Device {
            context: "decoding".into(),
            source: Arc::new(damacy::DeviceError::NoDevice("none here".into())),
        },
        "out_of_memory" => CodecError::OutOfMemory("too small".into()),
        "internal" => CodecError::Internal { what: "a lock was poisoned".into(), source: Some(source()) },
        other => return Err(InvalidArgument::new_err(format!("no engine error kind {other}"))),
    };
    Err(codec_err(&e))
}

/// Registers the exception classes on the module.
pub(crate) fn register(m: &Bound<'_, PyModule>) -> PyResult<()> {
    let py = m.py();
    m.add("Error", py.get_type::<Error>())?;
    m.add("InvalidArgument", py.get_type::<InvalidArgument>())?;
    m.add("Unsupported", py.get_type::<Unsupported>())?;
    m.add("NotFound", py.get_type::<NotFound>())?;
    m.add("StorageError", py.get_type::<StorageError>())?;
    m.add("DecodeError", py.get_type::<DecodeError>())?;
    m.add("DeviceError", py.get_type::<DeviceError>())?;
    m.add("OutOfMemory", py.get_type::<OutOfMemory>())?;
    m.add("Timeout", py.get_type::<Timeout>())?;
    m.add("Closed", py.get_type::<Closed>())?;
    m.add("PoolStarved", py.get_type::<PoolStarved>())?;
    m.add("Exhausted", py.get_type::<Exhausted>())?;
    Ok(())
}
