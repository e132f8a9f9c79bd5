#include "lib/run/dump_writer.h"

#include <algorithm>
#include <cstdio>
#include <filesystem>
#include <fstream>
#include <system_error>

#include "lib/run/hash.h"
#include "lib/run/npy.h"

namespace mla {

namespace fs = std::filesystem;
using nlohmann::json;

namespace {

std::string mib(int64_t bytes) {
  char buf[32];
  std::snprintf(buf, sizeof buf, "%.1f MiB", static_cast<double>(bytes) / (1 << 20));
  return buf;
}

}  // namespace

std::string dump_path_of(const std::string& check_id) {
  std::string out;
  for (char c : check_id) {
    const bool keep = (c >= 'A' && c <= 'Z') || (c >= 'a' && c <= 'z') || (c >= '0' && c <= '9') || c == '_' ||
                      c == '.' || c == '-' || c == '/';
    out += keep ? c : '_';
  }
  // No empty, "." or ".." levels: a level of dots only becomes underscores.
  std::string clean, level;
  auto flush = [&] {
    if (level.empty() || level.find_first_not_of('.') == std::string::npos) level = std::string(std::max<size_t>(level.size(), 1), '_');
    clean += (clean.empty() ? "" : "/") + level;
    level.clear();
  };
  for (char c : out) {
    if (c == '/') flush();
    else level += c;
  }
  flush();
  return clean;
}

DirectoryDump::DirectoryDump(const DumpOptions& options, const std::string& scenario, json about)
    : options_(options), dir_((fs::path(options.dir) / dump_path_of(scenario)).string()) {
  index_ = std::move(about);
  index_["schema"] = kDumpIndexSchema;
  index_["max_bytes"] = options_.max_bytes;
  index_["bytes_written"] = 0;
  index_["checks"] = json::array();
  std::error_code ec;
  fs::create_directories(dir_, ec);
  if (ec) error_ = "cannot create " + dir_ + ": " + ec.message();
  write_index();
}

void DirectoryDump::begin_check(const std::string& id) {
  current_ = json{{"id", id}, {"dir", dump_path_of(id)}, {"params", json::object()}, {"arrays", json::array()},
                  {"left_out", json::array()}};
  current_dir_ = dump_path_of(id);
  left_out_bytes_ = 0;
  left_out_arrays_ = 0;
}

void DirectoryDump::param(const std::string& name, double value) {
  if (current_.is_null()) return;
  current_["params"][name] = value;
}

void DirectoryDump::array(const DumpArray& a) {
  if (current_.is_null()) return;
  json entry{{"name", a.name}, {"role", to_string(a.role)}, {"what", a.what}, {"element", a.element},
             {"dtype", a.npy_dtype}, {"shape", a.shape}, {"bytes", a.bytes}};
  const bool shared = a.bytes >= kDumpSharedMinBytes;
  const std::string key = shared ? a.npy_dtype + json(a.shape).dump() + ":" + std::to_string(fnv1a64(a.data, a.bytes)) : "";
  if (auto it = files_by_content_.find(key); shared && it != files_by_content_.end()) {
    entry["file"] = it->second;
    entry["same_as_earlier"] = true;
    current_["arrays"].push_back(entry);
    return;
  }
  const std::string why = !error_.empty() ? error_
                          : written_ + static_cast<int64_t>(a.bytes) > options_.max_bytes
                              ? "the scenario's dump would pass --dump-max-bytes (" + std::to_string(options_.max_bytes) + ")"
                              : "";
  if (!why.empty()) {
    current_["left_out"].push_back(json{{"name", a.name}, {"role", to_string(a.role)}, {"bytes", a.bytes}, {"why", why}});
    left_out_bytes_ += static_cast<int64_t>(a.bytes);
    ++left_out_arrays_;
    return;
  }
  const std::string rel = current_dir_ + "/" + to_string(a.role) + "/" + dump_path_of(a.name) + ".npy";
  std::error_code ec;
  fs::create_directories(fs::path(dir_) / current_dir_ / to_string(a.role), ec);
  const Status s = ec ? Status::error("cannot create a directory under " + dir_ + ": " + ec.message())
                      : write_npy((fs::path(dir_) / rel).string(), a.npy_dtype, a.shape, a.data, a.bytes);
  if (!s.ok()) {
    error_ = s.message();
    current_["left_out"].push_back(json{{"name", a.name}, {"role", to_string(a.role)}, {"bytes", a.bytes}, {"why", error_}});
    left_out_bytes_ += static_cast<int64_t>(a.bytes);
    ++left_out_arrays_;
    return;
  }
  written_ += static_cast<int64_t>(a.bytes);
  if (shared) files_by_content_[key] = rel;
  entry["file"] = rel;
  current_["arrays"].push_back(entry);
}

void DirectoryDump::end_check(CheckResult& r) {
  if (current_.is_null()) return;
  current_["check"] = r.check;
  current_["verdict"] = to_string(r.verdict);
  current_["reason"] = r.reason;
  if (left_out_arrays_ > 0) {
    r.notes.push_back("--dump: " + std::to_string(left_out_arrays_) + " arrays (" + mib(left_out_bytes_) +
                      ") of this check not written: " +
                      (error_.empty() ? "the scenario's dump reached --dump-max-bytes (" + mib(options_.max_bytes) +
                                            "); raise it to write them"
                                      : error_));
  }
  index_["checks"].push_back(std::move(current_));
  current_ = json();
  index_["bytes_written"] = written_;
  write_index();
}

void DirectoryDump::write_index() {
  if (!error_.empty() && !fs::is_directory(dir_)) return;
  const std::string path = (fs::path(dir_) / "index.json").string();
  const std::string tmp = path + ".tmp";
  {
    std::ofstream out(tmp, std::ios::trunc);
    out << index_.dump(2, ' ', false, json::error_handler_t::replace) << "\n";
    if (!out) {
      if (error_.empty()) error_ = "cannot write " + tmp;
      return;
    }
  }
  std::error_code ec;
  fs::rename(tmp, path, ec);
  if (ec && error_.empty()) error_ = "cannot write " + path + ": " + ec.message();
}

}  // namespace mla
