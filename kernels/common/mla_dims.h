// The model dimensions of DeepSeek-style MLA that every kernel, the host backend and lib/ share
// (docs/semantics.md §1, §4). The reference (reference/) keeps its own constants on purpose.
//   sparse MQA (decode):  q = [q_nope_lat (kDc), q_pe (kDr)] per head, keys = the kDl-wide
//                         dequantized cache rows, values = their first kDc elements;
//   dense MHA (prefill):  q = [q_nope (kDn), q_pe (kDr)], k = [k_nope (kDn), k_pe (kDr)] (kDqk
//                         wide), v (kDv).
// The fp8_ds_mla entry's byte layout is built on these in kernels/common/ds_mla_entry.h.
#pragma once

namespace mla {

inline constexpr int kDc = 512;          // latent (NoPE) width: kv_c, q_nope_lat, out_lat
inline constexpr int kDr = 64;           // RoPE width: k_pe, q_pe
inline constexpr int kDl = kDc + kDr;    // 576: a dequantized cache row, a sparse MQA key
inline constexpr int kDn = 128;          // dense MHA q / k NoPE head width
inline constexpr int kDv = 128;          // dense MHA value head width
inline constexpr int kDqk = kDn + kDr;   // 192: dense MHA q / k head width

static_assert(kDc == 512 && kDr == 64 && kDl == 576, "DeepSeek MLA latent dims");
static_assert(kDn == 128 && kDv == 128 && kDqk == 192, "DeepSeek MLA prefill head dims");

}  // namespace mla
