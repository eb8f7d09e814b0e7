// `strata tokenize`: token ids of text, with the model's own tokenizer.

#include <fmt/format.h>

#include <fstream>
#include <sstream>

#include "cli/commands.h"
#include "gguf/gguf_file.h"
#include "tokenizer/tokenizer.h"
#include "util/error.h"

namespace strata::cli {
namespace {

std::string read_text_file(const std::string& path) {
  std::ifstream in(path, std::ios::binary);
  if (!in) fail("cannot open '{}'", path);
  std::stringstream ss;
  ss << in.rdbuf();
  return ss.str();
}

}  // namespace

void add_tokenize_command(CLI::App& app) {
  struct Options {
    std::string model;
    std::string prompt;
    std::string corpus;
    bool special = false;
    bool bos = false;
    bool show_pieces = false;
  };
  auto o = std::make_shared<Options>();
  CLI::App* cmd =
      app.add_subcommand("tokenize", "Print the token ids of text (one line per record)");
  cmd->add_option("-m,--model,model", o->model, "GGUF file with the vocabulary")->required();
  auto* p = cmd->add_option("-p,--prompt", o->prompt, "Text to tokenize");
  auto* c = cmd->add_option("--corpus", o->corpus,
                            "File of records separated by \"\\n\\x1e\\n\"; one output line each");
  p->excludes(c);
  cmd->add_flag("--special", o->special,
                "Match control tokens written in the text (<|im_start|> ...)");
  cmd->add_flag("--bos", o->bos,
                "Add BOS/EOS as the vocabulary asks (tokenizer.ggml.add_bos_token)");
  cmd->add_flag("--pieces", o->show_pieces, "Print each token's text next to its id");
  cmd->callback([o] {
    if (o->prompt.empty() && o->corpus.empty()) fail("give text with -p or a file with --corpus");
    const GgufFile file = GgufFile::open(o->model);
    const auto tokenizer = Tokenizer::from_gguf(file);
    std::vector<std::string> records;
    if (!o->corpus.empty()) {
      const std::string data = read_text_file(o->corpus);
      const std::string sep = "\n\x1e\n";
      size_t start = 0;
      for (size_t at; (at = data.find(sep, start)) != std::string::npos; start = at + sep.size()) {
        records.push_back(data.substr(start, at - start));
      }
      records.push_back(data.substr(start));
    } else {
      records.push_back(o->prompt);
    }
    for (const std::string& r : records) {
      const auto ids = tokenizer->encode(r, o->special, o->bos);
      std::string line;
      for (size_t i = 0; i < ids.size(); ++i) {
        if (i) line += ' ';
        line += std::to_string(ids[i]);
        if (o->show_pieces) {
          line += fmt::format("({:?})", tokenizer->token_bytes(ids[i], true));
        }
      }
      fmt::print("{}\n", line);
    }
  });
}

}  // namespace strata::cli
