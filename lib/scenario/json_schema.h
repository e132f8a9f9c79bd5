// JSON Schema validation of the project's input files. A schema (draft 7, as valijson 1.0 reads
// it) states the structure of a file: types, ranges, required and unknown keys, non-empty lists,
// patterns. A loader validates the parsed document against it before it reads any field, and
// keeps in C++ only the rules between fields that a schema cannot state.
//
// Violations come back as {JSON pointer, problem}, worded for the file's author, and are printed
// in the one style of every input file of the project: "FILE: at /json/pointer: problem"
// ("FILE: problem" at the document's root; ScenarioError::to_string's style). Problems:
//   missing key         at .../KEY: missing required key "KEY"
//   unknown key         at .../KEY: unknown key "KEY" (did you mean "K2"?); allowed here: a, b, c
//   type                expected an integer, got string "x" (arrays: "an array of integers", from
//                       the schema's "items")
//   minimum / maximum   value V is outside [lo, hi] ("(" / ")" for an exclusive bound)
//   minItems, minLength expected at least one value / N values; expected a non-empty string
//   pattern, const,     "VALUE" does not match PATTERN; expected C; expected one of: a, b
//   enum
// A subschema's "errorMessage" replaces the wording of its own constraint failures: a string for
// all of them, or an object by keyword ({"pattern": "..."}); missing and unknown keys below it are
// reported as such. The wording reads the failing value's subschema by following "properties",
// "additionalProperties", "items" and local "$ref"s from the root: a value reached only through
// allOf / anyOf / oneOf gets valijson's own description instead.
#pragma once

#include <memory>
#include <string>
#include <vector>

#include <nlohmann/json.hpp>

namespace mla {

struct SchemaViolation {
  std::string pointer;  // RFC 6901 pointer into the validated document; "" is its root
  std::string problem;
};

// What a file holds, for "expected X, got Y" messages: "integer 5", "number 2.5", "string \"x\"",
// "boolean true", "null", "an array", "an object" (values past 48 characters shortened).
std::string describe_json_value(const nlohmann::json& value);

// The candidate within two edits of `key` (the closest; the first of equals), or "": the "did you
// mean" of unknown-key messages.
std::string closest_spelling(const std::string& key, const std::vector<std::string>& candidates);

// "FILE: at POINTER: PROBLEM", or "FILE: PROBLEM" when the pointer is "" (the root).
std::string located_problem(const std::string& file, const std::string& pointer, const std::string& problem);

class JsonSchema {
 public:
  // Compiles a schema document. Throws std::invalid_argument naming `source` when the text is not
  // JSON or not a schema valijson can compile (a defect of the program, not of the user's input).
  JsonSchema(const std::string& schema_text, const std::string& source);

  // Every violation of `doc`, in valijson's order, each (pointer, problem) once; empty when
  // `doc` is valid.
  std::vector<SchemaViolation> validate(const nlohmann::json& doc) const;

 private:
  struct Impl;
  std::shared_ptr<const Impl> impl_;
};

}  // namespace mla
