// common.cuh — shared device helpers, fixed-width types, status codes, launch constants.
//
// Every `#define DMC_<NAME> <integer>` line in this file is parsed by the crate's build
// script into a Rust constant of the same name (crate `damacy-kernels`, module `consts`),
// so block sizes, limits and status codes live in exactly one place.
#ifndef DMC_COMMON_CUH
#define DMC_COMMON_CUH

// NVRTC has no standard headers: fixed-width types are defined here.
typedef unsigned char dmc_u8;
typedef signed char dmc_i8;
typedef unsigned short dmc_u16;
typedef short dmc_i16;
typedef unsigned int dmc_u32;
typedef int dmc_i32;
typedef unsigned long long dmc_u64;
typedef long long dmc_i64;

// ---- Launch geometry (read by the Rust launcher) ----
#define DMC_WARP_SIZE 32
#define DMC_LZ4_WARPS_PER_BLOCK 4
#define DMC_BLOSCLZ_WARPS_PER_BLOCK 4
#define DMC_ZSTD_WARPS_PER_BLOCK 4
// Warps of a zstd job's team (zstd.cu): a block's warps.
#define DMC_ZSTD_TEAM DMC_ZSTD_WARPS_PER_BLOCK
// A raw zstd block this long or longer is copied by the whole team in a round of its own (the
// round's barrier before, the next one after); a shorter one by the leader alone. The host's
// parse counts such blocks as bytes a team decodes side by side (src/zstd.rs, team_bytes).
#define DMC_ZSTD_TEAM_COPY_MIN 4096u
// Blocks per SM the zstd kernel is compiled for (its launch bound; see zstd.cu).
#define DMC_ZSTD_MIN_BLOCKS 4
// A wave's zstd or inflate jobs get teams of warps (a block each) while they fit this many
// blocks per SM: both kernels' resident blocks on every supported device (the launcher's rule).
#define DMC_TEAM_BLOCKS_PER_SM 4
#define DMC_INFLATE_WARPS_PER_BLOCK 4
// Warps of an inflate job's team (inflate.cu): a block's warps.
#define DMC_INFLATE_TEAM DMC_INFLATE_WARPS_PER_BLOCK
// A stored deflate block this long or longer is copied by the whole team (one barrier before,
// one after); a shorter one by the leader alone, the helpers not woken. The host counts such
// blocks at a stream's start as bytes a team decodes side by side (decode.rs).
#define DMC_INF_TEAM_COPY_MIN 4096u
#define DMC_MEMCPY_THREADS 256
#define DMC_SHUFFLE_THREADS 256
#define DMC_CRC32C_THREADS 256
#define DMC_ASSEMBLE_THREADS 256
#define DMC_ASSEMBLE_MAX_RANK 8
// Upper bound on the x dimension of a 2-D grid (blocks per job) used by grid-stride kernels.
#define DMC_MAX_BLOCKS_PER_JOB 1024
// Bytes one block of dmc_memcpy (and of dmc_unshuffle's copies) moves per round of
// dmc_range_copy: DMC_MEMCPY_THREADS threads × DMC_COPY_UNROLL 16-byte words in flight each.
// The launcher gives a stream one block per this many bytes (grid.y), capped.
#define DMC_COPY_UNROLL 4
#define DMC_MEMCPY_PART_BYTES 16384
// Bytes of a blosc block one block of dmc_unshuffle takes per tile (at most; the launcher gives
// a job one block per this many bytes, grid.y, capped).
#define DMC_UNSHUFFLE_PART_BYTES 16384

// ---- Per-stream status codes (written by every decode kernel) ----
#define DMC_STATUS_OK 0
// The input ended in the middle of a token, a length or a literal run.
#define DMC_STATUS_SRC_TRUNCATED 1
// The output would exceed the stream's declared decoded size.
#define DMC_STATUS_DST_OVERFLOW 2
// A match refers to bytes before the start of the output.
#define DMC_STATUS_BAD_OFFSET 3
// Decoding finished cleanly but produced a different number of bytes than declared.
#define DMC_STATUS_SIZE_MISMATCH 4
// The stored CRC32C does not match the data.
#define DMC_STATUS_CRC_MISMATCH 5
// The stream descriptor itself is out of bounds of the wave buffers.
#define DMC_STATUS_BAD_DESCRIPTOR 6
// Malformed compressed data (zstd: a bad header, table, bitstream or reserved field).
#define DMC_STATUS_CORRUPT 7
// A stored checksum (zstd XXH64, gzip CRC32/ISIZE/header CRC, zlib Adler-32) does not match.
#define DMC_STATUS_CHECKSUM_MISMATCH 8
// A valid feature this decoder does not implement (zstd dictionaries, zlib preset dictionaries).
#define DMC_STATUS_UNSUPPORTED 9
// Stream not processed (initial value written by the host).
#define DMC_STATUS_PENDING 255

// ---- zstd stream flags (dmc_stream.flags of zstd streams) ----
// Verify the XXH64 content checksum of every frame that carries one.
#define DMC_ZSTD_VERIFY_CHECKSUM 1

// ---- inflate stream flags (dmc_stream.flags of inflate streams) ----
// The wrapper around the deflate data: none, zlib (RFC 1950) or gzip (RFC 1952) members.
#define DMC_INFLATE_FMT_RAW 0
#define DMC_INFLATE_FMT_ZLIB 1
#define DMC_INFLATE_FMT_GZIP 2
#define DMC_INFLATE_FMT_MASK 3
// Verify the wrapper's checksums: Adler-32 (zlib), CRC32, ISIZE and a header CRC (gzip).
#define DMC_INFLATE_VERIFY_CHECKSUM 4

// ---- Shuffle modes ----
#define DMC_SHUFFLE_BYTE 1
#define DMC_SHUFFLE_BIT 2

// ---- Assemble dtypes ----
#define DMC_DTYPE_BOOL 0
#define DMC_DTYPE_U8 1
#define DMC_DTYPE_I8 2
#define DMC_DTYPE_U16 3
#define DMC_DTYPE_I16 4
#define DMC_DTYPE_U32 5
#define DMC_DTYPE_I32 6
#define DMC_DTYPE_U64 7
#define DMC_DTYPE_I64 8
#define DMC_DTYPE_F16 9
#define DMC_DTYPE_BF16 10
#define DMC_DTYPE_F32 11
#define DMC_DTYPE_F64 12

// ---- Assemble job flags ----
// Source elements are big-endian: swap bytes after loading.
#define DMC_ASM_BYTESWAP 1
// No source: write the fill value to every element of the region.
#define DMC_ASM_FILL 2
// Copy (or fill) whole rows with 16-byte words (assemble.cu's wide path); the host sets it only
// for jobs without a cast or byte swap whose innermost axis is contiguous; the kernel checks it.
#define DMC_ASM_WIDE 4
// Convert whole rows 8 elements at a time (assemble.cu's vector cast path); the host sets it only
// for jobs with a 1- or 2-byte integer source cast to float32, bfloat16 or float16 (or a 2-byte
// integer byte swap alone) whose innermost axis is contiguous in both; the kernel checks it.
#define DMC_ASM_VEC 8

// ---- Device wire formats ----
// Every struct below has a `#[repr(C)]` twin in crates/damacy-kernels/src/wire.rs. The crate's
// build script compiles these definitions with the host C++ compiler (DMC_LAYOUT_PROBE), measures
// every field and fails the build when a size or an offset differs from the Rust twin's: change
// both sides together. One field per line.

// One decode stream: a byte range of the wave's source buffer that decodes into a byte range
// of the wave's destination buffer (Rust: `StreamDesc`).
struct dmc_stream {
    dmc_u64 src_off;
    dmc_u64 dst_off;
    dmc_u32 src_len;
    dmc_u32 dst_len;
    dmc_u32 codec;
    dmc_u32 flags;
};

// One unshuffle job: a blosc block of `len` bytes at `src_off` (shuffled) → `dst_off`
// (Rust: `ShuffleJobDesc`).
struct dmc_shuffle_job {
    dmc_u64 src_off;
    dmc_u64 dst_off;
    dmc_u32 len;
    dmc_u32 typesize;
    dmc_u32 mode;
    dmc_u32 stream;  // status slot to write (the chunk's first stream)
};

// One assemble job: copy an N-d region from the decoded buffer into the batch buffer (or fill)
// (Rust: `AssembleJobDesc`).
struct dmc_assemble_job {
    dmc_u64 src_off;                         // byte offset of the region origin in src
    dmc_u64 dst_off;                         // byte offset of the region origin in dst
    dmc_i64 src_stride[DMC_ASSEMBLE_MAX_RANK];  // element strides in src (any permutation)
    dmc_i64 dst_stride[DMC_ASSEMBLE_MAX_RANK];  // element strides in dst
    dmc_u64 shape[DMC_ASSEMBLE_MAX_RANK];       // region extent per dimension (C order)
    dmc_u64 n_elems;                          // product of shape
    dmc_u64 fill_bits;                        // fill value in the dst dtype, little-endian bits
    dmc_u32 rank;
    dmc_u32 src_dtype;
    dmc_u32 dst_dtype;
    dmc_u32 flags;
};

// The build script's layout probe stops here: what follows is device code.
#ifndef DMC_LAYOUT_PROBE

__device__ __forceinline__ dmc_u64 dmc_min_u64(dmc_u64 a, dmc_u64 b) { return a < b ? a : b; }
__device__ __forceinline__ dmc_u32 dmc_min_u32(dmc_u32 a, dmc_u32 b) { return a < b ? a : b; }

// Checks that [off, off+len) lies inside [0, total). Overflow-safe.
__device__ __forceinline__ bool dmc_in_bounds(dmc_u64 off, dmc_u64 len, dmc_u64 total) {
    return off <= total && len <= total - off;
}

// `#pragma unroll` for the CUDA compilers (the host compiler of the emulator has no such pragma).
// The cost build unrolls the same loops with gcc's pragma, so that its basic blocks match the
// GPU's code line for line (the GPU performance model weighs each by its line's SASS).
#if defined(DMC_EMULATE) && defined(DMC_EMU_COST) && DMC_EMU_COST
#define DMC_UNROLL _Pragma("GCC unroll 64")
#elif defined(DMC_EMULATE)
#define DMC_UNROLL
#else
#define DMC_UNROLL _Pragma("unroll")
#endif

// 16 bytes as four little-endian words, loaded with one 16-byte (vector) access; the pointer
// must be 16-byte aligned. (The emulator reads them as one GCC vector: a struct copy would be
// split into four word accesses, and its cost model would count four requests.)
// Not a wire struct: no host twin.
typedef struct alignas(16) {
    dmc_u32 w[4];
} dmc_u32x4;
#ifdef DMC_EMULATE
typedef dmc_u32 dmc_emu_u32v4 __attribute__((vector_size(16)));
__device__ __forceinline__ dmc_u32x4 dmc_load16(const void* p) {
    const dmc_emu_u32v4 v = *(const dmc_emu_u32v4*)p;
    return dmc_u32x4{{v[0], v[1], v[2], v[3]}};
}
#else
__device__ __forceinline__ dmc_u32x4 dmc_load16(const void* p) {
    const uint4 v = *(const uint4*)p;
    return dmc_u32x4{{v.x, v.y, v.z, v.w}};
}
#endif

// The prologue every decode kernel shares: check stream `sid`'s descriptor against the wave's
// buffers. A descriptor outside them is reported (by `reporter`, one thread) as
// DMC_STATUS_BAD_DESCRIPTOR with actual size 0, and the caller returns without touching memory.
__device__ __forceinline__ bool dmc_stream_ok(const dmc_stream& s, dmc_u32 sid, dmc_u64 src_total,
                                              dmc_u64 dst_total, bool reporter,
                                              dmc_u32* __restrict__ status,
                                              dmc_u32* __restrict__ actual) {
    if (dmc_in_bounds(s.src_off, s.src_len, src_total) &&
        dmc_in_bounds(s.dst_off, s.dst_len, dst_total)) {
        return true;
    }
    if (reporter) {
        status[sid] = DMC_STATUS_BAD_DESCRIPTOR;
        actual[sid] = 0;
    }
    return false;
}

// Little-endian loads from byte pointers (no alignment assumption).
__device__ __forceinline__ dmc_u32 dmc_load_le16(const dmc_u8* p) {
    return (dmc_u32)p[0] | ((dmc_u32)p[1] << 8);
}
__device__ __forceinline__ dmc_u32 dmc_load_le32(const dmc_u8* p) {
    return (dmc_u32)p[0] | ((dmc_u32)p[1] << 8) | ((dmc_u32)p[2] << 16) | ((dmc_u32)p[3] << 24);
}

// Lane index within the warp.
__device__ __forceinline__ dmc_u32 dmc_lane() { return threadIdx.x & (DMC_WARP_SIZE - 1); }

// ---- A warp's window on a stream's input (the LZ4, BloscLZ and inflate decoders) ----
// 32 words of type W held in registers, one per lane (lane L: bytes sizeof(W) * L .. of the
// window), filled with one aligned, coalesced sizeof(W)-byte load per lane and read with
// shuffles: `dmc_win` (4-byte words, 128 bytes: the LZ4 and BloscLZ parsers read tokens,
// lengths, offsets and literals from it: dmc_win_get/_byte/_has/_copy) and `dmc_win8` (8-byte
// words, 256 bytes, half the refills: inflate's bit window, dmc_win8_bits32). Filling, opening
// and moving are one template over the word type. The window starts at a sizeof(W)-aligned address, so its
// first word may begin up to sizeof(W) - 1 bytes before the byte asked for; bytes outside the
// stream read as 0 and are never asked for (the parsers check lengths against the stream
// first). Every call is a warp collective: all 32 lanes, same arguments unless said otherwise.
template <typename W>
struct dmc_win_t {
    const dmc_u8* src;  // the stream's input
    dmc_u32 len;        // its length in bytes
    dmc_u32 mis;        // the address of src modulo sizeof(W)
    dmc_u32 start;      // stream position of the window's first byte, plus mis (a multiple of sizeof(W))
    W word;             // this lane's word: positions start - mis + sizeof(W) * lane .. + sizeof(W) - 1
};
typedef dmc_win_t<dmc_u32> dmc_win;   // 128 bytes
typedef dmc_win_t<dmc_u64> dmc_win8;  // 256 bytes
#define DMC_WIN_BYTES 128
#define DMC_WIN8_BYTES 256

// Loads the window that holds stream position p.
template <typename W>
__device__ __forceinline__ void dmc_win_fill(dmc_win_t<W>* w, dmc_u32 p, dmc_u32 lane) {
    const dmc_u32 B = (dmc_u32)sizeof(W);
    w->start = (p + w->mis) & ~(B - 1);
    const dmc_u32 at = w->start + B * lane;  // position at - mis
    if (at >= w->mis && (dmc_u64)at + B <= (dmc_u64)w->len + w->mis) {
        w->word = *(const W*)(w->src + (at - w->mis));  // aligned: src - mis is
    } else {
        W v = 0;  // the stream's first or last word: single bytes inside it
        for (dmc_u32 q = 0; q < B; q++)
            if (at + q >= w->mis && at + q - w->mis < w->len) v |= (W)w->src[at + q - w->mis] << (8 * q);
        w->word = v;
    }
}

// A window on `src[0, len)` holding position 0 (W: dmc_u32 for a dmc_win, dmc_u64 for a dmc_win8).
template <typename W = dmc_u32>
__device__ __forceinline__ dmc_win_t<W> dmc_win_open(const dmc_u8* src, dmc_u32 len, dmc_u32 lane) {
    dmc_win_t<W> w;
    w.src = src;
    w.len = len;
    w.mis = (dmc_u32)(((dmc_u64)src) & (sizeof(W) - 1));
    dmc_win_fill(&w, 0, lane);
    return w;
}

// Moves the window so that it holds [p, p + n) (n <= 32 * sizeof(W) - sizeof(W) + 1), when it does not.
template <typename W>
__device__ __forceinline__ void dmc_win_need(dmc_win_t<W>* w, dmc_u32 p, dmc_u32 n, dmc_u32 lane) {
    // p's offset in the window (below its start: wraps past any window size; positions and the
    // window's start are 32-bit, as in dmc_win_get)
    const dmc_u32 d = p + w->mis - w->start;
    if (d > DMC_WARP_SIZE * (dmc_u32)sizeof(W) - n) dmc_win_fill(w, p, lane);
}

// Byte p of a dmc_win; p may differ between lanes (a lane whose p lies outside the window
// gets an unspecified byte).
__device__ __forceinline__ dmc_u32 dmc_win_get(const dmc_win& w, dmc_u32 p) {
    const dmc_u32 off = p + w.mis - w.start;
    const dmc_u32 v = __shfl_sync(0xffffffffu, w.word, (int)((off >> 2) & (DMC_WARP_SIZE - 1)));
    return (v >> (8 * (off & 3u))) & 0xffu;
}

// Bytes p .. p + 3 of a dmc_win, byte p in bits 0-7 (p may differ between lanes; a byte outside
// the window is unspecified): two shuffles, independent of each other, and a funnel shift.
__device__ __forceinline__ dmc_u32 dmc_win_get32(const dmc_win& w, dmc_u32 p) {
    const dmc_u32 off = p + w.mis - w.start;
    const dmc_u32 lo = __shfl_sync(0xffffffffu, w.word, (int)((off >> 2) & (DMC_WARP_SIZE - 1)));
    const dmc_u32 hi = __shfl_sync(0xffffffffu, w.word, (int)(((off >> 2) + 1) & (DMC_WARP_SIZE - 1)));
    return __funnelshift_r(lo, hi, 8 * (off & 3u));
}

// Byte p of the stream (the same p in every lane), moving the dmc_win when needed.
__device__ __forceinline__ dmc_u32 dmc_win_byte(dmc_win* w, dmc_u32 p, dmc_u32 lane) {
    dmc_win_need(w, p, 1, lane);
    return dmc_win_get(*w, p);
}

// 32 stream bits from stream bit `pos` of a dmc_win8 (first bit in bit 0; pos may differ
// between lanes): 4-byte word q of the window is half q mod 2 of lane q/2's word; three
// shuffles and a funnel shift. The window must hold bytes pos/8 .. pos/8 + 4 of every lane's pos.
__device__ __forceinline__ dmc_u32 dmc_win8_bits32(const dmc_win8& w, dmc_u64 pos) {
    const dmc_u32 rel = (dmc_u32)(pos + 8ull * w.mis - 8ull * w.start);  // bit of the window
    const dmc_u32 q = rel >> 5;                                           // its 4-byte word
    const dmc_u32 w0 = (dmc_u32)w.word, w1 = (dmc_u32)(w.word >> 32);
    const dmc_u32 a0 = __shfl_sync(0xffffffffu, w0, (int)((q >> 1) & (DMC_WARP_SIZE - 1)));
    const dmc_u32 a1 = __shfl_sync(0xffffffffu, w1, (int)((q >> 1) & (DMC_WARP_SIZE - 1)));
    const dmc_u32 b0 = __shfl_sync(0xffffffffu, w0, (int)(((q >> 1) + 1) & (DMC_WARP_SIZE - 1)));
    const dmc_u32 lo = (q & 1) ? a1 : a0, hi = (q & 1) ? b0 : a1;
    return __funnelshift_r(lo, hi, rel & 31);
}

// 64 stream bits from stream bit `pos` of a dmc_win8 (first bit in bit 0), as dmc_win8_bits32:
// the three 4-byte words from q on lie in lanes q/2 and q/2 + 1, four shuffles. The window
// must hold bytes pos/8 .. pos/8 + 8 of every lane's pos.
__device__ __forceinline__ dmc_u64 dmc_win8_bits64(const dmc_win8& w, dmc_u64 pos) {
    const dmc_u32 rel = (dmc_u32)(pos + 8ull * w.mis - 8ull * w.start);
    const dmc_u32 q = rel >> 5;
    const dmc_u32 w0 = (dmc_u32)w.word, w1 = (dmc_u32)(w.word >> 32);
    const int la = (int)((q >> 1) & (DMC_WARP_SIZE - 1)), lb = (int)(((q >> 1) + 1) & (DMC_WARP_SIZE - 1));
    const dmc_u32 a0 = __shfl_sync(0xffffffffu, w0, la), a1 = __shfl_sync(0xffffffffu, w1, la);
    const dmc_u32 b0 = __shfl_sync(0xffffffffu, w0, lb), b1 = __shfl_sync(0xffffffffu, w1, lb);
    const dmc_u32 lo = (q & 1) ? a1 : a0, mid = (q & 1) ? b0 : a1, hi = (q & 1) ? b1 : b0;
    return (dmc_u64)__funnelshift_r(lo, mid, rel & 31) | ((dmc_u64)__funnelshift_r(mid, hi, rel & 31) << 32);
}

// ---- LZ77 match copy (the LZ4 and BloscLZ decoders) ----
// Matches at least this long are copied with 16-byte stores (below it, one byte per lane).
#define DMC_LZ_WIDE_MATCH 64
// Long matches at distances below this are built from the pattern held in registers; at this
// distance or more they are copied in rounds of aligned 16-byte loads and stores.
#define DMC_LZ_PATTERN_DIST 128

// Stores 16 bytes (four little-endian words) with one 16-byte access; p must be 16-byte aligned.
__device__ __forceinline__ void dmc_store16(void* p, dmc_u32x4 v) {
#ifdef DMC_EMULATE
    *(dmc_emu_u32v4*)p = dmc_emu_u32v4{v.w[0], v.w[1], v.w[2], v.w[3]};
#else
    uint4 u;
    u.x = v.w[0];
    u.y = v.w[1];
    u.z = v.w[2];
    u.w = v.w[3];
    *(uint4*)p = u;
#endif
}

// ---- A warp's ring of its latest output in shared memory (the LZ4 and zstd decoders) ----
// RS bytes of shared memory (a power of two; DMC_LZ_RING, an LZ4 warp's, unless the type says
// otherwise: DMC_ZSTD_RING, a zstd team leader's), 16-byte aligned, that mirror the output: the
// copies below write every output byte also at ring slot (its address mod RS) when
// called with a dmc_ring<true>, and read a byte they need from the output from the ring when it
// lies close enough behind the write front that neither a later write nor one of the same
// round can have reused its slot (each read site states its rule). The copies write the slots
// in output order (one that stores its tail before its body puts the tail into the ring last),
// so behind the write front the ring holds the latest RS bytes; a __syncwarp orders
// one lane's access of a slot before another lane's write of it (between calls, between rounds
// that may reuse a slot, after a pattern's load). Output stored moments before
// is an L2 access (global stores leave no L1 line: ~351 cycles on an H200), a ring slot a
// shared-memory one (~29; benches/results/gpu-model.md), and a label image's matches read the
// rows just written. With a dmc_ring<false> (the default) the copies are what they were.
#define DMC_LZ_RING 4096u
// A zstd team leader's ring (zstd.cu: the spare shared memory of a team's block; a label image's
// rows lie 2-8 KiB apart).
#define DMC_ZSTD_RING 16384u
template <bool RING, dmc_u32 RS = DMC_LZ_RING>
struct dmc_ring {
    dmc_u8* b;  // RING: the ring's RS bytes of shared memory; else unused
    __device__ __forceinline__ dmc_u8* at(const void* p) const {
        return b + ((dmc_u32)(dmc_u64)p & (RS - 1u));
    }
    __device__ __forceinline__ void put8(dmc_u8* p, dmc_u32 v) const {
        *p = (dmc_u8)v;
        if (RING) *at(p) = (dmc_u8)v;
    }
    __device__ __forceinline__ void put32(dmc_u8* p, dmc_u32 v) const {  // p 4-byte aligned
        *(dmc_u32*)p = v;
        if (RING) *(dmc_u32*)at(p) = v;
    }
    __device__ __forceinline__ void put16(dmc_u8* p, dmc_u32x4 v) const {  // p 16-byte aligned
        dmc_store16(p, v);
        if (RING) dmc_store16(at(p), v);
    }
    // Byte p of the output (written before this call): from the ring when `near`.
    __device__ __forceinline__ dmc_u32 get8(const dmc_u8* p, bool near) const {
        return RING && near ? (dmc_u32)*at(p) : (dmc_u32)*p;
    }
};

// The 16 bytes at the aligned address p, of which those before `lo` (another stream's output,
// or outside the buffer) are not read and come back as 0: one 16-byte load when p >= lo, else
// single bytes.
__device__ __forceinline__ dmc_u32x4 dmc_load16_from(const dmc_u8* p, const dmc_u8* lo) {
    if (p >= lo) return dmc_load16(p);
    dmc_u32x4 v = {{0, 0, 0, 0}};
    for (dmc_u32 q = 0; q < 16; q++)
        if (p + q >= lo) v.w[q >> 2] |= (dmc_u32)p[q] << (8 * (q & 3u));
    return v;
}

// The 16 bytes at the aligned address p, of which those outside [lo, hi) (another stream's
// output, or outside the buffer) are not read and come back as 0: one 16-byte load when all
// 16 lie inside, else single bytes.
__device__ __forceinline__ dmc_u32x4 dmc_load16_in(const dmc_u8* p, const dmc_u8* lo, const dmc_u8* hi) {
    if (p >= lo && p + 16 <= hi) return dmc_load16(p);
    dmc_u32x4 v = {{0, 0, 0, 0}};
    for (dmc_u32 q = 0; q < 16; q++)
        if (p + q >= lo && p + q < hi) v.w[q >> 2] |= (dmc_u32)p[q] << (8 * (q & 3u));
    return v;
}

// Bytes [sh, sh + 16) of the 32 bytes x[0..8) (eight little-endian words), sh < 16; x is
// overwritten.
__device__ __forceinline__ dmc_u32x4 dmc_shift16_words(dmc_u32 (&x)[8], dmc_u32 sh) {
    if (sh & 8u) {
DMC_UNROLL
        for (dmc_u32 i = 0; i < 6; i++) x[i] = x[i + 2];
    }
    if (sh & 4u) {
DMC_UNROLL
        for (dmc_u32 i = 0; i < 7; i++) x[i] = x[i + 1];
    }
    dmc_u32x4 o;
DMC_UNROLL
    for (dmc_u32 i = 0; i < 4; i++) o.w[i] = __funnelshift_r(x[i], x[i + 1], 8 * (sh & 3u));
    return o;
}

// Bytes [sh, sh + 16) of the 32 bytes lo:hi (two little-endian 16-byte vectors), sh < 16.
__device__ __forceinline__ dmc_u32x4 dmc_shift16(const dmc_u32x4& lo, const dmc_u32x4& hi, dmc_u32 sh) {
    dmc_u32 x[8] = {lo.w[0], lo.w[1], lo.w[2], lo.w[3], hi.w[0], hi.w[1], hi.w[2], hi.w[3]};
    return dmc_shift16_words(x, sh);
}

// A round of a 16-byte shifted copy (all 32 lanes): lane l < m stores at d + 16 l (16-byte
// aligned) the 16 bytes that start sh bytes into its vector v, the rest from the next lane's
// (the round's source: the vectors the lanes loaded, lane l's 16 l bytes after the first).
template <bool RING = false, dmc_u32 RS = DMC_LZ_RING>
__device__ __forceinline__ void dmc_shifted_store16(dmc_u8* d, const dmc_u32x4& v, dmc_u32 sh, dmc_u32 m,
                                                    dmc_u32 lane, const dmc_ring<RING, RS>& ring = dmc_ring<false>{}) {
    dmc_u32 x[8];
DMC_UNROLL
    for (dmc_u32 i = 0; i < 4; i++) {
        x[i] = v.w[i];
        x[i + 4] = __shfl_down_sync(0xffffffffu, v.w[i], 1);
    }
    const dmc_u32x4 o = dmc_shift16_words(x, sh);
    if (lane < m) ring.put16(d + 16 * lane, o);
}

// All 32 lanes of a warp: d[0, n) = s[0, n), where the bytes of [lo, hi) (which hold s[0, n))
// are readable and no lane writes them meanwhile (d's bytes are not among them). d's bytes
// before its first 16-byte boundary and after its last one go one per lane (one request); the
// 16-byte words between in rounds of 31: lane l loads the aligned 16 bytes at (s's first
// body byte rounded down to 16) + 16 l (one load request per round, 32 lanes) and stores its
// word shifted together from its own and the next lane's vector (four shuffles). A vector
// reaching outside [lo, hi) is read byte by byte (the stream's first and last 16 bytes).
template <bool RING = false, dmc_u32 RS = DMC_LZ_RING>
__device__ __forceinline__ void dmc_copy16_in(dmc_u8* d, const dmc_u8* s, dmc_u32 n, const dmc_u8* lo,
                                              const dmc_u8* hi, dmc_u32 lane,
                                              const dmc_ring<RING, RS>& ring = dmc_ring<false>{}) {
    const dmc_u32 head = dmc_min_u32((0u - (dmc_u32)(dmc_u64)d) & 15u, n);
    const dmc_u32 body = (n - head) & ~15u;
    const dmc_u32 tail = n - head - body;
    // (with a ring the tail goes last: the ring's slots are written in output order)
    if (lane < (RING ? head : head + tail)) {
        const dmc_u32 j = lane < head ? lane : body + lane;
        ring.put8(d + j, s[j]);
    }
    const dmc_u64 sb = (dmc_u64)(s + head);
    const dmc_u8* a = (const dmc_u8*)(sb & ~(dmc_u64)15);
    const dmc_u32 sh = (dmc_u32)(sb & 15u);
    for (dmc_u32 k = 0; k < body; k += 16 * (DMC_WARP_SIZE - 1)) {
        const dmc_u32 m = dmc_min_u32(body - k, 16 * (DMC_WARP_SIZE - 1)) / 16;  // storing lanes
        // with a ring: a run longer than the ring writes a slot more than once, from other
        // lanes: each round's ring writes after the earlier rounds' (and the head's)
        if (RING) __syncwarp();
        dmc_u32x4 v = {{0, 0, 0, 0}};
        if (lane < m || (lane == m && sh != 0)) v = dmc_load16_in(a + k + 16 * lane, lo, hi);
        dmc_shifted_store16(d + head + k, v, sh, m, lane, ring);
    }
    if (RING && lane >= head && lane < head + tail) ring.put8(d + body + lane, s[body + lane]);
}

// Literal runs at least this long are copied with 4-byte stores (below it, one byte per lane).
#define DMC_WIN_WIDE_COPY 96
// Literal runs at least this long are copied from the input itself, not through the window, in
// rounds of 16-byte loads and stores (dmc_copy16_in: 496 bytes and one load request a round,
// where the window's rounds move 124 bytes and refill it with a load request each).
#define DMC_WIN_COPY16_MIN 256

// Copies stream bytes [p, p + n) to out[0, n) from the window (moved as the copy advances).
// Short runs: one byte per lane, 32 bytes per round. Runs of DMC_WIN_WIDE_COPY bytes or more:
// the bytes before out's first 4-byte boundary (head < 4) and after its last (tail < 4) one per
// lane, the words between as aligned 4-byte stores, 31 per round (124 bytes: the window holds
// them at any alignment), lane l's word from the two window words holding its 4 bytes (two
// shuffles and a funnel shift).
template <bool RING = false, dmc_u32 RS = DMC_LZ_RING>
__device__ __forceinline__ void dmc_win_copy(dmc_win* w, dmc_u32 p, dmc_u32 n, dmc_u8* out,
                                             dmc_u32 lane, const dmc_ring<RING, RS>& ring = dmc_ring<false>{}) {
    // with a ring: its slots' earlier reads and writes (other lanes') before these writes
    if (RING) __syncwarp();
    if (n >= DMC_WIN_COPY16_MIN) {
        dmc_copy16_in(out, w->src + p, n, w->src, w->src + w->len, lane, ring);  // the window stays
        return;
    }
    dmc_u32 j = 0;
    if (n >= DMC_WIN_WIDE_COPY) {
        const dmc_u32 head = (0u - (dmc_u32)(dmc_u64)out) & 3u;
        const dmc_u32 end = head + ((n - head) & ~3u);  // the tail starts here
        dmc_win_need(w, p, head, lane);
        const dmc_u32 b = dmc_win_get(*w, p + lane);
        if (lane < head) ring.put8(out + lane, b);
        for (j = head; j < end; j += 4 * (DMC_WARP_SIZE - 1)) {
            const dmc_u32 m = dmc_min_u32(end - j, 4 * (DMC_WARP_SIZE - 1));
            dmc_win_need(w, p + j, m, lane);
            const dmc_u32 off = p + j + 4 * lane + w->mis - w->start;
            const dmc_u32 lo = __shfl_sync(0xffffffffu, w->word, (int)((off >> 2) & (DMC_WARP_SIZE - 1)));
            const dmc_u32 hi = __shfl_sync(0xffffffffu, w->word, (int)(((off >> 2) + 1) & (DMC_WARP_SIZE - 1)));
            if (4 * lane < m) ring.put32(out + j + 4 * lane, __funnelshift_r(lo, hi, 8 * (off & 3u)));
        }
        j = end;  // the tail: fewer than 4 bytes, one round below
    }
    for (; j < n; j += DMC_WARP_SIZE) {
        dmc_win_need(w, p + j, dmc_min_u32(n - j, DMC_WARP_SIZE), lane);
        const dmc_u32 b = dmc_win_get(*w, p + j + lane);
        if (j + lane < n) ring.put8(out + j + lane, b);
    }
}

// Copies part `part` of `parts` of len bytes src -> dst with the block's threads (t of nt; every
// block of the parts calls it with the same src, dst, len, parts). dst's 16-byte words between
// its first and last 16-byte boundary go in rounds of DMC_COPY_UNROLL * nt words, round k to part
// k mod parts; a thread loads its DMC_COPY_UNROLL words of a round (nt apart: each load
// instruction of a warp reads 512 contiguous bytes) before it stores them, so that many 16-byte
// loads are in flight per thread (U of them). A word is one aligned 16-byte store, from the aligned 16-byte
// source vector (src shares dst's alignment) or the two it straddles, shifted together; source
// vectors reaching outside [src, src + len) load single bytes. Part 0 copies the bytes before the
// first boundary, the last part those after the last one, one per thread.
// U: words in flight per thread (DMC_COPY_UNROLL unless the caller's register budget is tight:
// dmc_unshuffle's launch bounds leave 32 registers).
template <dmc_u32 U = DMC_COPY_UNROLL>
__device__ __forceinline__ void dmc_range_copy(dmc_u8* __restrict__ dst, const dmc_u8* __restrict__ src,
                                               dmc_u32 len, dmc_u32 part, dmc_u32 parts, dmc_u32 t,
                                               dmc_u32 nt) {
    const dmc_u32 head = dmc_min_u32((0u - (dmc_u32)(dmc_u64)dst) & 15u, len);
    const dmc_u32 words = (len - head) / 16;
    const dmc_u32 body_end = head + 16 * words;
    if (part == 0 && t < head) dst[t] = src[t];
    if (part + 1 == parts)
        for (dmc_u32 i = body_end + t; i < len; i += nt) dst[i] = src[i];
    const dmc_u8* s = src + head;
    const dmc_u32 sh = (dmc_u32)((dmc_u64)s & 15u);
    const dmc_u8* a = s - sh;
    const dmc_u8* end = src + len;
    dmc_u8* d = dst + head;
    const dmc_u32 round = U * nt;
    for (dmc_u32 w0 = part * round; w0 < words; w0 += parts * round) {
        dmc_u32x4 v[U];
DMC_UNROLL
        for (dmc_u32 k = 0; k < U; k++) {
            const dmc_u32 w = w0 + k * nt + t;
            v[k] = dmc_u32x4{{0, 0, 0, 0}};
            if (w < words) {
                v[k] = dmc_load16_in(a + 16 * w, src, end);
                if (sh != 0) v[k] = dmc_shift16(v[k], dmc_load16_in(a + 16 * w + 16, src, end), sh);
            }
        }
DMC_UNROLL
        for (dmc_u32 k = 0; k < U; k++) {
            const dmc_u32 w = w0 + k * nt + t;
            if (w < words) dmc_store16(d + 16 * w, v[k]);
        }
    }
}

// Byte m (< DMC_LZ_PATTERN_DIST) of a match pattern held by the warp as in dmc_lz_match_copy:
// lane l's word holds bytes l, l + 32, l + 64 and l + 96. A warp collective (m per lane).
__device__ __forceinline__ dmc_u32 dmc_lz_pat_byte(dmc_u32 pat, dmc_u32 m) {
    return (__shfl_sync(0xffffffffu, pat, (int)(m & (DMC_WARP_SIZE - 1))) >> (8 * (m >> 5))) & 0xffu;
}

// The 16 pattern bytes m, m + 1, ... (mod dist; m < dist < DMC_LZ_PATTERN_DIST) as four
// little-endian words. A warp collective (m per lane).
__device__ __forceinline__ dmc_u32x4 dmc_lz_pat_word(dmc_u32 pat, dmc_u32 m, dmc_u32 dist) {
    dmc_u32x4 v;
DMC_UNROLL
    for (dmc_u32 i = 0; i < 4; i++) {
        dmc_u32 x = 0;
DMC_UNROLL
        for (dmc_u32 q = 0; q < 4; q++) {
            x |= dmc_lz_pat_byte(pat, m) << (8 * q);
            m = m + 1 == dist ? 0 : m + 1;
        }
        v.w[i] = x;
    }
    return v;
}

// Writes len >= DMC_LZ_WIDE_MATCH bytes at `to` that repeat a period of 1, 2 or 4 bytes: byte j
// is byte j mod 4 of P. The bytes before the first 16-byte boundary (head) and after the last
// whole 16-byte word (tail) one per lane, one sector each; the body as aligned 16-byte stores of
// four copies of P turned by the head (the words start a multiple of 4 bytes after it), lane l
// the 16 bytes at 16 l of a round. A warp collective (uniform arguments); no memory is read.
template <bool RING = false, dmc_u32 RS = DMC_LZ_RING>
__device__ __forceinline__ void dmc_lz_fill4(dmc_u8* to, dmc_u32 P, dmc_u32 len, dmc_u32 lane,
                                             const dmc_ring<RING, RS>& ring = dmc_ring<false>{}) {
    const dmc_u32 head = (0u - (dmc_u32)(dmc_u64)to) & 15u;
    const dmc_u32 body = (len - head) & ~15u;
    const dmc_u32 tail = len - head - body;
    if (lane < head) ring.put8(to + lane, P >> (8 * (lane & 3u)));
    if (!RING && lane < tail) to[head + body + lane] = (dmc_u8)(P >> (8 * ((head + body + lane) & 3u)));
    const dmc_u32 w = __funnelshift_r(P, P, 8 * (head & 3u));
    const dmc_u32x4 v = dmc_u32x4{{w, w, w, w}};
    for (dmc_u32 k = 0; k < body; k += 16 * DMC_WARP_SIZE) {
        // with a ring, a run longer than it writes a slot more than once, from other lanes:
        // each round's ring writes after the earlier rounds'
        if (RING && len > RS) __syncwarp();
        const dmc_u32 b = head + k + 16 * lane;
        if (b < head + body) ring.put16(to + b, v);  // aligned: to + head is
    }
    // with a ring, the tail last: its slots are written in output order
    if (RING && lane < tail) ring.put8(to + head + body + lane, P >> (8 * ((head + body + lane) & 3u)));
}

// Copies the match of `len` bytes at distance `dist` (1 <= dist <= op) to out[op, op + len),
// where out is the start of the stream's output: a match repeats the dist bytes before it, so
// byte j comes from op - dist + (j mod dist). Every byte before op was written before the
// match (the caller orders those writes with a __syncwarp). A warp collective (uniform
// arguments).
// - len < DMC_LZ_WIDE_MATCH: one byte per lane per round, from op - dist + (j mod dist), which
//   lies before op: no lane reads what another writes here, whatever the overlap.
// - Longer: the bytes before out + op + head (the first 16-byte boundary, head < 16) and after
//   the last whole 16-byte word (tail < 16) one per lane, from the dist bytes before op as
//   above (dist < DMC_LZ_PATTERN_DIST: two stores from the pattern, each in one sector; else one
//   load and one store, lanes 0-15 the head and 16-31 the tail); the body as aligned 16-byte stores, lane l
//   taking the 16 bytes at 16 l of a round:
//   - dist < DMC_LZ_PATTERN_DIST: the dist bytes before op are loaded once (one byte per lane,
//     ceil(dist / 32) loads) into a word per lane and every output byte is shuffled out of it
//     (byte j from pattern byte j mod dist): no memory reads after that, no ordering needed;
//     for a power-of-two dist (a divisor of a round's 512 bytes) a lane's 16 bytes are the
//     same every round, shuffled out once; with `small_period` (a constant of the call site),
//     a period of 1, 2 or 4 bytes builds them from a 4-byte word of the pattern (four
//     shuffles, where 16 shuffles and a modulo build a general one: a label image's runs are
//     such periods; dmc_lz_fill4). The zstd kernel, at its 128-register bound, calls this path
//     through a function of its own (dmc_zstd_run_match): inlined in its sequence loop with
//     `small_period` ptxas spilled 8 bytes.
//   - dist >= DMC_LZ_PATTERN_DIST: rounds of R = min(496, (dist - 16) rounded down to 16) bytes.
//     The round's source S = its destination - dist; lane l loads the aligned 16 bytes at
//     (S rounded down to 16) + 16 l, for l = 0..R/16, and builds its output from its own and
//     the next lane's (shuffled down) with funnel shifts. The last byte loaded lies below
//     S + R + 16 <= the round's destination: only bytes written before the round are read
//     (a __syncwarp at the top of each round orders the earlier rounds' and the head's stores),
//     never one this round writes. Loads that would start before `out` read single bytes.
// With a ring (dmc_ring<true>) every byte is also written to it, and the match's source bytes
// are read from it where no write of this call can reuse their slots first: a short match's
// when dist <= RS - DMC_LZ_WIDE_MATCH (its writes end less than 64 bytes after op), a
// pattern's always (loaded, then shuffled, before any store), a long match's head and tail when
// dist + 16 <= RS (the head's 16 bytes are written beside those reads; the tail's
// bytes go into the ring after the body's, so that its slots are written in output order), a
// round's vectors when dist + 512 <= RS (a round writes at most 496 bytes, and reads
// 16 below its source).
template <bool RING = false, dmc_u32 RS = DMC_LZ_RING>
__device__ __forceinline__ void dmc_lz_match_copy(dmc_u8* out, dmc_u32 op, dmc_u32 dist, dmc_u32 len,
                                                  dmc_u32 lane, bool small_period = true,
                                                  const dmc_ring<RING, RS>& ring = dmc_ring<false>{}) {
    const dmc_u8* from = out + (op - dist);
    dmc_u8* to = out + op;
    if (len < DMC_LZ_WIDE_MATCH) {
        const bool near = dist <= RS - DMC_LZ_WIDE_MATCH;
        for (dmc_u32 j = lane; j < len; j += DMC_WARP_SIZE) ring.put8(to + j, ring.get8(from + (j < dist ? j : j % dist), near));
        return;
    }
    const dmc_u32 head = (0u - (dmc_u32)(dmc_u64)to) & 15u;  // bytes before a 16-byte boundary
    const dmc_u32 body = (len - head) & ~15u;                // then whole 16-byte words
    const dmc_u32 tail = len - head - body;                  // then up to 15 bytes
    if (dist < DMC_LZ_PATTERN_DIST) {
        dmc_u32 pat = 0;
        for (dmc_u32 q = 0; 32 * q < dist; q++)
            if (32 * q + lane < dist) pat |= ring.get8(from + 32 * q + lane, true) << (8 * q);
        // with a ring: a match that ends more than a ring past its source writes the slots
        // just read (other lanes' reads: shuffles order no memory)
        if (RING && len + dist > RS) __syncwarp();
        // a power-of-two dist divides 512: a lane's 16 bytes are the same every round
        const bool same = (dist & (dist - 1u)) == 0u;
        if (small_period && same && dist <= 4) {
            // a period of 1, 2 or 4 bytes: P, pattern bytes 0..3 (byte q: pattern byte q mod
            // dist), makes every byte of the match (dmc_lz_fill4: no modulo, no more shuffles)
            const dmc_u32 pm = dist - 1u;
            const dmc_u32 P = dmc_lz_pat_byte(pat, 0) | (dmc_lz_pat_byte(pat, 1u & pm) << 8) |
                              (dmc_lz_pat_byte(pat, 2u & pm) << 16) | (dmc_lz_pat_byte(pat, 3u & pm) << 24);
            dmc_lz_fill4(to, P, len, lane, ring);
            return;
        }
        const dmc_u32 eh = dmc_lz_pat_byte(pat, lane % dist);
        if (lane < head) ring.put8(to + lane, eh);  // one sector each: head and tail
        const dmc_u32 et = dmc_lz_pat_byte(pat, (head + body + lane) % dist);
        if (!RING && lane < tail) to[head + body + lane] = (dmc_u8)et;
        dmc_u32x4 v = dmc_lz_pat_word(pat, (head + 16 * lane) % dist, dist);
        for (dmc_u32 k = 0; k < body; k += 16 * DMC_WARP_SIZE) {
            if (RING && len > RS) __syncwarp();  // as in dmc_lz_fill4
            const dmc_u32 b = head + k + 16 * lane;
            if (!same && k > 0) v = dmc_lz_pat_word(pat, b % dist, dist);
            if (b < head + body) ring.put16(to + b, v);  // aligned: to + head is
        }
        if (RING && lane < tail) ring.put8(to + head + body + lane, et);  // the ring's slots in output order
        return;
    }
    // head and tail in one load and one store: lanes 0-15 the head's bytes, 16-31 the
    // tail's; both read the match's first period only (dist > 15: out[op - dist, op),
    // written before the copy), so the load waits on no store of this one. The tail goes into
    // the ring after the body (the ring's slots are written in output order)
    const dmc_u32 hk = lane & 15u;
    const dmc_u32 hj = lane < 16 ? hk : head + body + hk;
    const bool ht = hk < (lane < 16 ? head : tail);
    dmc_u32 hv = 0;
    if (ht) {
        hv = ring.get8(from + hj % dist, dist + 16 <= RS);
        to[hj] = (dmc_u8)hv;
        if (RING && lane < 16) *ring.at(to + hj) = (dmc_u8)hv;
    }
    const bool near = dist + 16 * DMC_WARP_SIZE <= RS;
    const dmc_u32 round = dmc_min_u32(16 * (DMC_WARP_SIZE - 1), (dist - 16) & ~15u);
    for (dmc_u32 k = 0; k < body; k += round) {
        const dmc_u32 n = dmc_min_u32(body - k, round) / 16;  // storing lanes
        __syncwarp();  // the head's and the earlier rounds' stores are read below
        const dmc_u64 s = (dmc_u64)(to + head + k - dist);
        const dmc_u8* a = (const dmc_u8*)(s & ~(dmc_u64)15);
        const dmc_u32 sh = (dmc_u32)(s & 15u);
        dmc_u32x4 v = {{0, 0, 0, 0}};
        if (lane <= n) {
            const dmc_u8* p = a + 16 * lane;
            v = RING && near && p >= out ? dmc_load16(ring.at(p)) : dmc_load16_from(p, out);
        }
        dmc_shifted_store16(to + head + k, v, sh, n, lane, ring);
    }
    // (no slot the last round read from the ring is the tail's: dist + 512 <= RS)
    if (RING && ht && lane >= 16) *ring.at(to + hj) = (dmc_u8)hv;
}

// ---- Batches of short LZ tokens (the LZ4 and BloscLZ decoders) ----
// A token is a literal run followed by a match (LZ4 sequences; a BloscLZ control is one or the
// other). Consecutive short tokens whose input lies in the window are parsed ahead from the
// window (every lane the same, or, for most LZ4 streams, from candidates at every window byte:
// lz4.cu's dmc_lz4_parse_batch), lane t keeping token t, and their output is then written in
// rounds of 32 bytes, one byte per lane, whatever the tokens' boundaries: per round one load
// request (the match bytes written before the round) and one store request, instead of a store
// per literal run and a load and a store per match.
// The window must hold [ip, ip + this) when a batch starts (else it is moved there).
#define DMC_LZ_BATCH_WINDOW 32

// True when stream position p lies in the window.
__device__ __forceinline__ bool dmc_win_has(const dmc_win& w, dmc_u32 p) {
    return p + w.mis - w.start < DMC_WIN_BYTES;  // one 32-bit compare (see dmc_win_need)
}

// One token of a batch, held by lane t for token t.
struct dmc_lz_tok {
    dmc_u32 start;  // its first output byte, relative to the batch's
    dmc_u32 lit;    // literal bytes (first)
    dmc_u32 lip;    // stream position of its first literal byte (in the window)
    dmc_u32 dist;   // match distance (then the rest of the token's output), >= 1
};

// Writes a batch's output out[op0, op0 + n): token t (lane t's `tok`, t < ntok, starts strictly
// increasing, the first 0) covers [start_t, start_(t+1)) relative to op0 (the last one up to n):
// its lit bytes from the window at lip_t, then match bytes, each from dist_t bytes before it.
// The parser has checked every distance against the bytes before its match and every literal
// position against the window. A warp collective (uniform arguments but `tok`).
// Round k writes bytes [32 k, 32 k + 32), lane l byte 32 k + l: it finds its token (a count of
// the starts at or before its byte: a bit per start in the round, ORed over the lanes, and the
// starts of the rounds before), then its byte: a literal from the window; a
// match byte from before the round from memory (written by an earlier round or before the
// batch: the __syncwarp at the top of each round orders those stores); a match byte from
// inside the round from the lane that writes it (always a lower lane: pointer jumping by
// shuffles, 5 doublings resolve a chain through all 32 lanes).
// With a ring (dmc_ring<true>) every byte is also written to it, and a match byte from before
// the round is read from it when it lies at most RS - 32 bytes before the round (whose
// 32 bytes' writes then cannot reuse its slot).
template <bool RING = false, dmc_u32 RS = DMC_LZ_RING>
__device__ __forceinline__ void dmc_lz_batch_copy(const dmc_win& w, dmc_u8* out, dmc_u32 op0, dmc_u32 n,
                                                  dmc_u32 ntok, const dmc_lz_tok& tok, dmc_u32 lane,
                                                  const dmc_ring<RING, RS>& ring = dmc_ring<false>{}) {
    // Rounds start a bytes before the batch: at the output's 32-byte sector boundaries (each
    // round's store inside one sector) when that takes no more rounds than a = 0.
    dmc_u32 a = (dmc_u32)((dmc_u64)(out + op0) & 31u);
    if ((a + n + 31) / 32 != (n + 31) / 32) a = 0;
    // A round's bytes are 32 consecutive ones (lane l: byte v0 - a + l of the batch), so a byte's
    // token is the count of tokens starting before the round (carried from round to round; none
    // starts before the first) and in it at or before the byte (one OR over the lanes of a bit
    // per start in the round), less one: no binary search of dependent shuffles.
    dmc_u32 before = 0;
    const dmc_u32 upto_lane = 0xFFFFFFFFu >> (DMC_WARP_SIZE - 1 - lane);
    for (dmc_u32 v0 = 0; v0 < a + n; v0 += DMC_WARP_SIZE) {
        __syncwarp();  // the earlier rounds' and tokens' stores are read below
        const dmc_u32 r0 = v0 > a ? v0 - a : 0;  // the round's first byte
        const bool mine = v0 + lane >= a && v0 + lane - a < n;
        const dmc_u32 r = mine ? v0 + lane - a : r0;
        const dmc_u32 rel = tok.start - (v0 - a);  // (v0 - a wraps below 0 in a first round)
        const dmc_u32 starts = __reduce_or_sync(0xffffffffu, lane < ntok && rel < DMC_WARP_SIZE ? 1u << rel : 0u);
        const dmc_u32 upto = before + (dmc_u32)__popc(starts & upto_lane);
        before += (dmc_u32)__popc(starts);
        const dmc_u32 t = upto > 0 ? upto - 1 : 0;  // (lanes not mine: any token; they load nothing)
        const dmc_u32 k = r - __shfl_sync(0xffffffffu, tok.start, (int)t);
        const dmc_u32 lit = __shfl_sync(0xffffffffu, tok.lit, (int)t);
        const dmc_u32 lip = __shfl_sync(0xffffffffu, tok.lip, (int)t);
        const dmc_u32 dist = __shfl_sync(0xffffffffu, tok.dist, (int)t);
        const dmc_u32 wb = dmc_win_get(w, lip + k);  // every lane: a collective
        dmc_u32 b = 0, ptr = lane;
        bool ready = true;
        if (mine) {
            if (k < lit) {
                b = wb;
            } else if (dist > r || r - dist < r0) {  // before the round (dist > r: before the batch)
                b = ring.get8(out + op0 + r - dist, dist + r0 <= RS - DMC_WARP_SIZE + r);
            } else {
                ptr = r - dist + a - v0;  // < lane
                ready = false;
            }
        }
DMC_UNROLL
        for (dmc_u32 i = 0; i < 5; i++) {
            if (__all_sync(0xffffffffu, ready)) break;
            const dmc_u32 rr = __shfl_sync(0xffffffffu, ready ? 1u : 0u, (int)ptr);
            const dmc_u32 bb = __shfl_sync(0xffffffffu, b, (int)ptr);
            const dmc_u32 pp = __shfl_sync(0xffffffffu, ptr, (int)ptr);
            if (!ready) {
                if (rr != 0) {
                    b = bb;
                    ready = true;
                } else {
                    ptr = pp;
                }
            }
        }
        if (mine) ring.put8(out + op0 + r, b);
    }
}

// ---- Warp-wide copies (all 32 lanes; zstd's literals, matches and raw blocks, inflate's stored
// blocks) ----

// Aligned 4-byte word k of the bytes [p, p+len) (address bytes [4k, 4k+4) from p - mis, mis the
// address of p modulo 4; the word may start before p): one load when it lies wholly inside, else
// bounds-checked byte loads (zeros outside). zstd's bit readers' words and dmc_warp_copy_wide's
// sources.
__device__ __forceinline__ dmc_u32 dmc_word4(const dmc_u8* p, dmc_u32 len, dmc_u32 mis, dmc_i32 k) {
    const dmc_i32 first = 4 * k - (dmc_i32)mis;
    if (first >= 0 && first + 4 <= (dmc_i32)len) return *(const dmc_u32*)(p + first);  // aligned
    dmc_u32 v = 0;
    if (first + 4 <= 0 || first >= (dmc_i32)len) return v;
    for (dmc_i32 q = 0; q < 4; q++) {
        const dmc_i32 i = first + q;
        if (i >= 0 && i < (dmc_i32)len) v |= (dmc_u32)p[i] << (8 * q);
    }
    return v;
}

// All 32 lanes of a warp: d[0, n) = s[0, n) for disjoint ranges (no byte of d is a byte of s). The
// destination's aligned words go out with aligned 4-byte stores, W words per lane a round (their
// loads first; 512 bytes a round with the default four); when the source is aligned apart from
// the destination each
// word is shifted together from the two aligned source words it spans, the upper one taken from
// the next lane's lower one by a shuffle (lane 0 loads the round's one word past its last), so a
// round is W or W + 1 coalesced load requests, not 2 W; the bytes of d's partial words at
// either end go one per lane (one load and one store request). With a ring (dmc_ring<true>)
// every byte stored also goes to it (the tail's after the body's, a __syncwarp between rounds
// when the copy is longer than the ring: its slots in output order); s is not read from it.
template <dmc_u32 W = 4, bool RING = false, dmc_u32 RS = DMC_LZ_RING>
__device__ inline void dmc_warp_copy_wide(dmc_u8* d, const dmc_u8* s, dmc_u32 n, dmc_u32 lane,
                                          const dmc_ring<RING, RS>& ring = dmc_ring<false>{}) {
    const dmc_u32 head = dmc_min_u32((4u - (dmc_u32)((dmc_u64)d & 3u)) & 3u, n);
    const dmc_u32 nw = (n - head) / 4;
    const dmc_u32 tail = n - head - 4 * nw;
    if (lane < (RING ? head : head + tail)) {
        const dmc_u32 j = lane < head ? lane : n - tail + (lane - head);
        ring.put8(d + j, s[j]);
    }
    // word k of the body: d + head + 4k = bytes sm + 4k .. sm + 4k + 3 from sb - sm (aligned), that
    // is source words k and k + 1 shifted (k + 1 unused when sm = 0: word nw is loaded only when
    // sm != 0)
    const dmc_u8* sb = s + head;
    const dmc_u32 sm = (dmc_u32)((dmc_u64)sb & 3u);
    dmc_u32* dw = (dmc_u32*)(d + head);
    // rounds of up to W * 128 bytes: each lane's W words loaded before any is stored, so that a
    // lane has W loads in flight, not one (a warp issues in order: a store waits for its load)
    for (dmc_u32 k0 = 0; k0 < nw; k0 += W * DMC_WARP_SIZE) {
        if (RING && n > RS) __syncwarp();
        dmc_u32 v[W];
        DMC_UNROLL
        for (dmc_u32 b = 0; b < W; b++) {
            const dmc_u32 k = k0 + DMC_WARP_SIZE * b + lane;
            v[b] = k < nw || (k == nw && sm != 0) ? dmc_word4(sb, n - head, sm, (dmc_i32)k) : 0u;
        }
        if (sm != 0) {
            const dmc_u32 kw = k0 + W * DMC_WARP_SIZE;  // lane 0: the word after the round's last
            const dmc_u32 vw = lane == 0 && kw <= nw ? dmc_word4(sb, n - head, sm, (dmc_i32)kw) : 0u;
            DMC_UNROLL
            for (dmc_u32 b = 0; b < W; b++) {
                // lane l's upper word is lane l + 1's lower one; lane 31's, lane 0's next one
                const dmc_u32 up = lane == 0 ? (b + 1 < W ? v[(b + 1) % W] : vw) : v[b];
                const dmc_u32 hi = __shfl_sync(0xffffffffu, up, (int)((lane + 1) & (DMC_WARP_SIZE - 1)));
                v[b] = __funnelshift_r(v[b], hi, 8 * sm);
            }
        }
        DMC_UNROLL
        for (dmc_u32 b = 0; b < W; b++) {
            const dmc_u32 k = k0 + DMC_WARP_SIZE * b + lane;
            if (k < nw) ring.put32((dmc_u8*)(dw + k), v[b]);
        }
    }
    if (RING) {
        if (n > RS) __syncwarp();  // the body's slots before the tail's
        if (lane >= head && lane < head + tail) ring.put8(d + n - tail + (lane - head), s[n - tail + (lane - head)]);
    }
}

// A team's barrier (the zstd and inflate kernels' teams of warps, one job per block): every warp
// of the block calls this one function, so all of them wait at the same __syncthreads (a
// barrier orders the block's shared and global memory). A template so that every kernel file
// may include it unused (one definition across the emulator's files, no unused-function error).
template <int = 0>
__device__ __noinline__ void dmc_team_sync() {
    __syncthreads();
}

// Copies of this many bytes or more go through dmc_warp_copy_long's 16-byte path.
#define DMC_WARP_COPY_LONG_MIN 256u

// All 32 lanes of a warp: d[0, n) = s[0, n) for disjoint ranges, as dmc_warp_copy_wide, a long
// copy (DMC_WARP_COPY_LONG_MIN bytes or more) as dmc_range_copy's aligned 16-byte loads and
// stores: 2 KiB per round, four 16-byte loads in flight per lane (64 bytes, where the 4-byte
// words keep 16): a lone warp's copy is bound by the bytes it has in flight. For the copies
// outside the decoders' sequence loops (zstd's raw blocks and last literals, inflate's stored
// blocks): inlined in those loops its registers spilled the zstd kernel's state.
__device__ inline void dmc_warp_copy_long(dmc_u8* d, const dmc_u8* s, dmc_u32 n, dmc_u32 lane) {
    if (n >= DMC_WARP_COPY_LONG_MIN) {
        dmc_range_copy<DMC_COPY_UNROLL>(d, s, n, 0, 1, lane, DMC_WARP_SIZE);
    } else {
        dmc_warp_copy_wide(d, s, n, lane);
    }
}

#endif  // DMC_LAYOUT_PROBE

#endif  // DMC_COMMON_CUH
