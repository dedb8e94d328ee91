//! One test source, two devices: every case here runs on a real GPU (`gpu_*`) and, in builds
//! with the `emulate` feature, on the host emulator (`emulated_*`, under a fixed and a shuffled
//! schedule), so an expectation that goes stale fails in CI long before the next GPU run (issue
//! 28: a GPU-only test asserted 96 blosc fixtures, and unsupported chunks, after the fixtures had
//! become 120, all supported). The GPU variants skip, printing "SKIPPED" and the reason, when no
//! CUDA driver or device is present (or libnvrtc cannot be found). Expected counts come from
//! `fixtures/manifest.json`, not literals.
#![allow(clippy::doc_markdown, clippy::missing_panics_doc)]

mod common;

use common::{
    blosc_compress, blosc_fixture_in_run, blosc_fixtures, decode_host, manifest, run_blosc_fixtures,
    run_bytes_fixtures, run_inflate_checks, run_mixed_codec_waves, run_pipelined_waves, test_data, under_asan,
};
use damacy_kernels::{ChunkInput, Device, DeviceKind, Error};

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

/// Whether the emulated kernels of this build run under a sanitizer (`scripts/asan.sh`,
/// `scripts/tsan.sh` set these for the build and the run): there the emulated variants run the
/// shuffled schedule only, and under TSan `every_codec_in_one_wave` its one wave only.
fn sanitized() -> (bool, bool) {
    let on = |v: &str| std::env::var(v).is_ok_and(|v| v == "1");
    (on("DAMACY_EMU_ASAN"), on("DAMACY_EMU_TSAN"))
}

/// Declares each case as `gpu_<name>` (CUDA device 0, skipped without one) and, with the
/// `emulate` feature, `emulated_<name>` (the emulator with schedule seed 0 and a shuffled one;
/// the shuffled one alone under a sanitizer).
macro_rules! on_both_devices {
    ($($gpu:ident, $emulated:ident => $case:ident;)*) => {$(
        #[test]
        fn $gpu() {
            let Some(device) = gpu() else { return };
            $case(&device);
        }
        #[cfg(feature = "emulate")]
        #[test]
        fn $emulated() {
            let (asan, tsan) = sanitized();
            let seeds: &[u64] = if asan || tsan { &[0x5EED_2026] } else { &[0, 0x5EED_2026] };
            for &seed in seeds {
                $case(&Device::emulated(seed));
            }
        }
    )*};
}

on_both_devices! {
    gpu_blosc_fixtures_match_manifest_digests, emulated_blosc_fixtures_match_manifest_digests
        => blosc_fixtures_match_manifest_digests;
    gpu_bytes_fixtures_decode_and_assemble, emulated_bytes_fixtures_decode_and_assemble
        => bytes_fixtures_decode_and_assemble;
    gpu_random_frames_roundtrip_and_corruption_is_a_status, emulated_random_frames_roundtrip_and_corruption_is_a_status
        => random_frames_roundtrip_and_corruption_is_a_status;
    gpu_pipelined_waves_over_streams_and_events, emulated_pipelined_waves_over_streams_and_events
        => pipelined_waves_over_streams_and_events;
    gpu_zstd_matches_libzstd_and_corruption_is_a_status, emulated_zstd_matches_libzstd_and_corruption_is_a_status
        => zstd_matches_libzstd_and_corruption_is_a_status;
    gpu_inflate_matches_flate2_and_corruption_is_a_status, emulated_inflate_matches_flate2_and_corruption_is_a_status
        => inflate_matches_flate2_and_corruption_is_a_status;
    gpu_every_codec_in_one_wave, emulated_every_codec_in_one_wave => every_codec_in_one_wave;
}

/// Input sizes: the emulator (one fiber per CUDA thread) takes minutes for what a GPU decodes in
/// milliseconds, more under ASan, so its inputs are smaller; the checks are the same.
fn scaled(device: &Device, len: usize) -> usize {
    match device.kind() {
        DeviceKind::Emulated if sanitized().0 => len / 25,
        DeviceKind::Emulated => len / 5,
        _ => len,
    }
}

/// The v3 fixtures whose codecs are `bytes` + `blosc`: all of them decode on the device (every
/// compressor of the fixtures has a kernel) and match the manifest's digests.
fn blosc_fixtures_match_manifest_digests(device: &Device) {
    let m = manifest();
    let blosc = blosc_fixtures(&m);
    assert!(!blosc.is_empty(), "the manifest lists blosc fixtures");
    for a in &blosc {
        let cname = a["codecs"][1]["configuration"]["cname"].as_str().unwrap();
        assert!(matches!(cname, "lz4" | "lz4hc" | "blosclz" | "zstd" | "zlib"), "{}: {cname} has no kernel", a["path"]);
    }
    // Under ASan half of them (`blosc_fixture_in_run`), and not the zlib ones: tests/inflate.rs's
    // blosc-zlib test decodes those under ASan (inflating blosc's 1000-byte blocks under the
    // instrumented emulator is most of either test's time).
    let zlib_elsewhere = |cname: &str| under_asan() && cname == "zlib";
    let expected = blosc
        .iter()
        .filter(|a| {
            blosc_fixture_in_run(a) && !zlib_elsewhere(a["codecs"][1]["configuration"]["cname"].as_str().unwrap())
        })
        .count();
    assert!(expected * 5 >= blosc.len() * 2, "{expected} of {} blosc fixtures", blosc.len());
    let (checked, unsupported) = run_blosc_fixtures(device, |c| !zlib_elsewhere(c));
    assert_eq!(checked, expected, "blosc fixtures checked ({})", device.describe());
    assert_eq!(unsupported, 0, "every blosc fixture's compressor has a kernel");
}

/// The unsharded v3 `bytes` fixtures (alone, + crc32c, transpose +): every one decodes and
/// assembles (crop, byte order, transpose, fill) to the manifest's digest.
fn bytes_fixtures_decode_and_assemble(device: &Device) {
    let m = manifest();
    let expected = m["arrays"]
        .as_array()
        .unwrap()
        .iter()
        .filter(|a| a["zarr_format"] == 3 && a["shard_shape"].is_null())
        .filter(|a| {
            let names: Vec<&str> =
                a["codecs"].as_array().unwrap().iter().map(|c| c["name"].as_str().unwrap()).collect();
            matches!(names.as_slice(), ["bytes"] | ["bytes", "crc32c"] | ["transpose", "bytes"])
        })
        .count();
    assert!(expected > 0, "the manifest lists bytes fixtures");
    assert_eq!(run_bytes_fixtures(device), expected, "bytes fixtures checked ({})", device.describe());
}

fn random_frames_roundtrip_and_corruption_is_a_status(device: &Device) {
    let mut datas = Vec::new();
    let mut frames = Vec::new();
    for (i, cname) in ["lz4", "lz4hc", "blosclz"].iter().enumerate() {
        for shuffle in 0..3 {
            for ts in [1usize, 2, 4, 8] {
                let d = test_data(scaled(device, 100_000) + i * 777, (ts + shuffle as usize) as u8, i as u64);
                frames.push(blosc_compress(&d, 5, shuffle, ts, cname, 0));
                datas.push(d);
            }
        }
    }
    let inputs: Vec<_> = frames.iter().map(|f| ChunkInput::blosc(f)).collect();
    for (r, d) in decode_host(device, &inputs).iter().zip(&datas) {
        assert_eq!(r.as_ref().unwrap(), d);
    }
    let mut cut = frames[0][..frames[0].len() / 2].to_vec();
    let l = cut.len() as u32;
    cut[12..16].copy_from_slice(&l.to_le_bytes());
    let r = decode_host(device, &[ChunkInput::blosc(&cut)]);
    assert!(matches!(r[0], Err(Error::Stream { .. } | Error::Decode { .. })), "{:?}", r[0]);
}

fn pipelined_waves_over_streams_and_events(device: &Device) {
    run_pipelined_waves(device);
}

fn zstd_matches_libzstd_and_corruption_is_a_status(device: &Device) {
    let mut datas = Vec::new();
    let mut frames = Vec::new();
    for (i, level) in [-5, -1, 0, 1, 3, 7, 12, 19, 22].into_iter().enumerate() {
        for kind in 0..4u8 {
            let len = scaled(device, [1usize, 300, 70_000, 300_000][usize::from(kind)]).max(1);
            let d = test_data(len + i * 131, kind + i as u8, i as u64);
            frames.push(zstd::bulk::compress(&d, level).unwrap());
            datas.push(d);
        }
    }
    let inputs: Vec<_> = frames.iter().map(|f| ChunkInput::zstd(f).with_checksum_verification()).collect();
    for (r, d) in decode_host(device, &inputs).iter().zip(&datas) {
        assert_eq!(r.as_ref().unwrap(), d);
    }
    let mut bad = frames[10].clone();
    let n = bad.len();
    bad[n / 2] ^= 0x55;
    let r = decode_host(device, &[ChunkInput::zstd(&bad)]);
    if let Ok(v) = &r[0] {
        assert_eq!(Some(v.clone()), zstd::bulk::decompress(&bad, v.len()).ok());
    }
}

/// gzip and zlib through the inflate kernel: flate2's streams at every level (stored, fixed and
/// dynamic blocks), a two-member gzip chunk with every header field, and corrupt streams, each
/// fault its status (checksums, header CRC, reserved block type, truncation, overflow, preset
/// dictionary). `tests/inflate.rs` has the emulator's finer cases.
fn inflate_matches_flate2_and_corruption_is_a_status(device: &Device) {
    run_inflate_checks(device, scaled(device, 300_000));
}

fn every_codec_in_one_wave(device: &Device) {
    // Under TSan one wave: the race detector, not the wave sizes, finds a missing ordering.
    run_mixed_codec_waves(device, !sanitized().1);
}
