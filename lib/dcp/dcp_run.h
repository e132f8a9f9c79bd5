// A scenario's dcp check over real ranks (docs/semantics.md §3, §5): every process of the run is
// one rank, holds only its own shard of the cache (lib/dcp/shard.h), converts the token picks in
// DCP mode and runs sparse MQA on its own device (lib/checks/dcp_parts.h, the simulated check's
// own code); the partial outputs and LSEs are gathered on every rank by the communicator
// (ncclAllGather between GPUs) and merged there by the backend's LSE merge in the simulated
// check's order (lib/dcp/merge_tree.h). Rank 0 then judges the result:
//   dcp_distributed/N_ranks               the merged output against the single-rank reference,
//                                         within the dcp check's tolerances; every rank's merged
//                                         bits equal (ranks_disagreeing 0);
//   dcp_distributed/N_ranks/vs_simulated  the merged output and LSE against the simulated N-rank
//                                         run on rank 0's device, bit for bit (the same kernels and
//                                         merge order); SKIP when the ranks' devices differ.
// Metrics say how the batch falls on the ranks (rank_requests_without_positions,
// requests_shorter_than_interleave). Every rank calls run_distributed_dcp for the same scenarios
// in the same order; the ranks meet twice per scenario in the exchange (their status, then their
// results' hashes), so a failure on one rank ends the scenario in ERROR on all of them.
#pragma once

#include "kernels/backend.h"
#include "lib/dcp/communicator.h"
#include "lib/dcp/exchange.h"
#include "lib/run/hash.h"
#include "lib/run/scenario_run.h"
#include "lib/scenario/scenario.h"

namespace mla {

struct DcpRunContext {
  Backend& backend;
  Communicator& comm;
  Exchange& exchange;
  double timeout_s = 900.0;  // how long a rank waits for the others at each meeting
};

// The ids of the two checks for `world` ranks.
std::string dcp_distributed_id(int world);
std::string dcp_distributed_simulated_id(int world);

// Rank 0: the scenario's result. Other ranks: a result with the name, file and duration only.
ScenarioResult run_distributed_dcp(const Scenario& s, const DcpRunContext& ctx);

// FNV-1a (64 bits, lib/run/hash.h) of bytes, as 16 hex digits: how the ranks compare their merged results.
std::string fnv1a_hex(const void* data, std::size_t bytes, uint64_t seed = kFnv1a64Offset);

}  // namespace mla
