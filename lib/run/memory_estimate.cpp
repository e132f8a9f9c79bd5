#include "lib/run/memory_estimate.h"

#include <algorithm>
#include <cstdio>
#include <fstream>
#include <limits>
#include <sstream>

#include "lib/checks/kv_cache_spec.h"

namespace mla {

namespace {

// Sizes are added in double (exact to 2^53 bytes, and no wrap-around past 2^64) and saturated
// when converted back.
std::uint64_t saturate(double bytes) {
  constexpr double kMax = static_cast<double>(std::numeric_limits<std::uint64_t>::max());
  if (!(bytes > 0.0)) return 0;
  return bytes >= kMax ? std::numeric_limits<std::uint64_t>::max() : static_cast<std::uint64_t>(bytes);
}

struct Need {
  double host = 0.0, backend = 0.0;
};

// Bytes per element and per row of the buffers the checks hand to the backend.
constexpr double kBf16 = 2.0, kF32 = 4.0, kF64 = 8.0, kI32 = 4.0, kI64 = 8.0;
constexpr double kEntry = 656.0;             // an fp8_ds_mla cache entry
constexpr double kLatent = 576.0;            // 512 nope + 64 rope dims
constexpr double kNope = 512.0, kRope = 64.0, kHeadQk = 192.0, kHeadV = 128.0, kHeadNope = 128.0;

// The process's own working memory besides the buffers counted: the reference's temporaries, the
// allocator's slack, per-check vectors of a few bytes per token (measured: up to ~30 MB on the
// shipped scenarios).
constexpr double kProcessAllowance = 64.0 * 1024 * 1024;

}  // namespace

MemoryEstimate estimate_memory(const Scenario& s) {
  const double B = std::max(1, s.model.block_size), H = s.model.heads, K = s.model.topk;
  double S = 0.0, T = 0.0, pages = 0.0, widest = 0.0;
  for (size_t r = 0; r < s.batch.seq_lens.size(); ++r) {
    const double seq = std::max(0, s.batch.seq_lens[r]);
    S += seq;
    const double p = static_cast<double>((static_cast<int64_t>(seq) + s.model.block_size - 1) / std::max(1, s.model.block_size));
    pages += p;
    widest = std::max(widest, p);
    if (r < s.batch.query_lens.size()) T += std::max(0, s.batch.query_lens[r]);
  }
  const double R = static_cast<double>(s.batch.seq_lens.size());
  const double blocks = s.cache.num_blocks > 0 ? static_cast<double>(s.cache.num_blocks)
                                               : pages + static_cast<double>(std::max<int64_t>(0, s.cache.spare_blocks));
  const double C = blocks * (B * kEntry + static_cast<double>(std::max<int64_t>(0, s.cache.page_padding_bytes)));
  const double table = kI32 * R * (widest + std::max(0, s.block_table.extra_columns) + std::max(0, s.block_table.stride_padding));
  const bool ds_mla = canonical_sparse_cache_dtype(s.cache.dtype).value_or("") == "fp8_ds_mla";
  const bool attention = ds_mla && std::any_of(s.checks.begin(), s.checks.end(), is_attention_check);

  // Kept for the whole run: the batch (every cached token's slot, the block table, per new token
  // its request and position), the generated rows of every cached token (kv_c and k_pe, bf16) and
  // the reference's cache, and the attention inputs (W_UK and W_UV, the queries, the top-k
  // positions, the new tokens' rows, the context cache and its rows while it is packed).
  Need base;
  base.host = kI64 * S + table + 2 * kI32 * T;
  if (ds_mla) base.host += kBf16 * kLatent * S + C;
  if (attention) {
    base.host += 2 * H * kHeadNope * kNope * kBf16 + kBf16 * kHeadQk * T * H + kI32 * T * K +
                 (kBf16 * kLatent + kI64) * T + C + kBf16 * kLatent * S;
  }

  // Each check's own buffers: backend = what it hands to the backend; host = its host copies of
  // the inputs, the downloads and the reference's arrays.
  const Need pack{2 * (kBf16 * kLatent + kI64) * S + C, (kBf16 * kLatent + kI64) * S + C};
  double gather_rows = 0.0;
  for (const GatherCase& g : s.gathers) {
    const double rows = g.chunked_context_rows ? std::min(S, static_cast<double>(*g.chunked_context_rows) * R)
                                               : static_cast<double>(g.num_rows);
    gather_rows = std::max(gather_rows, rows);
  }
  const Need gather{C + 2 * kBf16 * kLatent * gather_rows + kF64 * kLatent * gather_rows,
                    C + kBf16 * kLatent * gather_rows + table};
  const Need convert{3 * kI32 * T * K * 2 + kI64 * T * K, 3 * kI32 * T * K + table};
  const Need layout{2 * C, C};
  // Sparse MQA over the T new tokens: the absorbed query (double, then bf16 in two parts), its
  // widened copy for the reference, indices, the cache; out [T, H, 512] bf16 and lse; the
  // reference's and the downloaded output in double.
  const double sparse_in = kBf16 * kLatent * T * H + kI32 * T * K + C;
  const double sparse_out = (kBf16 * kNope + kF32) * T * H;
  const Need sparse{kF64 * kLatent * T * H * 2 + kBf16 * kLatent * T * H * 2 + sparse_in + sparse_out +
                        2 * kF64 * kNope * T * H + kI32 * T * K,
                    sparse_in + sparse_out};
  // Dense MHA, causal over every cached token: per-head keys and values of S tokens (bf16), the
  // reference's q and k in double [.., H, 192] and v widened.
  const double dense_in = kBf16 * kHeadQk * T * H + kBf16 * (kHeadNope + kHeadV) * S * H + kBf16 * kRope * S;
  const double dense_out = (kBf16 * kHeadV + kF32) * T * H;
  const Need dense{2 * dense_in + dense_out + kF64 * kHeadQk * (T + S) * H + kF64 * kHeadV * S * H +
                       2 * kF64 * kHeadV * T * H,
                   dense_in + dense_out};
  // The forward step and the equivalence check run both routes; DCP adds the ranks' caches;
  // determinism runs the sparse kernel twice.
  const Need both{dense.host + sparse.host, dense.backend + sparse.backend + C};
  const Need dcp{sparse.host + 2 * C, sparse.backend + C};
  const Need twice{2 * sparse.host, 2 * sparse.backend};

  Need largest;
  auto take = [&](const Need& n) {
    largest.host = std::max(largest.host, n.host);
    largest.backend = std::max(largest.backend, n.backend);
  };
  for (CheckKind k : s.checks) {
    const bool cache_check = k != CheckKind::kConvert && k != CheckKind::kLayout;
    if (cache_check && !ds_mla) continue;  // skipped: allocates nothing
    switch (k) {
      case CheckKind::kPack: take(pack); break;
      case CheckKind::kGather: take(gather); break;
      case CheckKind::kConvert: take(convert); break;
      case CheckKind::kLayout: take(layout); break;
      case CheckKind::kSparseMqa: take(sparse); break;
      case CheckKind::kDenseMha: take(dense); break;
      case CheckKind::kForward:
      case CheckKind::kEquivalence: take(both); break;
      case CheckKind::kDcp: take(dcp); break;
      case CheckKind::kDeterminism: take(twice); break;
      case CheckKind::kDrift: take(both); break;  // both routes, one layer's buffers at a time
      case CheckKind::kMerge: break;               // a few hundred rows
    }
  }
  MemoryEstimate e;
  e.host_bytes = saturate(kProcessAllowance + base.host + largest.host);
  e.backend_bytes = saturate(largest.backend);
  return e;
}

std::optional<std::uint64_t> host_memory_available() {
  std::ifstream in("/proc/meminfo");
  for (std::string line; std::getline(in, line);) {
    if (line.rfind("MemAvailable:", 0) != 0) continue;
    std::istringstream fields(line.substr(13));
    std::uint64_t kib = 0;
    std::string unit;
    if (fields >> kib >> unit && unit == "kB") return kib * 1024;
    return std::nullopt;
  }
  return std::nullopt;
}

std::string format_bytes(std::uint64_t bytes) {
  char buf[64];
  const double b = static_cast<double>(bytes);
  if (b >= 1024.0 * 1024 * 1024) {
    std::snprintf(buf, sizeof buf, "%.1f GiB", b / (1024.0 * 1024 * 1024));
  } else if (b >= 1024.0 * 1024) {
    std::snprintf(buf, sizeof buf, "%.1f MiB", b / (1024.0 * 1024));
  } else if (b >= 1024.0) {
    std::snprintf(buf, sizeof buf, "%.1f KiB", b / 1024.0);
  } else {
    std::snprintf(buf, sizeof buf, "%llu bytes", static_cast<unsigned long long>(bytes));
  }
  return buf;
}

std::string memory_refusal(const Scenario& s, const MemoryEstimate& need, bool backend_on_host,
                           std::optional<std::uint64_t> host_available,
                           std::optional<std::uint64_t> device_available) {
  const std::uint64_t host_need =
      backend_on_host ? saturate(static_cast<double>(need.host_bytes) + static_cast<double>(need.backend_bytes))
                      : need.host_bytes;
  const std::string who = s.file + ": scenario '" + s.name + "' needs about ";
  if (host_available && host_need > *host_available) {
    return who + format_bytes(host_need) + " of host memory (" + std::to_string(host_need) + " bytes) but " +
           format_bytes(*host_available) + " (" + std::to_string(*host_available) +
           " bytes) is available (MemAvailable of /proc/meminfo); make its batch smaller";
  }
  if (!backend_on_host && device_available && need.backend_bytes > *device_available) {
    return who + format_bytes(need.backend_bytes) + " of device memory (" + std::to_string(need.backend_bytes) +
           " bytes) but the device has " + format_bytes(*device_available) + " (" + std::to_string(*device_available) +
           " bytes) free; make its batch smaller";
  }
  return "";
}

}  // namespace mla
