// --dump DIR: one small shape per operation (pack, gather, convert), run on the chosen backend;
// writes every input and our output as raw little-endian binary files plus DIR/manifest.json
// (shapes, dtypes, strides in elements, parameters), so that a peer implementation
// (scripts/peer_check.py) can recompute the outputs and compare them bit for bit.
// The shapes exercise what a peer must get right: padded pages, kv_c/k_pe as column ranges of
// one [rows, 576] tensor, padding rows past slot_mapping, skipped (-1) slots, all-zero, tiny and
// large tiles, odd block sizes, nonzero unaligned seq_starts, a zero-length request, and every
// kind of invalid top-k index.
#pragma once

#include <cstdint>
#include <string>

#include "kernels/backend.h"

namespace mla::bench {

Status write_dump(Backend& backend, const std::string& dir, uint64_t seed);

}  // namespace mla::bench
