// mla-bench --sweep dcp: the decode-context-parallel step timed on 1..N GPUs (docs/dcp.md,
// "Timing the step"). mla-bench starts one worker process per GPU before any CUDA call in its own
// process (lib/dcp/local_launch.h: each binds its GPU through CUDA_VISIBLE_DEVICES, NVLink
// multicast off), and drives them: for a benchmark of R ranks, workers 0..R-1 share an NCCL
// communicator, each holds its own shard of a batch's cache (the rank's owned positions of every
// request) and runs one step per iteration:
//   attention      the DCP conversion of every token's picks and sparse MQA over the shard
//   communication  ncclAllGather of the partial outputs [T, H, 512] bf16 and LSEs [T, H]
//   merge          the LSE merges in the balanced tree (lib/dcp/merge_tree.h)
// each phase between CUDA events on the worker's stream, the ranks released together before the
// first (a 4-byte gather). The iteration's time is the slowest rank's sum of the three; counters
// give each phase's slowest rank, each rank's attention and communication, and the speed-up over
// the same shape on one GPU. Benchmark names: dcp/ranks:R/batch:B/q:Q/H:H/K:K/seq:L.
// On the host backend (--backend host) the workers are processes of this machine with the socket
// transport: the same protocol, host timings, for tests.
#pragma once

#include <string>

#include "apps/mla_bench/sweep.h"
#include "lib/backends/backend_choice.h"

namespace mla::bench {

std::string dcp_benchmark_name(int ranks, const SparseMqaShape& s);

// The FLOPs of one step of every rank together (the sparse MQA model of bench_attention_ops.h).
double dcp_step_flops(const SparseMqaShape& s);

// Registers and runs the sweep's dcp benchmarks (Google Benchmark is initialised); mla-bench's
// exit code. Rank counts above the visible GPUs are left out, with a note.
int run_dcp_sweep(const Sweep& sweep, const BackendChoice& choice);

}  // namespace mla::bench
