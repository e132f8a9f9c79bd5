#!/usr/bin/env bash
# Session 27, call 5: the first GPU run of peer_torch.py's late-queue count (ColdStart.note_queued:
# after a timed call and its stop event are queued, has the GPU already reached the start event?)
# on the shapes where the lead moved the peer most (sparse batch 1, dense causal 1k, 16 heads), at
# leads 0, 200000 and 400000; --iters 200 (no mla-bench here). Run from the repository root.
set -u -o pipefail
L=$OUT/L; mkdir -p $L
git log --oneline -1 > $L/tree.txt; git status --short >> $L/tree.txt; sha256sum scripts/peer_torch.py >> $L/tree.txt
for lead in 0 200000 400000; do
  timeout 60 python3 scripts/peer_torch.py --attention --sweep attention --timing-device cuda --iters 200 \
    --lead-cycles $lead --filter 'sparse_mqa/batch:1/|dense_mha/H:128/reqs:1/tokens:1024$|dense_mha/H:16/' \
    --out $L/late-lead$lead.json > $L/late-lead$lead.log 2>&1; echo "lead $lead rc=$?"
done
