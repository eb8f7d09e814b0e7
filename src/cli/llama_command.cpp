#include "cli/llama_command.h"

#include <algorithm>

#include <fmt/format.h>

#include "util/error.h"

namespace strata::cli {
namespace {

bool is_flag(const std::string& word) {
  return word.size() > 1 && word[0] == '-' && !(word[1] >= '0' && word[1] <= '9');
}

// The flags of a llama.cpp program: its name (a word that is not a flag, first) dropped.
std::vector<std::string> program_flags(const std::string& line) {
  std::vector<std::string> words = shell_words(line);
  STRATA_CHECK(!words.empty(), "--llama-cmd: the command line is empty");
  if (!is_flag(words.front())) words.erase(words.begin());
  return words;
}

}  // namespace

std::vector<std::string> shell_words(std::string_view line) {
  std::vector<std::string> words;
  std::string word;
  bool in_word = false;
  for (size_t i = 0; i < line.size(); ++i) {
    const char c = line[i];
    if (c == ' ' || c == '\t' || c == '\n') {
      if (in_word) words.push_back(std::move(word));
      word.clear();
      in_word = false;
      continue;
    }
    in_word = true;
    if (c == '\\') {
      if (i + 1 < line.size() && line[i + 1] == '\n') {
        ++i;  // a line continuation
        in_word = !word.empty();
      } else if (i + 1 < line.size()) {
        word += line[++i];
      }
    } else if (c == '\'') {
      const size_t end = line.find('\'', i + 1);
      STRATA_CHECK(end != std::string_view::npos, "--llama-cmd: a ' quote is not closed");
      word += line.substr(i + 1, end - i - 1);
      i = end;
    } else if (c == '"') {
      size_t j = i + 1;
      for (; j < line.size() && line[j] != '"'; ++j) {
        if (line[j] == '\\' && j + 1 < line.size() &&
            std::string_view("\"\\$`").find(line[j + 1]) != std::string_view::npos) {
          ++j;
        }
        word += line[j];
      }
      STRATA_CHECK(j < line.size(), "--llama-cmd: a \" quote is not closed");
      i = j;
    } else {
      word += c;
    }
  }
  if (in_word) words.push_back(std::move(word));
  return words;
}

RewrittenArgs expand_llama_command(std::span<const std::string> args,
                                   const std::function<bool(const std::string&)>& known) {
  RewrittenArgs out;
  if (args.empty()) return out;
  out.args.push_back(args[0]);
  // With --arch the plan is of a published architecture: the command's model file is not read.
  const bool arch_given = std::any_of(args.begin(), args.end(), [](const std::string& a) {
    return a == "--arch" || a.rfind("--arch=", 0) == 0;
  });
  for (size_t i = 1; i < args.size(); ++i) {
    std::string line;
    if (args[i] == "--llama-cmd") {
      STRATA_CHECK(i + 1 < args.size(), "--llama-cmd needs a command line");
      line = args[++i];
    } else if (args[i].rfind("--llama-cmd=", 0) == 0) {
      line = args[i].substr(12);
    } else {
      out.args.push_back(args[i]);
      continue;
    }
    std::vector<std::string> words = {args[0]};
    for (std::string& w : program_flags(line)) words.push_back(std::move(w));
    RewrittenArgs rewritten = rewrite_llama_flags(words);
    out.notes.insert(out.notes.end(), rewritten.notes.begin(), rewritten.notes.end());
    const std::vector<std::string>& flags = rewritten.args;
    for (size_t k = 1; k < flags.size(); ++k) {
      const std::string name = flags[k].substr(0, flags[k].find('='));
      if (arch_given && (name == "-m" || name == "--model")) {
        std::string dropped = flags[k];
        if (flags[k].find('=') == std::string::npos && k + 1 < flags.size())
          dropped += " " + flags[++k];
        out.notes.push_back(fmt::format(
            "--llama-cmd: {}: left out; --arch plans the published architecture instead", dropped));
        continue;
      }
      if (!is_flag(flags[k]) || known(name)) {
        out.args.push_back(flags[k]);
        continue;
      }
      std::string dropped = flags[k];
      if (flags[k].find('=') == std::string::npos && k + 1 < flags.size() && !is_flag(flags[k + 1]))
        dropped += " " + flags[++k];
      out.notes.push_back(fmt::format(
          "--llama-cmd: {}: not a flag strata {} knows; left out of the plan", dropped, args[0]));
    }
  }
  return out;
}

}  // namespace strata::cli
