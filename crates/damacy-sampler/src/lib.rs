//! Per-rank sample plans (strided, contiguous, chunk-aware, resumable).
