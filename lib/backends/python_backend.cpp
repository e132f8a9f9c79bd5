#include "lib/backends/python_backend.h"

#if defined(MLA_HAVE_PYTHON)

#include <dlpack/dlpack.h>
#include <pybind11/embed.h>
#include <pybind11/stl.h>

#include <algorithm>
#include <cstdlib>
#include <mutex>
#include <set>
#include <stdexcept>
#include <utility>

#include "kernels/common/ds_mla_entry.h"
#include "kernels/common/mla_dims.h"
#include "lib/backends/forwarding_backend.h"

namespace py = pybind11;

namespace mla {

namespace {

// The glue module's source (lib/backends/python/adapter_glue.py), compiled in.
constexpr const char* kGlueSource =
#include "adapter_glue.inc"
    ;

// A harness buffer as a DLPack provider: shape and strides in elements; the memory stays the
// harness's (the capsule's deleter frees only the shape and strides).
struct DlpackBuffer {
  void* data = nullptr;
  std::vector<int64_t> shape;
  std::vector<int64_t> strides;
  DLDataType dtype{};
  DLDevice device{};
};

struct ManagedContext {
  DLManagedTensor tensor{};
  std::vector<int64_t> shape, strides;
};

void delete_managed(DLManagedTensor* t) { delete static_cast<ManagedContext*>(t->manager_ctx); }

py::capsule to_capsule(const DlpackBuffer& b) {
  auto* ctx = new ManagedContext;
  ctx->shape = b.shape;
  ctx->strides = b.strides;
  DLTensor& t = ctx->tensor.dl_tensor;
  t.data = b.data;
  t.device = b.device;
  t.ndim = static_cast<int32_t>(b.shape.size());
  t.dtype = b.dtype;
  t.shape = ctx->shape.data();
  t.strides = ctx->strides.data();
  t.byte_offset = 0;
  ctx->tensor.manager_ctx = ctx;
  ctx->tensor.deleter = delete_managed;
  // A capsule nobody consumed still owns its tensor; a consumer renames it "used_dltensor".
  return py::capsule(&ctx->tensor, "dltensor", [](PyObject* cap) {
    if (PyCapsule_IsValid(cap, "dltensor")) {
      auto* mt = static_cast<DLManagedTensor*>(PyCapsule_GetPointer(cap, "dltensor"));
      mt->deleter(mt);
    }
  });
}

PYBIND11_EMBEDDED_MODULE(mla_harness, m) {
  m.doc() = "The harness's side of Python adapters (docs/adapters.md).";
  py::class_<DlpackBuffer>(m, "Buffer")
      .def("__dlpack__", [](const DlpackBuffer& b, py::args, py::kwargs) { return to_capsule(b); })
      .def("__dlpack_device__", [](const DlpackBuffer& b) {
        return py::make_tuple(static_cast<int>(b.device.device_type), b.device.device_id);
      })
      .def_property_readonly("shape", [](const DlpackBuffer& b) { return b.shape; })
      // Host memory as NumPy reads it writable (NumPy imports DLPack read-only).
      .def_property_readonly("__array_interface__", [](const DlpackBuffer& b) {
        const int bytes = b.dtype.bits / 8;
        const char kind = b.dtype.code == kDLFloat ? 'f' : b.dtype.code == kDLInt ? 'i' : 'u';
        std::vector<int64_t> byte_strides;
        for (int64_t s : b.strides) byte_strides.push_back(s * bytes);
        py::dict d;
        d["shape"] = py::tuple(py::cast(b.shape));
        d["typestr"] = std::string(bytes == 1 ? "|" : "<") + kind + std::to_string(bytes);
        d["data"] = py::make_tuple(reinterpret_cast<uintptr_t>(b.data), false);
        d["strides"] = py::tuple(py::cast(byte_strides));
        d["version"] = 3;
        return d;
      });
}

// The embedded interpreter: one per process, never finalized (extension modules such as
// PyTorch's do not support it). The executable configured at build time (MLA_PYTHON at run time)
// makes a virtual environment's packages visible.
void ensure_interpreter() {
  static std::once_flag once;
  std::call_once(once, [] {
    PyConfig config;
    PyConfig_InitPythonConfig(&config);
    config.install_signal_handlers = 0;  // the suite runner owns SIGCHLD / SIGKILL handling
    const char* exe = std::getenv("MLA_PYTHON");
    const std::string executable = exe != nullptr && *exe != '\0' ? exe : MLA_PYTHON_EXECUTABLE;
    if (!executable.empty()) {
      PyStatus s = PyConfig_SetBytesString(&config, &config.executable, executable.c_str());
      if (PyStatus_Exception(s)) {
        PyConfig_Clear(&config);
        throw std::runtime_error("cannot set the Python executable '" + executable + "'");
      }
    }
    py::initialize_interpreter(&config, 0, nullptr, false);
  });
}

class PythonBackend final : public ForwardingBackend {
 public:
  PythonBackend(std::unique_ptr<Backend> base, py::module_ glue, py::dict description, bool fallback)
      : ForwardingBackend(*base), base_(std::move(base)), glue_(std::move(glue)), fallback_(fallback) {
    name_ = py::str(description["path"]).cast<std::string>();
    for (auto op : description["operations"]) operations_.insert(op.cast<std::string>());
    // The glue accepts only "f32_scale" and "bf16_scale" (SUPPORTS['sparse_mqa']['dequant']).
    sparse_dequant_ = py::str(description["sparse_mqa_dequant"]).cast<std::string>() == "bf16_scale"
                          ? SparseDequant::kBf16Scale
                          : SparseDequant::kF32Scale;
    const NativeDevice nd = base_->native_device();
    info_ = base_->info();
    const std::string base_name = info_.name;
    info_.name = "python";
    info_.details["adapter"] = name_;
    info_.details["adapter_sha256"] = py::str(description["sha256"]).cast<std::string>();
    info_.details["adapter_device"] = py::str(description["device"]).cast<std::string>();
    std::string ops;
    for (const auto& op : operations_) ops += (ops.empty() ? "" : ",") + op;
    info_.details["adapter_operations"] = ops;
    info_.details["fallback"] = fallback_ ? base_name : "none";
    info_.details["python"] = py::str(description["python"]).cast<std::string>();
    for (auto kv : description["versions"].cast<py::dict>())
      info_.details["version." + kv.first.cast<std::string>()] = kv.second.cast<std::string>();
    info_.kernels = "adapter " + name_ + " (" + ops + ")" + (fallback_ ? ", others: " + base_name : "");
    device_ = nd;
  }

  BackendInfo info() const override { return info_; }
  // The backend's notes and the glue's (invalid indices given as the adapter's declared invalid_index,
  // the declared dequantization rule its sparse_mqa was judged under).
  std::vector<std::string> take_notes() override {
    try {
      for (auto n : glue_.attr("take_notes")()) note(n.cast<std::string>());
    } catch (py::error_already_set& e) {
      note(py::str(e.value()).cast<std::string>());
    }
    return std::exchange(notes_, {});
  }
  // An error here cannot be returned; it is noted, and the check's own operations still run.
  void begin_check(const std::string& scenario, const std::string& check) override {
    try {
      glue_.attr("begin_check")(scenario, check);
    } catch (py::error_already_set& e) {
      note(py::str(e.value()).cast<std::string>());
    }
  }
  // The adapter's declared rule; where its sparse_mqa is the base's (fallback), the base's rule.
  SparseDequant sparse_mqa_dequant() const override {
    return has("sparse_mqa") ? sparse_dequant_ : base_->sparse_mqa_dequant();
  }
  bool supports_attention() const override {
    for (const char* op : {"sparse_mqa", "dense_mha", "merge", "gemm"})
      if (operations_.count(op)) return true;
    return fallback_ && base_->supports_attention();
  }

  Status pack(const PackParams& p) override {
    MLA_RETURN_IF_ERROR(p.validate());
    if (!has("pack")) return lacking("pack", [&] { return base_->pack(p); });
    py::dict b;
    b["kv_c"] = bf16_matrix(const_cast<bf16_t*>(p.kv_c), p.num_tokens, DsMlaEntry::kNopeDims, p.kv_c_row_stride);
    b["k_pe"] = bf16_matrix(const_cast<bf16_t*>(p.k_pe), p.num_tokens, DsMlaEntry::kRopeDims, p.k_pe_row_stride);
    b["slot_mapping"] = buffer(const_cast<int64_t*>(p.slot_mapping), {p.num_tokens}, {1}, int_type(64));
    b["cache"] = cache_buffer(p.cache);
    py::dict q = cache_params(p.cache);
    q["num_tokens"] = p.num_tokens;
    return call("pack", b, q);
  }

  Status gather(const GatherParams& p) override {
    MLA_RETURN_IF_ERROR(p.validate());
    if (!has("gather")) return lacking("gather", [&] { return base_->gather(p); });
    py::dict b;
    b["cache"] = cache_buffer(p.cache);
    b["block_table"] = int32_matrix(p.block_table, p.num_reqs, p.block_table_width, p.block_table_stride);
    b["workspace_starts"] = int32_vector(p.workspace_starts, p.num_reqs);
    b["seq_starts"] = p.seq_starts ? int32_vector(p.seq_starts, p.num_reqs) : py::none();
    b["dst"] = bf16_matrix(p.dst, p.num_rows, DsMlaEntry::kLatentDims, p.dst_row_stride);
    py::dict q = cache_params(p.cache);
    q["num_rows"] = p.num_rows;
    q["num_reqs"] = p.num_reqs;
    return call("gather", b, q);
  }

  Status convert(const ConvertParams& p) override {
    MLA_RETURN_IF_ERROR(p.validate());
    if (!has("convert")) return lacking("convert", [&] { return base_->convert(p); });
    // Shapes as the params state them (an injected caller states more rows than its buffers
    // have: an adapter that writes them writes into the guard zones, as a kernel would).
    py::dict b;
    b["req_id"] = int32_vector(p.req_id, p.num_tokens);
    b["indices"] = int32_matrix(p.indices, p.indices_rows, p.topk, p.indices_row_stride);
    b["block_table"] = int32_matrix(p.block_table, p.num_reqs, p.block_table_width, p.block_table_stride);
    b["out"] = int32_matrix(p.out, p.indices_rows, p.topk, p.out_row_stride);
    b["valid_count"] = p.valid_count ? int32_vector(p.valid_count, p.indices_rows) : py::none();
    b["prefill_req"] = p.prefill_req ? int32_vector(p.prefill_req, p.num_tokens) : py::none();
    b["prefill_workspace_starts"] =
        p.prefill_workspace_starts ? int32_vector(p.prefill_workspace_starts, p.num_prefills) : py::none();
    py::dict q;
    q["block_size"] = p.block_size;
    q["topk"] = p.topk;
    q["num_tokens"] = p.num_tokens;
    q["num_prefills"] = p.num_prefills;
    q["dcp_world_size"] = p.dcp_world_size;
    q["dcp_rank"] = p.dcp_rank;
    q["dcp_interleave"] = p.dcp_interleave;
    return call("convert", b, q);
  }

  Status gemm(const GemmParams& p) override {
    MLA_RETURN_IF_ERROR(p.validate());
    if (!has("gemm")) return lacking("gemm", [&] { return base_->gemm(p); });
    py::dict b;
    b["a"] = buffer(const_cast<bf16_t*>(p.a), {p.batch, p.m, p.k}, {p.stride_a, p.lda, 1}, bf16_type());
    b["b"] = p.transpose_b ? buffer(const_cast<bf16_t*>(p.b), {p.batch, p.n, p.k}, {p.stride_b, p.ldb, 1}, bf16_type())
                           : buffer(const_cast<bf16_t*>(p.b), {p.batch, p.k, p.n}, {p.stride_b, p.ldb, 1}, bf16_type());
    b["c"] = buffer(p.c, {p.batch, p.m, p.n}, {p.stride_c, p.ldc, 1}, bf16_type());
    py::dict q;
    q["m"] = p.m;
    q["n"] = p.n;
    q["k"] = p.k;
    q["batch"] = p.batch;
    q["transpose_b"] = p.transpose_b;
    return call("gemm", b, q);
  }

  Status sparse_mqa(const SparseMqaParams& p) override {
    MLA_RETURN_IF_ERROR(p.validate());
    if (!has("sparse_mqa")) return lacking("sparse_mqa", [&] { return base_->sparse_mqa(p); });
    const int64_t T = p.num_tokens, H = p.num_heads;
    py::dict b;
    b["q_nope"] = buffer(const_cast<bf16_t*>(p.q_nope_lat), {T, H, DsMlaEntry::kNopeDims},
                         {p.q_nope_token_stride, p.q_nope_head_stride, 1}, bf16_type());
    b["q_pe"] = buffer(const_cast<bf16_t*>(p.q_pe), {T, H, DsMlaEntry::kRopeDims},
                       {p.q_pe_token_stride, p.q_pe_head_stride, 1}, bf16_type());
    // The absorbed query as one [T, H, 576] tensor when its parts are adjacent in memory (no
    // copy); otherwise the glue concatenates them.
    const bool fused = p.q_pe == p.q_nope_lat + DsMlaEntry::kNopeDims &&
                       p.q_pe_token_stride == p.q_nope_token_stride && p.q_pe_head_stride == p.q_nope_head_stride;
    b["q"] = fused ? buffer(const_cast<bf16_t*>(p.q_nope_lat), {T, H, DsMlaEntry::kLatentDims},
                            {p.q_nope_token_stride, p.q_nope_head_stride, 1}, bf16_type())
                   : py::none();
    b["indices"] = int32_matrix(p.indices, T, p.topk, p.indices_row_stride);
    b["cache"] = cache_buffer(p.cache);
    b["out"] = buffer(p.out_lat, {T, H, DsMlaEntry::kNopeDims}, {H * DsMlaEntry::kNopeDims, DsMlaEntry::kNopeDims, 1},
                      bf16_type());
    b["lse"] = buffer(p.lse, {T, H}, {H, 1}, float_type());
    py::dict q = cache_params(p.cache);
    q["tokens"] = T;
    q["heads"] = p.num_heads;
    q["topk"] = p.topk;
    q["scale"] = p.scale;
    return call("sparse_mqa", b, q);
  }

  Status dense_mha(const DenseMhaParams& p) override {
    MLA_RETURN_IF_ERROR(p.validate());
    if (!has("dense_mha")) return lacking("dense_mha", [&] { return base_->dense_mha(p); });
    const int64_t H = p.num_heads;
    py::dict b;
    b["q_nope"] = buffer(const_cast<bf16_t*>(p.q_nope), {p.total_q, H, kDn}, {p.q_nope_stride, kDn, 1},
                         bf16_type());
    b["q_pe"] = buffer(const_cast<bf16_t*>(p.q_pe), {p.total_q, H, kDr},
                       {p.q_pe_stride, kDr, 1}, bf16_type());
    b["k_nope"] = buffer(const_cast<bf16_t*>(p.k_nope), {p.total_k, H, kDn}, {p.k_nope_stride, kDn, 1},
                         bf16_type());
    b["k_pe"] = bf16_matrix(const_cast<bf16_t*>(p.k_pe), p.total_k, kDr, p.k_pe_stride);
    b["v"] = buffer(const_cast<bf16_t*>(p.v), {p.total_k, H, kDv}, {p.v_stride, kDv, 1}, bf16_type());
    b["cu_seqlens_q"] = int32_vector(p.cu_seqlens_q, p.num_reqs + 1);
    b["cu_seqlens_k"] = int32_vector(p.cu_seqlens_k, p.num_reqs + 1);
    b["out"] = buffer(p.out, {p.total_q, H, kDv}, {H * kDv, kDv, 1}, bf16_type());
    b["lse"] = buffer(p.lse, {p.total_q, H}, {H, 1}, float_type());
    int32_t max_q = 0, max_k = 0;
    for (int32_t r = 0; r < p.num_reqs; ++r) {
      max_q = std::max(max_q, p.cu_seqlens_q_host[r + 1] - p.cu_seqlens_q_host[r]);
      max_k = std::max(max_k, p.cu_seqlens_k_host[r + 1] - p.cu_seqlens_k_host[r]);
    }
    py::dict q;
    q["heads"] = p.num_heads;
    q["num_reqs"] = p.num_reqs;
    q["total_q"] = p.total_q;
    q["total_k"] = p.total_k;
    q["max_seqlen_q"] = max_q;
    q["max_seqlen_k"] = max_k;
    q["causal"] = p.causal;
    q["scale"] = p.scale;
    return call("dense_mha", b, q);
  }

  Status merge(const MergeParams& p) override {
    MLA_RETURN_IF_ERROR(p.validate());
    if (!has("merge")) return lacking("merge", [&] { return base_->merge(p); });
    py::dict b;
    b["out_a"] = bf16_matrix(const_cast<bf16_t*>(p.out_a), p.rows, p.width, p.width);
    b["lse_a"] = buffer(const_cast<float*>(p.lse_a), {p.rows}, {1}, float_type());
    b["out_b"] = bf16_matrix(const_cast<bf16_t*>(p.out_b), p.rows, p.width, p.width);
    b["lse_b"] = buffer(const_cast<float*>(p.lse_b), {p.rows}, {1}, float_type());
    b["out"] = bf16_matrix(p.out, p.rows, p.width, p.width);
    b["lse"] = buffer(p.lse, {p.rows}, {1}, float_type());
    py::dict q;
    q["rows"] = p.rows;
    q["width"] = p.width;
    return call("merge", b, q);
  }

 private:
  bool has(const std::string& op) const { return operations_.count(op) > 0; }

  template <typename F>
  Status lacking(const std::string& op, F&& on_base) {
    if (fallback_) return on_base();
    return Status::unsupported("the adapter " + name_ + " has no " + op + " operation (--adapter-fallback runs the " +
                               "harness's own " + op + " instead)");
  }

  DLDevice dl_device() const {
    if (device_.kind == NativeDevice::Kind::kCuda) return DLDevice{kDLCUDA, device_.ordinal};
    return DLDevice{kDLCPU, 0};
  }
  // bf16 on the GPU; on the host the bits as uint16 (NumPy has no bfloat16).
  DLDataType bf16_type() const {
    return device_.kind == NativeDevice::Kind::kCuda ? DLDataType{kDLBfloat, 16, 1} : DLDataType{kDLUInt, 16, 1};
  }
  static DLDataType int_type(uint8_t bits) { return DLDataType{kDLInt, bits, 1}; }
  static DLDataType float_type() { return DLDataType{kDLFloat, 32, 1}; }

  py::object buffer(void* data, std::vector<int64_t> shape, std::vector<int64_t> strides, DLDataType dtype) const {
    DlpackBuffer b;
    b.data = data;
    b.shape = std::move(shape);
    b.strides = std::move(strides);
    b.dtype = dtype;
    b.device = dl_device();
    return py::cast(std::move(b));
  }
  py::object bf16_matrix(bf16_t* p, int64_t rows, int64_t cols, int64_t row_stride) const {
    return buffer(p, {rows, cols}, {row_stride, 1}, bf16_type());
  }
  py::object int32_matrix(const int32_t* p, int64_t rows, int64_t cols, int64_t row_stride) const {
    return buffer(const_cast<int32_t*>(p), {rows, cols}, {row_stride, 1}, int_type(32));
  }
  py::object int32_vector(const int32_t* p, int64_t n) const {
    return buffer(const_cast<int32_t*>(p), {n}, {1}, int_type(32));
  }
  // The pool as [num_blocks, block_size, 656] bytes; a padded page shows in the first stride.
  py::object cache_buffer(const PagedCacheView& c) const {
    return buffer(c.data, {c.num_blocks, c.block_size, DsMlaEntry::kBytes}, {c.page_stride_bytes, DsMlaEntry::kBytes, 1},
                  DLDataType{kDLUInt, 8, 1});
  }
  static py::dict cache_params(const PagedCacheView& c) {
    py::dict q;
    q["block_size"] = c.block_size;
    q["num_blocks"] = c.num_blocks;
    q["page_padding_bytes"] = c.page_stride_bytes - int64_t{c.block_size} * DsMlaEntry::kBytes;
    return q;
  }

  Status call(const std::string& op, const py::dict& buffers, const py::dict& params) {
    try {
      const auto stream = reinterpret_cast<intptr_t>(device_.stream);
      const bool returned = glue_.attr("call")(op, buffers, params, stream).cast<bool>();
      if (returned)
        note("the adapter " + name_ + " returned its " + op +
             " outputs (copied into the harness's buffers): writes outside the outputs were not observable");
      return Status();
    } catch (py::error_already_set& e) {
      if (e.matches(glue_.attr("Unsupported"))) return Status::unsupported(py::str(e.value()).cast<std::string>());
      if (e.matches(glue_.attr("AdapterError"))) return Status::error(py::str(e.value()).cast<std::string>());
      return Status::error(py::str(e.value()).cast<std::string>());
    }
  }

  void note(const std::string& n) {
    if (std::find(notes_.begin(), notes_.end(), n) == notes_.end()) notes_.push_back(n);
  }

  std::unique_ptr<Backend> base_;
  py::module_ glue_;
  bool fallback_;
  std::string name_;
  std::set<std::string> operations_;
  SparseDequant sparse_dequant_ = SparseDequant::kF32Scale;
  BackendInfo info_;
  NativeDevice device_;
  std::vector<std::string> notes_;
};

}  // namespace

bool python_backend_built(std::string* why_not) {
  (void)why_not;
  return true;
}

std::unique_ptr<Backend> make_python_backend(const PythonAdapterOptions& o, std::string* error) {
  try {
    ensure_interpreter();
    py::module_ glue = py::module_::import("types").attr("ModuleType")("mla_harness_glue");
    py::exec(kGlueSource, glue.attr("__dict__"));
    py::module_ harness = py::module_::import("mla_harness");
    harness.attr("Unsupported") = glue.attr("Unsupported");
    py::module_::import("sys").attr("modules")["mla_harness_glue"] = glue;
    // The device is read from the file before the base backend exists; the compute capability
    // the declared constraints see comes from the base once it does.
    py::dict first = glue.attr("load")(o.path, 0);
    const std::string device = py::str(first["device"]).cast<std::string>();
    std::string why;
    std::unique_ptr<Backend> base = o.make_base(device, &why);
    if (!base) {
      if (error) *error = "adapter " + o.path + ": DEVICE '" + device + "': " + why;
      return nullptr;
    }
    glue.attr("_sm") = base->native_device().compute_capability;
    return std::make_unique<PythonBackend>(std::move(base), glue, first, o.fallback_operations);
  } catch (py::error_already_set& e) {
    if (error) *error = py::str(e.value()).cast<std::string>();
  } catch (const std::exception& e) {
    if (error) *error = std::string("adapter ") + o.path + ": " + e.what();
  }
  return nullptr;
}

}  // namespace mla

#else  // !MLA_HAVE_PYTHON

namespace mla {

bool python_backend_built(std::string* why_not) {
  if (why_not) *why_not = MLA_PYTHON_UNAVAILABLE_REASON;
  return false;
}

std::unique_ptr<Backend> make_python_backend(const PythonAdapterOptions&, std::string* error) {
  if (error) *error = std::string("this build has no Python backend: ") + MLA_PYTHON_UNAVAILABLE_REASON;
  return nullptr;
}

}  // namespace mla

#endif
