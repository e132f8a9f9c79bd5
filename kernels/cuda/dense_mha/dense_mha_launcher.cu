// launch_dense_mha (dense_mha_launcher.h): validation, the choice between the implementations
// (dense_mha_impls.h), the kernels' argument block, the wgmma kernel's item order and the grid.
#include "kernels/cuda/dense_mha/dense_mha_launcher.h"

#include <algorithm>
#include <cstdint>
#include <string>

#include "kernels/cuda/common/cuda_check.h"
#include "kernels/cuda/common/device_io.cuh"
#include "kernels/cuda/common/launch_limits.h"
#include "kernels/cuda/dense_mha/dense_item_order.h"
#include "kernels/cuda/dense_mha/dense_mha_config.h"
#include "kernels/cuda/dense_mha/dense_mha_impls.h"

namespace mla {
namespace {

using cuda_io::aligned_to;

// What runs for `requested` on `device` (`optin` bytes of shared memory per block) with inputs
// that are (not) `aligned` for the cp.async kernels and an output that is (not) `out_aligned16` for
// wgmma's 16-byte stores: wgmma falls back to tc, tc to simple. *no_wgmma says why wgmma does not
// run (nullptr when it does).
DenseMhaImpl choose_impl(DenseMhaImpl requested, bool aligned, bool out_aligned16, int device, int optin,
                         const char** no_wgmma) {
  *no_wgmma = nullptr;
  if (requested != DenseMhaImpl::kWgmma) {
    *no_wgmma = "the kernel policy selects another implementation";
  } else if (!aligned) {
    *no_wgmma = "an input is not 16-byte aligned or a token stride not a multiple of 8";
  } else if (!out_aligned16) {
    *no_wgmma = "out is not 16-byte aligned";
  } else {
#if MLA_HAVE_WGMMA
    if (optin < dense_wgmma::smem_bytes()) {
      *no_wgmma = "the device's shared memory per block is too small";
    } else if (!dense_wgmma::runs_on(device)) {
      *no_wgmma = "the device is not compute capability 9.0, or the sm_90a kernel does not load there or was "
                  "not given the 168 registers per thread its setmaxnreg budget assumes";
    }
#else
    (void)device;
    *no_wgmma = "not built (the configured CUDA architectures do not include 90)";
#endif
  }
  if (*no_wgmma == nullptr) return DenseMhaImpl::kWgmma;
  return requested != DenseMhaImpl::kSimple && aligned && optin >= dense_tc::smem_bytes() ? DenseMhaImpl::kTc
                                                                                          : DenseMhaImpl::kSimple;
}

// tc: 16-byte cp.async from every input, wgmma: TMA tensor maps over them (16-byte aligned
// pointers, token strides multiples of 16 bytes); tc: 4-byte output stores, wgmma: 16-byte ones.
bool inputs_aligned(const DenseMhaParams& p) {
  return aligned_to(p.q_nope, 16) && aligned_to(p.q_pe, 16) && aligned_to(p.k_nope, 16) && aligned_to(p.k_pe, 16) &&
         aligned_to(p.v, 16) && p.q_nope_stride % 8 == 0 && p.q_pe_stride % 8 == 0 && p.k_nope_stride % 8 == 0 &&
         p.k_pe_stride % 8 == 0 && p.v_stride % 8 == 0 && aligned_to(p.out, 4);
}

Status chosen(DenseMhaImpl requested, bool aligned, bool out_aligned16, int device, DenseMhaImpl* runs) {
  int optin = 0;
  MLA_RETURN_IF_ERROR(smem_optin(device, &optin));
  const char* no_wgmma = nullptr;
  *runs = choose_impl(requested, aligned, out_aligned16, device, optin, &no_wgmma);
  return Status();
}

}  // namespace

Status launch_dense_mha(const DenseMhaParams& p, const KernelPolicy& policy, cudaStream_t stream) {
  MLA_RETURN_IF_ERROR(p.validate());
  if (p.total_q == 0 || p.num_reqs == 0) return Status();
  int64_t max_q = 0;
  for (int32_t r = 0; r < p.num_reqs; ++r) {
    max_q = std::max<int64_t>(max_q, static_cast<int64_t>(p.cu_seqlens_q_host[r + 1]) - p.cu_seqlens_q_host[r]);
  }
  if (max_q == 0) return Status();
  if (p.num_heads > 65535) {
    return Status::error("launch_dense_mha: num_heads " + std::to_string(p.num_heads) + " exceeds the grid's y limit");
  }

  int device = 0, optin = 0;
  MLA_RETURN_IF_ERROR(current_device_smem_optin(&device, &optin));

  DenseArgs args{};
  args.q_nope = p.q_nope;
  args.q_nope_stride = p.q_nope_stride;
  args.q_pe = p.q_pe;
  args.q_pe_stride = p.q_pe_stride;
  args.k_nope = p.k_nope;
  args.k_nope_stride = p.k_nope_stride;
  args.k_pe = p.k_pe;
  args.k_pe_stride = p.k_pe_stride;
  args.v = p.v;
  args.v_stride = p.v_stride;
  args.cu_q = p.cu_seqlens_q;
  args.cu_k = p.cu_seqlens_k;
  args.num_heads = p.num_heads;
  args.total_q = p.total_q;
  args.total_k = p.total_k;
  args.causal = p.causal;
  args.scale = p.scale;
  args.out = p.out;
  args.lse = p.lse;

  const char* no_wgmma = nullptr;
  const DenseMhaImpl runs =
      choose_impl(policy.dense_mha, inputs_aligned(p), aligned_to(p.out, 16), device, optin, &no_wgmma);
  if (policy.dense_wgmma_debug != DenseWgmmaDebug::kNone && runs != DenseMhaImpl::kWgmma) {
    return Status::unsupported(std::string("the dense wgmma debug output (") + to_string(policy.dense_wgmma_debug) +
                               ") needs the wgmma kernel, which does not run: " + no_wgmma);
  }
  const int rows_per_cta = runs == DenseMhaImpl::kWgmma ? dense_wgmma::kRowsPerCta
                           : runs == DenseMhaImpl::kTc  ? dense_dev::kTcRows
                                                        : dense_dev::kSimpleRows;
  const int64_t q_tiles = (max_q + rows_per_cta - 1) / rows_per_cta;
  const int64_t blocks = q_tiles * p.num_reqs;
  MLA_RETURN_IF_ERROR(require_grid_x("launch_dense_mha", blocks));
  args.q_tiles = static_cast<int32_t>(q_tiles);
  args.num_reqs = p.num_reqs;
  args.tail_heads = 0;
  const dim3 grid(static_cast<unsigned>(blocks), static_cast<unsigned>(p.num_heads));

  if (runs == DenseMhaImpl::kWgmma) {
    // The order the persistent grid's CTAs (dense_wgmma::launch: min(items, SMs)) take the items
    // in. It changes which CTA runs an item, never the item's bits (fewer CTAs under
    // policy.dense_wgmma_max_ctas keep this order).
    int sms = 0, l2 = 0;
    MLA_CUDA_CHECK(cudaDeviceGetAttribute(&sms, cudaDevAttrMultiProcessorCount, device));
    MLA_CUDA_CHECK(cudaDeviceGetAttribute(&l2, cudaDevAttrL2CacheSize, device));
    const int64_t items = blocks * p.num_heads;
    args.tail_heads = dense_tail_heads(p.cu_seqlens_q_host, p.cu_seqlens_k_host, p.num_reqs, p.causal, p.num_heads,
                                       dense_wgmma::kRowsPerCta, dense_wgmma::kSoftmaxStepKeys,
                                       items < sms ? items : sms, l2);
#if MLA_HAVE_WGMMA
    MLA_RETURN_IF_ERROR(dense_wgmma::launch(args, policy.dense_wgmma_debug, policy.dense_wgmma_schedule,
                                            policy.dense_wgmma_max_ctas, stream));
#endif
  } else if (runs == DenseMhaImpl::kTc) {
    MLA_RETURN_IF_ERROR(dense_tc::launch(args, grid, stream));
  } else {
    MLA_RETURN_IF_ERROR(require_simple_smem("launch_dense_mha", optin, dense_simple::smem_bytes()));
    MLA_RETURN_IF_ERROR(dense_simple::launch(args, grid, stream));
  }
  return Status();
}

Status dense_mha_implementation(DenseMhaImpl requested, int device, DenseMhaImpl* runs) {
  return chosen(requested, /*aligned=*/true, /*out_aligned16=*/true, device, runs);
}

Status dense_mha_implementation_for(const DenseMhaParams& p, DenseMhaImpl requested, int device,
                                    DenseMhaImpl* runs) {
  return chosen(requested, inputs_aligned(p), aligned_to(p.out, 16), device, runs);
}

}  // namespace mla
