// FNV-1a, 64 bits: the one byte hash of lib/ (the dump writer's file keys, the shard line's order
// of scenario names, the DCP ranks' comparison of their merged results). Not cryptographic.
#pragma once

#include <cstddef>
#include <cstdint>

namespace mla {

inline constexpr uint64_t kFnv1a64Offset = 0xcbf29ce484222325ull;

inline uint64_t fnv1a64(const void* data, std::size_t bytes, uint64_t seed = kFnv1a64Offset) {
  uint64_t h = seed;
  const auto* p = static_cast<const unsigned char*>(data);
  for (std::size_t i = 0; i < bytes; ++i) {
    h ^= p[i];
    h *= 0x100000001b3ull;
  }
  return h;
}

}  // namespace mla
