"""A deliberately wrong cache-path adapter: two known failure classes of docs/semantics.md §6,
which mla-check must catch (exit 1) when it runs the suite's gather and convert checks through it.

- gather ignores seq_starts (§6.3): every request's rows start at position 0;
- convert writes past the rows of its output (§6.1: a launch sized by a longer req_id). NumPy
  bounds its arrays, so the stray values are written through the output's raw address, as an
  unbounded kernel would write them.
"""
import ctypes
import importlib.util
import os


_spec = importlib.util.spec_from_file_location(
    "numpy_cache", os.path.join(os.path.dirname(__file__), "..", "..", "adapters", "numpy_cache.py"))
_right = importlib.util.module_from_spec(_spec)
_spec.loader.exec_module(_right)

DEVICE = "cpu"
pack = _right.pack


def gather(seq_starts, **kwargs):
    return _right.gather(seq_starts=None, **kwargs)


def convert(req_id, out, topk, **kwargs):
    _right.convert(req_id=req_id, out=out, topk=topk, **kwargs)
    # Past the end of `out`, as a launch sized by a longer req_id writes: the first 8 int32 of the
    # next row (inside the harness's guard zone, which must catch it).
    end = out.ctypes.data + out.shape[0] * out.strides[0]
    ctypes.memmove(end, (ctypes.c_int32 * 8)(*([0x11111111] * 8)), 32)
