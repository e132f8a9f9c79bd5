"""The harness side of a Python adapter (docs/adapters.md), run inside mla-check / mla-bench.

The C++ backend (lib/backends/python_backend.cpp) imports this module once per process, loads
the adapter file through `load`, and for every operation calls `call` with the harness's own
buffers as DLPack providers (no copies) and the operation's parameters as plain values.

On the CUDA device the buffers arrive as PyTorch tensors (DLPack) and the adapter runs on the
harness's stream (torch.cuda.ExternalStream); on the host they arrive as writable NumPy arrays
over the same memory, bf16 buffers as uint16 arrays holding the bf16 bits (NumPy has no bfloat16).
"""
import hashlib
import importlib.util
import inspect
import os
import sys
import traceback

# Operations an adapter may define, with the output buffers of each (in the order a function
# that returns its outputs instead of writing them returns them).
OUTPUTS = {
    "pack": ("cache",),
    "gather": ("dst",),
    "convert": ("out", "valid_count"),
    "gemm": ("c",),
    "sparse_mqa": ("out", "lse"),
    "dense_mha": ("out", "lse"),
    "merge": ("out", "lse"),
}
# Declarations an adapter's SUPPORTS may state per operation, and what they constrain.
CONSTRAINT_KEYS = {
    "heads": "the number of query heads",
    "block_size": "the cache page size in tokens",
    "topk_multiple": "top-k must be a multiple of this",
    "sm": "the GPU's compute capability (e.g. 90)",
    "page_padding": "whether pages may be padded past block_size * 656 bytes",
}
DEVICES = ("cuda", "cpu")


class Unsupported(Exception):
    """Raised by an adapter (or by the declared SUPPORTS) when it does not support a call: the
    check that needs it ends in SKIP with the message."""


class AdapterError(Exception):
    """A problem with the adapter itself (its file, its declarations, a function's signature or
    what it returned): the message names the adapter, the function and the problem."""


_adapter = None
_name = ""
_device = "cpu"
_sm = 0
_torch = None
_numpy = None


def _fail(problem, function=None):
    where = f"adapter {_name}" + (f": {function}()" if function else "")
    raise AdapterError(f"{where}: {problem}")


def load(path, sm):
    """Imports the adapter file and checks its declarations. Returns a dict describing it."""
    global _adapter, _name, _device, _sm, _torch, _numpy
    _name = os.path.basename(path)
    _sm = int(sm)
    if not os.path.isfile(path):
        _fail(f"no such file: {path}")
    with open(path, "rb") as f:
        digest = hashlib.sha256(f.read()).hexdigest()
    spec = importlib.util.spec_from_file_location("mla_adapter_" + _name.replace(".", "_"), path)
    if spec is None or spec.loader is None:
        _fail(f"cannot be imported as a Python module: {path}")
    module = importlib.util.module_from_spec(spec)
    sys.modules[spec.name] = module
    try:
        spec.loader.exec_module(module)
    except Exception:
        _fail("import failed:\n" + _traceback_tail())
    device = getattr(module, "DEVICE", None)
    if device not in DEVICES:
        _fail(f"DEVICE must be one of {', '.join(DEVICES)}; it is {device!r}")
    ops = [op for op in OUTPUTS if callable(getattr(module, op, None))]
    if not ops:
        _fail("defines none of the operations " + ", ".join(OUTPUTS))
    supports = getattr(module, "SUPPORTS", {})
    if not isinstance(supports, dict):
        _fail(f"SUPPORTS must be a dict of operation -> constraints; it is {type(supports).__name__}")
    for op, constraints in supports.items():
        if op not in OUTPUTS:
            _fail(f"SUPPORTS names an unknown operation {op!r} (known: {', '.join(OUTPUTS)})")
        if not isinstance(constraints, dict):
            _fail(f"SUPPORTS[{op!r}] must be a dict; it is {type(constraints).__name__}")
        for key in constraints:
            if key not in CONSTRAINT_KEYS:
                _fail(f"SUPPORTS[{op!r}] has an unknown constraint {key!r} (known: {', '.join(CONSTRAINT_KEYS)})")
    versions = {}
    if callable(getattr(module, "versions", None)):
        try:
            versions = module.versions()
        except Exception:
            _fail("failed:\n" + _traceback_tail(), "versions")
        if not isinstance(versions, dict):
            _fail(f"must return a dict of name -> version; it returned {type(versions).__name__}", "versions")
        versions = {str(k): str(v) for k, v in versions.items()}
    if device == "cuda":
        try:
            import torch
        except Exception:
            _fail("DEVICE is 'cuda' but PyTorch cannot be imported:\n" + _traceback_tail())
        _torch = torch
    else:
        try:
            import numpy
        except Exception:
            _fail("DEVICE is 'cpu' but NumPy cannot be imported:\n" + _traceback_tail())
        _numpy = numpy
    _adapter, _device = module, device
    return {"path": os.path.abspath(path), "sha256": digest, "device": device, "operations": ops,
            "versions": versions, "python": sys.version.split()[0]}


def _traceback_tail(lines=12):
    text = traceback.format_exc().rstrip().splitlines()
    return "\n".join(text[-lines:])


def _check_declared(op, params):
    constraints = getattr(_adapter, "SUPPORTS", {}).get(op, {})
    heads = params.get("heads")
    if "heads" in constraints and heads is not None and heads not in constraints["heads"]:
        raise Unsupported(f"{_name} {op}: heads {heads} not in {list(constraints['heads'])}")
    block = params.get("block_size")
    if "block_size" in constraints and block is not None and block not in constraints["block_size"]:
        raise Unsupported(f"{_name} {op}: block size {block} not in {list(constraints['block_size'])}")
    topk = params.get("topk")
    m = constraints.get("topk_multiple")
    if m and topk is not None and topk % m != 0:
        raise Unsupported(f"{_name} {op}: top-k {topk} is not a multiple of {m}")
    if "sm" in constraints and _sm not in constraints["sm"]:
        raise Unsupported(f"{_name} {op}: compute capability {_sm} not in {list(constraints['sm'])}")
    if constraints.get("page_padding") is False and params.get("page_padding_bytes", 0):
        raise Unsupported(f"{_name} {op}: padded pages ({params['page_padding_bytes']} bytes per page)")
    supports = getattr(_adapter, "supports", None)
    if callable(supports):
        reason = supports(op, dict(params))
        if reason:
            raise Unsupported(f"{_name} {op}: {reason}")


def _as_array(buf):
    if buf is None:
        return None
    if _device == "cuda":
        return _torch.from_dlpack(buf)
    return _numpy.asarray(buf)  # through __array_interface__: writable, no copy


def _copy_returned(op, returned, outs):
    names = OUTPUTS[op]
    if isinstance(returned, dict):
        items = returned
    else:
        values = returned if isinstance(returned, (tuple, list)) else (returned,)
        if len(values) > len(names):
            _fail(f"returned {len(values)} values; its outputs are {', '.join(names)}", op)
        items = dict(zip(names, values))
    for name, value in items.items():
        if name not in names:
            _fail(f"returned an unknown output {name!r}; its outputs are {', '.join(names)}", op)
        dst = outs.get(name)
        if dst is None:
            _fail(f"returned {name!r}, which this call does not have", op)
        shape, dtype = tuple(value.shape), getattr(value, "dtype", None)
        if shape != tuple(dst.shape):
            _fail(f"returned {name} of shape {list(shape)}; expected {list(dst.shape)}", op)
        if dtype != dst.dtype:
            _fail(f"returned {name} of dtype {dtype}; expected {dst.dtype}", op)
        if _device == "cuda":
            if value.device != dst.device:
                _fail(f"returned {name} on {value.device}; expected {dst.device}", op)
            dst.copy_(value)
        else:
            _numpy.copyto(dst, value)


def begin_check(scenario, check):
    """Calls the adapter's optional begin_check(scenario, check) before each check's operations."""
    hook = getattr(_adapter, "begin_check", None)
    if callable(hook):
        try:
            hook(scenario, check)
        except Exception:
            raise RuntimeError(f"{_name}: begin_check() raised:\n" + _traceback_tail())


def call(op, buffers, params, stream):
    """Runs the adapter's `op`. buffers: name -> DLPack provider or None; params: plain values;
    stream: the harness's CUDA stream (an integer handle) on the CUDA device. Returns True when
    the adapter returned its outputs (copied into the harness's buffers) instead of writing them."""
    fn = getattr(_adapter, op, None)
    if not callable(fn):
        raise Unsupported(f"{_name} has no {op} operation")
    _check_declared(op, params)
    if _device == "cuda":
        device = _torch.device("cuda", _torch.cuda.current_device())
        with _torch.cuda.stream(_torch.cuda.ExternalStream(stream, device=device)):
            return _run(op, fn, buffers, params)
    return _run(op, fn, buffers, params)


def _run(op, fn, buffers, params):
    arrays = {name: _as_array(buf) for name, buf in buffers.items()}
    if op == "sparse_mqa" and arrays.get("q") is None:
        # The parts of the absorbed query are not adjacent in memory: one [T, H, 576] copy.
        parts = (arrays["q_nope"], arrays["q_pe"])
        arrays["q"] = _torch.cat(parts, dim=-1) if _device == "cuda" else _numpy.concatenate(parts, axis=-1)
    kwargs = dict(arrays)
    kwargs.update(params)
    try:
        inspect.signature(fn).bind(**kwargs)
    except TypeError as e:
        accepted = ", ".join(sorted(kwargs))
        _fail(f"its signature does not accept the call: {e} (the harness passes: {accepted}; "
              f"take **_ to ignore what it does not use)", op)
    try:
        returned = fn(**kwargs)
    except Unsupported:
        raise
    except Exception:
        raise RuntimeError(f"{_name}: {op}() raised:\n" + _traceback_tail())
    if returned is None:
        return False
    outs = {name: arrays.get(name) for name in OUTPUTS[op]}
    _copy_returned(op, returned, outs)
    return True
