// launch_sparse_mqa (sparse_mqa_launcher.h): validation, the choice between the implementations
// (sparse_mqa_impls.h), the kernels' argument block and grid, then the combine step.
#include "kernels/cuda/sparse_mqa/sparse_mqa_launcher.h"

#include <cstdint>
#include <string>

#include "kernels/cuda/common/cuda_check.h"
#include "kernels/cuda/common/device_io.cuh"
#include "kernels/cuda/common/launch_limits.h"
#include "kernels/cuda/sparse_mqa/sparse_mqa_config.h"
#include "kernels/cuda/sparse_mqa/sparse_mqa_device.cuh"
#include "kernels/cuda/sparse_mqa/sparse_mqa_impls.h"

namespace mla {
namespace {

using cuda_io::aligned_to;

// Whether `num_heads` makes an even number of 64-head groups: the crossover kernel's clusters pair
// the two adjacent CTAs of one work item.
bool heads_fit_crossover(int32_t num_heads) {
  return ((num_heads + sparse_dev::kCrossoverHeads - 1) / sparse_dev::kCrossoverHeads) % 2 == 0;
}

// What runs for `requested` on `device` (`optin` bytes of shared memory per block) with inputs
// that are (not) `aligned` (inputs_aligned), `num_heads` heads and top-k `topk` (both 0: a shape
// whose head groups come in pairs and whose top-k is at least kCrossoverAutoMinTopk, for the
// answer that does not depend on the shape).
SparseMqaImpl choose_impl(SparseMqaImpl requested, bool aligned, int device, int optin, int32_t num_heads,
                          int32_t topk) {
  if (requested == SparseMqaImpl::kAuto) {
    requested = heads_fit_crossover(num_heads) && (topk == 0 || topk >= sparse_dev::kCrossoverAutoMinTopk)
                    ? SparseMqaImpl::kCrossover
                    : SparseMqaImpl::kWgmma;
  }
#if MLA_HAVE_WGMMA
  if (requested == SparseMqaImpl::kCrossover && aligned && heads_fit_crossover(num_heads) &&
      optin >= sparse_crossover::smem_bytes() && sparse_crossover::runs_on(device)) {
    return SparseMqaImpl::kCrossover;
  }
  if ((requested == SparseMqaImpl::kCrossover || requested == SparseMqaImpl::kWgmma) && aligned &&
      optin >= sparse_wgmma::smem_bytes() && sparse_wgmma::runs_on(device)) {
    return SparseMqaImpl::kWgmma;
  }
#else
  (void)device;
  (void)num_heads;
#endif
  return requested != SparseMqaImpl::kSimple && aligned && optin >= sparse_tc::smem_bytes() ? SparseMqaImpl::kTc
                                                                                            : SparseMqaImpl::kSimple;
}

// The alignment the cp.async kernels need (choose_impl).
bool cache_aligned(const SparseMqaParams& p) { return aligned_to(p.cache.data, 16) && p.cache.page_stride_bytes % 16 == 0; }
bool inputs_aligned(const SparseMqaParams& p) {
  return cache_aligned(p) && aligned_to(p.out_lat, 4) && aligned_to(p.partial_out, 8);
}

Status chosen(SparseMqaImpl requested, bool aligned, int32_t num_heads, int32_t topk, int device,
              SparseMqaImpl* runs) {
  int optin = 0;
  MLA_RETURN_IF_ERROR(smem_optin(device, &optin));
  *runs = choose_impl(requested, aligned, device, optin, num_heads, topk);
  return Status();
}

}  // namespace

Status launch_sparse_mqa(const SparseMqaParams& p, SparseMqaImpl requested, cudaStream_t stream) {
  MLA_RETURN_IF_ERROR(p.validate());
  const SparseMqaMetadata& md = p.metadata;
  if (md.num_items == 0 && md.num_tokens_planned == 0) return Status();

  sparse_dev::SparseArgs args{};
  args.q_nope = p.q_nope_lat;
  args.q_nope_ts = p.q_nope_token_stride;
  args.q_nope_hs = p.q_nope_head_stride;
  args.q_pe = p.q_pe;
  args.q_pe_ts = p.q_pe_token_stride;
  args.q_pe_hs = p.q_pe_head_stride;
  args.num_heads = p.num_heads;
  args.indices = p.indices;
  args.indices_row_stride = p.indices_row_stride;
  args.topk = p.topk;
  args.cache = p.cache.data;
  args.num_slots = p.cache.num_slots();
  args.block_size = p.cache.block_size;
  args.page_stride = p.cache.page_stride_bytes;
  args.scale = p.scale;
  args.out_lat = p.out_lat;
  args.lse = p.lse;
  args.items = md.items;
  args.partial_out = p.partial_out;
  args.partial_lse = p.partial_lse;
  args.q_vec = aligned_to(p.q_nope_lat, 16) && aligned_to(p.q_pe, 16) && p.q_nope_token_stride % 8 == 0 &&
               p.q_nope_head_stride % 8 == 0 && p.q_pe_token_stride % 8 == 0 && p.q_pe_head_stride % 8 == 0;

  if (md.num_items > 0) {
    int device = 0, optin = 0;
    MLA_RETURN_IF_ERROR(current_device_smem_optin(&device, &optin));
    const SparseMqaImpl runs = choose_impl(requested, inputs_aligned(p), device, optin, p.num_heads, p.topk);
    const int heads_per_cta = runs == SparseMqaImpl::kCrossover ? sparse_dev::kCrossoverHeads
                              : runs == SparseMqaImpl::kWgmma   ? sparse_dev::kWgmmaHeads
                              : runs == SparseMqaImpl::kTc      ? sparse_dev::kTcHeads
                                                                : sparse_dev::kSimpleHeads;
    args.head_groups = (p.num_heads + heads_per_cta - 1) / heads_per_cta;
    const int64_t blocks = static_cast<int64_t>(md.num_items) * args.head_groups;
    MLA_RETURN_IF_ERROR(require_grid_x("launch_sparse_mqa", blocks));
    args.blocks = static_cast<int32_t>(blocks);
    const dim3 grid(static_cast<unsigned>(blocks));
    if (runs == SparseMqaImpl::kCrossover) {
#if MLA_HAVE_WGMMA
      MLA_RETURN_IF_ERROR(sparse_crossover::launch(args, grid, stream));
#endif
    } else if (runs == SparseMqaImpl::kWgmma) {
#if MLA_HAVE_WGMMA
      MLA_RETURN_IF_ERROR(sparse_wgmma::launch(args, grid, stream));
#endif
    } else if (runs == SparseMqaImpl::kTc) {
      MLA_RETURN_IF_ERROR(sparse_tc::launch(args, grid, stream));
    } else {
      MLA_RETURN_IF_ERROR(require_simple_smem("launch_sparse_mqa", optin, sparse_simple::smem_bytes()));
      MLA_RETURN_IF_ERROR(sparse_simple::launch(args, grid, cache_aligned(p), stream));
    }
  }

  if (md.num_tokens_planned > 0) MLA_RETURN_IF_ERROR(sparse_combine::launch(p, stream));
  return Status();
}

Status sparse_mqa_implementation(SparseMqaImpl requested, int device, SparseMqaImpl* runs) {
  return chosen(requested, /*aligned=*/true, /*num_heads=*/0, /*topk=*/0, device, runs);
}

Status sparse_mqa_implementation_for(const SparseMqaParams& p, SparseMqaImpl requested, int device,
                                     SparseMqaImpl* runs) {
  return chosen(requested, inputs_aligned(p), p.num_heads, p.topk, device, runs);
}

}  // namespace mla
