//! Helpers shared by the integration tests: the fixture corpus and its manifest.
#![allow(dead_code, unreachable_pub, missing_docs)]

use std::path::PathBuf;

use serde::Deserialize;

/// One array of `fixtures/manifest.json`.
#[derive(Debug, Deserialize)]
pub struct Entry {
    pub path: String,
    pub zarr_format: u8,
    pub shape: Vec<u64>,
    pub chunk_shape: Vec<u64>,
    pub shard_shape: Option<Vec<u64>>,
    pub dtype: String,
    pub codecs: serde_json::Value,
    pub sha256: String,
    pub decoded_bytes: u64,
}

#[derive(Debug, Deserialize)]
struct Manifest {
    arrays: Vec<Entry>,
}

pub fn fixtures_dir() -> PathBuf {
    PathBuf::from(env!("CARGO_MANIFEST_DIR")).join("../../fixtures")
}

pub fn manifest() -> Vec<Entry> {
    let text =
        std::fs::read_to_string(fixtures_dir().join("manifest.json")).expect("fixtures/manifest.json is readable");
    serde_json::from_str::<Manifest>(&text).expect("manifest.json parses").arrays
}

/// A small deterministic generator for test regions.
pub struct SplitMix(pub u64);

impl SplitMix {
    pub fn next(&mut self) -> u64 {
        self.0 = self.0.wrapping_add(0x9E37_79B9_7F4A_7C15);
        let mut z = self.0;
        z = (z ^ (z >> 30)).wrapping_mul(0xBF58_476D_1CE4_E5B9);
        z = (z ^ (z >> 27)).wrapping_mul(0x94D0_49BB_1331_11EB);
        z ^ (z >> 31)
    }

    pub fn below(&mut self, n: u64) -> u64 {
        if n == 0 { 0 } else { self.next() % n }
    }
}

/// SHA-256 of an array's whole decoded bytes (C order, little-endian), read in one batch.
pub fn digest(reader: &damacy_codec::Reader, array: &damacy_codec::ArrayHandle) -> Result<String, damacy_codec::Error> {
    use sha2::{Digest, Sha256};
    let batch = reader.read_region(array, &damacy_codec::Region::whole(&array.shape))?;
    Ok(hex::encode(Sha256::digest(batch.bytes())))
}
