// mla-bench --list-shapes [--json]: every shape a sweep registers, with what a peer needs to
// build its inputs and the models mla-bench's counters use (the functions of bench_cache_ops.h and
// bench_attention_ops.h, not copies), without a backend. scripts/peer_timing.py reads the JSON
// instead of parsing sweep files.
//
// JSON ("schema": "mla-bench.shapes/1"):
//   producer  {tool, version, git_revision}
//   sweep     {name, source, description, seed, repetitions, min_time_s, host: {max_tokens,
//             max_convert_elements, max_attention_flops}}
//   shapes    one object per benchmark, in registration order:
//     name         the benchmark's name; run_name: as Google Benchmark writes it ("/manual_time")
//     op           pack | gather | convert | sparse_mqa | dense_mha | forward | route | dcp
//     params       pack {block_size, tokens}; gather {block_size, seq_starts, rows};
//                  convert {block_size, topk, rows}; sparse_mqa {block_size, batch, query_tokens,
//                  heads, topk, seq_len}; dense_mha {heads, tokens, requests, keys_per_request
//                  (null: each request's keys are its queries), causal, query_lens, key_lens};
//                  forward {batch, heads, topk, block_size, decode_threshold, seq_lens, query_lens};
//                  route {route (dense | sparse), prefill_len, prefills, heads, topk, block_size,
//                  decode_threshold, seq_lens, query_lens}; dcp {block_size, interleave, ranks, batch,
//                  query_tokens, heads, topk, seq_len}
//     pair         route only: the other route's benchmark name on the same batch, null when the
//                  prefills are longer than top-k (only the sparse route is timed there)
//     items        items_per_second's items per call (tokens, rows, indices, query tokens)
//     bytes        bytes_per_second's bytes per call; null for forward, route and dcp (the sum over the launches
//                  it records when it runs)
//     flops        flops_per_second's FLOPs per call (0 for the cache path; forward: the model,
//                  which its label compares with the launches it records)
//     model        sparse_mqa {distinct_entries: the cache entries its byte model counts, from
//                  the sweep's seed as the benchmark draws them}; dense_mha {pairs};
//                  forward and route {sparse_attention_flops, dense_attention_flops, gemm_flops,
//                  sparse_tokens, dense_tokens}
//     label        the cache path's label (attention labels depend on the prepared inputs)
//     host_capped  the host backend leaves it out unless --no-host-caps
#pragma once

#include <string>

#include <nlohmann/json.hpp>

#include "apps/mla_bench/sweep.h"

namespace mla::bench {

inline constexpr const char* kShapesSchema = "mla-bench.shapes/1";

nlohmann::ordered_json shapes_json(const Sweep& sweep);

// Prints the shapes (as JSON, or one line each: name, bytes, FLOPs) to stdout; returns the exit code.
int list_shapes(const Sweep& sweep, bool as_json);

}  // namespace mla::bench
