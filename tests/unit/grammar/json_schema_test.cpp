// JSON schema -> grammar: each supported keyword accepts the JSON it allows (byte by byte) and
// rejects what it forbids at the first offending byte; malformed schemas are errors naming the
// path; unenforced keywords are reported.

#include <gtest/gtest.h>

#include "first_rejected.h"
#include "grammar/grammar_matcher.h"
#include "grammar/json_schema.h"
#include "util/error.h"

namespace strata::grammar {
namespace {

using json = nlohmann::ordered_json;

std::shared_ptr<const Grammar> compile(const json& schema) {
  return grammar_for_json_schema(schema).grammar;
}

void expect_valid(const json& schema, std::string_view text) {
  bool end = false;
  EXPECT_EQ(first_rejected(compile(schema), text, &end), -1) << schema.dump() << " | " << text;
  EXPECT_TRUE(end) << schema.dump() << " | " << text;
  EXPECT_TRUE(json::accept(text)) << text;
}

void expect_rejected_at(const json& schema, std::string_view text, int at) {
  EXPECT_EQ(first_rejected(compile(schema), text), at) << schema.dump() << " | " << text;
}

void expect_incomplete(const json& schema, std::string_view text) {
  bool end = true;
  EXPECT_EQ(first_rejected(compile(schema), text, &end), -1) << text;
  EXPECT_FALSE(end) << text;
}

std::string error_of(const json& schema) {
  try {
    grammar_for_json_schema(schema);
  } catch (const Error& e) {
    return e.what();
  }
  return "(no error)";
}

std::vector<std::string> unenforced_of(const json& schema) {
  return grammar_for_json_schema(schema).unenforced;
}

const json kString = {{"type", "string"}};

TEST(JsonSchemaString, PlainEscapesAndUnicode) {
  expect_valid(kString, R"("")");
  expect_valid(kString, R"("hello world")");
  expect_valid(kString, R"("q\"\\\/\b\f\n\r\t")");
  expect_valid(kString, R"("\u00e9\u20AC\ud83d\ude00")");
  expect_valid(kString, "\"é€😀\x7f\"");
  expect_rejected_at(kString, R"("\x")", 2);
  expect_rejected_at(kString, R"("\u12g")", 5);
  expect_rejected_at(kString, "\"a\nb\"", 2);  // raw control character
  expect_rejected_at(kString, std::string("\"\0\"", 3), 1);
  expect_rejected_at(kString, "'a'", 0);
}

TEST(JsonSchemaString, RejectsInvalidUtf8) {
  expect_rejected_at(kString, "\"\xc0\x80\"", 1);          // overlong
  expect_rejected_at(kString, "\"\xe0\x80\xaf\"", 2);      // overlong 3-byte
  expect_rejected_at(kString, "\"\xed\xa0\x80\"", 2);      // surrogate
  expect_rejected_at(kString, "\"\xf4\x90\x80\x80\"", 2);  // above U+10FFFF
  expect_rejected_at(kString, "\"\xf5\"", 1);
  expect_rejected_at(kString, "\"\x80\"", 1);  // lone continuation
  expect_rejected_at(kString, "\"\xc3\"", 2);  // truncated sequence
}

TEST(JsonSchemaString, SurrogateEscapesMustPair) {
  expect_rejected_at(kString, R"("\ud83d")", 7);        // high surrogate must be followed by \u
  expect_rejected_at(kString, R"("\ud83d\u0041")", 9);  // ... a low one
  expect_rejected_at(kString, R"("\ude00")", 4);        // lone low surrogate
}

TEST(JsonSchemaString, LengthInCodePoints) {
  const json s = {{"type", "string"}, {"minLength", 2}, {"maxLength", 3}};
  expect_valid(s, "\"éé\"");
  expect_valid(s, R"("\n\ud83d\ude00x")");
  expect_rejected_at(s, "\"a\"", 2);
  expect_rejected_at(s, "\"ab😀c\"", 7);
  expect_valid({{"type", "string"}, {"maxLength", 0}}, R"("")");
}

TEST(JsonSchemaString, HugeMaximumIsUnboundedAndReported) {
  const json s = {{"type", "string"}, {"maxLength", 1000000}};
  expect_valid(s, R"("abc")");
  EXPECT_EQ(unenforced_of(s), std::vector<std::string>{"maxLength"});
  EXPECT_NE(error_of({{"type", "string"}, {"minLength", 20000}}).find("larger than"),
            std::string::npos);
}

TEST(JsonSchemaNumber, Syntax) {
  const json n = {{"type", "number"}};
  for (const char* ok : {"0", "-0", "12", "-3.25", "1e5", "1E+05", "2.5e-3", "0.0"}) {
    expect_valid(n, ok);
  }
  expect_rejected_at(n, "01", 1);
  expect_rejected_at(n, "+1", 0);
  expect_rejected_at(n, ".5", 0);
  expect_rejected_at(n, "1.e5", 2);
  expect_incomplete(n, "-");
  expect_incomplete(n, "1.");
  expect_incomplete(n, "1e");
  expect_rejected_at(n, "NaN", 0);
}

TEST(JsonSchemaNumber, BoundedDigits) {
  const json n = {{"type", "number"}};
  expect_valid(n, "1234567890123456");
  expect_rejected_at(n, "12345678901234567", 16);
  expect_valid(n, "0.1234567890123456");
  expect_rejected_at(n, "0.12345678901234567", 18);
  expect_valid(n, "-9999999999999999.9999999999999999e+99");
  expect_rejected_at(n, "1e308", 4);
}

TEST(JsonSchemaNumber, Integer) {
  const json i = {{"type", "integer"}};
  expect_valid(i, "-42");
  expect_rejected_at(i, "1.5", 1);
  expect_rejected_at(i, "1e3", 1);
  const json non_negative = {{"type", "integer"}, {"minimum", 0}};
  expect_valid(non_negative, "7");
  expect_rejected_at(non_negative, "-1", 0);
  EXPECT_TRUE(unenforced_of(non_negative).empty());
  EXPECT_EQ(unenforced_of({{"type", "integer"}, {"minimum", 5}}),
            std::vector<std::string>{"minimum"});
  expect_rejected_at({{"type", "number"}, {"exclusiveMinimum", 0}}, "-1", 0);
  EXPECT_EQ(unenforced_of({{"type", "number"}, {"maximum", 5}}),
            std::vector<std::string>{"maximum"});
}

TEST(JsonSchemaScalars, BooleanNullAndTypeArrays) {
  expect_valid({{"type", "boolean"}}, "true");
  expect_valid({{"type", "boolean"}}, "false");
  expect_rejected_at({{"type", "boolean"}}, "null", 0);
  expect_valid({{"type", "null"}}, "null");
  const json nullable_string = {{"type", {"string", "null"}}};
  expect_valid(nullable_string, R"("x")");
  expect_valid(nullable_string, "null");
  expect_rejected_at(nullable_string, "1", 0);
  const json openapi_nullable = {{"type", "integer"}, {"nullable", true}};
  expect_valid(openapi_nullable, "null");
  expect_valid(openapi_nullable, "5");
}

TEST(JsonSchemaEnum, AnyJsonValues) {
  const json e = {{"enum", {"red", 1.5, nullptr, true, json::array({1, "a"}), {{"k", "v"}}}}};
  expect_valid(e, R"("red")");
  expect_valid(e, "1.5");
  expect_valid(e, "null");
  expect_valid(e, "true");
  expect_valid(e, R"([1,"a"])");
  expect_valid(e, R"({"k":"v"})");
  expect_rejected_at(e, R"("blue")", 1);
  expect_rejected_at(e, "false", 0);
  expect_valid({{"enum", {"a\"b", "é"}}}, R"("a\"b")");
  expect_valid({{"const", 42}}, "42");
  expect_rejected_at({{"const", 42}}, "43", 1);
  // type filters the values
  expect_rejected_at({{"type", "string"}, {"enum", {"a", 1}}}, "1", 0);
}

TEST(JsonSchemaObject, PropertiesInOrderRequiredAndOptional) {
  const json s = {{"type", "object"},
                  {"properties",
                   {{"city", {{"type", "string"}}},
                    {"days", {{"type", "integer"}}},
                    {"unit", {{"enum", {"c", "f"}}}}}},
                  {"required", {"city"}}};
  expect_valid(s, R"({"city":"Paris"})");
  expect_valid(s, R"({"city": "Paris", "days": 3, "unit": "c"})");
  expect_valid(s, R"({"city":"Paris","unit":"f"})");
  expect_valid(s, "{\n  \"city\": \"Paris\",\n  \"days\": 3\n}");
  expect_rejected_at(s, R"({})", 1);
  expect_rejected_at(s, R"({"days":3})", 2);                // city first
  expect_rejected_at(s, R"({"city":"P","city":"Q"})", 13);  // no repeats, no extras
  expect_rejected_at(s, R"({"city":"P","extra":1})", 13);
  expect_rejected_at(s, R"({"city":"P",})", 12);
  expect_rejected_at(s, R"({"city":1})", 8);
}

TEST(JsonSchemaObject, AllOptionalAndEmpty) {
  const json s = {{"type", "object"},
                  {"properties", {{"a", {{"type", "integer"}}}, {"b", {{"type", "integer"}}}}}};
  expect_valid(s, "{}");
  expect_valid(s, "{ }");
  expect_valid(s, R"({"b":2})");
  expect_valid(s, R"({"a":1,"b":2})");
  expect_rejected_at(s, R"({"b":2,"a":1})", 6);
  expect_valid({{"type", "object"}}, "{}");
  expect_rejected_at({{"type", "object"}}, R"({"a":1})", 1);
}

TEST(JsonSchemaObject, AdditionalProperties) {
  const json open = {{"type", "object"},
                     {"properties", {{"a", {{"type", "integer"}}}}},
                     {"additionalProperties", true}};
  expect_valid(open, R"({"a":1,"b":[1,{"c":null}],"ab":"x"})");
  expect_valid(open, R"({"zz":1})");
  expect_valid(open, R"({"":1})");
  expect_rejected_at(open, R"({"a":1,"a":2})", 9);  // a declared name cannot come back
  const json typed = {{"type", "object"}, {"additionalProperties", {{"type", "boolean"}}}};
  expect_valid(typed, R"({"x":true,"y\n":false})");
  expect_rejected_at(typed, R"({"x":1})", 5);
  // required names missing from properties come with any value
  expect_valid({{"type", "object"}, {"required", {"id"}}}, R"({"id":[1]})");
}

TEST(JsonSchemaArray, ItemsAndCounts) {
  const json s = {
      {"type", "array"}, {"items", {{"type", "integer"}}}, {"minItems", 1}, {"maxItems", 3}};
  expect_valid(s, "[1]");
  expect_valid(s, "[1, 2, 3]");
  expect_rejected_at(s, "[]", 1);
  expect_rejected_at(s, "[1,2,3,4]", 6);
  expect_rejected_at(s, R"([1,"a"])", 3);
  expect_valid({{"type", "array"}}, R"([1,"a",null,[],{}])");
  expect_valid({{"type", "array"}, {"maxItems", 0}}, "[]");
}

TEST(JsonSchemaArray, PrefixItems) {
  const json tuple = {{"type", "array"},
                      {"prefixItems", {{{"type", "string"}}, {{"type", "integer"}}}},
                      {"items", false}};
  expect_valid(tuple, R"(["a",1])");
  expect_valid(tuple, R"(["a"])");
  expect_valid(tuple, "[]");
  expect_rejected_at(tuple, R"(["a",1,2])", 6);
  expect_rejected_at(tuple, "[1]", 1);
  const json rest = {{"type", "array"},
                     {"prefixItems", {{{"type", "string"}}}},
                     {"items", {{"type", "boolean"}}},
                     {"minItems", 2}};
  expect_valid(rest, R"(["a",true,false])");
  expect_rejected_at(rest, R"(["a"])", 4);
  EXPECT_NE(error_of({{"type", "array"},
                      {"prefixItems", {{{"type", "string"}}}},
                      {"items", false},
                      {"minItems", 2}})
                .find("minItems"),
            std::string::npos);
}

TEST(JsonSchemaComposition, AnyOfOneOfAllOf) {
  const json any = {{"anyOf", {{{"type", "integer"}}, {{"type", "string"}, {"maxLength", 1}}}}};
  expect_valid(any, "5");
  expect_valid(any, R"("a")");
  expect_rejected_at(any, R"("ab")", 2);
  const json one = {{"oneOf", {{{"type", "integer"}}, {{"type", "null"}}}}};
  expect_valid(one, "null");
  EXPECT_TRUE(unenforced_of(one).empty());
  EXPECT_EQ(unenforced_of({{"oneOf", {{{"type", "integer"}}, {{"type", "number"}}}}}),
            std::vector<std::string>{"oneOf"});
  const json all = {{"allOf", {{{"type", "string"}, {"maxLength", 2}}}}};
  expect_valid(all, R"("ab")");
  expect_rejected_at(all, R"("abc")", 3);
  // keywords beside anyOf apply to every branch
  const json shared = {{"type", "object"},
                       {"required", {"kind"}},
                       {"anyOf",
                        {{{"properties", {{"kind", {{"const", "a"}}}}}},
                         {{"properties", {{"kind", {{"const", "b"}}}}}}}}};
  expect_valid(shared, R"({"kind":"b"})");
  expect_rejected_at(shared, R"({})", 1);
  // allOf of two object schemas merges them
  const json merged = {
      {"allOf",
       {{{"type", "object"}, {"properties", {{"a", {{"type", "integer"}}}}}, {"required", {"a"}}},
        {{"properties", {{"b", {{"type", "integer"}}}}}, {"required", {"b"}}}}}};
  expect_valid(merged, R"({"a":1,"b":2})");
  expect_rejected_at(merged, R"({"a":1})", 6);
}

TEST(JsonSchemaRef, DefsDefinitionsAndRecursion) {
  const json defs = {{"$defs", {{"pos", {{"type", "integer"}, {"minimum", 0}}}}},
                     {"type", "array"},
                     {"items", {{"$ref", "#/$defs/pos"}}}};
  expect_valid(defs, "[1,2]");
  expect_rejected_at(defs, "[-1]", 1);
  const json old = {{"definitions", {{"s", {{"type", "string"}}}}}, {"$ref", "#/definitions/s"}};
  expect_valid(old, R"("x")");
  const json tree = {{"type", "object"},
                     {"properties",
                      {{"name", {{"type", "string"}}},
                       {"children", {{"type", "array"}, {"items", {{"$ref", "#"}}}}}}},
                     {"required", {"name"}},
                     {"additionalProperties", false}};
  expect_valid(tree, R"({"name":"a","children":[{"name":"b","children":[{"name":"c"}]}]})");
  expect_rejected_at(tree, R"({"name":"a","children":[{}]})", 25);
}

TEST(JsonSchemaAny, EmptySchemaAndTrue) {
  for (const json& s : {json::object(), json(true), json{{"description", "anything"}}}) {
    expect_valid(s, R"({"a":[1,2.5e3,"x",true,null,{}]})");
    expect_valid(s, "-7");
    expect_rejected_at(s, "nul", -1);
    expect_incomplete(s, "[1,");
    EXPECT_TRUE(unenforced_of(s).empty());
  }
  auto obj = grammar_for_any_json_object();
  EXPECT_EQ(first_rejected(obj, R"( {"a": [1, {"b": null}]} )"), -1);
  EXPECT_EQ(first_rejected(obj, "[1]"), 0);
}

TEST(JsonSchemaWhitespace, BoundedPerGap) {
  const json s = {{"type", "array"}};
  expect_valid(s, "[        1]");  // 8
  expect_rejected_at(s, "[         1]", 9);
  expect_valid(s, "\n\t[1 ,\r\n  2]\n");
  expect_rejected_at(kString, "         \"a\"", 8);
}

TEST(JsonSchemaUnenforced, ReportedWithPaths) {
  const json s = {{"$schema", "https://json-schema.org/draft/2020-12/schema"},
                  {"title", "T"},
                  {"type", "object"},
                  {"properties",
                   {{"url", {{"type", "string"}, {"format", "uri"}, {"description", "d"}}},
                    {"tags",
                     {{"type", "array"},
                      {"uniqueItems", true},
                      {"items", {{"type", "string"}, {"pattern", "^[a-z]+$"}}}}}}},
                  {"minProperties", 1}};
  const std::vector<std::string> expected = {"minProperties", "properties.url.format",
                                             "properties.tags.uniqueItems",
                                             "properties.tags.items.pattern"};
  auto got = unenforced_of(s);
  std::sort(got.begin(), got.end());
  auto want = expected;
  std::sort(want.begin(), want.end());
  EXPECT_EQ(got, want);
}

TEST(JsonSchemaErrors, MalformedSchemasNameThePath) {
  auto expect_error = [](const json& s, const std::string& part) {
    const std::string e = error_of(s);
    EXPECT_NE(e.find(part), std::string::npos) << "error: " << e << "\nwanted: " << part;
  };
  expect_error({{"type", 5}}, "at the schema root: \"type\" must be a string or a non-empty array");
  expect_error({{"type", "text"}}, "found \"text\"");
  expect_error({{"type", json::array()}}, "non-empty array of strings, found []");
  expect_error({{"properties", {{"a", {{"type", {"string", 3}}}}}}},
               "at 'properties.a': \"type\" must be a string or an array of strings");
  expect_error({{"type", "object"}, {"required", "a"}},
               "\"required\" must be an array of strings, found \"a\"");
  expect_error({{"type", "object"}, {"required", {"a", 1}}}, "array of strings");
  expect_error({{"type", "object"}, {"properties", {1, 2}}}, "\"properties\" must be an object");
  expect_error({{"type", "array"}, {"minItems", 3}, {"maxItems", 2}},
               "\"minItems\" (3) is greater than \"maxItems\" (2)");
  expect_error({{"type", "string"}, {"maxLength", -1}},
               "\"maxLength\" must be a non-negative integer, found -1");
  expect_error({{"enum", "a"}}, "\"enum\" must be a non-empty array, found \"a\"");
  expect_error({{"enum", json::array()}}, "\"enum\" must be a non-empty array");
  expect_error({{"$ref", "#/$defs/missing"}}, "\"$ref\" \"#/$defs/missing\" points to nothing");
  expect_error({{"$ref", "https://example.com/s.json"}}, "must be a local reference");
  expect_error({{"$ref", "#anchor"}}, "anchor");
  expect_error({{"properties", {{"p", {{"items", {{"$ref", 7}}}}}}}},
               "at 'properties.p.items': \"$ref\" must be a string, found 7");
  expect_error(json(false), "the schema false accepts no value");
  expect_error(json(3), "a schema must be an object or a boolean, found 3");
  expect_error({{"type", "object"}, {"additionalProperties", "no"}},
               "\"additionalProperties\" must be a boolean or a schema");
  expect_error({{"anyOf", json::object()}}, "\"anyOf\" must be a non-empty array");
  expect_error({{"const", 1}, {"enum", {2}}}, "\"const\" 1 is not one of \"enum\" [2]");
  expect_error({{"type", "object"}, {"required", {"x"}}, {"additionalProperties", false}},
               "required property \"x\" is not in \"properties\"");
  // Found by fuzz_json_schema: a non-boolean "nullable" escaped as a JSON library type error.
  expect_error({{"type", "object"},
                {"properties", {{"b", {{"type", "array"}, {"nullable", 2}}}}},
                {"required", {"b"}}},
               "at 'properties.b': \"nullable\" must be true or false, found 2");
  expect_error({{"type", "integer"}, {"enum", {1, 2}}, {"nullable", "yes"}},
               "\"nullable\" must be true or false, found \"yes\"");
  expect_error({{"anyOf", {{{"type", "string"}, {"nullable", 0}}, kString}}}, "\"nullable\"");
}

TEST(JsonSchemaErrors, UnusableRecursion) {
  const std::string cycle =
      error_of({{"$defs", {{"a", {{"$ref", "#/$defs/a"}}}}}, {"$ref", "#/$defs/a"}});
  EXPECT_NE(cycle.find("can never complete"), std::string::npos) << cycle;
  const std::string left =
      error_of({{"$defs", {{"a", {{"anyOf", {{{"$ref", "#/$defs/a"}}, {{"type", "string"}}}}}}}},
                {"$ref", "#/$defs/a"}});
  EXPECT_NE(left.find("left recursion"), std::string::npos) << left;
  const std::string endless = error_of(
      {{"type", "object"}, {"properties", {{"self", {{"$ref", "#"}}}}}, {"required", {"self"}}});
  EXPECT_NE(endless.find("can never complete"), std::string::npos) << endless;
}

TEST(JsonSchemaEmbedding, ToolCallGrammar) {
  GrammarBuilder b;
  std::vector<std::string> unenforced;
  auto call = [&](const char* name, const json& params) {
    return b.sequence(
        {b.literal(fmt::format("<tool_call>\n{{\"name\": \"{}\", \"arguments\": ", name)),
         add_json_schema(b, params, &unenforced), b.literal("}\n</tool_call>")});
  };
  const json weather = {{"type", "object"},
                        {"properties", {{"city", {{"type", "string"}, {"format", "city"}}}}},
                        {"required", {"city"}}};
  const json time = {{"$defs", {{"tz", {{"type", "string"}}}}},
                     {"type", "object"},
                     {"properties", {{"tz", {{"$ref", "#/$defs/tz"}}}}}};
  Element one = b.choice({call("get_weather", weather), call("get_time", time)});
  auto g = b.build(b.sequence({one, b.repeat(b.sequence({b.literal("\n"), one}), 0, -1)}));
  EXPECT_EQ(unenforced, std::vector<std::string>{"properties.city.format"});
  const std::string text =
      "<tool_call>\n{\"name\": \"get_weather\", \"arguments\": {\"city\": "
      "\"Oslo\"}}\n</tool_call>\n"
      "<tool_call>\n{\"name\": \"get_time\", \"arguments\": {}}\n</tool_call>";
  bool end = false;
  EXPECT_EQ(first_rejected(g, text, &end), -1);
  EXPECT_TRUE(end);
  EXPECT_EQ(first_rejected(g, "<tool_call>\n{\"name\": \"get_time\", \"arguments\": {\"city\""),
            48);
}

}  // namespace
}  // namespace strata::grammar
