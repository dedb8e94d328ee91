//! damacy kernels (in progress).
