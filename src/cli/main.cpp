// The strata binary: sub-commands over GGUF MoE models.
//
// Exit codes: 0 success, 1 a user error (a bad file, a model that does not fit, a refused
// setting: the message says what and why), 2 a usage error (an unknown command or flag, a missing
// or malformed value).

#include <CLI/CLI.hpp>

#include <algorithm>
#include <cstdio>
#include <exception>
#include <string>
#include <vector>

#include "cli/commands.h"
#include "cli/llama_command.h"
#include "cli/llama_flags.h"
#include "util/error.h"
#include "util/log.h"

namespace {

constexpr int kUserError = 1;
constexpr int kUsageError = 2;

// Levenshtein distance, for "did you mean".
size_t edit_distance(const std::string& a, const std::string& b) {
  std::vector<size_t> row(b.size() + 1);
  for (size_t j = 0; j <= b.size(); ++j) row[j] = j;
  for (size_t i = 1; i <= a.size(); ++i) {
    size_t diagonal = row[0];
    row[0] = i;
    for (size_t j = 1; j <= b.size(); ++j) {
      const size_t above = row[j];
      row[j] = std::min({row[j] + 1, row[j - 1] + 1, diagonal + (a[i - 1] == b[j - 1] ? 0 : 1)});
      diagonal = above;
    }
  }
  return row[b.size()];
}

std::vector<std::string> command_names(const CLI::App& app) {
  std::vector<std::string> names;
  for (const CLI::App* sub : app.get_subcommands([](const CLI::App*) { return true; }))
    names.push_back(sub->get_name());
  return names;
}

// `strata serv`: the nearest command when it is close enough to be a typo.
std::string unknown_command_message(const CLI::App& app, const std::string& word) {
  std::string best;
  size_t best_distance = 3;  // more edits than this is not a typo
  for (const std::string& name : command_names(app)) {
    const size_t d = edit_distance(word, name);
    if (d < best_distance || (d == best_distance && best.empty() && name.rfind(word, 0) == 0)) {
      best = name;
      best_distance = d;
    }
  }
  std::string all;
  for (const std::string& name : command_names(app)) all += (all.empty() ? "" : ", ") + name;
  return best.empty() ? "unknown command '" + word + "' (commands: " + all + "; strata help CMD)"
                      : "unknown command '" + word + "'; did you mean '" + best + "'?";
}

}  // namespace

int main(int argc, char** argv) {
  CLI::App app{
      "strata: plans, runs and serves Mixture-of-Experts GGUF models on the hardware you own"};
  app.require_subcommand(1);
  app.set_version_flag("--version", "strata 0.1.0");
  app.footer(
      "Exit codes: 0 success, 1 a user error, 2 a usage error. `strata help CMD` or "
      "`strata CMD --help` for a command's options.");
  strata::cli::add_inspect_command(app);
  strata::cli::add_devices_command(app);
  strata::cli::add_plan_command(app);
  strata::cli::add_run_command(app);
  strata::cli::add_logits_command(app);
  strata::cli::add_bench_command(app);
  strata::cli::add_tokenize_command(app);
  strata::cli::add_template_command(app);
  strata::cli::add_serve_command(app);
  strata::cli::add_service_command(app);
  strata::cli::add_perplexity_command(app);
  strata::cli::add_eval_command(app);
  strata::cli::add_quantize_command(app);
  strata::cli::add_profile_command(app);

  std::vector<std::string> args(argv + 1, argv + argc);
  // `strata help [CMD]` is `strata [CMD] --help`.
  if (!args.empty() && args[0] == "help") {
    args.erase(args.begin());
    if (args.size() > 1) args.resize(1);
    args.emplace_back("--help");
  }
  if (args.empty()) {
    std::fputs(app.help().c_str(), stdout);
    return kUsageError;
  }
  if (args[0][0] != '-') {
    const std::vector<std::string> names = command_names(app);
    if (std::find(names.begin(), names.end(), args[0]) == names.end()) {
      strata::log::error("{}", unknown_command_message(app, args[0]));
      return kUsageError;
    }
  }
  // llama.cpp's spellings become strata's (or are dropped with a note) before parsing.
  strata::cli::RewrittenArgs rewritten;
  try {
    // `plan --llama-cmd LINE`: the pasted command's flags, those plan does not know left out.
    if (args[0] == "plan") {
      const CLI::App* plan = app.get_subcommand("plan");
      rewritten = strata::cli::expand_llama_command(args, [plan](const std::string& name) {
        return plan->get_option_no_throw(name) != nullptr;
      });
      args = rewritten.args;
    }
    strata::cli::RewrittenArgs renamed = strata::cli::rewrite_llama_flags(args);
    renamed.notes.insert(renamed.notes.begin(), rewritten.notes.begin(), rewritten.notes.end());
    rewritten = std::move(renamed);
  } catch (const strata::Error& e) {
    strata::log::error("{}", e.what());
    return kUsageError;
  }
  for (const std::string& note : rewritten.notes) std::fprintf(stderr, "note: %s\n", note.c_str());
  try {
    std::vector<std::string> parsed = rewritten.args;
    std::vector<char*> parsed_argv = {argv[0]};
    for (std::string& a : parsed) parsed_argv.push_back(a.data());
    app.parse(static_cast<int>(parsed_argv.size()), parsed_argv.data());
  } catch (const CLI::ParseError& e) {
    const int code = app.exit(e);  // prints help, the version, or the error
    return code == 0 ? 0 : kUsageError;
  } catch (const strata::Error& e) {
    strata::log::error("{}", e.what());
    return kUserError;
  } catch (const std::exception& e) {
    strata::log::error("unexpected failure: {}", e.what());
    return kUserError;
  }
  return 0;
}
