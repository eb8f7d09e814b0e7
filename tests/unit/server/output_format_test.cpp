// Constrained output through the whole server: response_format (json_object, json_schema) and
// enforced tool calls (tool_choice required / named, parallel_tool_calls), sampled at
// temperature 1 from a random model, so only the grammar makes the output valid.

#include <gtest/gtest.h>

#include "server_fixture.h"

namespace strata::server {
namespace {

using test_support::ServerStack;
using test_support::sse_payloads;
using Json = nlohmann::json;

const Json kMessages = {{{"role", "user"}, {"content", "Describe a city as JSON."}}};

// A schema with one of each kind, every size bounded so a random model finishes quickly.
const Json kCitySchema = Json::parse(R"({
  "type": "object",
  "properties": {
    "name": {"type": "string", "minLength": 1, "maxLength": 6},
    "population": {"type": "integer", "minimum": 0},
    "kind": {"enum": ["town", "city", 3, null]},
    "coastal": {"type": "boolean"},
    "tags": {"type": "array", "items": {"type": "string", "maxLength": 3}, "maxItems": 2},
    "mayor": {"anyOf": [{"type": "null"}, {"$ref": "#/$defs/person"}]}
  },
  "required": ["name", "population", "kind", "tags"],
  "additionalProperties": false,
  "$defs": {"person": {"type": "object", "properties": {"age": {"type": "integer"}},
                       "required": ["age"], "additionalProperties": false}}
})");

Json chat(httplib::Client& c, Json body) {
  body["messages"] = body.value("messages", kMessages);
  body["chat_template_kwargs"] = {{"enable_thinking", false}};
  auto r = c.Post("/v1/chat/completions", body.dump(), "application/json");
  EXPECT_TRUE(r);
  if (!r) return Json();
  if (body.value("stream", false)) return Json{{"status", r->status}, {"sse", r->body}};
  Json j = Json::parse(r->body);
  j["status"] = r->status;
  return j;
}

// Checks the city object by hand, keyword by keyword (the openai client test validates the
// same kind of output with ajv, an independent validator).
void expect_city(const Json& v) {
  ASSERT_TRUE(v.is_object()) << v.dump();
  for (const char* key : {"name", "population", "kind", "tags"})
    EXPECT_TRUE(v.contains(key)) << key;
  for (const auto& [key, value] : v.items()) {
    EXPECT_TRUE(kCitySchema["properties"].contains(key)) << "extra member " << key;
  }
  const auto name_length = [](const std::string& s) {
    size_t n = 0;
    for (const char ch : s) n += (static_cast<unsigned char>(ch) & 0xc0) != 0x80;
    return n;
  };
  EXPECT_TRUE(v["name"].is_string());
  if (v["name"].is_string()) {
    EXPECT_GE(name_length(v["name"]), 1u);
    EXPECT_LE(name_length(v["name"]), 6u);
  }
  EXPECT_TRUE(v["population"].is_number_integer() && v["population"].get<int64_t>() >= 0);
  EXPECT_TRUE(v["kind"] == "town" || v["kind"] == "city" || v["kind"] == 3 || v["kind"].is_null());
  if (v.contains("coastal")) {
    EXPECT_TRUE(v["coastal"].is_boolean());
  }
  EXPECT_TRUE(v["tags"].is_array() && v["tags"].size() <= 2);
  if (v.contains("mayor") && !v["mayor"].is_null()) {
    EXPECT_TRUE(v["mayor"]["age"].is_number_integer()) << v["mayor"].dump();
    EXPECT_EQ(v["mayor"].size(), 1u);
  }
}

TEST(OutputFormat, JsonSchemaOutputAlwaysValidates) {
  ServerStack s({.n_slots = 2, .n_ctx = 1024});
  auto c = s.client();
  for (int seed = 1; seed <= 6; ++seed) {
    const Json r =
        chat(c, {{"response_format",
                  {{"type", "json_schema"},
                   {"json_schema", {{"name", "city"}, {"schema", kCitySchema}, {"strict", true}}}}},
                 {"temperature", 1.0},
                 {"top_k", 0},
                 {"top_p", 1.0},
                 {"seed", seed},
                 {"max_tokens", 400}});
    ASSERT_EQ(r["status"], 200) << r.dump();
    EXPECT_EQ(r["choices"][0]["finish_reason"], "stop") << "the grammar ends the output";
    const std::string text = r["choices"][0]["message"]["content"];
    const Json v = Json::parse(text, nullptr, false);
    ASSERT_FALSE(v.is_discarded()) << "seed " << seed << ": " << text;
    expect_city(v);
  }
}

TEST(OutputFormat, JsonObjectWholeAndStreamed) {
  ServerStack s({.n_slots = 1, .n_ctx = 1024});
  auto c = s.client();
  const Json format = {{"type", "json_object"}};
  const Json whole =
      chat(c, {{"response_format", format}, {"temperature", 0}, {"max_tokens", 300}});
  ASSERT_EQ(whole["status"], 200) << whole.dump();
  const Json parsed =
      Json::parse(whole["choices"][0]["message"]["content"].get<std::string>(), nullptr, false);
  EXPECT_EQ(whole["choices"][0]["finish_reason"], "stop");
  EXPECT_TRUE(parsed.is_object()) << whole.dump();

  const Json streamed = chat(
      c, {{"response_format", format}, {"temperature", 0}, {"max_tokens", 300}, {"stream", true}});
  bool done = false;
  std::string text;
  for (const auto& ch : sse_payloads(streamed["sse"], done)) {
    if (!ch["choices"].empty() && ch["choices"][0]["delta"].contains("content"))
      text += ch["choices"][0]["delta"]["content"].get<std::string>();
  }
  EXPECT_TRUE(done);
  EXPECT_EQ(text, whole["choices"][0]["message"]["content"]) << "greedy: the same text";
  // Text before the object is not allowed: the first non-space byte opens it.
  EXPECT_EQ(text[text.find_first_not_of(" \t\r\n")], '{') << text;
}

const Json kTools = Json::parse(R"([
  {"type": "function", "function": {"name": "get_weather", "parameters": {"type": "object",
    "properties": {"city": {"type": "string", "maxLength": 5}, "days": {"type": "integer", "minimum": 0}},
    "required": ["city", "days"], "additionalProperties": false}}},
  {"type": "function", "function": {"name": "list_files", "parameters": {"type": "object",
    "properties": {"recursive": {"type": "boolean"}}, "required": ["recursive"]}}}
])");

TEST(OutputFormat, RequiredToolChoiceAlwaysCallsAToolWithValidArguments) {
  ServerStack s({.n_slots = 2, .n_ctx = 1024});
  auto c = s.client();
  for (int seed = 1; seed <= 4; ++seed) {
    const bool named = seed % 2 == 0;
    const Json choice = named ? Json{{"type", "function"}, {"function", {{"name", "get_weather"}}}}
                              : Json("required");
    const Json r = chat(c, {{"tools", kTools},
                            {"tool_choice", choice},
                            {"parallel_tool_calls", false},
                            {"temperature", 1.0},
                            {"seed", seed},
                            {"max_tokens", 200}});
    ASSERT_EQ(r["status"], 200) << r.dump();
    const Json& message = r["choices"][0]["message"];
    EXPECT_EQ(r["choices"][0]["finish_reason"], "tool_calls") << message.dump();
    ASSERT_EQ(message["tool_calls"].size(), 1u) << message.dump();
    const Json& fn = message["tool_calls"][0]["function"];
    const Json args = Json::parse(fn["arguments"].get<std::string>());
    if (named) {
      EXPECT_EQ(fn["name"], "get_weather");
    }
    if (fn["name"] == "get_weather") {
      EXPECT_TRUE(args["city"].is_string() && args["city"].get<std::string>().size() <= 5 * 4);
      EXPECT_TRUE(args["days"].is_number_integer() && args["days"].get<int64_t>() >= 0);
      EXPECT_EQ(args.size(), 2u);
    } else {
      EXPECT_EQ(fn["name"], "list_files");
      EXPECT_TRUE(args["recursive"].is_boolean()) << args.dump();
    }
  }
}

TEST(OutputFormat, UncompilableSchemasAre400sNamingTheField) {
  ServerStack s({.n_slots = 1, .n_ctx = 512});
  auto c = s.client();
  const Json bad_ref = {
      {"type", "json_schema"},
      {"json_schema", {{"name", "x"}, {"schema", {{"$ref", "#/$defs/missing"}}}}}};
  Json r = chat(c, {{"response_format", bad_ref}, {"max_tokens", 4}});
  EXPECT_EQ(r["status"], 400);
  EXPECT_EQ(r["error"]["param"], "response_format");
  EXPECT_NE(r["error"]["message"].get<std::string>().find("missing"), std::string::npos)
      << r.dump();

  r = chat(c, {{"response_format", {{"type", "yaml"}}}, {"max_tokens", 4}});
  EXPECT_EQ(r["status"], 400);
  EXPECT_EQ(r["error"]["param"], "response_format");

  Json tools = kTools;
  tools[1]["function"]["parameters"]["properties"]["recursive"]["type"] = 7;
  r = chat(c, {{"tools", tools}, {"tool_choice", "required"}, {"max_tokens", 4}});
  EXPECT_EQ(r["status"], 400);
  EXPECT_EQ(r["error"]["param"], "tools");
  EXPECT_NE(r["error"]["message"].get<std::string>().find("list_files"), std::string::npos)
      << r.dump();
}

}  // namespace
}  // namespace strata::server
