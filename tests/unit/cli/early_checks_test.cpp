// What can be checked before a model loads is checked first (a big model takes minutes to load),
// and settings that run but not as the user hopes are said, never taken silently.

#include <arpa/inet.h>
#include <gtest/gtest.h>
#include <netinet/in.h>
#include <sys/socket.h>
#include <unistd.h>
#include <cstdio>

#include "support/test_support.h"
#include "unit/cli/cli_test_support.h"

namespace strata {
namespace {

std::string tiny_model() {
  return (test::oracle_dir() / "models" / "tiny-qwen3moe-Q8_0.gguf").string();
}

// A port this test holds (listening on 127.0.0.1) while strata tries it.
class HeldPort {
 public:
  HeldPort() {
    fd_ = ::socket(AF_INET, SOCK_STREAM, 0);
    sockaddr_in a{};
    a.sin_family = AF_INET;
    a.sin_addr.s_addr = htonl(INADDR_LOOPBACK);
    a.sin_port = 0;
    if (::bind(fd_, reinterpret_cast<sockaddr*>(&a), sizeof a) != 0 || ::listen(fd_, 1) != 0)
      return;
    socklen_t len = sizeof a;
    ::getsockname(fd_, reinterpret_cast<sockaddr*>(&a), &len);
    port_ = ntohs(a.sin_port);
  }
  ~HeldPort() { ::close(fd_); }
  int port() const { return port_; }

 private:
  int fd_ = -1;
  int port_ = 0;
};

TEST(EarlyChecks, ServeRefusesWhatWouldFailBeforeLoading) {
  auto r = run_strata("serve -m " + tiny_model() + " --kv-size 10 --ctx 4096 --device none");
  EXPECT_EQ(r.exit_code, 1) << r.output;
  EXPECT_TRUE(contains(r.output, "--kv-size 10 holds fewer positions than one request's context"))
      << r.output;
  EXPECT_FALSE(contains(r.output, "loaded")) << r.output;  // refused before the weights load

  const HeldPort held;
  ASSERT_GT(held.port(), 0);
  r = run_strata("serve -m " + tiny_model() + " --device none --port " +
                 std::to_string(held.port()));
  EXPECT_EQ(r.exit_code, 1) << r.output;
  EXPECT_TRUE(contains(r.output, "port " + std::to_string(held.port()) + " on 127.0.0.1 is in use"))
      << r.output;
  EXPECT_FALSE(contains(r.output, "loaded")) << r.output;

  r = run_strata("serve -m " + tiny_model() + " --device none --host no-such-host.invalid");
  EXPECT_EQ(r.exit_code, 1) << r.output;
  EXPECT_TRUE(contains(r.output, "--host 'no-such-host.invalid': not a name or address"))
      << r.output;

  r = run_strata("serve -m " + tiny_model() + " --device none --spec nextn");
  EXPECT_EQ(r.exit_code, 2) << r.output;
  EXPECT_TRUE(contains(r.output, "--spec: must be auto, ngram, mtp, draft or off")) << r.output;

  // A model with a vocabulary and no NextN/MTP block: refused before it listens.
  const std::string trained =
      (test::test_data_dir() / ".." / ".." / "tools" / "train" / "strata-coder-tiny.gguf").string();
  r = run_strata("serve -m " + trained + " --device none --port 0 --spec mtp");
  EXPECT_EQ(r.exit_code, 1) << r.output;
  EXPECT_TRUE(contains(r.output, "keeps no NextN/MTP block")) << r.output;
  r = run_strata("serve -m " + trained + " --device none --port 0 --spec draft");
  EXPECT_EQ(r.exit_code, 1) << r.output;
  EXPECT_TRUE(contains(r.output, "--spec draft needs --draft-model FILE")) << r.output;
  r = run_strata("serve -m " + trained + " --device none --port 0 --draft-model " + tiny_model());
  EXPECT_EQ(r.exit_code, 1) << r.output;
  EXPECT_TRUE(contains(r.output,
                       "not the model's vocabulary (its vocabulary has 512 tokens, "
                       "the model's 4096)"))
      << r.output;
}

TEST(EarlyChecks, OddSettingsAreSaidOrRefused) {
  const std::string run = "run -m " + tiny_model() + " --tokens 1,2 -n 1 --device none ";
  auto r = run_strata(run + "--temp -1");
  EXPECT_EQ(r.exit_code, 2) << r.output;
  r = run_strata(run + "-t 1000");
  EXPECT_EQ(r.exit_code, 0) << r.output;
  EXPECT_TRUE(contains(r.output, "-t 1000: this machine has")) << r.output;
  r = run_strata(run + "--vram-budget 8G");
  EXPECT_EQ(r.exit_code, 0) << r.output;
  EXPECT_TRUE(contains(r.output, "--vram-budget 8G: no GPU runs this model")) << r.output;
  r = run_strata(run + "--ctx 1000000");
  EXPECT_EQ(r.exit_code, 0) << r.output;
  EXPECT_TRUE(contains(r.output, "--ctx 1000000 is beyond the")) << r.output;
  r = run_strata("plan -m " + tiny_model() + " --gpu none --ram 32G:29 --cores 2 --kv-type q4_0");
  EXPECT_EQ(r.exit_code, 0) << r.output;
  EXPECT_TRUE(contains(r.output, "strata run and serve keep keys and values in f16 or q8_0"))
      << r.output;
}

TEST(EarlyChecks, LlamaCppsRandomSeedAndOtherModelsProfiles) {
  const std::string run = "run -m " + tiny_model() + " --tokens 1,2 -n 2 --device none ";
  auto r = run_strata(run + "--seed -1 --temp 1");
  EXPECT_EQ(r.exit_code, 0) << r.output;
  EXPECT_TRUE(contains(r.output, "--seed -1: seed ")) << r.output;  // said, so it can be repeated
  r = run_strata(run + "--seed -2");
  EXPECT_EQ(r.exit_code, 2) << r.output;
  r = run_strata(run + "--kv-type q4_0");  // refused before the weights load
  EXPECT_EQ(r.exit_code, 1) << r.output;
  EXPECT_TRUE(contains(r.output, "strata keeps keys and values in f16 or q8_0")) << r.output;
  EXPECT_FALSE(contains(r.output, "loaded")) << r.output;

  // serve: a sampling default out of range, and a file without a vocabulary, before loading.
  r = run_strata("serve -m " + tiny_model() + " --device none --temp -0.5");
  EXPECT_EQ(r.exit_code, 2) << r.output;
  r = run_strata("serve -m " + tiny_model() + " --device none --port 0");
  EXPECT_EQ(r.exit_code, 1) << r.output;
  EXPECT_TRUE(contains(r.output, "has no vocabulary")) << r.output;
  EXPECT_FALSE(contains(r.output, "loaded")) << r.output;

  // A popularity profile recorded on another file is warned about.
  const std::string profile = (test::temp_dir() / "other-model-profile.json").string();
  {
    FILE* f = std::fopen(profile.c_str(), "w");
    ASSERT_NE(f, nullptr);
    std::fputs(R"({"model": "/models/another-model.gguf", "expert_counts": [[1,1,1,1,1,1,1,1],)"
               R"([1,1,1,1,1,1,1,1]]})",
               f);
    std::fclose(f);
  }
  r = run_strata("plan -m " + tiny_model() + " --gpu none --ram 32G:29 --cores 2 --profile " +
                 profile);
  EXPECT_EQ(r.exit_code, 0) << r.output;
  EXPECT_TRUE(contains(r.output,
                       "was recorded on another-model.gguf, and this is "
                       "tiny-qwen3moe-Q8_0.gguf"))
      << r.output;
}

}  // namespace
}  // namespace strata
