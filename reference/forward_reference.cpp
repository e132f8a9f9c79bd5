// The whole attention step (docs/semantics.md §4.3, 4.4) in double. See forward_reference.h for the contract.
#include "reference/forward_reference.h"

#include <algorithm>
#include <stdexcept>
#include <string>

namespace mla::ref {
namespace {

void require(bool ok, const std::string& message) {
  if (!ok) throw std::invalid_argument(message);
}

size_t sz(int64_t v) { return static_cast<size_t>(v); }

// Copies rows `rows` (each `width` wide) of src into a new [rows.size(), width] container.
template <typename T>
std::vector<T> take_rows(const std::vector<T>& src, const std::vector<int64_t>& rows, int64_t width) {
  std::vector<T> out(rows.size() * sz(width));
  for (size_t i = 0; i < rows.size(); ++i)
    std::copy_n(src.begin() + static_cast<std::ptrdiff_t>(rows[i] * width), width,
                out.begin() + static_cast<std::ptrdiff_t>(i * sz(width)));
  return out;
}

// Writes row i of src ([rows.size(), width]) to row rows[i] of dst.
void put_rows(const std::vector<double>& src, const std::vector<int64_t>& rows, int64_t width,
              std::vector<double>& dst) {
  for (size_t i = 0; i < rows.size(); ++i)
    std::copy_n(src.begin() + static_cast<std::ptrdiff_t>(i * sz(width)), width,
                dst.begin() + static_cast<std::ptrdiff_t>(rows[i] * width));
}

// Slot of position p of request r for the dense route; every such position must be in the pool.
int64_t dense_slot(const ForwardInputs& in, int32_t r, int64_t p) {
  const int32_t B = in.geometry.block_size;
  const int64_t logical = p / B;
  const std::string where = "forward: dense route: position " + std::to_string(p) + " of request " + std::to_string(r);
  require(logical < in.block_table.width, where + " is past the block-table width");
  const int64_t phys = in.block_table.at(r, logical);
  require(phys >= 0 && phys < in.geometry.num_blocks, where + " maps to physical block " + std::to_string(phys) +
                                                           " outside [0, num_blocks)");
  return phys * B + p % B;
}

}  // namespace

int32_t count_decode_requests(const std::vector<int32_t>& query_len, int32_t threshold) {
  if (query_len.empty()) return 0;
  const int32_t first = query_len.front();
  if (first < 1 || first > threshold) return 0;
  const auto end = std::find_if(query_len.begin(), query_len.end(), [first](int32_t q) { return q != first; });
  return static_cast<int32_t>(end - query_len.begin());
}

bool prefills_go_dense(const std::vector<int32_t>& seq_len, int32_t num_decodes, int32_t topk, bool force_sparse) {
  require(num_decodes >= 0 && sz(num_decodes) <= seq_len.size(), "prefills_go_dense: num_decodes outside [0, R]");
  if (force_sparse) return false;
  return std::all_of(seq_len.begin() + num_decodes, seq_len.end(), [topk](int32_t s) { return s <= topk; });
}

ForwardOutputs forward(const ForwardInputs& in, const std::vector<uint8_t>& cache) {
  // --- Validate the batch ---------------------------------------------------------------------
  const auto R = static_cast<int32_t>(in.seq_len.size());
  require(in.query_len.size() == in.seq_len.size(), "forward: query_len and seq_len differ in length");
  require(in.num_decodes >= 0 && in.num_decodes <= R, "forward: num_decodes outside [0, R]");
  std::vector<int64_t> cu_q(sz(R) + 1, 0), kv_row0(sz(R) + 1, 0);
  for (int32_t r = 0; r < R; ++r) {
    require(in.query_len[sz(r)] >= 0 && in.seq_len[sz(r)] >= in.query_len[sz(r)],
            "forward: request " + std::to_string(r) + " needs 0 <= query_len <= seq_len");
    cu_q[sz(r) + 1] = cu_q[sz(r)] + in.query_len[sz(r)];
    kv_row0[sz(r) + 1] = kv_row0[sz(r)] + in.seq_len[sz(r)];
  }
  const int64_t T = cu_q.back();
  const int64_t total_kv = kv_row0.back();
  require(in.req_id.size() == sz(T) && in.position.size() == sz(T),
          "forward: req_id and position must have one entry per new token (sum of query_len)");
  for (int32_t r = 0; r < R; ++r) {
    const int64_t context = in.seq_len[sz(r)] - in.query_len[sz(r)];
    for (int64_t t = cu_q[sz(r)]; t < cu_q[sz(r) + 1]; ++t)
      require(in.req_id[sz(t)] == r && in.position[sz(t)] == context + (t - cu_q[sz(r)]),
              "forward: token " + std::to_string(t) +
                  " is out of batch order (tokens of request r must be consecutive, positions context_len .. seq_len-1)");
  }
  const int32_t H = in.num_heads;
  require(H >= 1, "forward: num_heads must be >= 1");
  require(in.q_nope.size() == sz(T * H * kHeadNope), "forward: q_nope must be [T, H, 128]");
  require(in.q_pe.size() == sz(T * H * kRope), "forward: q_pe must be [T, H, 64]");
  require(in.w_uk.size() == sz(H * kWeightPerHead) && in.w_uv.size() == sz(H * kWeightPerHead),
          "forward: w_uk and w_uv must be [H, 128, 512]");
  require(in.kv_c.size() == sz(total_kv * kNope) && in.k_pe.size() == sz(total_kv * kRope),
          "forward: kv_c / k_pe must be [sum seq_len, 512] / [sum seq_len, 64]");
  require(in.topk >= 0 && in.topk_positions.size() == sz(T * in.topk), "forward: topk_positions must be [T, topk]");
  require(in.block_table.num_reqs >= R, "forward: block table has fewer rows than requests");

  // --- Route ----------------------------------------------------------------------------------
  ForwardOutputs result;
  result.prefills_dense = prefills_go_dense(in.seq_len, in.num_decodes, in.topk, in.force_sparse);
  result.route.assign(sz(T), Route::kSparse);
  result.out.assign(sz(T * H * kHeadValue), 0.0);
  result.lse.assign(sz(T * H), 0.0);
  std::vector<int64_t> sparse_tokens;
  for (int64_t t = 0; t < T; ++t) {
    if (result.prefills_dense && in.req_id[sz(t)] >= in.num_decodes) result.route[sz(t)] = Route::kDense;
    else sparse_tokens.push_back(t);
  }

  // --- Sparse route: absorb -> sparse MQA over the dequantized cache -> W_UV --------------------
  if (!sparse_tokens.empty()) {
    ConvertInputs ci;
    ci.req_id = take_rows(in.req_id, sparse_tokens, 1);
    ci.indices = take_rows(in.topk_positions, sparse_tokens, in.topk);
    ci.topk = in.topk;
    ci.block_table = in.block_table;
    ci.block_size = in.geometry.block_size;
    const ConvertOutputs slots = convert(ci);
    const std::vector<double> q_lat = absorb_q(take_rows(in.q_nope, sparse_tokens, static_cast<int64_t>(H) * kHeadNope),
                                               take_rows(in.q_pe, sparse_tokens, static_cast<int64_t>(H) * kRope), in.w_uk);
    const AttentionResult lat = sparse_mqa(q_lat, H, slots.out, in.topk, cache, in.geometry, in.scale,
                                           in.sparse_dequant);
    put_rows(project_out(lat.out, in.w_uv), sparse_tokens, static_cast<int64_t>(H) * kHeadValue, result.out);
    put_rows(lat.lse, sparse_tokens, H, result.lse);
  }

  // --- Dense route: per prefill request, one causal softmax over all seq_len positions ----------
  if (result.prefills_dense) {
    const std::vector<double> kv_all = bf16_to_double(in.kv_c);
    const std::vector<double> pe_all = bf16_to_double(in.k_pe);
    const std::vector<double> qn = bf16_to_double(in.q_nope);
    const std::vector<double> qp = bf16_to_double(in.q_pe);
    for (int32_t r = in.num_decodes; r < R; ++r) {
      const int64_t nq = in.query_len[sz(r)];
      if (nq == 0) continue;
      const int64_t s = in.seq_len[sz(r)];
      const int64_t context = s - nq;
      // Positions read from the cache: the context, and the new tokens too with kFromCache.
      const int64_t from_cache = in.new_token_kv == NewTokenKv::kFromCache ? s : context;
      std::vector<int64_t> slots(sz(from_cache));
      for (int64_t p = 0; p < from_cache; ++p) slots[sz(p)] = dense_slot(in, r, p);
      const std::vector<double> cached = dequant_slots(cache, in.geometry, slots);  // [from_cache, 576]
      std::vector<double> kv(sz(s * kNope)), pe(sz(s * kRope));
      for (int64_t p = 0; p < s; ++p) {
        const bool in_cache = p < from_cache;
        const double* src_kv = in_cache ? &cached[sz(p * kLatent)] : &kv_all[sz((kv_row0[sz(r)] + p) * kNope)];
        const double* src_pe = in_cache ? &cached[sz(p * kLatent + kNope)] : &pe_all[sz((kv_row0[sz(r)] + p) * kRope)];
        std::copy_n(src_kv, kNope, &kv[sz(p * kNope)]);
        std::copy_n(src_pe, kRope, &pe[sz(p * kRope)]);
      }
      const UpProjected kvh = up_project(kv, pe, in.w_uk, in.w_uv);

      // q = [q_nope, q_pe] for the request's tokens [cu_q[r], cu_q[r+1]).
      std::vector<double> q(sz(nq * H * kHeadQk));
      for (int64_t i = 0; i < nq; ++i)
        for (int64_t h = 0; h < H; ++h) {
          const int64_t src = (cu_q[sz(r)] + i) * H + h;
          double* dst = &q[sz((i * H + h) * kHeadQk)];
          std::copy_n(&qn[sz(src * kHeadNope)], kHeadNope, dst);
          std::copy_n(&qp[sz(src * kRope)], kRope, dst + kHeadNope);
        }
      // Bottom-right causal over nq queries and s keys: query i sees positions <= context + i.
      const AttentionResult att = dense_mha(q, kvh.k, kvh.v, H, {0, static_cast<int32_t>(nq)},
                                            {0, static_cast<int32_t>(s)}, /*causal=*/true, in.scale);
      std::copy(att.out.begin(), att.out.end(), result.out.begin() + static_cast<std::ptrdiff_t>(cu_q[sz(r)] * H * kHeadValue));
      std::copy(att.lse.begin(), att.lse.end(), result.lse.begin() + static_cast<std::ptrdiff_t>(cu_q[sz(r)] * H));
    }
  }
  return result;
}

}  // namespace mla::ref
