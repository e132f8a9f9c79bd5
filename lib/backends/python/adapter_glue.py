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
import stat
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
# The keyword arguments each operation is called with (its buffers, then its parameters; the
# cache-reading operations also get block_size, num_blocks and page_padding_bytes): a function's
# signature is checked against them when the adapter is loaded.
_CACHE_PARAMS = ("block_size", "num_blocks", "page_padding_bytes")
ARGUMENTS = {
    "pack": ("kv_c", "k_pe", "slot_mapping", "cache", *_CACHE_PARAMS, "num_tokens"),
    "gather": ("cache", "block_table", "workspace_starts", "seq_starts", "dst", *_CACHE_PARAMS, "num_rows",
               "num_reqs"),
    "convert": ("req_id", "indices", "block_table", "out", "valid_count", "prefill_req", "prefill_workspace_starts",
                "block_size", "topk", "num_tokens", "num_prefills", "dcp_world_size", "dcp_rank", "dcp_interleave"),
    "gemm": ("a", "b", "c", "m", "n", "k", "batch", "transpose_b"),
    "sparse_mqa": ("q_nope", "q_pe", "q", "indices", "cache", "out", "lse", *_CACHE_PARAMS, "tokens", "heads", "topk",
                   "scale"),
    "dense_mha": ("q_nope", "q_pe", "k_nope", "k_pe", "v", "cu_seqlens_q", "cu_seqlens_k", "out", "lse", "heads",
                  "num_reqs", "total_q", "total_k", "max_seqlen_q", "max_seqlen_k", "causal", "scale"),
    "merge": ("out_a", "lse_a", "out_b", "lse_b", "out", "lse", "rows", "width"),
}
# An adapter file larger than this is refused unread (an adapter is source code, not data).
MAX_ADAPTER_BYTES = 16 << 20
# Declarations an adapter's SUPPORTS may state per operation, and what they constrain.
CONSTRAINT_KEYS = {
    "heads": "the number of query heads",
    "block_size": "the cache page size in tokens",
    "topk_multiple": "top-k must be a multiple of this",
    "sm": "the GPU's compute capability (e.g. 90)",
    "page_padding": "whether pages may be padded past block_size * 656 bytes",
    "invalid_index": "sparse_mqa: the one value the adapter accepts as an invalid index (e.g. -1)",
    "dequant": "sparse_mqa: how it dequantizes the cache (f32_scale or bf16_scale)",
}
# Operations whose indices an adapter may declare invalid_index for (docs/adapters.md).
INVALID_INDEX_OPS = ("sparse_mqa",)
# Operations that may declare a dequantization rule, and the rules (docs/adapters.md): f32_scale is
# docs/semantics.md §1.2; bf16_scale rounds the scale to bf16 first and the product once to bf16.
DEQUANT_OPS = ("sparse_mqa",)
DEQUANT_RULES = ("f32_scale", "bf16_scale")
DEQUANT_NOTES = {
    "bf16_scale": "judged against the reference dequantized as the adapter declares (dequant bf16_scale: scale "
                  "rounded to bf16, product rounded once to bf16; docs/semantics.md §4.1)",
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
# How many indices were given as the declared invalid_index since the notes were last taken, per
# (op, value, slots of the pool): an int on the host, a 0-dim device tensor on CUDA (added to on the
# stream, read only when the notes are taken, so that no call synchronises).
_replaced = {}
# (op, rule) of the calls since the notes were last taken that ran under a declared dequantization
# rule other than docs/semantics.md §1.2: one note per check.
_dequant_used = set()


def _fail(problem, function=None):
    where = f"adapter {_name}" + (f": {function}()" if function else "")
    raise AdapterError(f"{where}: {problem}")


def _read_digest(path):
    """The file's SHA-256, after checking that it is a regular file of a sane size."""
    try:
        st = os.stat(path)
    except FileNotFoundError:
        _fail(f"no such file: {path}")
    except OSError as error:  # a symbolic link loop, a name too long, no permission on a folder
        _fail(f"cannot read {path}: {error.strerror or error}")
    if stat.S_ISDIR(st.st_mode):
        _fail(f"{path} is a directory, not a Python file")
    if not stat.S_ISREG(st.st_mode):
        _fail(f"{path} is not a regular file")
    if st.st_size > MAX_ADAPTER_BYTES:
        _fail(f"{path} is {st.st_size} bytes; adapter files are at most {MAX_ADAPTER_BYTES} bytes")
    digest = hashlib.sha256()
    try:
        with open(path, "rb") as f:
            for block in iter(lambda: f.read(1 << 20), b""):
                digest.update(block)
    except OSError as error:
        _fail(f"cannot read {path}: {error.strerror or error}")
    return digest.hexdigest()


def _check_constraints(op, constraints):
    for key, value in constraints.items():
        if key not in CONSTRAINT_KEYS:
            _fail(f"SUPPORTS[{op!r}] has an unknown constraint {key!r} (known: {', '.join(CONSTRAINT_KEYS)})")
        if key in ("heads", "block_size", "sm"):
            if not isinstance(value, (list, tuple, set, frozenset)) or not all(
                    isinstance(v, int) and not isinstance(v, bool) for v in value):
                _fail(f"SUPPORTS[{op!r}][{key!r}] must be a list of integers ({CONSTRAINT_KEYS[key]}); "
                      f"it is {value!r}")
        elif key == "topk_multiple":
            if not isinstance(value, int) or isinstance(value, bool) or value < 1:
                _fail(f"SUPPORTS[{op!r}]['topk_multiple'] must be an integer >= 1; it is {value!r}")
        elif key == "page_padding" and not isinstance(value, bool):
            _fail(f"SUPPORTS[{op!r}]['page_padding'] must be True or False; it is {value!r}")
        elif key == "invalid_index":
            if op not in INVALID_INDEX_OPS:
                _fail(f"SUPPORTS[{op!r}] declares 'invalid_index', which applies to {', '.join(INVALID_INDEX_OPS)} "
                      f"only")
            # A value >= 0 may be a slot of the pool: giving invalid entries as it would read that slot.
            if not isinstance(value, int) or isinstance(value, bool) or not -2**31 <= value < 0:
                _fail(f"SUPPORTS[{op!r}]['invalid_index'] must be a negative int32 (the one value the adapter "
                      f"accepts as an invalid index, e.g. -1); it is {value!r}")
        elif key == "dequant":
            if op not in DEQUANT_OPS:
                _fail(f"SUPPORTS[{op!r}] declares 'dequant', which applies to {', '.join(DEQUANT_OPS)} only")
            if not isinstance(value, str) or value not in DEQUANT_RULES:
                _fail(f"SUPPORTS[{op!r}]['dequant'] must be one of {', '.join(repr(r) for r in DEQUANT_RULES)} "
                      f"(how it dequantizes the cache); it is {value!r}")


def _check_signature(op, fn):
    """The function must accept the call the harness makes (every argument by keyword)."""
    try:
        signature = inspect.signature(fn)
    except (TypeError, ValueError):
        return  # a builtin without a signature: checked when it is called
    try:
        signature.bind(**{name: None for name in ARGUMENTS[op]})
    except TypeError as e:
        _fail(f"its signature {op}{signature} does not accept the call: {e} (the harness passes: "
              f"{', '.join(ARGUMENTS[op])}; take **_ to ignore what it does not use)", op)


def load(path, sm):
    """Imports the adapter file and checks its declarations. Returns a dict describing it."""
    global _adapter, _name, _device, _sm, _torch, _numpy
    _name = os.path.basename(path)
    _sm = int(sm)
    digest = _read_digest(path)
    spec = importlib.util.spec_from_file_location("mla_adapter_" + _name.replace(".", "_"), path)
    if spec is None or spec.loader is None:
        _fail(f"cannot be imported as a Python module (a Python file ends in .py): {path}")
    module = importlib.util.module_from_spec(spec)
    sys.modules[spec.name] = module
    try:
        spec.loader.exec_module(module)
    except BaseException as error:  # SystemExit and KeyboardInterrupt too: the harness reports, never exits
        if isinstance(error, SystemExit):
            _fail(f"import failed: it called sys.exit({error.code!r})")
        _fail("import failed:\n" + _traceback_tail())
    device = getattr(module, "DEVICE", None)
    if device not in DEVICES:
        _fail(f"DEVICE must be one of {', '.join(DEVICES)}; it is {device!r}")
    for op in OUTPUTS:
        if hasattr(module, op) and not callable(getattr(module, op)):
            _fail(f"{op} must be a function; it is {type(getattr(module, op)).__name__}")
    ops = [op for op in OUTPUTS if callable(getattr(module, op, None))]
    if not ops:
        _fail("defines none of the operations " + ", ".join(OUTPUTS))
    for op in ops:
        _check_signature(op, getattr(module, op))
    supports = getattr(module, "SUPPORTS", {})
    if not isinstance(supports, dict):
        _fail(f"SUPPORTS must be a dict of operation -> constraints; it is {type(supports).__name__}")
    for op, constraints in supports.items():
        if op not in OUTPUTS:
            _fail(f"SUPPORTS names an unknown operation {op!r} (known: {', '.join(OUTPUTS)})")
        if not isinstance(constraints, dict):
            _fail(f"SUPPORTS[{op!r}] must be a dict; it is {type(constraints).__name__}")
        _check_constraints(op, constraints)
    if hasattr(module, "supports") and not callable(module.supports):
        _fail(f"supports must be a function (op, params) -> reason or None; it is {type(module.supports).__name__}")
    versions = {}
    if callable(getattr(module, "versions", None)):
        try:
            versions = module.versions()
        except BaseException:
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
            "versions": versions, "python": sys.version.split()[0],
            "sparse_mqa_dequant": supports.get("sparse_mqa", {}).get("dequant", "f32_scale")}


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
        try:
            reason = supports(op, dict(params))
        except Exception:
            _fail("failed:\n" + _traceback_tail(), "supports")
        if reason is not None and not isinstance(reason, str):
            _fail(f"must return a reason (str) or None; it returned {type(reason).__name__}", "supports")
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
        for name in items:
            if not isinstance(name, str):
                _fail(f"returned a dict with the key {name!r}; its outputs are {', '.join(names)}", op)
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
        if not hasattr(value, "shape") or not hasattr(value, "dtype"):
            _fail(f"returned {name} as a {type(value).__name__}; expected an array of shape {list(dst.shape)} "
                  f"and dtype {dst.dtype}", op)
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


def _give_invalid_indices_as(op, arrays, params, value):
    """A copy of the indices in which every index outside [0, slots of the pool) is `value` (the
    adapter's declared invalid_index); the harness's buffer is left as it is."""
    idx = arrays["indices"]
    slots = int(params["num_blocks"]) * int(params["block_size"])
    invalid = idx < 0
    if slots <= 2**31 - 1:  # otherwise no int32 index is past the pool
        invalid = invalid | (idx >= slots)
    replaced = invalid & (idx != value)
    if _device == "cuda":
        arrays["indices"] = idx.masked_fill(replaced, value)
        count = replaced.sum()
    else:
        arrays["indices"] = _numpy.where(replaced, _numpy.int32(value), idx).astype(idx.dtype, copy=False)
        count = int(replaced.sum())
    key = (op, value, slots)
    _replaced[key] = _replaced.get(key, 0) + count


def take_notes():
    """The notes of the calls since the last take: the declared dequantization rule the calls ran
    under, and how many invalid indices were given as the adapter's declared invalid_index (reads
    the counts, so it waits for the calls on the GPU)."""
    pending = dict(_replaced)
    _replaced.clear()  # first: a count that cannot be read (a failed kernel) is reported once
    notes = [f"{op}: {DEQUANT_NOTES[rule]}" for op, rule in sorted(_dequant_used)]
    _dequant_used.clear()
    for (op, value, slots), count in pending.items():
        count = int(count)
        if count:
            notes.append(f"{op}: {count} invalid indices (outside [0, {slots}), other than {value}) given as {value} "
                         f"(the adapter declares invalid_index {value})")
    return notes


def _run(op, fn, buffers, params):
    arrays = {name: _as_array(buf) for name, buf in buffers.items()}
    declared = getattr(_adapter, "SUPPORTS", {}).get(op, {})
    invalid_index = declared.get("invalid_index")
    if invalid_index is not None:
        _give_invalid_indices_as(op, arrays, params, invalid_index)
    dequant = declared.get("dequant")
    if dequant in DEQUANT_NOTES:
        _dequant_used.add((op, dequant))
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
    except SystemExit as error:
        raise RuntimeError(f"{_name}: {op}() called sys.exit({error.code!r})") from None
    except BaseException:
        raise RuntimeError(f"{_name}: {op}() raised:\n" + _traceback_tail()) from None
    if returned is None:
        return False
    outs = {name: arrays.get(name) for name in OUTPUTS[op]}
    _copy_returned(op, returned, outs)
    return True
