//! The device executor's lanes and streaming waves, on the kernel emulator: batches larger than
//! one decode wave stream through a lane (upload of wave k+1 under way before decode of wave k
//! ends, in the emulator's schedule log), every wave's statuses are checked, host outputs are assembled
//! on the device, and two lanes decode side by side.
#![cfg(feature = "emulate")]

use std::path::Path;
use std::sync::Arc;

use damacy_codec::{
    ArrayHandle, ArrayOptions, Error, ExecutorKind, Output, Reader, ReaderConfig, Region, Store, StoreOptions,
};
use zarrs::array::codec::Crc32cCodec;
use zarrs::array::{ArrayBuilder, data_type};

/// Planes (chunks) of the test array: 40 planes of 512 × 512 uint16 (512 KiB each, 20 MiB in
/// all), `bytes` + `crc32c`: the crc32c and memcpy kernels decode them.
const PLANES: u64 = 40;
const SIDE: u64 = 512;
const PLANE_BYTES: usize = (SIDE * SIDE * 2) as usize;

fn plane(z: u64) -> Vec<u16> {
    (0..SIDE * SIDE).map(|i| (i as u16).wrapping_mul(31) ^ (z as u16).wrapping_mul(0x9e37)).collect()
}

fn expected() -> Vec<u8> {
    (0..PLANES).flat_map(|z| plane(z).into_iter().flat_map(u16::to_le_bytes)).collect()
}

fn write_array(dir: &Path) {
    let store = Arc::new(zarrs::filesystem::FilesystemStore::new(dir).unwrap());
    let array = ArrayBuilder::new(vec![PLANES, SIDE, SIDE], vec![1, SIDE, SIDE], data_type::uint16(), 0u16)
        .bytes_to_bytes_codecs(vec![Arc::new(Crc32cCodec::new())])
        .build(store, "/planes")
        .unwrap();
    array.store_metadata().unwrap();
    for z in 0..PLANES {
        array.store_chunk(&[z, 0, 0], plane(z)).unwrap();
    }
}

/// The smallest budgets (64 MiB of device memory: one lane, waves of 6 MiB decoded, a 16 MiB
/// batch buffer) so that the 20 MiB array takes several waves.
fn reader(lanes: usize, device_bytes: u64) -> Reader {
    Reader::new(
        ReaderConfig::default()
            .with_executor(ExecutorKind::Emulated)
            .with_buffer_bytes(device_bytes, 64 << 20)
            .with_lanes(lanes)
            .with_compute_threads(2),
    )
    .unwrap()
}

fn open(reader: &Reader, dir: &Path) -> ArrayHandle {
    let store = Store::open(dir.to_str().unwrap(), &StoreOptions::default()).unwrap();
    reader.open_array(&store, "planes", ArrayOptions::default()).unwrap()
}

/// One region per plane: a batch of 40 regions of 512 KiB.
fn planes() -> Vec<Region> {
    (0..PLANES).map(|z| Region::new(vec![z, 0, 0], vec![1, SIDE, SIDE])).collect()
}

/// Reads the batch into a device buffer and copies it down.
fn read_device(reader: &Reader, array: &ArrayHandle, regions: &[Region]) -> Result<Vec<u8>, Error> {
    let plan = reader.plan(array, regions)?;
    let device = reader.device().expect("an emulated reader has a device");
    let mut buffer = device.alloc(plan.nbytes()).unwrap();
    let stream = device.new_stream().unwrap();
    reader.read_batch_into(&plan, Output::Device { buffer: &mut buffer, offset: 0, stream: &stream })?;
    stream.synchronize().unwrap();
    let mut host = vec![0u8; plan.nbytes()];
    device.download(&buffer, 0, &mut host).unwrap();
    Ok(host)
}

#[test]
fn a_many_wave_batch_streams_and_a_corrupt_chunk_in_its_last_wave_is_reported() {
    let dir = tempfile::tempdir().unwrap();
    write_array(dir.path());
    let reader = reader(1, 64 << 20);
    let array = open(&reader, dir.path());
    let before = reader.stats();
    assert_eq!(read_device(&reader, &array, &planes()).unwrap(), expected());
    let stats = reader.stats().since(&before);
    assert!(stats.device_waves >= 3, "a 20 MiB batch in waves of 6 MiB: {stats:?}");
    assert_eq!(stats.units_decoded_device, PLANES);

    // Flip a data byte of the last plane (the crc32c is the chunk's last 4 bytes): the last
    // wave's status reports it, with the chunk's key.
    let last = dir.path().join(format!("planes/c/{}/0/0", PLANES - 1));
    let mut bytes = std::fs::read(&last).unwrap();
    bytes[1000] ^= 0x40;
    std::fs::write(&last, bytes).unwrap();
    let err = read_device(&reader, &array, &planes()).unwrap_err();
    let msg = err.to_string();
    assert!(matches!(err, Error::Decode { .. }), "{msg}");
    assert!(msg.contains(&format!("c/{}/0/0", PLANES - 1)) && msg.contains("crc32c"), "{msg}");
    // The lane is whole again after the error: the other planes still read.
    let regions = &planes()[..(PLANES - 1) as usize];
    let want = &expected()[..(PLANES as usize - 1) * PLANE_BYTES];
    assert_eq!(read_device(&reader, &array, regions).unwrap(), want);
}

#[test]
fn host_outputs_are_assembled_on_the_device_and_copied_down_once_per_window() {
    let dir = tempfile::tempdir().unwrap();
    write_array(dir.path());
    let reader = reader(1, 64 << 20);
    let array = open(&reader, dir.path());
    // 40 regions of 512 KiB in a 16 MiB batch buffer: two windows, several waves, no scatter.
    let before = reader.stats();
    let batch = reader.read_batch(&array, &planes()).unwrap();
    assert_eq!(batch.bytes(), expected().as_slice());
    let stats = reader.stats().since(&before);
    assert_eq!(stats.batches_host_scattered, 0, "{stats:?}");
    assert!(stats.device_waves >= 3, "{stats:?}");
    // One region of 20 MiB is larger than the batch buffer, and no window plan serves it: it is
    // decoded and assembled on the device in a buffer of its own size (each unit once), not
    // scattered on the host.
    let before = reader.stats();
    let whole = reader.read_region(&array, &Region::new(vec![0, 0, 0], vec![PLANES, SIDE, SIDE])).unwrap();
    assert_eq!(whole.bytes(), expected().as_slice());
    let stats = reader.stats().since(&before);
    assert_eq!(stats.batches_host_scattered, 0, "{stats:?}");
    assert_eq!(stats.units_decoded_device, PLANES, "{stats:?}");
    // The buffer is kept: a second read allocates nothing new and gives the same bytes.
    let again = reader.read_region(&array, &Region::new(vec![0, 0, 0], vec![PLANES, SIDE, SIDE])).unwrap();
    assert_eq!(again.bytes(), expected().as_slice());
}

/// The emulator's schedule log: the upload of wave k+1 (copy stream) starts while wave k still
/// decodes (compute stream) or earlier, never after it, as a batch whose waves ran one after the
/// other would have it.
#[test]
fn uploads_of_the_next_wave_overlap_the_decode_of_this_one() {
    let dir = tempfile::tempdir().unwrap();
    write_array(dir.path());
    let reader = reader(1, 64 << 20);
    let array = open(&reader, dir.path());
    let device = reader.device().unwrap().clone();
    device.set_schedule_log(true);
    read_device(&reader, &array, &planes()).unwrap();
    device.set_schedule_log(false);
    let log = device.schedule_log();
    let runs = |stream: &str, kind: &str, label: &str| -> Vec<(std::time::Instant, std::time::Instant)> {
        log.iter()
            .filter(|e| e.stream == stream && e.kind == kind && e.label == label)
            .map(|e| (e.start, e.end))
            .collect()
    };
    let span =
        |v: &[(std::time::Instant, std::time::Instant)]| v.iter().map(|r| r.0).min().zip(v.iter().map(|r| r.1).max());
    let waves: Vec<usize> = log
        .iter()
        .filter(|e| e.stream == "lane 0 compute" && e.kind == "launch")
        .filter_map(|e| e.label.strip_prefix("decode wave ")?.parse().ok())
        .collect();
    let (first, last) = (*waves.iter().min().unwrap(), *waves.iter().max().unwrap());
    assert!(last - first >= 2, "expected three waves or more, got {first}..={last}");
    let decode = |k: usize| span(&runs("lane 0 compute", "launch", &format!("decode wave {k}")));
    let upload = |k: usize| span(&runs("lane 0 copy", "copy", &format!("upload wave {k}")));
    // The upload of wave k+1 is on the device before the decode of wave k ends (it waits only
    // for the decode of wave k−1, whose slot it reuses): with waves run one after the other it
    // would start after.
    let ahead =
        (first..last).filter(|&k| matches!((upload(k + 1), decode(k)), (Some(u), Some(d)) if u.0 < d.1)).count();
    assert!(ahead > 0, "no upload of wave k+1 started before the decode of wave k ended: {log:#?}");
}

/// Two lanes decode two batches side by side: their compute streams run at the same time, and
/// both batches are right.
#[test]
fn two_lanes_decode_two_batches_at_once() {
    let dir = tempfile::tempdir().unwrap();
    write_array(dir.path());
    let reader = reader(2, 256 << 20);
    assert!(reader.executor_note().contains("2 lanes"), "{}", reader.executor_note());
    let array = open(&reader, dir.path());
    let device = reader.device().unwrap().clone();
    device.set_schedule_log(true);
    let halves = planes();
    let (a, b) = halves.split_at(halves.len() / 2);
    let want = expected();
    std::thread::scope(|s| {
        let ta = s.spawn(|| read_device(&reader, &array, a).unwrap());
        let tb = s.spawn(|| read_device(&reader, &array, b).unwrap());
        let (ga, gb) = (ta.join().unwrap(), tb.join().unwrap());
        assert_eq!([ga, gb].concat(), want);
    });
    device.set_schedule_log(false);
    let log = device.schedule_log();
    let launches = |stream: &str| log.iter().filter(|e| e.stream == stream && e.kind == "launch").collect::<Vec<_>>();
    let (l0, l1) = (launches("lane 0 compute"), launches("lane 1 compute"));
    assert!(!l0.is_empty() && !l1.is_empty(), "both lanes decoded");
    assert!(l0.iter().any(|x| l1.iter().any(|y| x.overlaps(y))), "the two lanes' kernels never ran at the same time");
}

/// One `read_batch` of several regions takes the lanes that are free and gives each a share of
/// its windows: both lanes' kernels run, and the batch is right.
#[test]
fn one_read_batch_keeps_the_free_lanes_busy() {
    let dir = tempfile::tempdir().unwrap();
    write_array(dir.path());
    let reader = reader(2, 256 << 20);
    let array = open(&reader, dir.path());
    let device = reader.device().unwrap().clone();
    device.set_schedule_log(true);
    let before = reader.stats();
    let batch = reader.read_batch(&array, &planes()).unwrap();
    device.set_schedule_log(false);
    assert_eq!(batch.bytes(), expected().as_slice());
    let stats = reader.stats().since(&before);
    assert_eq!((stats.batches_host_scattered, stats.units_decoded), (0, PLANES), "{stats:?}");
    let log = device.schedule_log();
    for lane in ["lane 0 compute", "lane 1 compute"] {
        assert!(log.iter().any(|e| e.stream == lane && e.kind == "launch"), "{lane} ran no kernel");
    }
}

/// A batch read while two lanes are free is split by units over both, into one buffer: the
/// fills (here of a plane whose chunk is missing) are written before either lane's copies, on
/// host and device outputs, and each unit is decoded once.
#[test]
fn a_batch_split_over_lanes_writes_its_fills_before_every_lanes_copies() {
    let dir = tempfile::tempdir().unwrap();
    write_array(dir.path());
    std::fs::remove_file(dir.path().join("planes/c/5/0/0")).unwrap();
    let reader = reader(2, 256 << 20);
    let array = open(&reader, dir.path());
    // Regions of two planes each, overlapping by one: every region but the first and last
    // shares its units with its neighbours, and the two around plane 5 are partly filled.
    let regions: Vec<Region> = (0..PLANES - 1).map(|z| Region::new(vec![z, 0, 0], vec![2, SIDE, SIDE])).collect();
    let mut planes: Vec<Vec<u8>> =
        (0..PLANES).map(|z| plane(z).into_iter().flat_map(u16::to_le_bytes).collect()).collect();
    planes[5] = vec![0; PLANE_BYTES];
    let want: Vec<u8> =
        (0..PLANES - 1).flat_map(|z| [planes[z as usize].clone(), planes[z as usize + 1].clone()].concat()).collect();
    let device = reader.device().unwrap().clone();
    for round in 0..3 {
        device.set_schedule_log(true);
        let before = reader.stats();
        let batch = reader.read_batch(&array, &regions).unwrap();
        assert!(batch.bytes() == want.as_slice(), "host output, round {round}");
        let stats = reader.stats().since(&before);
        assert_eq!((stats.units_decoded, stats.units_filled), (PLANES - 1, 1), "{stats:?}");
        assert_eq!(read_device(&reader, &array, &regions).unwrap(), want, "device output, round {round}");
        device.set_schedule_log(false);
        let log = device.schedule_log();
        for lane in ["lane 0 compute", "lane 1 compute"] {
            assert!(log.iter().any(|e| e.stream == lane && e.kind == "launch"), "{lane} ran no kernel");
        }
        // Per batch (host, then device output): one lane launched the fills; the other lane's
        // assembly waited for them before its first copy.
        let fills: Vec<_> = log.iter().filter(|e| e.kind == "launch" && e.label == "assemble fills").collect();
        let waits: Vec<_> =
            log.iter().filter(|e| e.kind == "wait" && e.label == "wait for the batch's fills").collect();
        assert_eq!((fills.len(), waits.len()), (2, 2), "round {round}: {log:#?}");
        for (fill, wait) in fills.iter().zip(&waits) {
            assert_ne!(fill.stream, wait.stream);
            assert!(wait.end >= fill.end, "round {round}: the wait ended before the fills: {log:#?}");
            let first_copy = log
                .iter()
                .filter(|e| e.stream == wait.stream && e.kind == "launch" && e.start >= wait.start)
                .map(|e| e.start)
                .min();
            assert!(first_copy.is_some_and(|t| t >= wait.end), "round {round}: {log:#?}");
        }
    }
}
