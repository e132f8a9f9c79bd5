// Host LSE merge (docs/semantics.md §4.2), row by row in fp32. NaN and +inf LSEs are treated as -inf. With
// m = max(lse_a, lse_b), wa = exp(lse_a - m), wb = exp(lse_b - m):
// out = bf16((wa a + wb b) / (wa + wb)), lse = m + ln(wa + wb); a side whose weight is 0 adds
// nothing (its values are not used, so a poisoned or NaN row there does not leak). Both -inf:
// out = out_a as is, lse = -inf. Element e of a row is read from a and b before out[e] is
// written and the LSEs are read before lse is written, so out may alias out_a or out_b and lse
// may alias lse_a or lse_b.
#include <cstdint>
#include <cstring>

#include "kernels/common/bf16.h"
#include "kernels/common/online_softmax.h"
#include "kernels/host/host_kernels.h"

namespace mla::host {

void merge(const MergeParams& p) {
  const int64_t width = p.width;
  for (int64_t row = 0; row < p.rows; ++row) {
    const float la = lse_sanitize(p.lse_a[row]);
    const float lb = lse_sanitize(p.lse_b[row]);
    const bf16_t* a = p.out_a + row * width;
    const bf16_t* b = p.out_b + row * width;
    bf16_t* out = p.out + row * width;
    float wa = 0.0f, wb = 0.0f, lse = 0.0f;
    if (!lse_merge2_weights(la, lb, &wa, &wb, &lse)) {
      if (out != a) std::memmove(out, a, static_cast<size_t>(width) * sizeof(bf16_t));
      p.lse[row] = -INFINITY;
      continue;
    }
    const float total = wa + wb;
    for (int64_t e = 0; e < width; ++e) {
      float num = 0.0f;
      if (wa != 0.0f) num += wa * bf16_to_f32(a[e]);
      if (wb != 0.0f) num += wb * bf16_to_f32(b[e]);
      out[e] = f32_to_bf16_rne(num / total);
    }
    p.lse[row] = lse;
  }
}

}  // namespace mla::host
