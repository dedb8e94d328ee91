#!/usr/bin/env bash
# Runs the emulated kernel tests with the kernels built under ThreadSanitizer: every CUDA thread
# is a TSan fiber (a launch of up to 1024 / block-size blocks, at least 4, runs every block on
# fibers of its own; larger grids rotate through that many sets; each fiber has its own stack;
# with a seed up to 4 blocks are resident at once), barriers and __syncwarp are the only ordering
# between the threads of a block (shuffles and votes order no memory, as on a GPU) and blocks are
# not ordered at all, so a missing __syncthreads or __syncwarp, a lost update or two blocks
# writing the same bytes is reported as a data race and fails the run. Needs gcc's libtsan (libtsan2, installed with g++).
set -euo pipefail
cd "$(dirname "$0")/../../.."
export DAMACY_EMU_TSAN=1
export CARGO_TARGET_DIR="${CARGO_TARGET_DIR:-target}/tsan"
# A report fails the test binary (exit code 66) after it ran. suppress_equal_addresses=0: the
# address de-duplication of this libtsan scans a list per suppressed host-vs-kernel report.
export TSAN_OPTIONS="halt_on_error=0:exitcode=66:report_signal_unsafe=0:suppress_equal_addresses=0:suppressions=$PWD/crates/damacy-kernels/scripts/tsan.supp${TSAN_OPTIONS:+:$TSAN_OPTIONS}"
# Every seeded-bug test, and the real kernels on the tests that exercise them (lz4, blosclz,
# memcpy, crc32c, unshuffle, assemble on the fixtures; inflate on its small cases); the fixture/proptest sweeps and the cast
# matrix run under the schedules and ASan only — gcc 12's libtsan makes them take many minutes.
# (shuffled_schedule_catches_a_missing_barrier runs a defective kernel on purpose; its race is
# asserted by emulator_checks in a child process.)
cargo test -p damacy-kernels --features emulate --test emulator_checks "$@"
# inflate: hand-built stored/fixed/dynamic blocks, gzip members and every status case (small
# streams: table builds, match and stored copies, both checksums, all through the warp commands),
# stored blocks a team copies (the barriers around the helpers' copies) and its corrupt/truncated sweep (fewer variants per stream under TSan)
cargo test -p damacy-kernels --features emulate --test inflate "$@" -- \
    hand_built_blocks_decode gzip_members_and_header_fields statuses_name_what_is_wrong \
    short_codes_and_long_runs_decode corrupt_and_truncated_streams_end_in_a_status \
    stored_blocks_copied_by_a_team_decode
# zstd: frames built for every literal/table mode, every repeat-offset rule, Huffman streams of
# every length and alignment (one segment per lane, table stores and reads), raw blocks a team
# copies (the rounds around the helpers' copies), a team leader's ring (its slots' writes and
# reads at the edges of its reach), helper 1's loads ahead of a leader executing a block from
# the scratch (none of a byte the leader writes in that round), and the corrupt and
# truncated sweeps (a smaller corpus under TSan: frames up to 8 KB, fewer cuts and flips)
cargo test -p damacy-kernels --features emulate --test zstd "$@" -- \
    crafted_frames_match_libzstd repeat_offsets_of_every_kind_match_libzstd blocks_decoded_side_by_side_match_libzstd_and_fail_alike \
    extra_bits_past_the_reader_match_libzstd raw_blocks_copied_by_a_team_match_reference \
    matches_around_the_team_leader_s_ring_match_reference blocks_executed_from_the_scratch_match_libzstd_and_fail_alike \
    truncated_frames_are_errors corrupt_frames_never_crash huffman_streams_at_every_alignment
# the bytes fixtures (assemble) and every codec in one wave: tests/gpu.rs's emulated variants
# (under TSan the shuffled seed only, and one wave)
cargo test -p damacy-kernels --features emulate --test gpu "$@" -- \
    emulated_bytes_fixtures_decode_and_assemble emulated_every_codec_in_one_wave
# lz4_kernel_matches_lz4_flex (62 s here, inputs up to 200 KB) is skipped too: the LZ4 kernel's
# paths run under TSan in the generated-block, short-sequence and one-wave tests.
exec cargo test -p damacy-kernels --features emulate --test emulated "$@" -- \
    --skip random_blosc --skip corrupted_frames --skip pipelined --skip many_chunks \
    --skip shuffled_schedule_catches_a_missing_barrier --skip lz4_kernel_matches_lz4_flex
