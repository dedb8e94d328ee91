//! Launch geometry, limits, status codes, dtypes and flags shared with the kernels.
//!
//! Generated at build time from the `#define DMC_*` lines of `kernels/common.cuh`, so the
//! kernels and the Rust launcher read every value from one place.
#![allow(missing_docs)]

include!(concat!(env!("OUT_DIR"), "/consts.rs"));
