//! The `damacy` Python package's extension module (`damacy._damacy`), built with maturin.
//!
//! The pure-Python parts live in `python/damacy/`; this crate binds the engine (readers,
//! stores, chunk-level reads for `damacy.GpuCodecPipeline`), the sampler and the errors. Every
//! entry point that runs engine code releases the GIL and turns a panic into `damacy.Error`.

use pyo3::prelude::*;

mod engine;
mod errors;
mod pipeline;
mod sampler;

/// Panics inside the guard, to show (in tests) that a Rust panic surfaces as `damacy.Error`.
#[pyfunction]
fn _panic_for_tests() -> PyResult<()> {
    errors::guard("_panic_for_tests", || -> PyResult<()> { panic!("deliberate panic") })
}

/// The extension module.
#[pymodule]
fn _damacy(m: &Bound<'_, PyModule>) -> PyResult<()> {
    m.add("__version__", env!("CARGO_PKG_VERSION"))?;
    errors::register(m)?;
    m.add_class::<engine::PyReader>()?;
    m.add_class::<engine::PyStore>()?;
    m.add_class::<engine::PyArray>()?;
    pipeline::register(m)?;
    sampler::register(m)?;
    m.add_function(wrap_pyfunction!(_panic_for_tests, m)?)?;
    m.add_function(wrap_pyfunction!(errors::_engine_error_for_tests, m)?)?;
    Ok(())
}
