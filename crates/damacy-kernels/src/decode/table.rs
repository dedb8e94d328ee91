//! One wave's layout and tables, built on the host: where each chunk's encoded bytes go in the
//! upload and its decoded bytes in the output, and the stream table, per-codec id lists,
//! shuffle jobs and initial status words the kernels read. Pure: nothing here touches a device.

use super::{
    ALIGN, ChunkPlan, N_SLOTS, SLOT_CRC, SLOT_INFLATE, SLOT_RAW, SLOT_ZSTD, StreamInfo, Teams, align_up, codec_slot,
    push_table, team_candidate,
};
use crate::blosc::Shuffle;
use crate::consts as c;
use crate::wire::{ShuffleJobDesc, StreamDesc};

/// Where a wave's chunks go: every chunk's payload in the upload and its decoded bytes in the
/// output, 16-byte aligned. Direct chunks come first, at the same offsets in both, so one copy
/// puts them straight into the output; the others follow.
#[derive(Debug)]
pub(super) struct WaveLayout {
    /// Per chunk of the wave: its payload's offset in the upload.
    pub(super) chunk_src: Vec<usize>,
    /// Per chunk of the wave: its decoded bytes' offset in the output.
    pub(super) chunk_dst: Vec<usize>,
    /// Bytes of the direct chunks (a prefix of both the upload and the output).
    pub(super) direct_total: usize,
    /// Bytes of every payload (the tables follow them in the upload).
    pub(super) src_total: usize,
    /// Decoded bytes of the wave.
    pub(super) dst_total: usize,
}

impl WaveLayout {
    pub(super) fn new(wave: &[(usize, ChunkPlan)]) -> Self {
        let mut chunk_src = vec![0usize; wave.len()];
        let mut chunk_dst = vec![0usize; wave.len()];
        let (mut src, mut dst) = (0usize, 0usize);
        let mut direct_total = 0;
        for direct_pass in [true, false] {
            for (w, (_, p)) in wave.iter().enumerate() {
                if p.is_direct() == direct_pass {
                    chunk_src[w] = src;
                    src += align_up(p.payload_len);
                    chunk_dst[w] = dst;
                    dst += align_up(p.decoded_len);
                }
            }
            if direct_pass {
                debug_assert_eq!(src, dst);
                direct_total = src;
            }
        }
        Self { chunk_src, chunk_dst, direct_total, src_total: src, dst_total: dst }
    }
}

/// A wave's tables, as uploaded after its payloads; offsets are from the start of the upload.
#[derive(Debug)]
pub(super) struct WaveTables {
    /// The bytes: stream descriptors, id lists, shuffle jobs, status and size words.
    pub(super) bytes: Vec<u8>,
    /// Offset of the stream descriptors.
    pub(super) descs_at: usize,
    /// Per codec slot: offset and length of its id list.
    pub(super) ids: [(usize, u32); N_SLOTS],
    /// Per codec slot: how many of its ids (the first ones) get a team of warps, a block each
    /// (zstd and inflate; 0 for the others).
    pub(super) n_team: [u32; N_SLOTS],
    /// Offset and count of the shuffle jobs.
    pub(super) jobs: (usize, u32),
    /// Offset of the status words (the actual-size words follow them).
    pub(super) status_at: usize,
    /// Per stream, for error reports.
    pub(super) infos: Vec<StreamInfo>,
    /// Per chunk of the wave, its first stream.
    pub(super) first_stream: Vec<u32>,
    /// Streams per codec slot (`WaveStats::streams`).
    pub(super) per_codec: [usize; N_SLOTS],
    /// Per codec slot: the decoded length of its longest stream (launch sizing).
    pub(super) longest: [u32; N_SLOTS],
    /// The length of the longest shuffle job (launch sizing).
    pub(super) longest_job: u32,
}

impl WaveTables {
    /// Streams of the wave.
    pub(super) fn n_streams(&self) -> usize {
        self.infos.len()
    }
}

/// The tables being built.
#[derive(Default)]
struct Builder {
    descs: Vec<StreamDesc>,
    /// Per stream: its decoded bytes a team of warps decodes side by side (zstd, inflate).
    team_bytes: Vec<u32>,
    ids: [Vec<u32>; N_SLOTS],
    infos: Vec<StreamInfo>,
    jobs: Vec<ShuffleJobDesc>,
    /// Streams whose status the host knows (direct chunks, copied whole), with their size.
    known: Vec<(usize, u32)>,
}

impl Builder {
    fn push(&mut self, slot: usize, desc: StreamDesc, info: StreamInfo, team_bytes: u32) {
        self.ids[slot].push(self.infos.len() as u32);
        self.descs.push(desc);
        self.team_bytes.push(team_bytes);
        self.infos.push(info);
    }

    /// A direct chunk: one raw stream, already copied; its status is known.
    fn direct(&mut self, idx: usize, p: &ChunkPlan, src: usize, dst: usize) {
        self.known.push((self.infos.len(), p.payload_len as u32));
        self.descs.push(StreamDesc {
            src_off: src as u64,
            dst_off: dst as u64,
            src_len: p.payload_len as u32,
            dst_len: p.decoded_len as u32,
            codec: SLOT_RAW as u32,
            flags: 0,
        });
        self.team_bytes.push(0);
        let expected = p.decoded_len as u32;
        self.infos.push(StreamInfo { chunk: idx, slot: SLOT_RAW, src: (0, p.payload_len as u32), expected });
    }

    /// A chunk the kernels decode: its crc check, its streams and its shuffle jobs.
    fn chunk(&mut self, idx: usize, p: &ChunkPlan, (cs, cd): (u64, u64), scratch_base: u64) {
        let first = self.infos.len() as u32;
        if let Some(crc) = p.crc {
            let desc = StreamDesc {
                src_off: cs,
                dst_off: 0,
                src_len: p.payload_len as u32,
                dst_len: 0,
                codec: SLOT_CRC as u32,
                flags: crc,
            };
            self.push(
                SLOT_CRC,
                desc,
                StreamInfo { chunk: idx, slot: SLOT_CRC, src: (0, p.payload_len as u32), expected: crc },
                0,
            );
        }
        for s in &p.streams {
            let slot = codec_slot(s.codec);
            let desc = StreamDesc {
                src_off: cs + u64::from(s.src_off),
                dst_off: cd + u64::from(s.dst_off) + if s.to_scratch { scratch_base } else { 0 },
                src_len: s.src_len,
                dst_len: s.dst_len,
                codec: slot as u32,
                flags: match slot {
                    SLOT_ZSTD => p.zstd_flags,
                    SLOT_INFLATE => p.inflate_flags,
                    _ => 0,
                },
            };
            let info = StreamInfo { chunk: idx, slot, src: (s.src_off, s.src_off + s.src_len), expected: s.dst_len };
            self.push(slot, desc, info, s.team_bytes);
        }
        for sh in &p.shuffles {
            let off = cd + u64::from(sh.off);
            self.jobs.push(ShuffleJobDesc {
                src_off: scratch_base + off,
                dst_off: off,
                len: sh.len,
                typesize: p.typesize,
                mode: if sh.mode == Shuffle::Bit { c::DMC_SHUFFLE_BIT } else { c::DMC_SHUFFLE_BYTE },
                stream: first,
            });
        }
    }
}

/// Builds the tables of `wave` laid out as `layout`; decoded bytes of shuffled chunks go first
/// to `scratch_base` past their place (the unshuffle scratch half of the output). `teams` and
/// `sms` choose the zstd and inflate jobs that get teams of warps ([`Teams::resolve`]).
pub(super) fn build(
    wave: &[(usize, ChunkPlan)],
    layout: &WaveLayout,
    scratch_base: u64,
    teams: Teams,
    sms: u32,
) -> WaveTables {
    let mut b = Builder::default();
    let mut first_stream = Vec::with_capacity(wave.len());
    let mut per_codec = [0usize; N_SLOTS];
    for (w, (idx, p)) in wave.iter().enumerate() {
        first_stream.push(b.infos.len() as u32);
        if p.is_direct() {
            per_codec[SLOT_RAW] += 1;
            b.direct(*idx, p, layout.chunk_src[w], layout.chunk_dst[w]);
        } else {
            b.chunk(*idx, p, (layout.chunk_src[w] as u64, layout.chunk_dst[w] as u64), scratch_base);
        }
    }
    let n_streams = b.infos.len();
    let mut longest = [0u32; N_SLOTS];
    let mut n_team = [0u32; N_SLOTS];
    for (k, v) in b.ids.iter_mut().enumerate() {
        per_codec[k] += v.len();
        // The jobs with teams first (the kernel gives its first n_team ids a block each), then
        // longest first: one warp (or block) per stream, so the long ones start at once and
        // the short ones fill in behind them.
        let team = |sid: u32| team_candidate(b.descs[sid as usize].dst_len, b.team_bytes[sid as usize]);
        let choice = match k {
            SLOT_ZSTD | SLOT_INFLATE => teams.resolve(v.len(), v.iter().filter(|&&sid| team(sid)).count(), sms),
            _ => Teams::None,
        };
        let is_team = |sid: u32| match choice {
            Teams::All => true,
            Teams::Mostly => team(sid),
            _ => false,
        };
        v.sort_by_key(|&sid| (!is_team(sid), std::cmp::Reverse(b.descs[sid as usize].dst_len)));
        n_team[k] = v.iter().filter(|&&sid| is_team(sid)).count() as u32;
        longest[k] = v.iter().map(|&sid| b.descs[sid as usize].dst_len).max().unwrap_or(0);
    }
    let longest_job = b.jobs.iter().map(|j| j.len).max().unwrap_or(0);
    let mut status_init = vec![c::DMC_STATUS_PENDING; n_streams];
    let mut sizes = vec![0u32; n_streams];
    for &(sid, len) in &b.known {
        status_init[sid] = c::DMC_STATUS_OK;
        sizes[sid] = len;
    }
    // Tables follow the payloads in the same upload, 16-byte aligned.
    let base = layout.src_total;
    debug_assert_eq!(base % ALIGN, 0);
    let mut bytes: Vec<u8> = Vec::with_capacity(
        n_streams * (size_of::<StreamDesc>() + 3 * size_of::<u32>()) + b.jobs.len() * size_of::<ShuffleJobDesc>() + 128,
    );
    let descs_at = base + push_table(&mut bytes, &b.descs);
    let mut ids = [(0usize, 0u32); N_SLOTS];
    for (k, v) in b.ids.iter().enumerate() {
        ids[k] = (base + push_table(&mut bytes, v), v.len() as u32);
    }
    let jobs = (base + push_table(&mut bytes, &b.jobs), b.jobs.len() as u32);
    // Status words, then size words right after them (no padding between: the host reads both
    // back as one range, size word `i` at `n_streams + i`).
    status_init.extend_from_slice(&sizes);
    let status_at = base + push_table(&mut bytes, &status_init);
    WaveTables {
        bytes,
        descs_at,
        ids,
        n_team,
        jobs,
        status_at,
        infos: b.infos,
        first_stream,
        per_codec,
        longest,
        longest_job,
    }
}
