//! The blosc C library as reference compressor, shared by the tests, the criterion bench and
//! the `kernel_bench` example (each includes this file with `#[path]`).

/// Compresses `data` with `blosc_compress_ctx` (the C library numcodecs uses).
///
/// # Errors
/// When `cname` holds a NUL byte or the library reports a failure.
#[allow(dead_code, unreachable_pub)]
pub fn blosc_compress(
    data: &[u8],
    clevel: i32,
    shuffle: i32,
    typesize: usize,
    cname: &str,
    blocksize: usize,
) -> Result<Vec<u8>, String> {
    // Room for every split stored raw (a 4-byte size each) plus the header and block offsets.
    let mut out = vec![0u8; data.len() + data.len() / 8 + 4096];
    let cname = std::ffi::CString::new(cname).map_err(|e| e.to_string())?;
    // SAFETY: src and dst are valid for the sizes passed; cname is NUL-terminated; the context
    // API keeps no global state, so parallel calls are fine.
    let n = unsafe {
        blosc_src::blosc_compress_ctx(
            clevel,
            shuffle,
            typesize,
            data.len(),
            data.as_ptr().cast(),
            out.as_mut_ptr().cast(),
            out.len(),
            cname.as_ptr(),
            blocksize,
            1,
        )
    };
    if n <= 0 {
        return Err(format!("blosc_compress_ctx failed ({n}) on {} bytes", data.len()));
    }
    out.truncate(n as usize);
    Ok(out)
}
