// `strata eval`: accuracy on multiple-choice and short-answer tasks (JSON lines) through the
// engine and the model's chat template: a choice by the log-likelihood the model gives it, an
// answer by exact match of what it writes greedily. Each finished task is appended to --results,
// so a run that stops goes on where it was.
#include <fmt/format.h>

#include <chrono>
#include <fstream>
#include <map>
#include <nlohmann/json.hpp>
#include <set>

#include "cli/commands.h"
#include "cli/model_options.h"
#include "quality/eval.h"
#include "runtime/session.h"
#include "server/chat_prompt_tokens.h"
#include "template/chat_template.h"
#include "tokenizer/tokenizer.h"
#include "util/error.h"
#include "util/log.h"

namespace strata::cli {
namespace {

using Json = nlohmann::ordered_json;

struct EvalTask {
  std::string id;
  Json messages;
  Json tools;                        // OpenAI tools the template shows the model (null: none)
  std::vector<std::string> choices;  // multiple choice when not empty
  int64_t answer_index = -1;         // the right choice
  std::vector<std::string> answers;  // short answer: any of these
};

// One task from its JSON line; errors name the file and line.
EvalTask parse_task(const std::string& line, const std::string& where) {
  Json j = Json::parse(line, nullptr, false);
  STRATA_CHECK(j.is_object(), "{}: not a JSON object", where);
  EvalTask t;
  STRATA_CHECK(j.contains("id") && (j["id"].is_string() || j["id"].is_number_integer()),
               "{}: \"id\" (a string or an integer) is missing", where);
  t.id = j["id"].is_string() ? j["id"].get<std::string>() : j["id"].dump();
  if (j.contains("messages")) {
    STRATA_CHECK(j["messages"].is_array() && !j["messages"].empty(),
                 "{}: \"messages\" must be a non-empty array of chat messages", where);
    t.messages = j["messages"];
  } else {
    STRATA_CHECK(j.contains("question") && j["question"].is_string(),
                 "{}: give \"question\" (a string) or \"messages\"", where);
    t.messages = Json::array({{{"role", "user"}, {"content", j["question"]}}});
  }
  if (j.contains("tools") && !j["tools"].is_null()) {
    STRATA_CHECK(j["tools"].is_array(), "{}: \"tools\" must be an array of tools", where);
    t.tools = j["tools"];
  }
  STRATA_CHECK(j.contains("answer"), "{}: \"answer\" is missing", where);
  const Json& a = j["answer"];
  if (j.contains("choices")) {
    STRATA_CHECK(j["choices"].is_array() && j["choices"].size() >= 2,
                 "{}: \"choices\" must hold at least two strings", where);
    for (const Json& c : j["choices"]) {
      STRATA_CHECK(c.is_string() && !c.get<std::string>().empty(),
                   "{}: every choice must be a non-empty string", where);
      t.choices.push_back(c.get<std::string>());
    }
    if (a.is_number_integer()) {
      t.answer_index = a.get<int64_t>();
    } else if (a.is_string()) {
      const auto it = std::find(t.choices.begin(), t.choices.end(), a.get<std::string>());
      if (it != t.choices.end()) t.answer_index = it - t.choices.begin();
    }
    STRATA_CHECK(t.answer_index >= 0 && t.answer_index < static_cast<int64_t>(t.choices.size()),
                 "{}: \"answer\" must be a choice's index (0-based) or its text", where);
  } else if (a.is_string()) {
    t.answers = {a.get<std::string>()};
  } else {
    STRATA_CHECK(a.is_array() && !a.empty(),
                 "{}: \"answer\" must be a string or a list of accepted strings", where);
    for (const Json& x : a) {
      STRATA_CHECK(x.is_string(), "{}: every accepted answer must be a string", where);
      t.answers.push_back(x.get<std::string>());
    }
  }
  return t;
}

std::vector<EvalTask> read_tasks(const std::string& path) {
  std::ifstream in(path);
  STRATA_CHECK(in.good(), "--tasks {}: cannot read it", path);
  std::vector<EvalTask> tasks;
  std::set<std::string> ids;
  std::string line;
  for (int64_t n = 1; std::getline(in, line); ++n) {
    if (line.find_first_not_of(" \t\r") == std::string::npos) continue;
    tasks.push_back(parse_task(line, fmt::format("{} line {}", path, n)));
    STRATA_CHECK(ids.insert(tasks.back().id).second, "{} line {}: the id \"{}\" is used twice",
                 path, n, tasks.back().id);
  }
  STRATA_CHECK(!tasks.empty(), "--tasks {}: no task in it", path);
  return tasks;
}

// What a model writes after the prompt, without the reasoning block a thinking template opens.
std::string visible_answer(std::string text) {
  if (const size_t end = text.find("</think>"); text.rfind("<think>", 0) == 0) {
    text = end == std::string::npos ? "" : text.substr(end + 8);
  }
  return text;
}

struct Tally {
  int64_t total = 0, correct = 0, correct_norm = 0, choice_tasks = 0;
};

Json summary_json(const Tally& t) {
  const quality::Interval ci = quality::wilson_interval(t.correct, t.total);
  Json j = {{"tasks", t.total},
            {"correct", t.correct},
            {"accuracy", t.total ? static_cast<double>(t.correct) / t.total : 0.0},
            {"ci95", {ci.low, ci.high}}};
  if (t.choice_tasks > 0) {
    // Choices scored per byte of text as well (lm-eval's acc_norm): longer choices are not
    // penalised for their length.
    j["accuracy_norm"] = static_cast<double>(t.correct_norm) / t.choice_tasks;
  }
  return j;
}

}  // namespace

void add_eval_command(CLI::App& app) {
  struct Options {
    ModelOptions model;
    std::string tasks;
    std::string results;
    int64_t limit = 0;
    int64_t max_tokens = 256;
    bool json = false;
  };
  auto o = std::make_shared<Options>();
  CLI::App* cmd = app.add_subcommand(
      "eval",
      "Accuracy on multiple-choice and short-answer tasks (JSON lines) through the model's chat "
      "template: choices by log-likelihood, answers by exact match");
  add_model_options(cmd, o->model);
  cmd->add_option("--tasks", o->tasks,
                  "JSON lines: {\"id\", \"question\" or \"messages\" (and \"tools\"), \"choices\" "
                  "(optional), \"answer\": a choice's index or text, or the expected answer(s)}")
      ->required()
      ->check(CLI::ExistingFile);
  cmd->add_option("--results", o->results,
                  "Append each task's result here (JSON lines); tasks already in it are not run "
                  "again, so a stopped run resumes");
  cmd->add_option("--limit", o->limit, "Only the first N tasks (0: all)")
      ->check(CLI::Range(int64_t{0}, int64_t{1} << 40));
  cmd->add_option("--max-tokens", o->max_tokens, "Longest answer written for short-answer tasks")
      ->capture_default_str()
      ->check(CLI::Range(int64_t{1}, int64_t{1} << 20));
  cmd->add_flag("--json", o->json, "Print the summary as JSON");
  cmd->callback([o] {
    std::vector<EvalTask> tasks = read_tasks(o->tasks);
    if (o->limit > 0 && static_cast<int64_t>(tasks.size()) > o->limit)
      tasks.resize(static_cast<size_t>(o->limit));
    // Earlier results of this run (resuming): their tasks count, and are not run again.
    std::map<std::string, Json> done;
    if (!o->results.empty()) {
      std::ifstream in(o->results);
      std::string line;
      for (int64_t n = 1; std::getline(in, line); ++n) {
        if (line.empty()) continue;
        const Json r = Json::parse(line, nullptr, false);
        STRATA_CHECK(r.is_object() && r.contains("id") && r.contains("correct"),
                     "--results {} line {}: not a result of strata eval", o->results, n);
        done[r["id"].get<std::string>()] = r;
      }
    }
    o->model.kv_positions = o->model.ctx;
    auto model = load_model(o->model);
    const auto tokenizer = Tokenizer::from_gguf(model->file());
    const ChatTemplate chat_template(server::chat_template_source(model->file()));
    std::vector<int32_t> stop;
    for (int32_t id = 0; id < static_cast<int32_t>(model->hparams().n_vocab); ++id)
      if (tokenizer->vocab().is_end_of_generation(id)) stop.push_back(id);
    ThreadPool pool(o->model.thread_count());
    Session session(*model, o->model.ctx, o->model.kv_cache_type(), pool);
    std::ofstream results;
    if (!o->results.empty()) {
      results.open(o->results, std::ios::app);
      STRATA_CHECK(results.good(), "--results {}: cannot write it", o->results);
    }

    Tally tally;
    const auto count = [&](const Json& r) {
      ++tally.total;
      tally.correct += r["correct"].get<bool>() ? 1 : 0;
      if (r.contains("correct_norm")) {
        ++tally.choice_tasks;
        tally.correct_norm += r["correct_norm"].get<bool>() ? 1 : 0;
      }
    };
    int64_t to_run = 0;
    for (const EvalTask& t : tasks) to_run += done.count(t.id) ? 0 : 1;
    if (!done.empty())
      log::info("{}: {} of the {} tasks done before, {} to run", o->results,
                static_cast<int64_t>(tasks.size()) - to_run, tasks.size(), to_run);
    const auto start = std::chrono::steady_clock::now();
    int64_t ran = 0;
    for (const EvalTask& t : tasks) {
      if (const auto it = done.find(t.id); it != done.end()) {
        count(it->second);
        continue;
      }
      // Thinking off: the answer (or the choice) comes right after the prompt.
      ChatTemplateInputs in;
      in.messages = t.messages;
      in.tools = t.tools;
      in.add_generation_prompt = true;
      in.enable_thinking = false;
      server::set_special_tokens(*tokenizer, in);
      const std::vector<int32_t> prompt =
          server::encode_rendered(*tokenizer, chat_template.render(in), in);
      Json r = {{"id", t.id}};
      if (!t.choices.empty()) {
        std::vector<std::vector<int32_t>> choices;
        size_t longest = 0;
        for (const std::string& c : t.choices) {
          choices.push_back(tokenizer->encode(c, false, false));
          longest = std::max(longest, choices.back().size());
        }
        STRATA_CHECK(static_cast<int64_t>(prompt.size() + longest) <= o->model.ctx,
                     "task {}: the prompt and its longest choice are {} tokens, more than --ctx {}",
                     t.id, prompt.size() + longest, o->model.ctx);
        const quality::PromptState state = quality::run_prompt(session, prompt);
        std::vector<double> ll, per_byte;
        for (size_t i = 0; i < choices.size(); ++i) {
          ll.push_back(quality::continuation_log_likelihood(session, state, choices[i]));
          per_byte.push_back(ll.back() / static_cast<double>(t.choices[i].size()));
        }
        const auto best = std::max_element(ll.begin(), ll.end()) - ll.begin();
        const auto best_norm =
            std::max_element(per_byte.begin(), per_byte.end()) - per_byte.begin();
        r["kind"] = "choice";
        r["prediction"] = best;
        r["correct"] = best == t.answer_index;
        r["correct_norm"] = best_norm == t.answer_index;
        r["log_likelihoods"] = ll;
      } else {
        STRATA_CHECK(static_cast<int64_t>(prompt.size()) < o->model.ctx,
                     "task {}: the prompt is {} tokens, more than --ctx {}", t.id, prompt.size(),
                     o->model.ctx);
        const quality::PromptState state = quality::run_prompt(session, prompt);
        const std::string text = visible_answer(
            tokenizer->decode(quality::greedy_answer(session, state, o->max_tokens, stop), false));
        bool correct = false;
        for (const std::string& a : t.answers) correct = correct || quality::answers_match(text, a);
        r["kind"] = "answer";
        r["prediction"] = text;
        r["correct"] = correct;
      }
      count(r);
      if (results.is_open()) {
        results << r.dump(-1, ' ', false, nlohmann::json::error_handler_t::replace) << "\n";
        results.flush();
        STRATA_CHECK(results.good(), "--results {}: cannot write it", o->results);
      }
      ++ran;
      const double seconds =
          std::chrono::duration<double>(std::chrono::steady_clock::now() - start).count();
      fmt::print(stderr, "[{}/{}] {}: {}; accuracy so far {:.1f}% ({:.0f} s left)\n", ran, to_run,
                 t.id, r["correct"].get<bool>() ? "right" : "wrong",
                 100.0 * static_cast<double>(tally.correct) / static_cast<double>(tally.total),
                 seconds / static_cast<double>(ran) * static_cast<double>(to_run - ran));
    }
    const Json summary = summary_json(tally);
    if (o->json) {
      fmt::print("{}\n", summary.dump(2));
    } else {
      const quality::Interval ci = quality::wilson_interval(tally.correct, tally.total);
      fmt::print("accuracy {:.1f}% ({} of {}; 95% interval {:.1f}-{:.1f}%)",
                 100.0 * summary["accuracy"].get<double>(), tally.correct, tally.total,
                 100 * ci.low, 100 * ci.high);
      if (tally.choice_tasks > 0) {
        fmt::print(", per byte of choice {:.1f}% of {} multiple-choice tasks",
                   100.0 * summary["accuracy_norm"].get<double>(), tally.choice_tasks);
      }
      fmt::print("\n");
    }
  });
}

}  // namespace strata::cli
