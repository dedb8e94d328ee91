//! The emulated test cases again on a real GPU. Every test skips, printing the reason, when
//! no CUDA driver or device is present (or libnvrtc cannot be found).
#![allow(clippy::doc_markdown, clippy::missing_panics_doc)]

mod common;

use common::{
    blosc_compress, decode_host, run_blosc_fixtures, run_bytes_fixtures, run_inflate_checks, run_mixed_codec_waves,
    run_pipelined_waves, test_data,
};
use damacy_kernels::{ChunkInput, Device, Error};

fn gpu() -> Option<Device> {
    if let Err(r) = damacy_kernels::nvrtc::load() {
        eprintln!("SKIPPED (no GPU test): {r}");
        return None;
    }
    match Device::cuda(Some(0)) {
        Ok(d) => {
            eprintln!("running on {}", d.describe());
            Some(d)
        }
        Err(e) => {
            eprintln!("SKIPPED (no GPU test): {e}");
            None
        }
    }
}

#[test]
fn gpu_blosc_fixtures_match_manifest_digests() {
    let Some(device) = gpu() else { return };
    let (checked, unsupported) = run_blosc_fixtures(&device);
    assert_eq!(checked, 96);
    assert!(unsupported > 0);
}

#[test]
fn gpu_bytes_fixtures_decode_and_assemble() {
    let Some(device) = gpu() else { return };
    assert!(run_bytes_fixtures(&device) >= 19);
}

#[test]
fn gpu_random_frames_roundtrip_and_corruption_is_a_status() {
    let Some(device) = gpu() else { return };
    let mut datas = Vec::new();
    let mut frames = Vec::new();
    for (i, cname) in ["lz4", "lz4hc", "blosclz"].iter().enumerate() {
        for shuffle in 0..3 {
            for ts in [1usize, 2, 4, 8] {
                let d = test_data(100_000 + i * 777, (ts + shuffle as usize) as u8, i as u64);
                frames.push(blosc_compress(&d, 5, shuffle, ts, cname, 0));
                datas.push(d);
            }
        }
    }
    let inputs: Vec<_> = frames.iter().map(|f| ChunkInput::blosc(f)).collect();
    for (r, d) in decode_host(&device, &inputs).iter().zip(&datas) {
        assert_eq!(r.as_ref().unwrap(), d);
    }
    let mut cut = frames[0][..frames[0].len() / 2].to_vec();
    let l = cut.len() as u32;
    cut[12..16].copy_from_slice(&l.to_le_bytes());
    let r = decode_host(&device, &[ChunkInput::blosc(&cut)]);
    assert!(matches!(r[0], Err(Error::Stream { .. } | Error::Decode { .. })));
}

#[test]
fn gpu_pipelined_waves_over_streams_and_events() {
    let Some(device) = gpu() else { return };
    run_pipelined_waves(&device);
}

#[test]
fn gpu_zstd_matches_libzstd_and_corruption_is_a_status() {
    let Some(device) = gpu() else { return };
    let mut datas = Vec::new();
    let mut frames = Vec::new();
    for (i, level) in [-5, -1, 0, 1, 3, 7, 12, 19, 22].into_iter().enumerate() {
        for kind in 0..4u8 {
            let d = test_data([1usize, 300, 70_000, 300_000][usize::from(kind)] + i * 131, kind + i as u8, i as u64);
            frames.push(zstd::bulk::compress(&d, level).unwrap());
            datas.push(d);
        }
    }
    let inputs: Vec<_> = frames.iter().map(|f| ChunkInput::zstd(f).with_checksum_verification()).collect();
    for (r, d) in decode_host(&device, &inputs).iter().zip(&datas) {
        assert_eq!(r.as_ref().unwrap(), d);
    }
    let mut bad = frames[10].clone();
    let n = bad.len();
    bad[n / 2] ^= 0x55;
    let r = decode_host(&device, &[ChunkInput::zstd(&bad)]);
    if let Ok(v) = &r[0] {
        assert_eq!(Some(v.clone()), zstd::bulk::decompress(&bad, v.len()).ok());
    }
}

/// gzip and zlib through the inflate kernel on the GPU: flate2's streams at every level (stored,
/// fixed and dynamic blocks), a two-member gzip chunk with every header field, and corrupt
/// streams, each fault its status (checksums, header CRC, reserved block type, truncation,
/// overflow, preset dictionary). The same checks run on the emulator in `tests/inflate.rs`.
#[test]
fn gpu_inflate_matches_flate2_and_corruption_is_a_status() {
    let Some(device) = gpu() else { return };
    run_inflate_checks(&device, 300_000);
}

#[test]
fn gpu_every_codec_in_one_wave() {
    let Some(device) = gpu() else { return };
    run_mixed_codec_waves(&device, true);
}
