// Online (streaming) softmax and log-sum-exp merge rules in fp32, shared by the host attention
// kernels and, later, the CUDA ones. Natural log and exp() throughout (not exp2 with a folded
// log2(e): the contract of attention_params.h is exp()).
//
// One softmax row is processed in tiles of columns:
//   float factor = row.begin_tile(tile_max);   // tile_max = fmaxf over the tile's valid scores
//   acc[:] *= factor; (skippable when factor == 1)
//   p_j = row.prob(s_j);  row.l += sum_j p_j;  acc[:] += bf16_rne(p_j) * v_j[:]
//   ...
//   out = row.normalize(acc) = acc / l  (0 when no column was seen),  lse = row.lse()
//
// Non-finite scores: fmaxf ignores a NaN score, so m stays the max of the others; that NaN then
// gives p = NaN, which makes l, the output and the LSE NaN (a stray NaN shows; it is never
// dropped). An +inf score gives m = +inf and p = exp(inf - inf) = NaN likewise.
#pragma once

#include <cmath>

#include "kernels/common/hd.h"

namespace mla {

// The running state of one softmax row: m = max of the scores seen (-inf before any), l = sum of
// exp(s_j - m) over them.
struct OnlineSoftmaxRow {
  float m = -INFINITY;
  float l = 0.0f;

  // The reference point scores are taken against: m, or 0 while m is -inf (so that
  // exp(s - ref) is 0 for s = -inf and never exp(-inf - -inf) = NaN).
  MLA_HD float ref() const { return m == -INFINITY ? 0.0f : m; }

  // Starts a tile whose valid scores have maximum tile_max (-inf for a tile without valid
  // columns). Updates m, rescales l, and returns the factor the caller multiplies its
  // accumulator by: exp(m_old - m_new), which is 0 while nothing was seen and 1 when m is
  // unchanged.
  MLA_HD float begin_tile(float tile_max) {
    const float m_new = fmaxf(m, tile_max);
    if (m_new == m) return 1.0f;
    const float m_new_ref = m_new == -INFINITY ? 0.0f : m_new;
    const float factor = expf(m - m_new_ref);  // m_old = -inf gives 0
    m = m_new;
    l *= factor;
    return factor;
  }

  // exp(s - m) in fp32 (call after begin_tile of the tile that holds s).
  MLA_HD float prob(float s) const { return expf(s - ref()); }

  // An accumulator element turned into the output: acc / l, or 0 when no column was seen
  // (l == 0: out = 0). A NaN l gives NaN.
  MLA_HD float normalize(float acc) const { return l == 0.0f ? 0.0f : acc / l; }

  // ln sum exp(s_j) = m + ln(l); -inf when no column was seen; NaN when l is NaN.
  MLA_HD float lse() const { return l == 0.0f ? -INFINITY : m + logf(l); }
};

// docs/semantics.md §4.2 / 5: an LSE that is NaN or +inf is treated as -inf (the "no key" marker of other
// conventions) when merging partial attentions produced by different calls.
MLA_HD float lse_sanitize(float lse) { return (lse != lse || lse == INFINITY) ? -INFINITY : lse; }

// Weights of a two-way LSE merge (docs/semantics.md §4.2) of already sanitized LSEs a and b: with
// m = max(a, b), wa = exp(a - m), wb = exp(b - m), merged lse = m + ln(wa + wb). Returns false
// when both are -inf (the caller keeps out_a and writes lse = -inf). A side with weight 0
// contributes nothing: callers must skip it rather than multiply (its out may hold anything).
MLA_HD bool lse_merge2_weights(float a, float b, float* wa, float* wb, float* lse) {
  const float m = fmaxf(a, b);
  if (m == -INFINITY) {
    *wa = 0.0f;
    *wb = 0.0f;
    *lse = -INFINITY;
    return false;
  }
  *wa = expf(a - m);  // a = -inf gives 0
  *wb = expf(b - m);
  *lse = m + logf(*wa + *wb);
  return true;
}

}  // namespace mla
