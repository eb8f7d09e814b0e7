#include "cli/run_chat.h"

#include <fmt/format.h>
#include <unistd.h>

#include <algorithm>
#include <cstdio>
#include <iostream>
#include <optional>

#include "runtime/session.h"
#include "server/chat_prompt_tokens.h"
#include "template/chat_template.h"
#include "util/error.h"
#include "util/log.h"

namespace strata::cli {
namespace {

// The next turn from stdin (blank lines skipped); nullopt at the end of input.
std::optional<std::string> read_turn(bool interactive) {
  std::string line;
  for (;;) {
    if (interactive) {
      fmt::print("> ");
      std::fflush(stdout);
    }
    if (!std::getline(std::cin, line)) return std::nullopt;
    if (line.find_first_not_of(" \t\r") != std::string::npos) return line;
  }
}

class Conversation {
 public:
  Conversation(Model& model, const Tokenizer& tokenizer, const ChatRun& run, ThreadPool& pool)
      : model_(model),
        tokenizer_(tokenizer),
        run_(run),
        template_(server::chat_template_source(model.file())),
        session_(model, run.n_ctx, run.kv_type, pool),
        sampler_(run.sampling) {
    if (!run.system.empty()) messages_.push_back({{"role", "system"}, {"content", run.system}});
  }

  // Adds the user's turn, runs what the cache does not hold yet, and streams the answer.
  void answer(const std::string& turn) {
    messages_.push_back({{"role", "user"}, {"content", turn}});
    const std::vector<int32_t> prompt = render();
    STRATA_CHECK(static_cast<int64_t>(prompt.size()) + run_.max_answer_tokens <= run_.n_ctx,
                 "the conversation ({} tokens) and an answer of {} no longer fit the context of "
                 "{}: raise --ctx or start again",
                 prompt.size(), run_.max_answer_tokens, run_.n_ctx);
    std::vector<float> logits;
    feed(prompt, logits);
    StreamingDetokenizer text(tokenizer_, false);
    std::string answer;
    for (int i = 0; i < run_.max_answer_tokens; ++i) {
      const int32_t next = sampler_.sample(logits);
      sampler_.accept(next);
      if (!run_.ignore_eos && tokenizer_.vocab().is_end_of_generation(next)) break;
      const std::string piece = text.push(next);
      answer += piece;
      fmt::print("{}", piece);
      std::fflush(stdout);
      session_.eval(std::span<const int32_t>(&next, 1), false, logits);
      in_cache_.push_back(next);
    }
    const std::string rest = text.flush();
    answer += rest;
    fmt::print("{}\n", rest);
    std::fflush(stdout);
    messages_.push_back({{"role", "assistant"}, {"content", answer}});
  }

 private:
  std::vector<int32_t> render() const {
    ChatTemplateInputs in;
    in.messages = messages_;
    in.add_generation_prompt = true;
    server::set_special_tokens(tokenizer_, in);
    return server::encode_rendered(tokenizer_, template_.render(in), in);
  }

  // Runs the prompt's tokens past what the cache already holds (a template may render earlier
  // turns differently once answered: the cache is cut back to the common prefix, or restarted
  // for models whose recurrent state cannot step back).
  void feed(const std::vector<int32_t>& prompt, std::vector<float>& logits) {
    size_t keep = 0;
    while (keep < in_cache_.size() && keep < prompt.size() && in_cache_[keep] == prompt[keep])
      ++keep;
    keep = std::min(keep, prompt.size() - 1);  // at least one token runs, for the logits
    if (keep < in_cache_.size()) {
      if (model_.recurrent_state_floats() > 0) {
        session_.reset();
        keep = 0;
      } else {
        session_.truncate(static_cast<int64_t>(keep));
      }
    }
    session_.eval(std::span<const int32_t>(prompt).subspan(keep), false, logits);
    in_cache_ = prompt;
  }

  Model& model_;
  const Tokenizer& tokenizer_;
  const ChatRun& run_;
  ChatTemplate template_;
  Session session_;
  Sampler sampler_;
  nlohmann::ordered_json messages_ = nlohmann::ordered_json::array();
  std::vector<int32_t> in_cache_;  // the tokens the session holds
};

}  // namespace

void run_chat(Model& model, const Tokenizer& tokenizer, const ChatRun& run, ThreadPool& pool) {
  const bool interactive = ::isatty(STDIN_FILENO) != 0;
  Conversation conversation(model, tokenizer, run, pool);
  std::optional<std::string> turn = run.first_turn;
  if (run.first_turn.empty()) turn = read_turn(interactive);
  STRATA_CHECK(turn.has_value(), "--chat: give the first message with -p or on stdin");
  // With -p and no terminal the conversation is that one turn (a script's stdin is not a chat).
  const bool more_turns = interactive || run.first_turn.empty();
  while (turn) {
    conversation.answer(*turn);
    turn = more_turns ? read_turn(interactive) : std::nullopt;
  }
}

}  // namespace strata::cli
