// Device side of the GPU test of attn_dev::divide_by (test_cuda_division.cpp): a check kernel that
// compares it with __fdiv_rn bit for bit. Built only with the CUDA backend.
#pragma once

#include <string>
#include <vector>

namespace mla::test_device {

struct DivisionCounts {
  unsigned long long tested = 0;        // pairs inside division_divisor_ok / division_value_ok
  unsigned long long differ = 0;        // divide_by(acc, l, division_reciprocal(l)) != __fdiv_rn(acc, l)
  unsigned long long naive_differ = 0;  // acc * __frcp_rn(l) != __fdiv_rn(acc, l): the check can tell
};

// Pairs drawn from a hash of their index: kWholeRange spreads |acc| over exponents [-64, 64) and l
// over [1/2, 2^33) (pairs outside the fast path's range are not counted); kSoftmaxRows has
// l in [1, 4096) and acc = l v with |v| < 12, as an attention row's sum and accumulator. `pairs` is
// rounded up to a multiple of 2^20. False with `why` when there is no device ("no CUDA device"),
// the build has no code for it ("no kernel image for this device") or a CUDA call fails.
enum class DivisionOperands { kWholeRange, kSoftmaxRows };
bool compare_row_division(DivisionOperands operands, unsigned long long pairs, DivisionCounts* counts,
                          std::string* why);

// The same comparison for every pair (acc[i], l[j]) of the given values (host arrays): edge cases.
bool compare_division_pairs(const std::vector<float>& acc, const std::vector<float>& l, DivisionCounts* counts,
                            std::string* why);

}  // namespace mla::test_device
