//! Corrupt and truncated inputs give clear errors naming the array, chunk and byte range:
//! never a panic, never silent wrong data.

mod common;

use std::path::Path;

use common::fixtures_dir;
use damacy_codec::{ArrayOptions, Error, Reader, ReaderConfig, Region, Store, StoreOptions};

/// Copy one fixture array into a scratch store.
fn scratch(array: &str) -> tempfile::TempDir {
    let dir = tempfile::tempdir().unwrap();
    copy_dir(&fixtures_dir().join(array), &dir.path().join(array));
    dir
}

fn copy_dir(from: &Path, to: &Path) {
    std::fs::create_dir_all(to).unwrap();
    for entry in std::fs::read_dir(from).unwrap() {
        let entry = entry.unwrap();
        let target = to.join(entry.file_name());
        if entry.file_type().unwrap().is_dir() {
            copy_dir(&entry.path(), &target);
        } else {
            std::fs::copy(entry.path(), target).unwrap();
        }
    }
}

fn flip_byte(path: &Path, offset_from_start: Option<usize>, offset_from_end: Option<usize>) {
    let mut bytes = std::fs::read(path).unwrap();
    let i = offset_from_start.unwrap_or_else(|| bytes.len() - offset_from_end.unwrap());
    bytes[i] ^= 0x5A;
    std::fs::write(path, bytes).unwrap();
}

fn read_whole(dir: &Path, array: &str) -> Result<damacy_codec::Batch, Error> {
    let store = Store::open(dir.to_str().unwrap(), &StoreOptions::default())?;
    let reader = Reader::new(ReaderConfig::default())?;
    let info = reader.open_array(&store, array, ArrayOptions::default())?;
    reader.read_region(&info, &Region::whole(&info.shape))
}

#[test]
fn flipped_byte_in_a_checksummed_chunk() {
    for (array, chunk) in [("v3/crc32c_zstd", "c/1/1"), ("v3/zstd_l3_ck", "c/1/0/0")] {
        let dir = scratch(array);
        flip_byte(&dir.path().join(array).join(chunk), Some(20), None);
        let err = read_whole(dir.path(), array).unwrap_err();
        let msg = err.to_string();
        assert!(matches!(err, Error::Decode { .. }), "{msg}");
        assert!(msg.contains(array) && msg.contains(chunk), "names array and key: {msg}");
    }
}

#[test]
fn flipped_byte_in_a_blosc_header() {
    let array = "v3/blosc_lz4_byte_ts2_large";
    let dir = scratch(array);
    // nbytes in the blosc header: the frame claims a different decoded size.
    flip_byte(&dir.path().join(array).join("c/0"), Some(5), None);
    let err = read_whole(dir.path(), array).unwrap_err();
    assert!(matches!(err, Error::Decode { .. }), "{err}");
    assert!(err.to_string().contains("chunk [0]"), "{err}");
}

#[test]
fn bad_shard_index_checksum() {
    let array = "v3/sharded_zstd_index_end";
    let dir = scratch(array);
    // The index sits at the end: its last 4 bytes are the crc32c; flip a byte before them.
    flip_byte(&dir.path().join(array).join("c/1/1/0"), None, Some(10));
    let err = read_whole(dir.path(), array).unwrap_err();
    let msg = err.to_string();
    assert!(matches!(err, Error::Decode { .. }), "{msg}");
    assert!(msg.contains("shard index") && msg.contains("chunk [1, 1, 0]") && msg.contains(array), "{msg}");
}

#[test]
fn truncated_shards() {
    // Index at the start: the index survives, the inner chunks it points at do not.
    let array = "v3/sharded_blosc_index_start";
    let dir = scratch(array);
    let shard = dir.path().join(array).join("c/0/0/0");
    let len = std::fs::metadata(&shard).unwrap().len();
    std::fs::OpenOptions::new().write(true).open(&shard).unwrap().set_len(len / 2).unwrap();
    let err = read_whole(dir.path(), array).unwrap_err();
    let msg = err.to_string();
    assert!(matches!(err, Error::Decode { .. } | Error::Storage { .. }), "{msg}");
    assert!(msg.contains(array) && msg.contains("c/0/0/0") && msg.contains("bytes "), "names key and range: {msg}");

    // Shorter than its own index.
    std::fs::OpenOptions::new().write(true).open(&shard).unwrap().set_len(7).unwrap();
    let err = read_whole(dir.path(), array).unwrap_err();
    assert!(matches!(err, Error::Decode { .. } | Error::Storage { .. }), "{err}");
    assert!(err.to_string().contains("c/0/0/0"), "{err}");

    // Index at the end: cutting the tail off breaks the index checksum or its size.
    let array = "v3/sharded_zstd_index_end";
    let dir = scratch(array);
    let shard = dir.path().join(array).join("c/0/0/0");
    let len = std::fs::metadata(&shard).unwrap().len();
    std::fs::OpenOptions::new().write(true).open(&shard).unwrap().set_len(len - 100).unwrap();
    let err = read_whole(dir.path(), array).unwrap_err();
    assert!(matches!(err, Error::Decode { .. }), "{err}");
    assert!(err.to_string().contains("c/0/0/0"), "{err}");
}

#[test]
fn metadata_that_is_not_json() {
    let array = "v3/crc32c_bytes";
    let dir = scratch(array);
    std::fs::write(dir.path().join(array).join("zarr.json"), b"{\"zarr_format\": 3, oops").unwrap();
    let err = read_whole(dir.path(), array).unwrap_err();
    assert!(matches!(err, Error::Metadata { .. }), "{err}");
    assert!(err.to_string().contains("/v3/crc32c_bytes"), "{err}");
}

#[test]
fn a_codec_zarrs_does_not_know_is_unsupported_from_the_store_or_the_caller() {
    let array = "v3/crc32c_bytes";
    let dir = scratch(array);
    let path = dir.path().join(array).join("zarr.json");
    let json = std::fs::read_to_string(&path).unwrap().replace("\"crc32c\"", "\"damacy_test.xor\"");
    std::fs::write(&path, &json).unwrap();
    let err = read_whole(dir.path(), array).unwrap_err();
    assert!(matches!(err, Error::Unsupported(_)), "{err:?}");
    assert!(err.to_string().contains("damacy_test.xor") && err.to_string().contains(array), "{err}");
    let store = Store::open(dir.path().to_str().unwrap(), &StoreOptions::default()).unwrap();
    let err = damacy_codec::ArrayMeta::from_metadata_json(&store, array, &json).unwrap_err();
    assert!(matches!(err, Error::Unsupported(_)), "{err:?}");
}

#[test]
fn chunks_shared_by_a_batch_decode_once_and_indexes_are_fetched_once() {
    let store = Store::open(fixtures_dir().to_str().unwrap(), &StoreOptions::default()).unwrap();
    let reader = Reader::new(ReaderConfig::default()).unwrap();
    let array = reader.open_array(&store, "v3/sharded_zstd_index_end", ArrayOptions::default()).unwrap();
    // Eight crops inside inner chunks (2,0,0) and (2,0,1): two inner chunks of shard (1,0,0).
    let crops: Vec<Region> = (0..8).map(|i| Region::new(vec![16 + i % 4, i, 5], vec![4, 8, 10])).collect();
    let before = reader.stats();
    reader.read_batch(&array, &crops).unwrap();
    let s = reader.stats().since(&before);
    assert_eq!(s.units_decoded, 2, "{s:?}");
    assert_eq!(s.index_fetches, 1, "{s:?}");
    assert_eq!(s.storage_requests, 2, "one index read and one coalesced chunk read: {s:?}");

    // The next batch on the same shard hits the cache.
    let before = reader.stats();
    reader.read_batch(&array, &crops[..2]).unwrap();
    let s = reader.stats().since(&before);
    assert_eq!((s.index_fetches, s.index_hits), (0, 1), "{s:?}");
}

#[test]
fn concurrent_batches_fetch_each_index_once() {
    let store = Store::open(fixtures_dir().to_str().unwrap(), &StoreOptions::default()).unwrap();
    let reader = Reader::new(ReaderConfig::default()).unwrap();
    let array = reader.open_array(&store, "v3/sharded_blosc_index_end", ArrayOptions::default()).unwrap();
    std::thread::scope(|s| {
        for t in 0..8u64 {
            let (reader, array) = (&reader, &array);
            s.spawn(move || {
                let crops: Vec<Region> =
                    (0..3).map(|i| Region::new(vec![(t * 5 + i * 13) % 32, (t * 7) % 64, 0], vec![8, 8, 20])).collect();
                reader.read_batch(array, &crops).unwrap();
            });
        }
    });
    // 3 x 3 x 1 shards exist; no shard index is fetched twice however the threads interleave.
    assert!(reader.stats().index_fetches <= 9, "{:?}", reader.stats());
    assert_eq!(reader.stats().index_fetches, reader.shard_index_cache().entry_count());
    assert!(reader.stats().index_cache_bytes > 0);
}

#[test]
fn output_dtype_casts() {
    use damacy_codec::{Dtype, OutputDtype};
    let store = Store::open(fixtures_dir().to_str().unwrap(), &StoreOptions::default()).unwrap();
    let reader = Reader::new(ReaderConfig::default()).unwrap();
    let array = reader.open_array(&store, "v3/bytes_le_uint16_r3", ArrayOptions::default()).unwrap();
    let region = Region::whole(&array.shape);
    let raw = reader.read_region(&array, &region).unwrap();
    let expect: Vec<f32> = raw.as_slice::<u16>().unwrap().iter().map(|&v| f32::from(v)).collect();
    for to in [Dtype::F32, Dtype::F64, Dtype::I32, Dtype::U32] {
        // One reader, one array per output dtype (semantics are per array, resources shared).
        let cast = array.with_options(ArrayOptions::default().with_output_dtype(OutputDtype::Cast(to))).unwrap();
        let out = reader.read_region(&cast, &region).unwrap();
        assert_eq!(out.dtype, to);
        let got: Vec<f32> = out.bytes().chunks_exact(to.size()).map(|b| to.read_f64(b) as f32).collect();
        assert_eq!(got, expect, "{to}");
    }
    assert_eq!(
        reader
            .read_region(
                &array.with_options(ArrayOptions::default().with_output_dtype(OutputDtype::Cast(Dtype::F32))).unwrap(),
                &region
            )
            .unwrap()
            .as_slice::<f32>()
            .unwrap(),
        expect.as_slice()
    );
    // Float outputs take every source, rounded to nearest even (numpy's astype, torch's
    // .to(torch.bfloat16)): uint16 to float16 and bfloat16 without allowing lossy casts.
    let values = raw.as_slice::<u16>().unwrap();
    for to in [Dtype::F16, Dtype::BF16] {
        let cast = ArrayOptions::default().with_output_dtype(OutputDtype::Cast(to));
        let out =
            reader.read_region(&reader.open_array(&store, "v3/bytes_le_uint16_r3", cast).unwrap(), &region).unwrap();
        assert_eq!(out.dtype, to);
        let got: Vec<u16> = out.bytes().chunks_exact(2).map(|b| u16::from_ne_bytes([b[0], b[1]])).collect();
        let want: Vec<u16> = values.iter().map(|&v| Dtype::U16.convert_bits(to, v.into()) as u16).collect();
        assert_eq!(got, want, "{to}");
        // Rounded, not truncated: within half a unit in the last place of the target.
        let ulp = |v: f64| {
            if to == Dtype::BF16 {
                2f64.powi(v.log2().floor() as i32 - 7)
            } else {
                2f64.powi(v.log2().floor() as i32 - 10)
            }
        };
        for (&v, b) in values.iter().zip(out.bytes().chunks_exact(2)) {
            let (v, r) = (f64::from(v), to.read_f64(b));
            assert!(v == 0.0 || (r - v).abs() <= ulp(v) / 2.0 || r.is_infinite(), "{to}: {v} -> {r}");
        }
    }
    // Integer outputs that cannot hold the source's range stay refused when the array is opened.
    let strict = ArrayOptions::default().with_output_dtype(OutputDtype::Cast(Dtype::I16));
    let err = reader.open_array(&store, "v3/bytes_le_uint16_r3", strict).unwrap_err().to_string();
    assert!(
        err.contains("int16") && err.contains("uint16") && err.contains("allow lossy"),
        "refused when the array is opened: {err}"
    );
    let lossy = ArrayOptions::default().with_output_dtype(OutputDtype::Cast(Dtype::I16)).with_lossy_cast(true);
    let out = reader.read_region(&reader.open_array(&store, "v3/bytes_le_uint16_r3", lossy).unwrap(), &region).unwrap();
    assert_eq!(out.bytes().len(), raw.bytes().len());
    let wrapped: Vec<i16> = values.iter().map(|&v| v as i16).collect();
    assert_eq!(out.as_slice::<i16>().unwrap(), wrapped.as_slice(), "lossy integer casts wrap (numpy's astype)");
    assert!(out.as_slice::<f32>().is_err(), "typed views check the dtype");
}

/// The same failures on the device route (the GPU route's exact logic, on the kernel emulator):
/// corrupt zstd and blosc-zstd chunks are decode errors naming the array and the chunk, found by
/// the host parse or reported by the kernel as a status; content checksums are verified when
/// the array's options ask for it, and skipped otherwise.
#[cfg(feature = "emulate")]
mod device {
    use super::*;
    use damacy_codec::{ExecutorKind, StatsSnapshot};

    /// A reader on the kernel emulator with small buffers (allocated once per reader).
    fn emulated_reader() -> Reader {
        Reader::new(ReaderConfig::default().with_executor(ExecutorKind::Emulated).with_buffer_bytes(64 << 20, 16 << 20))
            .unwrap()
    }

    fn read_with(
        reader: &Reader,
        dir: &Path,
        array: &str,
        options: ArrayOptions,
    ) -> Result<(damacy_codec::Batch, StatsSnapshot), Error> {
        let store = Store::open(dir.to_str().unwrap(), &StoreOptions::default())?;
        let info = reader.open_array(&store, array, options)?;
        assert!(matches!(info.route, damacy_codec::ChainRoute::Device(_)), "{array}: {}", info.route);
        let before = reader.stats();
        let batch = reader.read_region(&info, &Region::whole(&info.shape))?;
        Ok((batch, reader.stats().since(&before)))
    }

    fn read_emulated(
        dir: &Path,
        array: &str,
        options: ArrayOptions,
    ) -> Result<(damacy_codec::Batch, StatsSnapshot), Error> {
        read_with(&emulated_reader(), dir, array, options)
    }

    fn expect_decode_error(dir: &Path, array: &str, key: &str, needle: &str) {
        let err = read_emulated(dir, array, ArrayOptions::default()).unwrap_err();
        let msg = err.to_string();
        assert!(matches!(err, Error::Decode { .. }), "{array}: {msg}");
        assert!(msg.contains(array) && msg.contains(key), "{array}: names array and key: {msg}");
        assert!(msg.contains(needle), "{array}: says what is wrong ({needle}): {msg}");
    }

    fn whole_digest(reader: &Reader, dir: &Path, array: &str, options: ArrayOptions) -> Result<String, Error> {
        use sha2::Digest as _;
        let (batch, stats) = read_with(reader, dir, array, options)?;
        assert_eq!(stats.units_decoded_device, stats.units_decoded, "{array}: every chunk on the device");
        Ok(hex::encode(sha2::Sha256::digest(batch.bytes())))
    }

    #[test]
    fn content_checksum_checked_only_when_validating() {
        let array = "v3/zstd_l3_ck";
        let want = common::manifest().into_iter().find(|e| e.path == array).unwrap().sha256;
        let dir = scratch(array);
        // The frame's last 4 bytes are its XXH64 checksum: the data still decodes.
        flip_byte(&dir.path().join(array).join("c/1/0/0"), None, Some(2));
        expect_decode_error(dir.path(), array, "c/1/0/0", "content checksum mismatch");
        let unchecked = ArrayOptions::default().with_validate_checksums(false);
        assert_eq!(whole_digest(&emulated_reader(), dir.path(), array, unchecked).unwrap(), want);
    }

    #[test]
    fn malformed_zstd_frames_are_decode_errors() {
        // A broken magic number: the host parse rejects the chunk before any launch.
        let array = "v3/zstd_l0_nock";
        let dir = scratch(array);
        flip_byte(&dir.path().join(array).join("c/0/1/0"), Some(1), None);
        expect_decode_error(dir.path(), array, "c/0/1/0", "magic number");

        // A truncated frame.
        let dir = scratch(array);
        let chunk = dir.path().join(array).join("c/1/1/0");
        let len = std::fs::metadata(&chunk).unwrap().len();
        std::fs::OpenOptions::new().write(true).open(&chunk).unwrap().set_len(len - 9).unwrap();
        expect_decode_error(dir.path(), array, "c/1/1/0", "truncated");

        // The frame of one blosc block: its magic number broken (blosc-zstd, byte shuffle).
        let array = "v3/blosc_zstd_byte_ts4_large";
        let dir = scratch(array);
        let chunk = dir.path().join(array).join("c/0");
        let bytes = std::fs::read(&chunk).unwrap();
        let block = u32::from_le_bytes(bytes[16..20].try_into().unwrap()) as usize;
        flip_byte(&chunk, Some(block + 4 + 1), None);
        expect_decode_error(dir.path(), array, "c/0", "zstd frame of a blosc stream");
    }

    #[test]
    fn corrupt_inner_chunks_of_a_shard_name_the_inner_chunk() {
        let array = "v3/sharded_zstd_index_end";
        let dir = scratch(array);
        let shard = dir.path().join(array).join("c/1/1/0");
        let bytes = std::fs::read(&shard).unwrap();
        // 2 x 2 x 2 inner chunks; the index (16 bytes each, then a crc32c) sits at the end.
        let index = &bytes[bytes.len() - (8 * 16 + 4)..];
        let (k, off) = (0..8)
            .map(|k| (k, u64::from_le_bytes(index[16 * k..16 * k + 8].try_into().unwrap())))
            .find(|(_, o)| *o != u64::MAX)
            .unwrap();
        flip_byte(&shard, Some(off as usize + 2), None);
        let inner = format!("{:?}", [k / 4, (k / 2) % 2, k % 2]).replace(' ', "");
        let err = read_emulated(dir.path(), array, ArrayOptions::default()).unwrap_err();
        let msg = err.to_string();
        assert!(matches!(err, Error::Decode { .. }), "{msg}");
        assert!(msg.contains(array) && msg.contains("c/1/1/0") && msg.contains("magic number"), "{msg}");
        assert!(msg.replace(' ', "").contains(&inner), "names inner chunk {inner}: {msg}");
    }

    /// The bytes of blosc block 0's first stream in a blosc chunk: the block starts after the
    /// 16-byte header, and the stream after its 4-byte compressed size.
    fn first_blosc_stream(chunk: &[u8]) -> std::ops::Range<usize> {
        let block = u32::from_le_bytes(chunk[16..20].try_into().unwrap()) as usize;
        let len = u32::from_le_bytes(chunk[block..block + 4].try_into().unwrap()) as usize;
        block + 4..block + 4 + len
    }

    /// Corrupt gzip, zlib and blosc-zlib chunks on the device route: the first deflate block's
    /// type set to 3 (reserved), which the inflate kernel reports as a status. The read fails with
    /// a decode error that names the array, the chunk's key and the byte range of the stream that
    /// failed inside the chunk (the whole chunk for gzip and zlib, one split stream for blosc).
    #[test]
    fn corrupt_deflate_chunks_name_the_array_key_and_byte_range() {
        for (array, key) in [
            ("v3/gzip_l6", "c/1/0"),
            ("v3/gzip_l1", "c/2/2"),
            ("v2/gzip_C", "0.1.0"),
            ("v2/zlib_C", "1.0.0"),
            ("v3/blosc_zlib_none_ts1_small", "c/0"),
            ("v3/blosc_zlib_byte_ts4_large", "c/1"),
        ] {
            let dir = scratch(array);
            let path = dir.path().join(array).join(key);
            let mut bytes = std::fs::read(&path).unwrap();
            // the stream's range and where its first block header sits (after the gzip header's
            // 10 bytes, none of them optional here, or the zlib header's 2)
            let (range, header) = if array.contains("blosc") {
                let r = first_blosc_stream(&bytes);
                (r.clone(), r.start + 2)
            } else if bytes[..2] == [0x1f, 0x8b] {
                assert_eq!(bytes[3], 0, "{array}: a gzip header without optional fields");
                (0..bytes.len(), 10)
            } else {
                (0..bytes.len(), 2)
            };
            bytes[header] |= 6;
            std::fs::write(&path, &bytes).unwrap();
            let err = read_emulated(dir.path(), array, ArrayOptions::default()).unwrap_err();
            let msg = err.to_string();
            let Error::Decode { location, .. } = &err else { panic!("{array}: not a decode error: {msg}") };
            assert_eq!(location.array.trim_start_matches('/'), array, "{msg}");
            assert_eq!(
                location.key.as_deref().map(|k| k.trim_start_matches('/')),
                Some(format!("{array}/{key}").as_str()),
                "{msg}"
            );
            assert!(msg.contains(array) && msg.contains(key), "names array and key: {msg}");
            let stream = format!("inflate stream at bytes {}..{} of the chunk", range.start, range.end);
            assert!(msg.contains(&stream), "{array}: names the stream's byte range ({stream}): {msg}");
            assert!(msg.contains("malformed compressed data") || msg.contains("corrupt"), "{array}: says what: {msg}");
        }
    }

    /// Byte flips all over checksummed zstd chunks: every read is either the exact data (a flip
    /// that changes nothing decoded) or a decode error naming the array and a chunk, never a
    /// panic or wrong bytes.
    #[test]
    fn flipped_bytes_anywhere_are_errors_or_the_exact_data() {
        let array = "v3/zstd_l3_ck";
        let want = common::manifest().into_iter().find(|e| e.path == array).unwrap().sha256;
        let mut rng = common::SplitMix(2026);
        let (mut errors, mut same) = (0, 0);
        let reader = emulated_reader();
        let dir = scratch(array);
        for _ in 0..24 {
            let chunk = ["c/0/0/0", "c/0/1/0", "c/1/0/0", "c/1/1/0"][rng.below(4) as usize];
            let path = dir.path().join(array).join(chunk);
            let original = std::fs::read(&path).unwrap();
            flip_byte(&path, Some(rng.below(original.len() as u64) as usize), None);
            let result = whole_digest(&reader, dir.path(), array, ArrayOptions::default());
            std::fs::write(&path, &original).unwrap();
            match result {
                Ok(d) => {
                    assert_eq!(d, want, "{chunk}: decoded to other bytes without an error");
                    same += 1;
                }
                Err(err) => {
                    let msg = err.to_string();
                    assert!(matches!(err, Error::Decode { .. }), "{msg}");
                    assert!(msg.contains(array) && msg.contains(chunk), "{msg}");
                    errors += 1;
                }
            }
        }
        assert!(errors >= 20, "{errors} errors, {same} unchanged");
    }
}
