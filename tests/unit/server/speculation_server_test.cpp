// Speculative decoding's request field through the whole server: "spec": "mtp" drafts from a
// model's NextN block (a generated glm4moe that keeps one) and answers what "off" answers, with
// the drafted tokens counted in the usage; on a model without such a block it is a 400 that
// says why.

#include <gtest/gtest.h>

#include "server_fixture.h"

namespace strata::server {
namespace {

using test_support::ServerStack;
using Json = nlohmann::json;

// The chat model's shape and vocabulary as glm4moe, with a NextN block.
std::string nextn_chat_model_path() {
  static const std::string path = [] {
    const auto p = test::temp_dir() / "server-nextn-model.gguf";
    tools::SyntheticModelSpec s = test_support::tiny_chat_spec(
        2, (test::oracle_dir() / "tokenizer" / "qwen3-vocab.gguf").string());
    s.arch = "glm4moe";
    s.n_leading_dense = 1;
    s.n_ff = 128;
    s.n_ff_shexp = 64;
    s.n_nextn = 1;
    tools::write_synthetic_model(s, p.string());
    return p.string();
  }();
  return path;
}

httplib::Result ask(httplib::Client& c, const std::string& spec) {
  const Json body = {{"messages", {{{"role", "user"}, {"content", "Count to ten."}}}},
                     {"temperature", 0},
                     {"max_tokens", 24},
                     {"chat_template_kwargs", {{"enable_thinking", false}}},
                     {"spec", spec}};
  return c.Post("/v1/chat/completions", body.dump(), "application/json");
}

TEST(SpeculationServer, MtpDraftsChangeNothingAndAreCounted) {
  ServerStack stack({}, {}, nextn_chat_model_path());
  httplib::Client c = stack.client();
  const auto off = ask(c, "off");
  const auto mtp = ask(c, "mtp");
  ASSERT_TRUE(off && mtp);
  ASSERT_EQ(off->status, 200) << off->body;
  ASSERT_EQ(mtp->status, 200) << mtp->body;
  const Json a = Json::parse(off->body), b = Json::parse(mtp->body);
  EXPECT_EQ(a["choices"][0]["message"], b["choices"][0]["message"]);
  EXPECT_FALSE(a["usage"].contains("completion_tokens_details"));
  // A fresh generation drafts (its acceptance starts at 1/2) until a random model's misses
  // turn drafting off.
  const Json& details = b["usage"]["completion_tokens_details"];
  EXPECT_GT(details["accepted_prediction_tokens"].get<int>() +
                details["rejected_prediction_tokens"].get<int>(),
            0);
}

TEST(SpeculationServer, MtpOnAModelWithoutTheBlockIsRefused) {
  ServerStack stack;
  httplib::Client c = stack.client();
  const auto r = ask(c, "mtp");
  ASSERT_TRUE(r);
  EXPECT_EQ(r->status, 400) << r->body;
  EXPECT_NE(r->body.find("no multi-token-prediction block"), std::string::npos) << r->body;
}

}  // namespace
}  // namespace strata::server
