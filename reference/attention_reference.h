// The independent attention reference (docs/semantics.md §4-§5), in double, written from the
// definitions and sharing nothing with kernels/. Plain host containers in the API, every one
// row-major and contiguous with its shape documented; Eigen inside.
//
// Numbers: bf16 inputs are decoded exactly (reference/cache_reference.h bf16_value), cache keys are
// the exact values of dequant_entry (bf16 results of docs/semantics.md §1.2), everything after that is double.
// Softmax is evaluated max-subtracted: p_j = exp(s_j - m) / sum exp(s_i - m), lse = m + ln sum
// exp(s_i - m) (natural log). A row that sees no key has out = 0 and lse = -inf (the identity of
// the log-sum-exp merge; FlashMLA itself reports +inf there). A row whose scores contain a NaN or
// an infinity (a stray NaN/inf key or query) is NaN in every output element and in its lse, so it
// shows in a comparison instead of vanishing.
//
// Determinism: the same call gives the same bits; a token's result may differ in the last bits of
// double between calls that batch it with different other tokens (blocked matrix products).
//
// Errors: shapes that do not add up, non-monotonic cu_seqlens, a cache smaller than its geometry
// and similar contract violations of the caller throw std::invalid_argument with a message naming
// the function and the rule. Data-dependent invalidity that docs/semantics.md defines (an index outside the
// cache, -1 padding) is semantics, not an error.
#pragma once

#include <cstdint>
#include <vector>

#include "reference/cache_reference.h"

namespace mla::ref {

// Widths (docs/semantics.md §0) not already named by cache_reference.h (kNope = Dc = 512, kRope = Dr = 64,
// kLatent = Dl = 576).
inline constexpr int kHeadNope = 128;                 // Dn
inline constexpr int kHeadValue = 128;                // Dv
inline constexpr int kHeadQk = kHeadNope + kRope;     // 192
inline constexpr int64_t kWeightPerHead = static_cast<int64_t>(kHeadNope) * kNope;  // 128 * 512

// An attention output and its log-sum-exp.
struct AttentionResult {
  std::vector<double> out;  // [rows, H, width] (width named by the producing function)
  std::vector<double> lse;  // [rows, H], natural log; -inf = no key seen
};

// --- Small helpers ---------------------------------------------------------------------------

// Exact values of bf16 bit patterns, element by element (same length as bits).
std::vector<double> bf16_to_double(const std::vector<uint16_t>& bits);

// The dequantized 576-wide cache entries (docs/semantics.md §1.2; dequant_entry with `rounding`) of `slots`, as
// exact doubles: [n, 576] with n = slots.size(). Slot s lives in block s / B at offset s % B (byte
// block * page_stride + offset * 656). Throws when a slot is outside [0, num_blocks * block_size).
std::vector<double> dequant_slots(const std::vector<uint8_t>& cache, const CacheGeometry& geo,
                                  const std::vector<int64_t>& slots, ScaleRounding rounding = ScaleRounding::kF32);

// Number of heads of a weight tensor [H, 128, 512] (its size / 65536); throws unless it is a
// positive whole number of heads.
int32_t heads_of_weights(const std::vector<uint16_t>& w, const char* who);

// --- docs/semantics.md §4.1: sparse MQA in latent space ("absorbed") ----------------------------------------

// q_lat[t,h] = [ W_UK[h]^T q_nope[t,h] (512), q_pe[t,h] (64) ]:
//   q_lat[t,h,c]       = sum_d W_UK[h][d][c] * q_nope[t,h,d]   for c < 512,
//   q_lat[t,h,512 + r] = q_pe[t,h,r].
// q_nope: bf16 [T, H, 128]; q_pe: bf16 [T, H, 64]; w_uk: bf16 [H, 128, 512] (W_UK[h] is
// [Dn, Dc] row-major). H comes from w_uk, T from q_nope. Returns double [T, H, 576]. No rounding
// to bf16 (the kernels round q_lat to bf16; the reference does not).
std::vector<double> absorb_q(const std::vector<uint16_t>& q_nope, const std::vector<uint16_t>& q_pe,
                             const std::vector<uint16_t>& w_uk);

// For token t, head h: index j of row t is valid iff 0 <= indices[t][j] < num_blocks * block_size
// (a global slot; anything else, -1 padding included, is skipped). Keys k_j = dequantized entry
// (576), values v_j = its first 512 elements. s_j = scale * q_lat[t,h] . k_j over valid j;
// out_lat[t,h] = sum_j softmax(s)_j v_j; lse[t,h] = ln sum_j exp(s_j). Duplicated slots count once
// per occurrence (as a kernel reading each index would). No valid index: out 0, lse -inf.
// q_lat: double [T, num_heads, 576] (T = q_lat.size() / (num_heads * 576)); indices: int32
// [T, topk]; cache: the paged cache bytes [num_blocks, page_stride] (size >= geo.bytes()).
// `rounding`: how the entries are dequantized (kF32: docs/semantics.md §1.2; kBf16: as an
// implementation that declares it reads them, §4.1).
// Returns out double [T, num_heads, 512], lse [T, num_heads].
AttentionResult sparse_mqa(const std::vector<double>& q_lat, int32_t num_heads, const std::vector<int32_t>& indices,
                           int32_t topk, const std::vector<uint8_t>& cache, const CacheGeometry& geo, double scale,
                           ScaleRounding rounding = ScaleRounding::kF32);

// out[t,h] = W_UV[h] out_lat[t,h]: out[t,h,d] = sum_c W_UV[h][d][c] * out_lat[t,h,c].
// out_lat: double [T, H, 512]; w_uv: bf16 [H, 128, 512] (W_UV[h] is [Dv, Dc] row-major); H from
// w_uv. Returns double [T, H, 128].
std::vector<double> project_out(const std::vector<double>& out_lat, const std::vector<uint16_t>& w_uv);

// --- docs/semantics.md §4.2: dense MHA ("compute-friendly") -------------------------------------------------

struct UpProjected {
  std::vector<double> k;  // [N, H, 192]: [ W_UK[h] kv_c[n] (128), k_pe[n] (64, the same for all heads) ]
  std::vector<double> v;  // [N, H, 128]: W_UV[h] kv_c[n]
};
// k[n,h,d] = sum_c W_UK[h][d][c] * kv_c[n,c] (d < 128), k[n,h,128 + r] = k_pe[n,r],
// v[n,h,d] = sum_c W_UV[h][d][c] * kv_c[n,c].
// kv_c: double [N, 512]; k_pe: double [N, 64] (bf16 values through bf16_to_double, or dequantized
// cache values from dequant_slots: columns [0, 512) and [512, 576) of its rows); w_uk, w_uv: bf16
// [H, 128, 512].
UpProjected up_project(const std::vector<double>& kv_c, const std::vector<double>& k_pe,
                       const std::vector<uint16_t>& w_uk, const std::vector<uint16_t>& w_uv);

// Varlen attention. Request r has queries [cu_q[r], cu_q[r+1]) and keys [cu_k[r], cu_k[r+1]);
// with nq, nk its counts, query i (0-based within the request) sees key j (0-based) iff
// j <= i + (nk - nq) when causal (bottom-right alignment; nq > nk is allowed, its first nq - nk
// queries see nothing), every key otherwise. s = scale * q . k (192 wide); out = softmax(s) v;
// lse = ln sum exp(s). No visible key: out 0, lse -inf.
// q: double [Tq, num_heads, 192]; k: double [Tk, num_heads, 192]; v: double [Tk, num_heads, 128];
// cu_q, cu_k: int32 [R + 1], cu[0] == 0, non-decreasing, cu_q[R] == Tq, cu_k[R] == Tk.
// Returns out double [Tq, num_heads, 128], lse [Tq, num_heads].
AttentionResult dense_mha(const std::vector<double>& q, const std::vector<double>& k, const std::vector<double>& v,
                          int32_t num_heads, const std::vector<int32_t>& cu_q, const std::vector<int32_t>& cu_k,
                          bool causal, double scale);

// --- LSE merges --------------------------------------------------------------------------------

// docs/semantics.md §4.2 merge of two partial attentions over the same rows (a row = one (token, head) pair).
// NaN and +inf LSEs are treated as -inf (the "no key" markers of other conventions). With
// m = max(a, b): out = (e^{a-m} out_a + e^{b-m} out_b) / (e^{a-m} + e^{b-m}), lse = m + ln(e^{a-m} +
// e^{b-m}); a side whose LSE is -inf contributes nothing (its out is not read, so a poisoned out
// there does not leak). Both -inf: out = out_a (copied as is), lse = -inf.
// out_a, out_b: double [rows, width]; lse_a, lse_b: double [rows] (rows = lse_a.size()).
AttentionResult merge_lse(const std::vector<double>& out_a, const std::vector<double>& lse_a,
                          const std::vector<double>& out_b, const std::vector<double>& lse_b, int32_t width);

// docs/semantics.md §5 merge of any number of partial attentions over the same rows (the DCP merge):
// L = logsumexp_r(lse_r), out = sum_r exp(lse_r - L) out_r, NaN/+inf LSEs treated as -inf; a part
// whose LSE is -inf contributes nothing. Every part -inf: out = 0, lse = -inf. parts: at least one,
// each out [rows, width] and lse [rows] with the same rows.
AttentionResult merge_many(const std::vector<AttentionResult>& parts, int32_t width);

// --- docs/semantics.md §3/5: decode context parallelism -------------------------------------------------------

// Owner rank of request-local position pos (>= 0): (pos / interleave) % world.
int32_t dcp_owner(int64_t pos, int32_t world, int32_t interleave);
// Rank-local position of pos on its owner: (pos / (world * interleave)) * interleave + pos % interleave.
int64_t dcp_local_position(int64_t pos, int32_t world, int32_t interleave);
// positions: int32 [rows, cols] request-local (any shape; element-wise). Returns the same shape
// with the entries owned by `rank` kept (still global request-local positions) and every other
// entry (negative ones included) set to -1.
std::vector<int32_t> dcp_owned_positions(const std::vector<int32_t>& positions, int32_t world, int32_t rank,
                                         int32_t interleave);

// One DCP rank's share of the cache: its own pool and a block table that maps rank-local
// positions (dcp_local_position) of each request.
struct DcpRankCache {
  const std::vector<uint8_t>* cache = nullptr;  // not owned; [num_blocks, page_stride] bytes
  CacheGeometry geometry;                       // block_size must be a multiple of the interleave
  BlockTable block_table;                       // [R, width], rank-local logical blocks
};
struct DcpResult {
  std::vector<AttentionResult> per_rank;  // rank rho: out_lat [T, H, 512], lse [T, H] over its owned positions
  AttentionResult merged;                 // merge_many(per_rank, 512)
};
// docs/semantics.md §5 for sparse MQA: every rank rho attends, with all heads, over the selected positions it
// owns (converted with ref::convert's DCP rules: owned -> rank-local position -> its block table;
// non-owned or invalid -> skipped), then the parts are merged. A rank owning none of a token's
// positions gives 0, -inf for it. The merged result equals sparse_mqa over the single-rank cache.
// q_lat: double [T, num_heads, 576]; req_id: int32 [T]; positions: int32 [T, topk] request-local,
// -1 padded; ranks.size() = world size (>= 1).
DcpResult sparse_mqa_dcp(const std::vector<double>& q_lat, int32_t num_heads, const std::vector<int32_t>& req_id,
                         const std::vector<int32_t>& positions, int32_t topk, const std::vector<DcpRankCache>& ranks,
                         int32_t interleave, double scale);

}  // namespace mla::ref
