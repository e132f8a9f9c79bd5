#include "lib/scenario/json_keys.h"

namespace mla {

std::string json_pointer_token(const std::string& key) {
  std::string out;
  for (char c : key) {
    if (c == '~') out += "~0";
    else if (c == '/') out += "~1";
    else out += c;
  }
  return out;
}

bool JsonKeyAudit::on_event(int depth, nlohmann::json::parse_event_t event, nlohmann::json& parsed) {
  using Event = nlohmann::json::parse_event_t;
  if (depth > max_depth_) throw JsonTooDeep{stack_.empty() ? "" : stack_.back().path, max_depth_};
  switch (event) {
    case Event::object_start: push(true); break;
    case Event::array_start: push(false); break;
    case Event::key: {
      Frame& f = stack_.back();
      f.key = parsed.get<std::string>();
      if (!f.keys.insert(f.key).second && !found_) found_ = f.path + "/" + json_pointer_token(f.key);
      break;
    }
    case Event::object_end:
    case Event::array_end:
      stack_.pop_back();
      element_done();
      break;
    case Event::value: element_done(); break;
  }
  return true;
}

void JsonKeyAudit::push(bool is_object) {
  std::string path;
  if (!stack_.empty()) {
    const Frame& parent = stack_.back();
    path = parent.path + "/" + (parent.is_object ? json_pointer_token(parent.key) : std::to_string(parent.index));
  }
  stack_.push_back(Frame{is_object, path, {}, {}, 0});
}

void JsonKeyAudit::element_done() {
  if (!stack_.empty() && !stack_.back().is_object) ++stack_.back().index;
}

}  // namespace mla
