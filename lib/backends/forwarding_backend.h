// A Backend that passes every call on to another one: the base of backends that watch or record
// some operations (mla-bench's recording backend, test probes) and override only those.
#pragma once

#include <cstddef>

#include "kernels/backend.h"

namespace mla {

class ForwardingBackend : public Backend {
 public:
  explicit ForwardingBackend(Backend& inner) : inner_(inner) {}

  BackendInfo info() const override { return inner_.info(); }
  NativeDevice native_device() const override { return inner_.native_device(); }
  std::vector<std::string> take_notes() override { return inner_.take_notes(); }
  void begin_check(const std::string& scenario, const std::string& check) override {
    inner_.begin_check(scenario, check);
  }
  Status allocate(std::size_t bytes, void** ptr) override { return inner_.allocate(bytes, ptr); }
  void release(void* ptr) override { inner_.release(ptr); }
  std::optional<std::size_t> free_memory() const override { return inner_.free_memory(); }
  Status copy_to_device(void* dst, const void* src, std::size_t bytes) override {
    return inner_.copy_to_device(dst, src, bytes);
  }
  Status copy_to_host(void* dst, const void* src, std::size_t bytes) override {
    return inner_.copy_to_host(dst, src, bytes);
  }
  Status synchronize() override { return inner_.synchronize(); }

  Status pack(const PackParams& p) override { return inner_.pack(p); }
  Status gather(const GatherParams& p) override { return inner_.gather(p); }
  Status convert(const ConvertParams& p) override { return inner_.convert(p); }

  Status gemm(const GemmParams& p) override { return inner_.gemm(p); }
  Status sparse_mqa(const SparseMqaParams& p) override { return inner_.sparse_mqa(p); }
  Status dense_mha(const DenseMhaParams& p) override { return inner_.dense_mha(p); }
  Status merge(const MergeParams& p) override { return inner_.merge(p); }
  bool supports_attention() const override { return inner_.supports_attention(); }
  SparseDequant sparse_mqa_dequant() const override { return inner_.sparse_mqa_dequant(); }

 protected:
  Backend& inner() const { return inner_; }

 private:
  Backend& inner_;
};

}  // namespace mla
