//! The demo's synthetic, microscopy-like dataset, written with zarrs on first use: one store
//! with a sharded zstd array and a blosc-lz4 array of the same uint16 volume (a noisy dark
//! background with smooth bright structures, as `benches/read/make_data.py` writes).

use std::path::{Path, PathBuf};
use std::sync::Arc;
use std::time::Instant;

use indicatif::{ProgressBar, ProgressStyle};
use rayon::prelude::*;
use zarrs::array::codec::{BloscCodec, BloscCompressionLevel, BloscCompressor, BloscShuffleMode, ZstdCodec};
use zarrs::array::{Array, ArrayBuilder, data_type};
use zarrs::filesystem::FilesystemStore;

type Result<T> = std::result::Result<T, String>;

/// The two geometries: a quick one (the default) and the full one.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) enum Size {
    /// 64×128×128 per array (2 MiB decoded each), for tests.
    Tiny,
    /// 256³ per array (32 MiB decoded each): generated in seconds.
    Small,
    /// 512³ per array (256 MiB decoded each), the read benchmark's geometry.
    Full,
}

impl Size {
    fn name(self) -> &'static str {
        match self {
            Size::Tiny => "tiny",
            Size::Small => "small",
            Size::Full => "full",
        }
    }

    pub(crate) fn shape(self) -> [u64; 3] {
        match self {
            Size::Tiny => [64, 128, 128],
            Size::Small => [256, 256, 256],
            Size::Full => [512, 512, 512],
        }
    }

    fn shard(self) -> [u64; 3] {
        match self {
            Size::Tiny => [64, 128, 128],
            Size::Small => [128, 256, 256],
            Size::Full => [256, 256, 512],
        }
    }
}

/// Inner chunks of the sharded array.
pub(crate) const INNER: [u64; 3] = [32, 64, 64];
/// Chunks of the blosc array.
pub(crate) const BLOSC_CHUNK: [u64; 3] = [64, 64, 64];
/// The arrays of the store, by path.
pub(crate) const ARRAYS: [&str; 2] = ["sharded_zstd", "blosc_lz4"];
/// Bump when the volume or the codecs change, so an old dataset is rewritten.
const VERSION: u32 = 1;

/// The default cache folder: `$DAMACY_DEMO_DIR`, else `$XDG_CACHE_HOME/damacy/demo`, else
/// `~/.cache/damacy/demo`, else the temporary folder.
pub(crate) fn default_dir() -> PathBuf {
    if let Some(d) = std::env::var_os("DAMACY_DEMO_DIR") {
        return PathBuf::from(d);
    }
    let cache = std::env::var_os("XDG_CACHE_HOME")
        .map(PathBuf::from)
        .or_else(|| std::env::var_os("HOME").map(|h| PathBuf::from(h).join(".cache")))
        .unwrap_or_else(std::env::temp_dir);
    cache.join("damacy").join("demo")
}

/// The store of `size` under `dir`, written unless a finished one is there. Returns its path.
pub(crate) fn ensure(dir: &Path, size: Size) -> Result<PathBuf> {
    let store_dir = dir.join(size.name()).join("demo.zarr");
    let marker = store_dir.join("DAMACY_DEMO");
    let expected = format!("version {VERSION} shape {:?} shard {:?}", size.shape(), size.shard());
    if std::fs::read_to_string(&marker).is_ok_and(|m| m == expected) {
        println!("dataset: {} (written earlier)", store_dir.display());
        return Ok(store_dir);
    }
    if store_dir.exists() {
        std::fs::remove_dir_all(&store_dir).map_err(|e| format!("cannot clear {}: {e}", store_dir.display()))?;
    }
    std::fs::create_dir_all(&store_dir).map_err(|e| format!("cannot create {}: {e}", store_dir.display()))?;
    println!("dataset: writing {} (two {:?} uint16 arrays, first use only)", store_dir.display(), size.shape());
    let started = Instant::now();
    write(&store_dir, size)?;
    std::fs::write(&marker, expected).map_err(|e| format!("cannot write {}: {e}", marker.display()))?;
    println!("dataset: written in {:.1} s", started.elapsed().as_secs_f64());
    Ok(store_dir)
}

fn write(store_dir: &Path, size: Size) -> Result<()> {
    let store = Arc::new(FilesystemStore::new(store_dir).map_err(|e| e.to_string())?);
    zarrs::group::GroupBuilder::new()
        .build(store.clone(), "/")
        .and_then(|g| g.store_metadata().map_err(Into::into))
        .map_err(|e| format!("group metadata: {e}"))?;
    let shape = size.shape().to_vec();
    let zstd = ArrayBuilder::new(shape.clone(), size.shard().to_vec(), data_type::uint16(), 0u16)
        .subchunk_shape(INNER.to_vec())
        .bytes_to_bytes_codecs(vec![Arc::new(ZstdCodec::new(0, false))])
        .build(store.clone(), "/sharded_zstd")
        .map_err(|e| format!("sharded_zstd: {e}"))?;
    let blosc_codec = BloscCodec::new(
        BloscCompressor::LZ4,
        BloscCompressionLevel::try_from(5u8).map_err(|e| format!("blosc level: {e:?}"))?,
        None,
        BloscShuffleMode::Shuffle,
        Some(2),
    )
    .map_err(|e| format!("blosc: {e}"))?;
    let blosc = ArrayBuilder::new(shape.clone(), BLOSC_CHUNK.to_vec(), data_type::uint16(), 0u16)
        .bytes_to_bytes_codecs(vec![Arc::new(blosc_codec)])
        .build(store, "/blosc_lz4")
        .map_err(|e| format!("blosc_lz4: {e}"))?;
    let total = 2 * shape.iter().product::<u64>() * 2;
    let bar = ProgressBar::new(total).with_style(
        ProgressStyle::with_template("  {bar:40} {bytes}/{total_bytes} {bytes_per_sec} eta {eta}")
            .map_err(|e| e.to_string())?,
    );
    for array in [&zstd, &blosc] {
        array.store_metadata().map_err(|e| format!("{}: {e}", array.path()))?;
        fill(array, &bar)?;
    }
    bar.finish_and_clear();
    Ok(())
}

/// Write every chunk (shard) of `array`, in parallel.
fn fill(array: &Array<FilesystemStore>, bar: &ProgressBar) -> Result<()> {
    let grid: Vec<u64> = array.chunk_grid_shape().to_vec();
    let chunk: Vec<u64> = array.chunk_shape(&[0, 0, 0]).map_err(|e| e.to_string())?.iter().map(|c| c.get()).collect();
    let (gy, gx) = (grid[1], grid[2]);
    let coords: Vec<[u64; 3]> =
        (0..grid[0]).flat_map(|z| (0..gy).flat_map(move |y| (0..gx).map(move |x| [z, y, x]))).collect();
    coords.par_iter().try_for_each(|c| {
        let origin = [c[0] * chunk[0], c[1] * chunk[1], c[2] * chunk[2]];
        let data = volume(origin, [chunk[0], chunk[1], chunk[2]]);
        array.store_chunk(c, data.as_slice()).map_err(|e| format!("{} chunk {c:?}: {e}", array.path()))?;
        bar.inc(data.len() as u64 * 2);
        Ok(())
    })
}

/// The synthetic volume on the box `origin + shape`: `100 + 2000·max(s − 0.4, 0)` plus
/// gaussian-like noise of σ ≈ 3, where `s` is a smooth sum of sines; deterministic per box.
pub(crate) fn volume(origin: [u64; 3], shape: [u64; 3]) -> Vec<u16> {
    let [z0, y0, x0] = origin.map(|o| o as f32);
    let [nz, ny, nx] = shape.map(|n| n as usize);
    let zs: Vec<f32> = (0..nz).map(|z| ((z0 + z as f32) / 13.0 + 0.3).sin()).collect();
    let ys: Vec<f32> = (0..ny).map(|y| ((y0 + y as f32) / 17.0).sin()).collect();
    let xs: Vec<f32> = (0..nx).map(|x| ((x0 + x as f32) / 11.0).cos()).collect();
    let mut rng =
        origin[0].wrapping_mul(0x9E37_79B9_7F4A_7C15) ^ origin[1].rotate_left(21) ^ origin[2].rotate_left(42) | 1;
    let mut out = Vec::with_capacity(nz * ny * nx);
    for (z, zv) in zs.iter().enumerate() {
        for (y, yv) in ys.iter().enumerate() {
            for (x, xv) in xs.iter().enumerate() {
                let diagonal = ((x0 + x as f32 + y0 + y as f32 - z0 - z as f32) / 23.0).sin();
                let s = (zv + yv * xv + diagonal) / 3.0;
                // Four uniforms: a bell-shaped noise of σ ≈ 3 counts.
                let mut u = 0.0f32;
                for _ in 0..4 {
                    rng ^= rng << 13;
                    rng ^= rng >> 7;
                    rng ^= rng << 17;
                    u += (rng >> 40) as f32 / (1u64 << 24) as f32;
                }
                let noise = (u - 2.0) * 3.0 * 3f32.sqrt();
                let f = 100.0 + 2000.0 * (s - 0.4).max(0.0) + noise;
                out.push(f.clamp(0.0, 65535.0) as u16);
            }
        }
    }
    out
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn the_volume_is_deterministic_and_microscopy_like() {
        let a = volume([0, 64, 128], [8, 8, 8]);
        assert_eq!(a, volume([0, 64, 128], [8, 8, 8]));
        let mean = a.iter().map(|&v| f64::from(v)).sum::<f64>() / a.len() as f64;
        assert!(a.iter().all(|&v| v >= 80), "a dark background around 100 counts");
        assert!((90.0..1000.0).contains(&mean), "{mean}");
        let bright = volume([0, 0, 0], [64, 64, 64]).iter().filter(|&&v| v > 300).count();
        assert!(bright > 1000, "bright structures: {bright}");
    }
}
