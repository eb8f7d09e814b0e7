// `strata profile`: how often each routed expert is selected while the model reads and answers a
// set of prompts. `strata plan --profile FILE` then places the popular experts on the fastest
// device instead of assuming uniform routing.

#include <fmt/format.h>

#include <algorithm>
#include <fstream>
#include <nlohmann/json.hpp>

#include "cli/commands.h"
#include "cli/expert_profile.h"
#include "cli/model_options.h"
#include "runtime/sampler.h"
#include "runtime/session.h"
#include "template/chat_template.h"
#include "tokenizer/tokenizer.h"
#include "util/error.h"
#include "util/log.h"

namespace strata::cli {
namespace {

// One prompt per line: plain text, or a JSON object {"messages": [...]} rendered with the
// model's chat template. Blank lines are skipped.
std::vector<std::vector<int32_t>> read_prompts(const std::string& path, const Model& model,
                                               const Tokenizer& tokenizer) {
  std::ifstream in(path);
  if (!in) fail("cannot read prompts file '{}'", path);
  std::unique_ptr<ChatTemplate> chat;
  std::vector<std::vector<int32_t>> out;
  std::string line;
  for (int number = 1; std::getline(in, line); ++number) {
    if (line.find_first_not_of(" \t\r") == std::string::npos) continue;
    if (line.front() == '{') {
      const auto j = nlohmann::ordered_json::parse(line, nullptr, false);
      if (j.is_discarded() || !j.contains("messages"))
        fail("{} line {}: expected {{\"messages\": [...]}} or plain text", path, number);
      if (!chat) {
        chat = std::make_unique<ChatTemplate>(model.file()
                                                  .find_string("tokenizer.chat_template")
                                                  .value_or(ChatTemplate::default_chatml_source()));
      }
      ChatTemplateInputs inputs;
      inputs.messages = normalize_messages(j["messages"]);
      out.push_back(tokenizer.encode(chat->render(inputs), true, true));
    } else {
      out.push_back(tokenizer.encode(line, false, true));
    }
  }
  if (out.empty()) fail("prompts file '{}' has no prompts", path);
  return out;
}

}  // namespace

void add_profile_command(CLI::App& app) {
  struct Options {
    ModelOptions model;
    std::string prompts;
    std::string out;
    int n_gen = 64;
  };
  auto o = std::make_shared<Options>();
  CLI::App* cmd = app.add_subcommand(
      "profile", "Record how often each expert is selected over a prompt set (for strata plan)");
  add_model_options(cmd, o->model);
  cmd->add_option("--prompts", o->prompts,
                  "File with one prompt per line: text, or {\"messages\": [...]} for the chat "
                  "template")
      ->required();
  cmd->add_option("-o,--output", o->out, "Output JSON file (strata plan --profile reads it)")
      ->required();
  cmd->add_option("-n,--n-gen", o->n_gen, "Greedy tokens generated after each prompt")
      ->capture_default_str()
      ->check(CLI::Range(0, 1 << 16));
  cmd->callback([o] {
    auto model = load_model(o->model);
    const ModelHParams& hp = model->hparams();
    if (hp.n_expert <= 0) fail("{} has no routed experts to profile", o->model.path);
    const auto tokenizer = Tokenizer::from_gguf(model->file());
    const auto prompts = read_prompts(o->prompts, *model, *tokenizer);
    ThreadPool pool(o->model.thread_count());
    int64_t longest = 0;
    for (const auto& p : prompts)
      longest = std::max<int64_t>(longest, static_cast<int64_t>(p.size()));
    const int64_t ctx = longest + o->n_gen;
    if (ctx > o->model.ctx)
      fail("the longest prompt ({} tokens) + {} generated exceed --ctx {}", longest, o->n_gen,
           o->model.ctx);
    Session session(*model, ctx, o->model.kv_cache_type(), pool);
    session.stats().expert_counts.assign(static_cast<size_t>(hp.n_layer * hp.n_expert), 0);
    std::vector<float> logits;
    int64_t tokens = 0;
    for (size_t i = 0; i < prompts.size(); ++i) {
      session.reset();
      session.eval(prompts[i], false, logits);
      tokens += static_cast<int64_t>(prompts[i].size());
      for (int g = 0; g < o->n_gen; ++g) {
        const int32_t next = argmax(logits);
        if (tokenizer->vocab().is_end_of_generation(next)) break;
        session.eval(std::span<const int32_t>(&next, 1), false, logits);
        ++tokens;
      }
      log::info("prompt {}/{} done ({} tokens so far)", i + 1, prompts.size(), tokens);
    }
    const RoutingSkew skew =
        write_expert_profile(o->out, o->model.path, hp, session.stats().expert_counts, tokens,
                             static_cast<int64_t>(prompts.size()));
    fmt::print(
        "{} tokens through {} prompts; the busiest {} of {} experts in a layer took {:.1f}% of "
        "its selections (uniform: {:.1f}%); wrote {}\n",
        tokens, prompts.size(), skew.busiest, skew.n_expert, 100 * skew.share,
        100.0 * static_cast<double>(skew.busiest) / static_cast<double>(skew.n_expert), o->out);
  });
}

}  // namespace strata::cli
