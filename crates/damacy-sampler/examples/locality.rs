//! Locality of plans on a sharded 3-D crop space, as a markdown table.
//!
//! `cargo run --release -p damacy-sampler --example locality`
//!
//! Four u16 arrays of 256³ in chunks of 32³ (64 KiB) and shards of 128³;
//! world 8, batch 16 per rank, one epoch. Read amplification = chunk bytes
//! decoded (each chunk once per batch that touches it, no cache across
//! batches) ÷ crop bytes used.

use damacy_sampler::{
    ArrayGeometry, CropOptions, CropPlacement, CropSpace, EqualLength, Granularity, GroupLevel, Mode, Plan, PlanConfig,
    RankSource, SamplerError, Shuffle, locality,
};

const WORLD: u32 = 8;
const BATCH: u64 = 16;

fn space(options: CropOptions) -> Result<CropSpace, SamplerError> {
    let a = ArrayGeometry::new(vec![256, 256, 256], vec![32, 32, 32])
        .with_shard_shape(vec![128, 128, 128])
        .with_element_size(2);
    CropSpace::new(vec![a; 4], options)
}

struct Row {
    label: &'static str,
    mode: Mode,
    granularity: Granularity,
    level: GroupLevel,
    shuffle: Shuffle,
    /// Must no chunk be read on two ranks?
    exclusive: bool,
}

fn row(label: &'static str, mode: Mode, granularity: Granularity, shuffle: Shuffle) -> Row {
    Row { label, mode, granularity, level: GroupLevel::Chunk, shuffle, exclusive: false }
}

fn report(space: &CropSpace, row: &Row) -> Result<locality::LocalityReport, SamplerError> {
    let plans = (0..WORLD)
        .map(|r| {
            Plan::new(
                space,
                PlanConfig::new()
                    .with_rank(RankSource::new(r, WORLD))
                    .with_batch_size(BATCH)
                    .with_mode(row.mode)
                    .with_granularity(row.granularity)
                    .with_group_level(row.level)
                    .with_shuffle(row.shuffle)
                    .with_equal_length(EqualLength::Drop)
                    .with_seed(2026)
                    .with_epoch(1),
            )
        })
        .collect::<Result<Vec<_>, _>>()?;
    Ok(locality::measure(&plans))
}

fn main() -> Result<(), Box<dyn std::error::Error>> {
    use Granularity::{Group, Sample};
    use Mode::{Contiguous, Strided};
    let two = Shuffle::TwoLevel { window: 4 };
    let exclusive = |mut r: Row| {
        r.exclusive = true;
        r
    };
    let tables: Vec<(String, CropSpace, Vec<Row>)> = vec![
        (
            "grid crops 16³ (stride 16: 8 crops per chunk, none straddles a chunk)".into(),
            space(CropOptions::grid(vec![16, 16, 16]))?,
            vec![
                row("strided · sample · no shuffle", Strided, Sample, Shuffle::None),
                row("contiguous · sample · no shuffle", Contiguous, Sample, Shuffle::None),
                row("strided · sample · full shuffle", Strided, Sample, Shuffle::Full),
                row("contiguous · sample · full shuffle", Contiguous, Sample, Shuffle::Full),
                row("strided · sample · two-level (4 chunks)", Strided, Sample, two),
                row("contiguous · sample · two-level (4 chunks)", Contiguous, Sample, two),
                exclusive(row("strided · chunk · full shuffle", Strided, Group, Shuffle::Full)),
                exclusive(row("contiguous · chunk · full shuffle", Contiguous, Group, Shuffle::Full)),
                exclusive(row("strided · chunk · two-level (4 chunks)", Strided, Group, two)),
                exclusive(Row {
                    level: GroupLevel::Shard,
                    ..row("strided · shard · two-level (4 shards)", Strided, Group, two)
                }),
            ],
        ),
        (
            "random crops 24³, anywhere (16384 per epoch)".into(),
            space(CropOptions::random(vec![24, 24, 24], 16384))?,
            vec![
                row("strided · sample · full shuffle", Strided, Sample, Shuffle::Full),
                row("contiguous · sample · two-level (4 chunks)", Contiguous, Sample, two),
                row("strided · chunk · two-level (4 chunks)", Strided, Group, two),
            ],
        ),
        (
            "random crops 24³, within one chunk (16384 per epoch)".into(),
            space(CropOptions::random(vec![24, 24, 24], 16384).with_placement(CropPlacement::WithinChunk))?,
            vec![
                row("strided · sample · full shuffle", Strided, Sample, Shuffle::Full),
                exclusive(row("strided · chunk · two-level (4 chunks)", Strided, Group, two)),
                exclusive(row("contiguous · chunk · full shuffle", Contiguous, Group, Shuffle::Full)),
            ],
        ),
    ];
    println!(
        "Locality, one epoch: 4 × u16 256³ arrays, chunks 32³, shards 128³; world {WORLD}, batch {BATCH}, EqualLength::Drop."
    );
    let mut violations = vec![];
    for (title, space, rows) in &tables {
        println!("\n### {title}\n");
        println!("{}", locality::LocalityReport::markdown_header());
        for r in rows {
            let rep = report(space, r)?;
            println!("{}", rep.markdown_row(r.label));
            if r.exclusive && rep.shared_chunks > 0 {
                violations.push(format!("{title}: {}: {} chunks on two ranks", r.label, rep.shared_chunks));
            }
        }
    }
    if violations.is_empty() {
        println!("\nChunk-granular plans with chunk-confined crops: no chunk read on two ranks.");
        Ok(())
    } else {
        Err(violations.join("; ").into())
    }
}
