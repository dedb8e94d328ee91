//! `damacy inspect`: what a store holds and how damacy will read it.

use std::fmt::Write as _;
use std::time::Instant;

use damacy::{ArrayHandle, ArrayOptions, ExecutorKind, Reader, ReaderConfig, Region, Store, StoreOptions};
use sha2::{Digest, Sha256};

use crate::discover;

/// Largest slab `digest` reads at once.
const DIGEST_SLAB_BYTES: u64 = 64 << 20;

/// SHA-256 of the whole array's bytes (C order, little-endian), read through damacy's engine
/// in slabs along the first axis so memory stays bounded.
fn digest_array(reader: &Reader, array: &ArrayHandle) -> Result<String, damacy::Error> {
    let mut hasher = Sha256::new();
    if array.shape.is_empty() {
        hasher.update(reader.read_region(array, &Region::whole(&[]))?.bytes());
        return Ok(hex(&hasher.finalize()));
    }
    if array.shape.contains(&0) {
        return Ok(hex(&hasher.finalize()));
    }
    let row_bytes = array.shape[1..].iter().product::<u64>() * array.dtype.size() as u64;
    let chunk_rows = array.chunk_shape[0].max(1);
    let rows = (DIGEST_SLAB_BYTES / row_bytes.max(1)).max(1);
    let rows = (rows / chunk_rows).max(1) * chunk_rows;
    let mut start = 0;
    while start < array.shape[0] {
        let n = rows.min(array.shape[0] - start);
        let mut region = Region::whole(&array.shape);
        region.start[0] = start;
        region.shape[0] = n;
        hasher.update(reader.read_region(array, &region)?.bytes());
        start += n;
    }
    Ok(hex(&hasher.finalize()))
}

fn hex(bytes: &[u8]) -> String {
    bytes.iter().fold(String::with_capacity(2 * bytes.len()), |mut s, b| {
        let _ = write!(s, "{b:02x}");
        s
    })
}

fn human(bytes: u64) -> String {
    const UNITS: [&str; 5] = ["B", "KiB", "MiB", "GiB", "TiB"];
    let mut v = bytes as f64;
    let mut u = 0;
    while v >= 1024.0 && u + 1 < UNITS.len() {
        v /= 1024.0;
        u += 1;
    }
    if u == 0 { format!("{bytes} B") } else { format!("{v:.1} {}", UNITS[u]) }
}

fn dims(v: &[u64]) -> String {
    format!("[{}]", v.iter().map(u64::to_string).collect::<Vec<_>>().join(", "))
}

pub(crate) fn run(
    url: &str,
    array: Option<&str>,
    digest: bool,
    (executor, device): (ExecutorKind, usize),
    options: &StoreOptions,
) -> Result<(), Box<dyn std::error::Error>> {
    let store = Store::open(url, options)?;
    let reader = Reader::new(ReaderConfig::default().with_executor(executor).with_device(device))?;
    if digest {
        println!("executor: {}", reader.executor_note());
    }
    let paths = match array {
        Some(p) => vec![damacy::normalize_path(p)],
        // A URL that points at an array inspects that array, whether or not the store lists.
        None if discover::root_is_array(&store)? => vec!["/".to_owned()],
        None => discover::list_arrays(&store)?,
    };
    if paths.is_empty() {
        return Err(format!("no zarr arrays in {url}").into());
    }
    let mut total_stored = 0u64;
    let mut total_decoded = 0u64;
    let started = Instant::now();
    for path in &paths {
        let info = reader.open_array(&store, path, ArrayOptions::default())?;
        let stored = discover::stored_bytes(&store, path);
        total_stored += stored.unwrap_or(0);
        total_decoded += info.decoded_bytes();
        let mut out = String::new();
        let _ = writeln!(out, "{path}");
        let _ = writeln!(
            out,
            "  zarr v{}  {}  shape {}  chunks {}{}",
            info.zarr_format,
            info.dtype,
            dims(&info.shape),
            dims(info.decode_shape()),
            info.shard.as_ref().map(|_| format!("  shards {}", dims(&info.chunk_shape))).unwrap_or_default()
        );
        let ratio = stored
            .filter(|s| *s > 0)
            .map(|s| format!(" ({:.2}x)", info.decoded_bytes() as f64 / s as f64))
            .unwrap_or_default();
        let _ = writeln!(
            out,
            "  stored {}, decoded {}{ratio}",
            stored.map_or_else(|| "unknown (store cannot list)".to_owned(), human),
            human(info.decoded_bytes())
        );
        let size = info.dtype.size();
        let mut chains = Vec::new();
        if let Some(shard) = &info.shard {
            chains.push(("shard", damacy::index_routes(&info.codec_metadata)));
            chains.push(("inner chunk codecs", damacy::routes(&shard.inner_codec_metadata, size)));
            chains.push(("index codecs", damacy::index_routes(&shard.index_codec_metadata)));
        } else {
            chains.push(("codecs", damacy::routes(&info.codec_metadata, size)));
        }
        for (label, routes) in chains {
            let _ = writeln!(out, "  {label}:");
            for r in routes {
                let _ = writeln!(out, "    {:<52} {}", r.codec, r.route);
            }
        }
        if digest {
            let before = reader.stats();
            let sha = digest_array(&reader, &info)?;
            let s = reader.stats().since(&before);
            let by = if s.units_decoded == 0 {
                "no chunks decoded".to_owned()
            } else if s.units_decoded_device == s.units_decoded {
                format!("{} chunks by device kernels", s.units_decoded)
            } else if s.units_decoded_device == 0 {
                format!("{} chunks on the CPU", s.units_decoded)
            } else {
                format!("{} of {} chunks by device kernels", s.units_decoded_device, s.units_decoded)
            };
            let _ = writeln!(out, "  sha256 {sha}  ({by})");
        }
        print!("{out}");
    }
    let stats = reader.stats();
    println!(
        "{} arrays, stored {}, decoded {}{}",
        paths.len(),
        human(total_stored),
        human(total_decoded),
        if digest {
            format!(
                "; digests in {:.2} s: {} chunks decoded, {} filled, {} storage requests, {} read",
                started.elapsed().as_secs_f64(),
                stats.units_decoded,
                stats.units_filled,
                stats.storage_requests,
                human(stats.bytes_read)
            )
        } else {
            String::new()
        }
    );
    Ok(())
}
