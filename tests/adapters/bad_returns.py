"""An adapter whose gather returns its output instead of writing it, wrongly as MLA_BAD_RETURN says:
"shape" (one row too few), "dtype" (float32 instead of bf16 bits) or "type" (a list). The gather
checks end in ERROR naming the function and the problem (exit 3)."""
import os

import numpy as np

DEVICE = "cpu"


def gather(dst, **_):
    kind = os.environ.get("MLA_BAD_RETURN", "shape")
    if kind == "shape":
        return np.zeros((dst.shape[0] - 1, dst.shape[1]), dtype=dst.dtype)
    if kind == "dtype":
        return np.zeros(dst.shape, dtype=np.float32)
    return [0] * dst.shape[0]
