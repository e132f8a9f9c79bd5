// lib/json_schema: violations come back as {JSON pointer, problem} worded for a file's author,
// one per failing value (not the enclosing objects'), and print in the style of every input file.
#include "lib/scenario/json_schema.h"

#include <gtest/gtest.h>

#include <algorithm>
#include <stdexcept>
#include <string>
#include <vector>

namespace mla {
namespace {

using json = nlohmann::json;

const char* const kSchema = R"({
  "$schema": "http://json-schema.org/draft-07/schema#",
  "type": "object",
  "additionalProperties": false,
  "required": ["version", "items"],
  "properties": {
    "version": { "const": 1 },
    "rate": { "type": "number", "exclusiveMinimum": 0, "maximum": 10 },
    "count": { "type": "integer", "minimum": 1 },
    "kind": { "enum": ["a", "b"] },
    "label": { "type": "string", "minLength": 1, "pattern": "^[a-z]*$",
               "errorMessage": { "pattern": "lower-case letters only" } },
    "seconds": { "type": "number", "errorMessage": "a number of seconds" },
    "items": { "type": "array", "minItems": 1, "items": { "$ref": "#/definitions/item" } },
    "named": { "type": "object", "additionalProperties": { "type": "boolean" } }
  },
  "definitions": {
    "item": {
      "type": "object",
      "additionalProperties": false,
      "required": ["size"],
      "properties": { "size": { "type": "integer", "minimum": 0, "maximum": 4096 },
                      "flags": { "type": "array", "items": { "type": "boolean" } } }
    }
  }
})";

std::vector<SchemaViolation> violations(const std::string& text) {
  static const JsonSchema schema(kSchema, "test schema");
  return schema.validate(json::parse(text));
}

// The single violation of `text`.
SchemaViolation only(const std::string& text) {
  const std::vector<SchemaViolation> v = violations(text);
  EXPECT_EQ(v.size(), 1u) << text;
  return v.empty() ? SchemaViolation{"(none)", "(none)"} : v.front();
}

void expect_only(const std::string& text, const std::string& pointer, const std::string& problem) {
  const SchemaViolation v = only(text);
  EXPECT_EQ(v.pointer, pointer) << text;
  EXPECT_EQ(v.problem, problem) << text;
}

TEST(JsonSchema, AValidDocumentHasNoViolation) {
  EXPECT_TRUE(violations(R"({"version": 1, "items": [{"size": 0, "flags": [true]}], "rate": 10,
                              "label": "ab", "named": {"x": false}})").empty());
}

TEST(JsonSchema, MissingAndUnknownKeysAreNamedWhereTheyAreOrWouldBe) {
  expect_only(R"({"version": 1})", "/items", "missing required key \"items\"");
  expect_only(R"({"version": 1, "items": [{}]})", "/items/0/size", "missing required key \"size\"");
  expect_only(R"({"version": 1, "items": [{"size": 1, "flag": []}]})", "/items/0/flag",
              "unknown key \"flag\" (did you mean \"flags\"?); allowed here: size, flags");
  // No close spelling: no suggestion; the allowed keys in the schema's order.
  expect_only(R"({"version": 1, "items": [{"size": 1}], "zzzzzz": 0})", "/zzzzzz",
              "unknown key \"zzzzzz\"; allowed here: version, rate, count, kind, label, seconds, items, named");
}

TEST(JsonSchema, PointersEscapeSlashAndTilde) {
  expect_only(R"({"version": 1, "items": [{"size": 1}], "a/b~c": 0})", "/a~1b~0c",
              "unknown key \"a/b~c\"; allowed here: version, rate, count, kind, label, seconds, items, named");
  expect_only(R"({"version": 1, "items": [{"size": 1}], "named": {"x/y": 3}})", "/named/x~1y",
              "expected true or false, got integer 3");
}

TEST(JsonSchema, TypesSayWhatWasExpectedAndWhatWasFound) {
  expect_only(R"({"version": 1, "items": {}})", "/items", "expected an array of objects, got an object");
  expect_only(R"({"version": 1, "items": [{"size": "1"}]})", "/items/0/size", "expected an integer, got string \"1\"");
  expect_only(R"({"version": 1, "items": [{"size": 1.0}]})", "/items/0/size", "expected an integer, got number 1.0");
  expect_only(R"({"version": 1, "items": [{"size": 1, "flags": [true, 0]}]})", "/items/0/flags/1",
              "expected true or false, got integer 0");
  expect_only(R"([])", "", "expected an object, got an array");
}

TEST(JsonSchema, BoundsAreShownAsAnInterval) {
  expect_only(R"({"version": 1, "items": [{"size": 4097}]})", "/items/0/size", "value 4097 is outside [0, 4096]");
  expect_only(R"({"version": 1, "items": [{"size": -1}]})", "/items/0/size", "value -1 is outside [0, 4096]");
  expect_only(R"({"version": 1, "items": [{"size": 1}], "rate": 0})", "/rate", "value 0 is outside (0, 10]");
  expect_only(R"({"version": 1, "items": [{"size": 1}], "count": 0})", "/count", "value 0 must be at least 1");
  // A value past int64 (valijson reads it wrapped) is shown as written.
  expect_only(R"({"version": 1, "items": [{"size": 18446744073709551615}]})", "/items/0/size",
              "value 18446744073709551615 is outside [0, 4096]");
}

TEST(JsonSchema, CountsConstantsEnumsAndPatterns) {
  expect_only(R"({"version": 1, "items": []})", "/items", "expected at least one value");
  expect_only(R"({"version": 2, "items": [{"size": 1}]})", "/version", "expected 1, got integer 2");
  expect_only(R"({"version": 1, "items": [{"size": 1}], "kind": "c"})", "/kind",
              "expected one of: \"a\", \"b\"; got string \"c\"");
  expect_only(R"({"version": 1, "items": [{"size": 1}], "label": ""})", "/label", "expected a non-empty string");
}

TEST(JsonSchema, ErrorMessageReplacesTheWordingOfItsOwnFailures) {
  expect_only(R"({"version": 1, "items": [{"size": 1}], "label": "aB"})", "/label", "lower-case letters only");
  expect_only(R"({"version": 1, "items": [{"size": 1}], "seconds": "3"})", "/seconds", "a number of seconds");
}

TEST(JsonSchema, EveryFailingValueIsReportedOnce) {
  const std::vector<SchemaViolation> v =
      violations(R"({"version": 2, "items": [{"size": -1}, {"size": 1, "x": 0}], "rate": 11})");
  std::vector<std::string> got;
  for (const SchemaViolation& s : v) got.push_back(s.pointer + ": " + s.problem);
  std::sort(got.begin(), got.end());
  EXPECT_EQ(got, (std::vector<std::string>{
                     "/items/0/size: value -1 is outside [0, 4096]",
                     "/items/1/x: unknown key \"x\"; allowed here: size, flags",
                     "/rate: value 11 is outside (0, 10]",
                     "/version: expected 1, got integer 2",
                 }));
}

TEST(JsonSchema, ProblemsPrintInTheStyleOfEveryInputFile) {
  EXPECT_EQ(located_problem("f.json", "/a/0", "missing"), "f.json: at /a/0: missing");
  EXPECT_EQ(located_problem("f.json", "", "expected an object"), "f.json: expected an object");
}

TEST(JsonSchema, ASchemaThatDoesNotCompileIsAProgramError) {
  EXPECT_THROW(JsonSchema("{", "broken"), std::invalid_argument);
  EXPECT_THROW(JsonSchema(R"({"type": 7})", "bad type"), std::invalid_argument);
  try {
    JsonSchema("{", "broken.schema.json");
  } catch (const std::invalid_argument& e) {
    EXPECT_NE(std::string(e.what()).find("broken.schema.json: not valid JSON"), std::string::npos) << e.what();
  }
}

}  // namespace
}  // namespace mla
