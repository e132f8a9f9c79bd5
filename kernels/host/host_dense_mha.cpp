// Host dense MHA (docs/semantics.md §4.2): varlen attention, bottom-right causal or unmasked, the algorithm of
// the GPU kernels one (request, head, query) row at a time.
//
// Per request r and head h, the request's keys k = [k_nope (128), k_pe (64, shared by heads)] and
// values (128) are widened to fp32 once. Per query row i (q = [q_nope, q_pe] widened to fp32):
// the visible keys are [0, nk) unmasked, [0, min(nk, i + nk - nq + 1)) causal; they are taken in
// tiles of `softmax_keys` keys (kAttentionTile = 64 by default; 128 for the `wgmma` kernel)
// starting at key 0 (the last tile cut at the mask, as a masked GPU tile);
// s_j = dot_f32(q, k_j, 192) * scale; online softmax in fp32 (max and sum updated once per tile,
// l += the fp32 tile sum in key order); acc[128] += bf16_rne(p_j) * v_j in fp32 key by key;
// out = bf16(acc / l), lse = m + ln l. No visible key: out 0, lse -inf.
#include <algorithm>
#include <cmath>
#include <cstdint>
#include <vector>

#include "kernels/common/bf16.h"
#include "kernels/common/online_softmax.h"
#include "kernels/host/host_kernels.h"

namespace mla::host {

void dense_mha(const DenseMhaParams& p, int softmax_keys) {
  const int H = p.num_heads;
  std::vector<float> keys, vals;
  float q[kDqk];
  float acc[kDv];
  const int step = std::max(softmax_keys, 1);
  std::vector<float> scores(static_cast<size_t>(step));

  for (int32_t r = 0; r < p.num_reqs; ++r) {
    const int64_t q0 = p.cu_seqlens_q_host[r], nq = p.cu_seqlens_q_host[r + 1] - q0;
    const int64_t k0 = p.cu_seqlens_k_host[r], nk = p.cu_seqlens_k_host[r + 1] - k0;
    if (nq <= 0) continue;
    keys.resize(static_cast<size_t>(std::max<int64_t>(nk, 1)) * kDqk);
    vals.resize(static_cast<size_t>(std::max<int64_t>(nk, 1)) * kDv);

    for (int h = 0; h < H; ++h) {
      for (int64_t j = 0; j < nk; ++j) {
        const bf16_t* kn = p.k_nope + (k0 + j) * p.k_nope_stride + static_cast<int64_t>(h) * kDn;
        const bf16_t* kr = p.k_pe + (k0 + j) * p.k_pe_stride;
        const bf16_t* vv = p.v + (k0 + j) * p.v_stride + static_cast<int64_t>(h) * kDv;
        float* kd = &keys[static_cast<size_t>(j) * kDqk];
        float* vd = &vals[static_cast<size_t>(j) * kDv];
        for (int e = 0; e < kDn; ++e) kd[e] = bf16_to_f32(kn[e]);
        for (int e = 0; e < kDr; ++e) kd[kDn + e] = bf16_to_f32(kr[e]);
        for (int e = 0; e < kDv; ++e) vd[e] = bf16_to_f32(vv[e]);
      }

      for (int64_t i = 0; i < nq; ++i) {
        const int64_t t = q0 + i;
        const bf16_t* qn = p.q_nope + t * p.q_nope_stride + static_cast<int64_t>(h) * kDn;
        const bf16_t* qr = p.q_pe + t * p.q_pe_stride + static_cast<int64_t>(h) * kDr;
        for (int e = 0; e < kDn; ++e) q[e] = bf16_to_f32(qn[e]);
        for (int e = 0; e < kDr; ++e) q[kDn + e] = bf16_to_f32(qr[e]);
        const int64_t visible = p.causal ? std::clamp<int64_t>(i + nk - nq + 1, 0, nk) : nk;

        OnlineSoftmaxRow row;
        std::fill(acc, acc + kDv, 0.0f);
        for (int64_t c0 = 0; c0 < visible; c0 += step) {
          const int n = static_cast<int>(std::min<int64_t>(step, visible - c0));
          softmax_tile<kDqk, kDv, kDv>(row, q, &keys[static_cast<size_t>(c0) * kDqk], &vals[static_cast<size_t>(c0) * kDv],
                                       n, p.scale, scores.data(), acc);
        }

        bf16_t* out = p.out + (t * H + h) * kDv;
        for (int e = 0; e < kDv; ++e) out[e] = f32_to_bf16_rne(row.normalize(acc[e]));
        p.lse[t * H + h] = row.lse();
      }
    }
  }
}

}  // namespace mla::host
