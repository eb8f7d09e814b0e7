// `strata run --chat`: turns through the chat template, each answer streamed and ending its
// line; turns from a pipe one per line; the cache carries the conversation from turn to turn
// (the first answer of a two-turn chat is the one-turn chat's answer).

#include <gtest/gtest.h>

#include <cstdlib>
#include <filesystem>

#include "support/test_support.h"
#include "unit/cli/cli_test_support.h"

namespace strata {
namespace {

// A small model with a byte vocabulary and a ChatML template, made once.
const std::string& chat_model() {
  static const std::string path = [] {
    const std::string generator =
        std::filesystem::path(STRATA_EXE).parent_path() / "make-synthetic-model";
    const std::string out = (test::temp_dir() / "chat-model.gguf").string();
    const std::string make = generator + " --byte-vocab --vocab 512 --layers 2 -o " + out + " 2>&1";
    EXPECT_EQ(std::system(make.c_str()), 0);
    return out;
  }();
  return path;
}

// strata run with `input` on its stdin (stdout only).
RunResult chat(const std::string& input, const std::string& args) {
  return run_strata_env("printf '" + input + "' | ",
                        "run -m " + chat_model() + " --device none -n 6 " + args, false);
}

TEST(RunChat, TurnsFromAPipeShareOneConversation) {
  const RunResult one = chat("Hi\\n", "--chat");
  ASSERT_EQ(one.exit_code, 0) << one.output;
  ASSERT_FALSE(one.output.empty());
  EXPECT_EQ(one.output.back(), '\n');  // the answer ends its line
  // -p gives the first turn; without a terminal that is the whole conversation.
  const RunResult given =
      run_strata("run -m " + chat_model() + " --device none -n 6 --chat -p Hi < /dev/null", false);
  EXPECT_EQ(given.output, one.output);
  const RunResult two = chat("Hi\\n\\nAgain\\n", "--chat");  // a blank line is skipped
  ASSERT_EQ(two.exit_code, 0) << two.output;
  EXPECT_EQ(two.output.substr(0, one.output.size()), one.output);
  EXPECT_GT(two.output.size(), one.output.size());
  EXPECT_EQ(two.output.back(), '\n');
  // llama.cpp's spelling, and a system message.
  EXPECT_EQ(chat("Hi\\n", "-cnv").output, one.output);
  EXPECT_EQ(chat("Hi\\n", "--chat --system 'Be brief.'").exit_code, 0);
}

TEST(RunChat, NoFirstTurnIsAClearError) {
  const RunResult r =
      run_strata_env("true | ", "run -m " + chat_model() + " --device none --chat", true);
  EXPECT_EQ(r.exit_code, 1) << r.output;
  EXPECT_TRUE(contains(r.output, "--chat: give the first message with -p or on stdin")) << r.output;
}

}  // namespace
}  // namespace strata
