// Comparators: reference against backend output, filling Metrics (lib/verdict.h).
// Exact comparators treat any NaN as equal to any NaN (payloads differ between CPUs and GPUs)
// but NaN positions must match; all other bits must be equal.
#pragma once

#include <cstdint>
#include <vector>

#include "lib/scenario/tolerance.h"
#include "lib/checks/verdict.h"

namespace mla {

// bf16 bit patterns, element by element. Error figures are over finite pairs.
Metrics compare_bf16_exact(const std::vector<uint16_t>& ref, const std::vector<uint16_t>& got);

// Raw bytes (e.g. the packed cache). `untouched` marks bytes the operation must not write
// (ref holds their initial value there); differences there count as untouched_bytes_changed,
// differences elsewhere as mismatches.
Metrics compare_bytes_exact(const std::vector<uint8_t>& ref, const std::vector<uint8_t>& got,
                            const std::vector<bool>* untouched = nullptr);

// Integers (converted indices, valid counts).
Metrics compare_int32_exact(const std::vector<int32_t>& ref, const std::vector<int32_t>& got);

// Tolerance comparison (docs/semantics.md §8): an element passes when |got - ref| <= abs OR
// |got - ref| <= rel * |ref|; the global cosine difference 1 - 2 sum(a r) / sum(a^2 + r^2) must be
// <= cos (over finite pairs); NaN/inf positions must match (a mismatch there is NONFINITE).
Metrics compare_tolerance(const std::vector<double>& ref, const std::vector<double>& got, const Tolerance& tol);

// bf16 / fp32 outputs widened to double for compare_tolerance.
std::vector<double> widen_bf16(const std::vector<uint16_t>& v);
std::vector<double> widen_f32(const std::vector<float>& v);

// Adds b's counts to a (several buffers checked by one check). Worst-element fields keep a's
// unless a had none.
void merge_into(Metrics& a, const Metrics& b);

}  // namespace mla
