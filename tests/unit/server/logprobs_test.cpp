// logprobs on both endpoints, whole and streamed: OpenAI's shapes, one entry per generated
// token, the alternatives sorted, and (greedy) the chosen token first among them.

#include <gtest/gtest.h>

#include "server_fixture.h"
#include "tokenizer/tokenizer.h"

namespace strata::server {
namespace {

using test_support::ServerStack;
using test_support::sse_payloads;
using Json = nlohmann::json;

Json post(httplib::Client& c, const char* path, const Json& body) {
  auto r = c.Post(path, body.dump(), "application/json");
  EXPECT_TRUE(r);
  if (!r) return Json();
  Json j = r->body.starts_with("data: ") ? Json::object() : Json::parse(r->body);
  j["status"] = r->status;
  if (r->body.starts_with("data: ")) j["sse"] = r->body;
  return j;
}

// One chat logprobs entry: the token, its bytes, and alternatives likeliest first.
void expect_chat_entry(const Json& e, size_t top) {
  ASSERT_TRUE(e["token"].is_string());
  ASSERT_TRUE(e["bytes"].is_array());
  std::string bytes;
  for (const auto& b : e["bytes"]) bytes += static_cast<char>(b.get<int>());
  EXPECT_EQ(sanitize_utf8(bytes), e["token"].get<std::string>());
  EXPECT_LE(e["logprob"].get<double>(), 0.0);
  ASSERT_EQ(e["top_logprobs"].size(), top);
  for (size_t i = 1; i < top; ++i)
    EXPECT_GE(e["top_logprobs"][i - 1]["logprob"].get<double>(),
              e["top_logprobs"][i]["logprob"].get<double>());
  if (top > 0) {  // greedy: the chosen token is the likeliest
    EXPECT_EQ(e["top_logprobs"][0]["token"], e["token"]);
    EXPECT_FLOAT_EQ(e["top_logprobs"][0]["logprob"].get<float>(), e["logprob"].get<float>());
  }
}

TEST(Logprobs, ChatWholeAndStreamedCarryOneEntryPerToken) {
  ServerStack s({.n_slots = 2, .n_ctx = 512});
  auto c = s.client();
  const Json body = {{"messages", {{{"role", "user"}, {"content", "Say something."}}}},
                     {"max_tokens", 6},
                     {"temperature", 0},
                     {"chat_template_kwargs", {{"enable_thinking", false}}},
                     {"logprobs", true},
                     {"top_logprobs", 3}};
  const Json whole = post(c, "/v1/chat/completions", body);
  ASSERT_EQ(whole["status"], 200) << whole.dump();
  const Json& lp = whole["choices"][0]["logprobs"];
  ASSERT_TRUE(lp.is_object()) << whole.dump();
  EXPECT_TRUE(lp["refusal"].is_null());
  ASSERT_EQ(lp["content"].size(), whole["usage"]["completion_tokens"].get<size_t>());
  for (const auto& e : lp["content"]) expect_chat_entry(e, 3);

  Json stream_body = body;
  stream_body["stream"] = true;
  const Json streamed = post(c, "/v1/chat/completions", stream_body);
  bool done = false;
  Json entries = Json::array();
  for (const auto& ch : sse_payloads(streamed["sse"], done)) {
    if (ch["choices"].empty() || ch["choices"][0]["logprobs"].is_null()) continue;
    for (const auto& e : ch["choices"][0]["logprobs"]["content"]) entries.push_back(e);
  }
  EXPECT_TRUE(done);
  EXPECT_EQ(entries, lp["content"]) << "greedy: the same tokens and numbers both ways";

  // Without logprobs the field stays null.
  Json plain = body;
  plain.erase("logprobs");
  plain.erase("top_logprobs");
  EXPECT_TRUE(post(c, "/v1/chat/completions", plain)["choices"][0]["logprobs"].is_null());
}

TEST(Logprobs, CompletionsUseTheLegacyShape) {
  ServerStack s({.n_slots = 1, .n_ctx = 512});
  auto c = s.client();
  const Json whole = post(c, "/v1/completions",
                          {{"prompt", "The capital of France is"},
                           {"max_tokens", 5},
                           {"temperature", 0},
                           {"logprobs", 2}});
  ASSERT_EQ(whole["status"], 200) << whole.dump();
  const Json& lp = whole["choices"][0]["logprobs"];
  const size_t n = whole["usage"]["completion_tokens"];
  ASSERT_EQ(lp["tokens"].size(), n);
  ASSERT_EQ(lp["token_logprobs"].size(), n);
  ASSERT_EQ(lp["top_logprobs"].size(), n);
  ASSERT_EQ(lp["text_offset"].size(), n);
  int64_t offset = 0;
  std::string text;
  for (size_t i = 0; i < n; ++i) {
    EXPECT_EQ(lp["text_offset"][i], offset);
    offset += static_cast<int64_t>(lp["tokens"][i].get<std::string>().size());
    text += lp["tokens"][i].get<std::string>();
    EXPECT_GE(lp["top_logprobs"][i].size(), 1u);
    EXPECT_LE(lp["top_logprobs"][i].size(), 2u);
    EXPECT_TRUE(lp["top_logprobs"][i].contains(lp["tokens"][i].get<std::string>()));
  }
  EXPECT_EQ(text, whole["choices"][0]["text"]);
}

TEST(Logprobs, BadValuesAre400NamingTheField) {
  ServerStack s({.n_slots = 1, .n_ctx = 512});
  auto c = s.client();
  const Json messages = {{{"role", "user"}, {"content", "hi"}}};
  for (const auto& [extra, param] : std::vector<std::pair<Json, std::string>>{
           {{{"top_logprobs", 2}}, "top_logprobs"},
           {{{"logprobs", true}, {"top_logprobs", 21}}, "top_logprobs"},
           {{{"logprobs", 3}}, "logprobs"}}) {
    Json body = {{"messages", messages}, {"max_tokens", 2}};
    body.update(extra);
    const Json r = post(c, "/v1/chat/completions", body);
    EXPECT_EQ(r["status"], 400) << extra.dump();
    EXPECT_EQ(r["error"]["param"], param) << r.dump();
  }
  const Json r = post(c, "/v1/completions", {{"prompt", "x"}, {"logprobs", 21}});
  EXPECT_EQ(r["status"], 400);
  EXPECT_EQ(r["error"]["param"], "logprobs");
}

}  // namespace
}  // namespace strata::server
