"""A deliberately wrong cache-path adapter: two known failure classes of docs/semantics.md §6,
which mla-check must catch (exit 1) when it runs the suite's gather and convert checks through it.

- gather ignores seq_starts (§6.3): every request's rows start at position 0;
- convert writes a row for every entry of req_id, past the rows of its output when a caller
  passes fewer index rows than tokens (§6.1). NumPy bounds its arrays, so the stray rows are
  written through the output's raw address, as an unbounded kernel would write them.
"""
import ctypes
import importlib.util
import os

import numpy as np

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
    # One extra row past the end of `out` for good measure: what a launch sized by a longer
    # req_id writes.
    rows = out.shape[0] + 1
    past = np.ctypeslib.as_array(ctypes.cast(out.ctypes.data, ctypes.POINTER(ctypes.c_int32)),
                                 shape=(rows * out.strides[0] // 4,))
    past[out.shape[0] * out.strides[0] // 4:] = 0x11111111
