// A scenario built in code for tests: a name, a seed, the model's dimensions and the batch; the
// rest keeps Scenario's defaults (the caller adds cases, pins and checks).
#pragma once

#include <cstdint>
#include <string>
#include <vector>

#include "lib/scenario/scenario.h"

namespace mla::test {

inline Scenario small_scenario(const std::string& name, uint64_t seed, int32_t heads, int32_t topk, int32_t block_size,
                               std::vector<int32_t> seq_lens, std::vector<int32_t> query_lens) {
  Scenario s;
  s.name = name;
  s.file = "(test)";
  s.seed = seed;
  s.model.heads = heads;
  s.model.topk = topk;
  s.model.block_size = block_size;
  s.batch.seq_lens = std::move(seq_lens);
  s.batch.query_lens = std::move(query_lens);
  return s;
}

}  // namespace mla::test
