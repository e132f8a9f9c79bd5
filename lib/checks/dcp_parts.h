// The pieces of the dcp check (docs/semantics.md §3, §5) that a distributed run shares with the
// simulated one (lib/checks/attention_checks.cpp run_dcp_check): one rank's partial attention,
// every rank simulated in this process and merged, and the judgement of a merged result against
// the single-rank reference. A run whose ranks are processes on other devices (lib/dcp/dcp_run.h)
// computes its own rank's partial with the same function, so both attend over the same shard with
// the same kernels and merge in the same order (lib/dcp/merge_tree.h).
#pragma once

#include <cstdint>
#include <vector>

#include "lib/checks/attention_check_context.h"
#include "lib/checks/buffer_set.h"

namespace mla {

struct DcpPartial {
  std::vector<uint16_t> out_lat;  // [T, H, 512] bf16 bits
  std::vector<float> lse;         // [T, H]
};

// Rank `rank` of `world` (interleave: the scenario's): its shard of the cache (lib/dcp/shard.h),
// the backend's conversion of every token's picks in DCP mode, the backend's sparse MQA over the
// shard (a plan of 264 work items). Throws BackendError / UnsupportedError (lib/checks/buffer_set.h).
DcpPartial dcp_rank_partial(const AttentionCheckContext& ctx, BufferSet& bufs, int32_t world, int32_t rank);

// Every rank's partial in this process on ctx.backend, merged in dcp_merge_steps order.
DcpPartial simulate_dcp(const AttentionCheckContext& ctx, BufferSet& bufs, int32_t world);

// A merged result of `world` ranks against the reference over the whole cache on one rank:
// out within the dcp tolerance, LSE within sparse_lse; extras "ranks" and the LSE figures. With
// `audit`, its guard zones and inputs count too. Finalized (verdict set); id and check unset.
CheckResult judge_dcp_result(const AttentionCheckContext& ctx, int32_t world, const DcpPartial& merged,
                             const BufferSet* audit);

}  // namespace mla
