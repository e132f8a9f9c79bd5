#include "lib/scenario/json_schema.h"

#include <algorithm>
#include <set>
#include <stdexcept>
#include <utility>

#include <valijson/adapters/nlohmann_json_adapter.hpp>
#include <valijson/schema.hpp>
#include <valijson/schema_parser.hpp>
#include <valijson/validation_results.hpp>
#include <valijson/validator.hpp>

#include "lib/scenario/json_keys.h"

namespace mla {

using json = nlohmann::json;
using ojson = nlohmann::ordered_json;  // the schema as written: "allowed here" lists keys in its order

struct JsonSchema::Impl {
  valijson::Schema compiled;
  ojson document;
};

namespace {

// An array index token ("0", "12"); false for anything else, or one past size_t.
bool parse_index(const std::string& token, size_t* index) {
  if (token.empty() || token.size() > 18 || token.find_first_not_of("0123456789") != std::string::npos) return false;
  *index = static_cast<size_t>(std::stoull(token));
  return true;
}

// --- Finding the subschema of a value -------------------------------------------------------------

// `node` with its local "$ref"s followed ("#/definitions/x"); nullptr for a remote or broken one.
const ojson* follow_refs(const ojson& root, const ojson* node) {
  for (int hops = 0; node != nullptr && node->is_object() && hops < 32; ++hops) {
    const auto ref = node->find("$ref");
    if (ref == node->end()) return node;
    if (!ref->is_string()) return nullptr;
    const std::string& target = ref->get_ref<const std::string&>();
    if (target.empty() || target[0] != '#') return nullptr;
    try {
      node = &root.at(ojson::json_pointer(target.substr(1)));
    } catch (const std::exception&) {
      return nullptr;
    }
  }
  return node;
}

// The subschema that applies to the value at `tokens` (unescaped keys and indices) of `doc`, by
// "properties", "additionalProperties" and "items" (one schema for every element); nullptr when
// the path leaves what these keywords say, or the document.
const ojson* subschema_at(const ojson& root, const json& doc, const std::vector<std::string>& tokens) {
  const ojson* node = follow_refs(root, &root);
  const json* value = &doc;
  for (const std::string& token : tokens) {
    if (node == nullptr || !node->is_object()) return nullptr;
    if (value->is_array()) {
      const auto items = node->find("items");
      if (items == node->end() || !items->is_object()) return nullptr;
      size_t index = 0;
      if (!parse_index(token, &index) || index >= value->size()) return nullptr;
      node = follow_refs(root, &*items);
      value = &(*value)[index];
    } else if (value->is_object()) {
      const auto it = value->find(token);
      if (it == value->end()) return nullptr;
      value = &*it;
      const auto props = node->find("properties");
      if (props != node->end() && props->is_object() && props->contains(token)) {
        node = follow_refs(root, &(*props)[token]);
      } else {
        const auto extra = node->find("additionalProperties");
        if (extra == node->end() || !extra->is_object()) return nullptr;
        node = follow_refs(root, &*extra);
      }
    } else {
      return nullptr;
    }
  }
  return node;
}

const json* value_at(const json& doc, const std::vector<std::string>& tokens) {
  const json* value = &doc;
  for (const std::string& token : tokens) {
    if (value->is_object()) {
      const auto it = value->find(token);
      if (it == value->end()) return nullptr;
      value = &*it;
    } else if (value->is_array()) {
      size_t index = 0;
      if (!parse_index(token, &index) || index >= value->size()) return nullptr;
      value = &(*value)[index];
    } else {
      return nullptr;
    }
  }
  return value;
}

std::string pointer_of(const std::vector<std::string>& tokens) {
  std::string pointer;
  for (const std::string& t : tokens) pointer += "/" + json_pointer_token(t);
  return pointer;
}

// --- Wording ------------------------------------------------------------------------------------

std::string shown(const json& value) {
  std::string text = value.dump();
  if (text.size() > 48) text = text.substr(0, 45) + "...";
  return text;
}

std::string type_name(const std::string& type, bool plural) {
  if (type == "integer") return plural ? "integers" : "an integer";
  if (type == "number") return plural ? "numbers" : "a number";
  if (type == "string") return plural ? "strings" : "a string";
  if (type == "boolean") return plural ? "booleans" : "true or false";
  if (type == "object") return plural ? "objects" : "an object";
  if (type == "array") return plural ? "arrays" : "an array";
  if (type == "null") return "null";
  return type;
}

std::string join(const std::vector<std::string>& parts, const std::string& separator) {
  std::string out;
  for (const std::string& p : parts) out += (out.empty() ? "" : separator) + p;
  return out;
}

std::vector<std::string> types_of(const ojson& schema) {
  const auto type = schema.find("type");
  std::vector<std::string> types;
  if (type == schema.end()) return types;
  if (type->is_string()) types.push_back(type->get<std::string>());
  if (type->is_array()) {
    for (const auto& t : *type) {
      if (t.is_string()) types.push_back(t.get<std::string>());
    }
  }
  return types;
}

// "an integer", "an array of booleans", "a string or null".
std::string expected_type(const ojson& root, const ojson& schema) {
  std::vector<std::string> names;
  for (const std::string& t : types_of(schema)) {
    std::string name = type_name(t, false);
    const auto items = schema.find("items");
    if (t == "array" && items != schema.end()) {
      const ojson* item = follow_refs(root, &*items);
      const std::vector<std::string> item_types = item != nullptr && item->is_object() ? types_of(*item) : std::vector<std::string>{};
      if (item_types.size() == 1) name += " of " + type_name(item_types.front(), true);
    }
    names.push_back(name);
  }
  return names.empty() ? "another type" : join(names, " or ");
}

std::string number_text(const ojson& n) { return n.dump(); }

// "value V is outside [lo, hi]" from the subschema's bounds.
std::string range_problem(const ojson& schema, const json& value) {
  std::string lo, hi;
  if (auto it = schema.find("exclusiveMinimum"); it != schema.end() && it->is_number()) lo = "(" + number_text(*it);
  else if (auto m = schema.find("minimum"); m != schema.end() && m->is_number()) lo = "[" + number_text(*m);
  if (auto it = schema.find("exclusiveMaximum"); it != schema.end() && it->is_number()) hi = number_text(*it) + ")";
  else if (auto m = schema.find("maximum"); m != schema.end() && m->is_number()) hi = number_text(*m) + "]";
  const std::string v = "value " + shown(value);
  if (!lo.empty() && !hi.empty()) return v + " is outside " + lo + ", " + hi;
  if (!lo.empty()) return v + (lo[0] == '(' ? " must be greater than " : " must be at least ") + lo.substr(1);
  if (!hi.empty()) return v + (hi.back() == ')' ? " must be less than " : " must be at most ") + hi.substr(0, hi.size() - 1);
  return v + " is out of range";
}

std::string count_problem(const char* at_least_or_most, const ojson& bound, const char* one, const char* many) {
  if (!bound.is_number_integer()) return std::string("expected ") + at_least_or_most + " " + number_text(bound) + " " + many;
  const int64_t n = bound.get<int64_t>();
  return std::string("expected ") + at_least_or_most + " " + (n == 1 ? std::string("one ") + one : std::to_string(n) + " " + many);
}

}  // namespace

std::string describe_json_value(const json& value) {
  if (value.is_number_integer()) return "integer " + shown(value);
  if (value.is_number_float()) return "number " + shown(value);
  if (value.is_string()) return "string " + shown(value);
  if (value.is_boolean()) return "boolean " + shown(value);
  if (value.is_null()) return "null";
  if (value.is_array()) return "an array";
  return "an object";
}

namespace {

size_t edit_distance(const std::string& a, const std::string& b) {
  std::vector<size_t> row(b.size() + 1);
  for (size_t j = 0; j <= b.size(); ++j) row[j] = j;
  for (size_t i = 1; i <= a.size(); ++i) {
    size_t diagonal = row[0];
    row[0] = i;
    for (size_t j = 1; j <= b.size(); ++j) {
      const size_t above = row[j];
      row[j] = std::min({row[j] + 1, row[j - 1] + 1, diagonal + (a[i - 1] == b[j - 1] ? 0 : 1)});
      diagonal = above;
    }
  }
  return row[b.size()];
}

}  // namespace

std::string closest_spelling(const std::string& key, const std::vector<std::string>& candidates) {
  std::string closest;
  size_t closest_distance = 3;  // suggest close spellings only
  for (const std::string& c : candidates) {
    const size_t d = edit_distance(key, c);
    if (d < closest_distance) closest_distance = d, closest = c;
  }
  return closest;
}

namespace {

std::string unknown_key_problem(const ojson* parent_schema, const std::string& key) {
  std::string problem = "unknown key \"" + key + "\"";
  if (parent_schema == nullptr) return problem;
  const auto props = parent_schema->find("properties");
  if (props == parent_schema->end() || !props->is_object()) return problem;
  std::vector<std::string> allowed;
  for (const auto& item : props->items()) allowed.push_back(item.key());
  const std::string closest = closest_spelling(key, allowed);
  if (!closest.empty()) problem += " (did you mean \"" + closest + "\"?)";
  return problem + "; allowed here: " + join(allowed, ", ");
}

// The constraint failures valijson reports again on every enclosing value ("Failed to validate
// against schema associated with property name 'x'."): dropped while a failure of their own
// subschema explains them.
bool is_enclosing_report(const std::string& description) {
  static const char* const kPrefixes[] = {
      "Failed to validate against schema associated with property name",
      "Failed to validate item #",
      "Failed to validate against child schema #",
      "Failed to validate against additional properties schema",
      "Failed to validate against schema associated with pattern",
      "Failed to validate against a conditional schema set by if-then-else constraints",
  };
  for (const char* p : kPrefixes) {
    if (description.rfind(p, 0) == 0) return true;
  }
  return false;
}

// Text between `prefix` and the closing "'." of a valijson description naming a key.
bool quoted_key(const std::string& description, const std::string& prefix, std::string* key) {
  if (description.rfind(prefix, 0) != 0 || description.size() < prefix.size() + 2) return false;
  if (description.compare(description.size() - 2, 2, "'.") != 0) return false;
  *key = description.substr(prefix.size(), description.size() - prefix.size() - 2);
  return true;
}

// The keyword of a constraint failure, for "errorMessage" objects; "" when not known.
std::string keyword_of(const std::string& d) {
  const std::pair<const char*, const char*> kinds[] = {
      {"Value type not permitted", "type"},
      {"Expected number greater than or equal to", "minimum"},
      {"Expected number greater than", "exclusiveMinimum"},
      {"Expected number less than or equal to", "maximum"},
      {"Expected number less than", "exclusiveMaximum"},
      {"Array should contain no fewer than", "minItems"},
      {"Array should contain no more than", "maxItems"},
      {"String should be no fewer than", "minLength"},
      {"String should be no more than", "maxLength"},
      {"Failed to match regex specified by 'pattern'", "pattern"},
      {"Failed to match expected value set by 'const'", "const"},
      {"Failed to match against any enum values", "enum"},
      {"Target should not validate against schema specified in 'not'", "not"},
      {"Failed to validate against any schemas allowed by anyOf", "anyOf"},
      {"Failed to validate against exactly one child schema", "oneOf"},
      {"Failed to validate against any child schemas allowed by oneOf", "oneOf"},
      {"Elements at indexes #", "uniqueItems"},
  };
  for (const auto& [prefix, keyword] : kinds) {
    if (d.rfind(prefix, 0) == 0) return keyword;
  }
  return "";
}

// The problem of a constraint failure of the value `value` under `schema` (nullptr: not found).
std::string constraint_problem(const ojson& root, const ojson* schema, const json* value, const std::string& description) {
  const std::string keyword = keyword_of(description);
  if (schema == nullptr || !schema->is_object()) return description;
  if (const auto custom = schema->find("errorMessage"); custom != schema->end()) {
    if (custom->is_string()) return custom->get<std::string>();
    if (custom->is_object() && custom->contains(keyword) && (*custom)[keyword].is_string()) {
      return (*custom)[keyword].get<std::string>();
    }
  }
  if (value == nullptr) return description;
  if (keyword == "type") return "expected " + expected_type(root, *schema) + ", got " + describe_json_value(*value);
  if (keyword == "minimum" || keyword == "exclusiveMinimum" || keyword == "maximum" || keyword == "exclusiveMaximum") {
    return range_problem(*schema, *value);
  }
  if (keyword == "minItems" && schema->contains("minItems")) {
    return count_problem("at least", (*schema)["minItems"], "value", "values");
  }
  if (keyword == "maxItems" && schema->contains("maxItems")) {
    return count_problem("at most", (*schema)["maxItems"], "value", "values");
  }
  if (keyword == "minLength" && schema->contains("minLength")) {
    const ojson& n = (*schema)["minLength"];
    if (n.is_number_integer() && n.get<int64_t>() == 1) return "expected a non-empty string";
    return count_problem("at least", n, "character", "characters");
  }
  if (keyword == "maxLength" && schema->contains("maxLength")) {
    return count_problem("at most", (*schema)["maxLength"], "character", "characters");
  }
  if (keyword == "pattern" && schema->contains("pattern")) {
    return shown(*value) + " does not match " + (*schema)["pattern"].dump();
  }
  if (keyword == "const" && schema->contains("const")) return "expected " + (*schema)["const"].dump() + ", got " + describe_json_value(*value);
  if (keyword == "enum" && schema->contains("enum") && (*schema)["enum"].is_array()) {
    std::vector<std::string> options;
    for (const auto& o : (*schema)["enum"]) options.push_back(o.dump());
    return "expected one of: " + join(options, ", ") + "; got " + describe_json_value(*value);
  }
  return description;
}

}  // namespace

std::string located_problem(const std::string& file, const std::string& pointer, const std::string& problem) {
  if (pointer.empty()) return file + ": " + problem;
  return file + ": at " + pointer + ": " + problem;
}

JsonSchema::JsonSchema(const std::string& schema_text, const std::string& source) {
  auto impl = std::make_shared<Impl>();
  json document;
  try {
    document = json::parse(schema_text);
    impl->document = ojson::parse(schema_text);
  } catch (const json::exception& e) {
    throw std::invalid_argument(source + ": not valid JSON: " + e.what());
  }
  try {
    valijson::SchemaParser parser(valijson::SchemaParser::kDraft7);
    valijson::adapters::NlohmannJsonAdapter adapter(document);
    parser.populateSchema(adapter, impl->compiled);
  } catch (const std::exception& e) {
    throw std::invalid_argument(source + ": not a schema valijson can compile: " + e.what());
  }
  impl_ = std::move(impl);
}

std::vector<SchemaViolation> JsonSchema::validate(const json& doc) const {
  valijson::Validator validator;  // strict types: 1.0 is not an integer, "1" not a number
  valijson::ValidationResults results;
  valijson::adapters::NlohmannJsonAdapter target(doc);
  if (validator.validate(impl_->compiled, target, &results)) return {};

  const ojson& root = impl_->document;
  std::vector<SchemaViolation> explained, enclosing;
  std::set<std::pair<std::string, std::string>> seen;
  auto add = [&](std::vector<SchemaViolation>& into, std::string pointer, std::string problem) {
    if (seen.insert({pointer, problem}).second) into.push_back({std::move(pointer), std::move(problem)});
  };
  for (const valijson::ValidationResults::Error& error : results) {
    std::vector<std::string> tokens;
    for (size_t i = 1; i < error.context.size(); ++i) {  // [0] is "<root>"; then "[key]" or "[index]"
      const std::string& c = error.context[i];
      tokens.push_back(c.size() >= 2 && c.front() == '[' && c.back() == ']' ? c.substr(1, c.size() - 2) : c);
    }
    const std::string& d = error.description;
    std::string key;
    if (quoted_key(d, "Missing required property '", &key)) {
      tokens.push_back(key);
      add(explained, pointer_of(tokens), "missing required key \"" + key + "\"");
    } else if (quoted_key(d, "Object contains a property that could not be validated using 'properties' or "
                             "'additionalProperties' constraints: '", &key)) {
      const ojson* parent = subschema_at(root, doc, tokens);
      tokens.push_back(key);
      add(explained, pointer_of(tokens), unknown_key_problem(parent, key));
    } else if (is_enclosing_report(d)) {
      add(enclosing, pointer_of(tokens), d);
    } else {
      add(explained, pointer_of(tokens),
          constraint_problem(root, subschema_at(root, doc, tokens), value_at(doc, tokens), d));
    }
  }
  return explained.empty() ? enclosing : explained;
}

}  // namespace mla
