//! zstd kernel tests through the host emulator, against the `zstd` crate (libzstd) as reference.
#![allow(clippy::doc_markdown, clippy::missing_panics_doc, clippy::too_many_lines)]

use damacy_kernels::{Device, Error, ZstdDecoder, ZstdInput};

fn data(len: usize, kind: u8, seed: u64) -> Vec<u8> {
    let mut s = seed ^ 0x9E37_79B9_7F4A_7C15;
    let mut next = move || {
        s ^= s << 13;
        s ^= s >> 7;
        s ^= s << 17;
        s
    };
    match kind % 6 {
        0 => (0..len).map(|_| next() as u8).collect(),
        1 => (0..len).map(|i| ((i / 7) as u8).wrapping_mul(3)).collect(),
        2 => (0..len).map(|i| if next() % 5 == 0 { next() as u8 } else { (i % 13) as u8 }).collect(),
        3 => (0..len).map(|i| ((i as f32 * 0.01).sin() * 1000.0) as i16 as u8).collect(),
        4 => (0..len).map(|_| b"the quick brown fox jumps "[(next() % 26) as usize]).collect(),
        _ => (0..len / 2).flat_map(|i| (((i as f32 * 0.003).sin() * 3000.0) as i16 + (next() % 7) as i16).to_le_bytes()).collect(),
    }
}

fn decode(device: &Device, inputs: &[ZstdInput<'_>]) -> Vec<Result<Vec<u8>, Error>> {
    ZstdDecoder::new(device).unwrap().decode_to_host(inputs).unwrap()
}

#[test]
fn smoke() {
    let device = Device::emulated(0);
    for level in [-5, 1, 3, 19] {
        for kind in 0..6 {
            for n in [1usize, 100, 5000, 200_000] {
                let d = data(n, kind, n as u64);
                let c = zstd::bulk::compress(&d, level).unwrap();
                let r = decode(&device, &[ZstdInput::new(&c)]);
                match &r[0] {
                    Ok(v) => assert!(v == &d, "level {level} kind {kind} n {n}: wrong bytes"),
                    Err(e) => panic!("level {level} kind {kind} n {n}: {e}"),
                }
            }
        }
    }
}
