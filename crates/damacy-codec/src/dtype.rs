//! Data types: one [`Dtype`] for the whole workspace, defined beside the kernels that read and
//! write it (`damacy_kernels::Dtype`).

pub use damacy_kernels::{CastKind, Dtype, OutputDtype, UnknownDtype};
