#include "kernels/kernel_policy.h"

#include <string>

namespace mla {
namespace {

// One enum's names, in the order of its enumerators.
template <typename E, int N>
struct Names {
  const char* what;  // for errors: "sparse MQA implementation"
  const char* names[N];

  const char* of(E v) const {
    const int i = static_cast<int>(v);
    return i >= 0 && i < N ? names[i] : "?";
  }

  Status parse(std::string_view text, E* out) const {
    for (int i = 0; i < N; ++i) {
      if (text == names[i]) {
        *out = static_cast<E>(i);
        return Status();
      }
    }
    std::string expected;
    for (int i = 0; i < N; ++i) {
      expected += std::string(i == 0 ? "" : (i + 1 == N ? " or " : ", ")) + "'" + names[i] + "'";
    }
    return Status::error("unknown " + std::string(what) + " '" + std::string(text) + "' (expected " + expected + ")");
  }
};

constexpr Names<SparseMqaImpl, 5> kSparseNames{"sparse MQA implementation",
                                               {"auto", "crossover", "wgmma", "tc", "simple"}};
constexpr Names<DenseMhaImpl, 3> kDenseNames{"dense MHA implementation", {"wgmma", "tc", "simple"}};
constexpr Names<DenseWgmmaSchedule, 2> kScheduleNames{"dense wgmma schedule", {"persistent", "grid"}};
constexpr Names<DenseWgmmaDebug, 3> kDebugNames{"dense wgmma debug output", {"off", "scores", "values"}};

static_assert(static_cast<int>(SparseMqaImpl::kSimple) == 4 && static_cast<int>(DenseMhaImpl::kSimple) == 2 &&
                  static_cast<int>(DenseWgmmaSchedule::kGrid) == 1 && static_cast<int>(DenseWgmmaDebug::kValues) == 2,
              "the name tables follow the enumerators' order");

}  // namespace

const char* to_string(SparseMqaImpl v) { return kSparseNames.of(v); }
const char* to_string(DenseMhaImpl v) { return kDenseNames.of(v); }
const char* to_string(DenseWgmmaSchedule v) { return kScheduleNames.of(v); }
const char* to_string(DenseWgmmaDebug v) { return kDebugNames.of(v); }

Status parse(std::string_view text, SparseMqaImpl* out) { return kSparseNames.parse(text, out); }
Status parse(std::string_view text, DenseMhaImpl* out) { return kDenseNames.parse(text, out); }
Status parse(std::string_view text, DenseWgmmaSchedule* out) { return kScheduleNames.parse(text, out); }
Status parse(std::string_view text, DenseWgmmaDebug* out) { return kDebugNames.parse(text, out); }

std::string describe(const KernelPolicy& p) {
  return std::string("sparse_mqa=") + to_string(p.sparse_mqa) + " dense_mha=" + to_string(p.dense_mha) +
         " dense_wgmma_schedule=" + to_string(p.dense_wgmma_schedule) +
         " dense_wgmma_debug=" + to_string(p.dense_wgmma_debug) + " dense_wgmma_max_ctas=" +
         (p.dense_wgmma_max_ctas > 0 ? std::to_string(p.dense_wgmma_max_ctas) : std::string("none")) +
         " sync_each=" + (p.sync_each ? "1" : "0");
}

std::string describe(const KernelPolicy& policy, SparseMqaImpl sparse_runs, DenseMhaImpl dense_runs) {
  KernelPolicy runs = policy;
  runs.sparse_mqa = sparse_runs;
  runs.dense_mha = dense_runs;
  std::string text = describe(runs);
  if (sparse_runs != policy.sparse_mqa) text += std::string(" sparse_mqa_requested=") + to_string(policy.sparse_mqa);
  if (dense_runs != policy.dense_mha) text += std::string(" dense_mha_requested=") + to_string(policy.dense_mha);
  return text;
}

}  // namespace mla
