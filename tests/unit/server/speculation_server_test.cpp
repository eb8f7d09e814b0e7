// Speculative decoding's request field through the whole server: "spec": "mtp" drafts from a
// model's NextN block (a generated glm4moe that keeps one) and "draft" from a draft model, each
// answering what "off" answers, with the drafted tokens counted in the usage; without such a
// block or draft model it is a 400 that says why.

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

TEST(SpeculationServer, MtpOnAModelWithoutTheBlockOrDraftWithoutADraftModelIsRefused) {
  ServerStack stack;
  httplib::Client c = stack.client();
  const auto mtp = ask(c, "mtp");
  ASSERT_TRUE(mtp);
  EXPECT_EQ(mtp->status, 400) << mtp->body;
  EXPECT_NE(mtp->body.find("no multi-token-prediction block"), std::string::npos) << mtp->body;
  const auto draft = ask(c, "draft");
  ASSERT_TRUE(draft);
  EXPECT_EQ(draft->status, 400) << draft->body;
  EXPECT_NE(draft->body.find("--draft-model"), std::string::npos) << draft->body;
}

// The chat model drafting for itself: every guess is kept, and the answer is the plain one.
TEST(SpeculationServer, ADraftModelsGuessesAreCheckedAndCounted) {
  const auto draft = Model::load(test_support::chat_model_path());
  ServerOptions opts;
  opts.draft_model = draft.get();
  ServerStack stack({}, opts);
  httplib::Client c = stack.client();
  const auto off = ask(c, "off");
  const auto drafted = ask(c, "draft");
  ASSERT_TRUE(off && drafted);
  ASSERT_EQ(drafted->status, 200) << drafted->body;
  const Json a = Json::parse(off->body), b = Json::parse(drafted->body);
  EXPECT_EQ(a["choices"][0]["message"], b["choices"][0]["message"]);
  const Json& details = b["usage"]["completion_tokens_details"];
  EXPECT_GT(details["accepted_prediction_tokens"].get<int>(), 0);
  EXPECT_EQ(details["rejected_prediction_tokens"].get<int>(), 0);
}

}  // namespace
}  // namespace strata::server
