// Checks nlohmann::json does not make while it parses: a key given twice in one object (it keeps
// the last silently) and nesting deeper than any of our formats needs. Shared by the scenario
// loader (lib/scenario.cpp) and mla-bench's sweep files.
#pragma once

#include <cstddef>
#include <optional>
#include <set>
#include <string>
#include <vector>

#include <nlohmann/json.hpp>

namespace mla {

// RFC 6901 reference token of an object key: '~' -> "~0", '/' -> "~1".
std::string json_pointer_token(const std::string& key);

// Thrown from on_event when an array or object opens deeper than the limit; `path` is the JSON
// pointer of the value that holds it.
struct JsonTooDeep {
  std::string path;
  int max_depth;
};

// Fed by json::parse's callback: `json::parse(text, [&](int d, auto e, auto& j) { return keys.on_event(d, e, j); })`.
// found(): the JSON pointer of the first duplicated key, if any.
class JsonKeyAudit {
 public:
  explicit JsonKeyAudit(int max_depth = 64) : max_depth_(max_depth) {}
  bool on_event(int depth, nlohmann::json::parse_event_t event, nlohmann::json& parsed);
  const std::optional<std::string>& found() const { return found_; }

 private:
  struct Frame {
    bool is_object;
    std::string path;
    std::set<std::string> keys;     // objects: the keys seen
    std::string key;                // objects: the key whose value is being parsed
    size_t index = 0;               // arrays: the element being parsed
  };
  void push(bool is_object);
  void element_done();
  int max_depth_;
  std::vector<Frame> stack_;
  std::optional<std::string> found_;
};

}  // namespace mla
