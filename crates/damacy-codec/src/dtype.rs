//! Data types: one [`Dtype`] for the whole workspace, defined beside the kernels that read and
//! write it (`damacy_kernels::dtype`).

pub use damacy_kernels::dtype::{CastKind, Dtype, OutputDtype, UnknownDtype};
