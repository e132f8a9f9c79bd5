// mla-check --dump DIR (docs/dump.md): the DumpSink that writes one scenario's arrays as .npy
// files under DIR/SCENARIO/CHECK_ID/ROLE/NAME.npy and an index, DIR/SCENARIO/index.json (schema
// "mla-harness.dump/1"), rewritten after every check so that a crash keeps what came before.
// An array of at least kDumpSharedMinBytes with the same bytes, type and shape as one already
// written (the cache, handed to several checks) is written once; later entries point at the first
// file ("same_as_earlier"). Smaller arrays are written where they belong.
// Bounded: the arrays of one scenario may take at most max_bytes; an array that would pass it is
// left out, listed in the index with its size and the reason, and the check gets a note
// ("--dump: ...") that says so.
#pragma once

#include <cstdint>
#include <map>
#include <string>
#include <vector>

#include <nlohmann/json.hpp>

#include "lib/checks/dump_sink.h"

namespace mla {

inline constexpr const char* kDumpIndexSchema = "mla-harness.dump/1";
inline constexpr int64_t kDefaultDumpMaxBytes = int64_t{256} << 20;
inline constexpr size_t kDumpSharedMinBytes = size_t{64} << 10;

struct DumpOptions {
  std::string dir;                            // empty: no dump
  int64_t max_bytes = kDefaultDumpMaxBytes;   // per scenario
};

class DirectoryDump final : public DumpSink {
 public:
  // `about` goes into the index as is (scenario name and file, seed, backend, injection).
  DirectoryDump(const DumpOptions& options, const std::string& scenario, nlohmann::json about);

  void begin_check(const std::string& id) override;
  void array(const DumpArray& a) override;
  void param(const std::string& name, double value) override;
  void end_check(CheckResult& r) override;

  // The index as last written; the scenario's directory.
  const nlohmann::json& index() const { return index_; }
  const std::string& scenario_dir() const { return dir_; }
  int64_t bytes_written() const { return written_; }

 private:
  void write_index();

  DumpOptions options_;
  std::string dir_;
  nlohmann::json index_;
  nlohmann::json current_;           // the check being dumped
  std::string current_dir_;          // its directory, relative to dir_
  int64_t written_ = 0;
  int64_t left_out_bytes_ = 0;       // of the current check
  int64_t left_out_arrays_ = 0;
  std::map<std::string, std::string> files_by_content_;  // content key -> file (relative)
  std::string error_;                // the first write error; later arrays are left out
};

// A check id as a directory name: '/' separates levels, characters other than letters, digits,
// '_', '.' and '-' become '_' ("gather/ctx[1]" -> "gather/ctx_1_").
std::string dump_path_of(const std::string& check_id);

}  // namespace mla
