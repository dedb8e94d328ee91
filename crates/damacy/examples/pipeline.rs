//! The README's Pipeline example, runnable: random crops of one array from a damacy-sampler
//! plan, streamed through a Pipeline.
//!
//! ```sh
//! cargo run --release -p damacy --example pipeline [ARRAY_URI] [CROP]
//! ```
//!
//! `ARRAY_URI` defaults to a fixture (`fixtures/v3/sharded_zstd_index_end`, 40×72×20 uint16).

use damacy::sampler::{ArrayGeometry, CropOptions, CropSpace, Plan, PlanConfig, RankSource};
use damacy::{Config, Dtype, OutputDtype, Pipeline, Region, Sample};

fn main() -> Result<(), Box<dyn std::error::Error>> {
    let fixture = concat!(env!("CARGO_MANIFEST_DIR"), "/../../fixtures/v3/sharded_zstd_index_end");
    let uri = std::env::args().nth(1).unwrap_or_else(|| fixture.to_owned());
    let crop: u64 = std::env::args().nth(2).map_or(Ok(8), |c| c.parse())?;
    // The array's geometry for the sampler (a real program knows it, or reads it from the
    // metadata as `damacy bench` does).
    let (store, path) = damacy::split_uri(&uri);
    // Metadata only: a CPU reader.
    let reader = damacy::Reader::new(damacy::ReaderConfig::default().with_executor(damacy::ExecutorKind::Cpu))?;
    let array = reader.open_array(
        &damacy::Store::open(store, &damacy::StoreOptions::default())?,
        &path,
        damacy::ArrayOptions::default(),
    )?;
    let mut geometry = ArrayGeometry::new(array.shape.clone(), array.decode_shape().to_vec());
    if array.shard.is_some() {
        geometry = geometry.with_shard_shape(array.chunk_shape.clone());
    }
    let shape = vec![crop; array.shape.len()];
    let space = CropSpace::new(vec![geometry], CropOptions::random(shape.clone(), 1000))?;
    let plan = Plan::new(space, PlanConfig::new().with_rank(RankSource::from_env()?).with_batch_size(32).with_seed(7))?;
    // This rank's GPU (LOCAL_RANK, as torchrun sets it; 0 alone): the CPU when there is none.
    let local_rank = std::env::var("LOCAL_RANK").ok().and_then(|v| v.parse().ok()).unwrap_or(0);
    let config =
        Config::new(32).with_sample_shape(shape).with_dtype(OutputDtype::Cast(Dtype::F32)).with_device(local_rank);
    let pipeline = Pipeline::new(config)?;
    println!("{}", pipeline.describe()); // every derived size: buffers, lookahead, caches, budgets
    pipeline.push((0..plan.len()).filter_map(move |i| {
        let p = plan.get(i)?;
        let crop = plan.resolve(p);
        Some(Sample::new(uri.clone(), Region::new(crop.start, crop.shape)).with_padded(p.padded).with_id(p.id))
    }))?;
    let mut crops = 0;
    while pipeline.pending() > 0 {
        let batch = match pipeline.pop() {
            Ok(b) => b,
            Err(e) if e.is_exhausted() => break,
            Err(e) => return Err(e.into()), // names the sample, e.g. a corrupt chunk; the pipeline stays usable
        };
        crops += batch.len();
        // Host batches: batch.as_slice::<f32>(0). Device batches: batch.device_ptr(0) after making
        // your stream wait on batch.ready_event(); then batch.release(Some(your_event)).
        drop(batch);
    }
    println!("{crops} crops\n{}", pipeline.stats()); // plan, read, io, input transfer, decode, assemble, pop wait
    Ok(())
}
