"""Every operation in plain PyTorch, as a user writes it without the harness's kernels: tensor
indexing, float8 casts and dtype views of the 656-byte entry for the cache path; gather + matmul
for sparse MQA; scaled_dot_product_attention for dense MHA. The PyTorch peer of mla-bench's
figures, timed by mla-bench's own protocol:

    mla-bench --backend python:adapters/torch_ops.py --sweep attention
    mla-check --backend python:adapters/torch_ops.py

Runs on the GPU (DEVICE = "cuda").
"""
import torch

DEVICE = "cuda"

NOPE, ROPE, LATENT, ENTRY, TILE, TILES = 512, 64, 576, 656, 128, 4
E4M3_MAX = 448.0
FLT_MIN = torch.finfo(torch.float32).tiny


def versions():
    return {"torch": torch.__version__, "cuda": str(torch.version.cuda)}


def _bf16(t):
    return t if t.dtype == torch.bfloat16 else t.view(torch.bfloat16)


def _quantize(kv_c, k_pe):
    """[n, 512], [n, 64] bf16 -> [n, 656] uint8 entries (docs/semantics.md §1.1)."""
    n = kv_c.shape[0]
    x = kv_c.float().view(n, TILES, TILE)
    amax = x.abs().nan_to_num(nan=0.0).amax(dim=-1)
    # A tensor divisor: PyTorch turns division by a Python scalar into a reciprocal multiply.
    scale = torch.clamp(amax / torch.full_like(amax, E4M3_MAX), min=FLT_MIN)
    q = (x / scale.unsqueeze(-1)).clamp(-E4M3_MAX, E4M3_MAX).to(torch.float8_e4m3fn)
    return torch.cat([q.view(n, NOPE).view(torch.uint8), scale.contiguous().view(torch.uint8),
                      k_pe.contiguous().view(torch.uint8)], dim=1)


def _dequantize(entries):
    """[t, 656] uint8 -> [t, 576] bf16 (docs/semantics.md §1.2)."""
    t = entries.shape[0]
    nope = entries[:, :NOPE].view(torch.float8_e4m3fn).float().view(t, TILES, TILE)
    scales = entries[:, NOPE:NOPE + 16].contiguous().view(torch.float32)
    rope = entries[:, NOPE + 16:].contiguous().view(torch.bfloat16)
    return torch.cat([(nope * scales.unsqueeze(-1)).view(t, NOPE).to(torch.bfloat16), rope], dim=1)


def pack(kv_c, k_pe, slot_mapping, cache, num_tokens, block_size, **_):
    n = num_tokens
    capacity = cache.shape[0] * block_size
    valid = (slot_mapping[:n] >= 0) & (slot_mapping[:n] < capacity)
    slots = slot_mapping[:n][valid]
    entries = _quantize(_bf16(kv_c[:n]), _bf16(k_pe[:n]))[valid]
    cache[torch.div(slots, block_size, rounding_mode="floor"), slots % block_size] = entries


def gather(cache, block_table, workspace_starts, seq_starts, dst, num_rows, block_size, **_):
    num_blocks, width = cache.shape[0], block_table.shape[1]
    rows = torch.arange(num_rows, device=cache.device)
    ws = workspace_starts.long()
    req = torch.searchsorted(ws, rows, right=True) - 1
    valid = req >= 0
    req = req.clamp(min=0)
    pos = rows - ws[req] + (seq_starts.long()[req] if seq_starts is not None else 0)
    logical = torch.div(pos, block_size, rounding_mode="floor")
    valid &= (pos >= 0) & (logical < width)
    phys = block_table.long()[req, logical.clamp(0, width - 1)]
    valid &= (phys >= 0) & (phys < num_blocks)
    entries = cache[phys.clamp(0, num_blocks - 1), (pos - logical * block_size).clamp(0, block_size - 1)]
    rows_out = _dequantize(entries)
    _bf16(dst)[:] = torch.where(valid.unsqueeze(1), rows_out, torch.full_like(rows_out, float("nan")))


def convert(req_id, indices, block_table, out, valid_count, prefill_req, prefill_workspace_starts, block_size,
            num_prefills, dcp_world_size, dcp_rank, dcp_interleave, **_):
    num_reqs, width = block_table.shape
    tok = indices.long()
    req = req_id.long()
    row_ok = ((req >= 0) & (req < num_reqs)).unsqueeze(1)
    local = tok
    owned = torch.ones_like(tok, dtype=torch.bool)
    if dcp_world_size > 1:
        w, i = dcp_world_size, dcp_interleave
        owned = torch.div(tok, i, rounding_mode="floor") % w == dcp_rank
        local = torch.div(tok, w * i, rounding_mode="floor") * i + tok % i
    logical = torch.div(local, block_size, rounding_mode="floor")
    valid = row_ok & (tok >= 0) & owned & (logical < width)
    phys = block_table.long()[req.clamp(0, num_reqs - 1).unsqueeze(1), logical.clamp(0, width - 1)]
    slot = phys * block_size + (local - logical * block_size)
    valid &= (phys >= 0) & (slot <= 2**31 - 1)
    result = torch.where(valid, slot, torch.full_like(slot, -1))
    if prefill_req is not None:
        p = prefill_req.long().unsqueeze(1)
        is_prefill = p >= 0
        starts = prefill_workspace_starts.long() if num_prefills > 0 else torch.zeros(1, dtype=torch.long, device=tok.device)
        row = starts[p.clamp(0, max(num_prefills - 1, 0))] + tok
        ok = row_ok & (tok >= 0) & (p < num_prefills) & (row >= 0) & (row <= 2**31 - 1)
        result = torch.where(is_prefill, torch.where(ok, row, torch.full_like(row, -1)), result)
    out[:] = result.to(torch.int32)
    if valid_count is not None:
        valid_count[:] = (out >= 0).sum(dim=1, dtype=torch.int32)


def gemm(a, b, c, transpose_b, **_):
    bb = _bf16(b).transpose(1, 2) if transpose_b else _bf16(b)
    _bf16(c)[:] = torch.bmm(_bf16(a), bb)


def sparse_mqa(q, cache, indices, out, lse, scale, tokens, heads, topk, **_):
    capacity = cache.shape[0] * cache.shape[1]
    slots = indices.long()
    valid = (slots >= 0) & (slots < capacity)
    flat = cache.view(-1, ENTRY) if cache.is_contiguous() else cache.reshape(-1, ENTRY)
    rows = _dequantize(flat.index_select(0, slots.clamp(0, capacity - 1).reshape(-1))).view(tokens, topk, LATENT)
    rows = rows.masked_fill(~valid.unsqueeze(-1), 0.0)    # an invalid slot's bytes (NaN) never reach P V
    # Scores in fp32 (the contract: fp32 accumulation, no bf16 rounding of S).
    scores = torch.bmm(_bf16(q).float(), rows.float().transpose(1, 2)) * scale     # [T, H, K]
    scores = scores.masked_fill(~valid.unsqueeze(1), float("-inf"))
    l = torch.logsumexp(scores, dim=-1)
    p = torch.exp(scores - l.unsqueeze(-1)).nan_to_num_(0.0)
    _bf16(out)[:] = torch.bmm(p.to(torch.bfloat16), rows[:, :, :NOPE])
    lse[:] = l


def dense_mha(q_nope, q_pe, k_nope, k_pe, v, cu_seqlens_q, cu_seqlens_k, out, lse, heads, causal, scale, **_):
    cq = cu_seqlens_q.tolist()
    ck = cu_seqlens_k.tolist()
    hp = heads
    for r in range(len(cq) - 1):
        nq, nk = cq[r + 1] - cq[r], ck[r + 1] - ck[r]
        if nq == 0:
            continue
        o = _bf16(out)[cq[r]:cq[r + 1]]
        if nk == 0:
            o.zero_()
            lse[cq[r]:cq[r + 1]] = float("-inf")
            continue
        qq = torch.cat([_bf16(q_nope)[cq[r]:cq[r + 1]], _bf16(q_pe)[cq[r]:cq[r + 1]]], dim=-1).transpose(0, 1)
        kp = _bf16(k_pe)[ck[r]:ck[r + 1]].unsqueeze(1).expand(nk, hp, ROPE)
        kk = torch.cat([_bf16(k_nope)[ck[r]:ck[r + 1]], kp], dim=-1).transpose(0, 1)
        vv = _bf16(v)[ck[r]:ck[r + 1]].transpose(0, 1)
        s = torch.matmul(qq.float(), kk.float().transpose(1, 2)) * scale           # [H, nq, nk]
        if causal:
            mask = torch.ones(nq, nk, dtype=torch.bool, device=s.device).tril(diagonal=nk - nq)
            s = s.masked_fill(~mask, float("-inf"))
        l = torch.logsumexp(s, dim=-1)                                               # [H, nq]
        lse[cq[r]:cq[r + 1]] = l.transpose(0, 1)
        mask = None
        if causal and nq != nk:
            mask = torch.ones(nq, nk, dtype=torch.bool, device=s.device).tril(diagonal=nk - nq)
        attn = torch.nn.functional.scaled_dot_product_attention(
            qq.unsqueeze(0), kk.unsqueeze(0), vv.unsqueeze(0), attn_mask=mask,
            is_causal=causal and nq == nk, scale=scale)
        o[:] = attn[0].transpose(0, 1)


def merge(out_a, lse_a, out_b, lse_b, out, lse, **_):
    a = torch.where(torch.isnan(lse_a) | torch.isposinf(lse_a), torch.full_like(lse_a, float("-inf")), lse_a)
    b = torch.where(torch.isnan(lse_b) | torch.isposinf(lse_b), torch.full_like(lse_b, float("-inf")), lse_b)
    m = torch.maximum(a, b)
    both_empty = torch.isneginf(m)
    m0 = torch.where(both_empty, torch.zeros_like(m), m)
    wa, wb = torch.exp(a - m0), torch.exp(b - m0)
    total = wa + wb
    merged = (wa.unsqueeze(1) * _bf16(out_a).float() + wb.unsqueeze(1) * _bf16(out_b).float()) / total.unsqueeze(1)
    result = torch.where(both_empty.unsqueeze(1), _bf16(out_a).float(), merged).to(torch.bfloat16)
    new_lse = torch.where(both_empty, torch.full_like(m, float("-inf")), m0 + torch.log(total))
    _bf16(out)[:] = result
    lse[:] = new_lse
