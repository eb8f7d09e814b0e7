// `strata template`: the prompt a chat renders to, with the model's own chat template.

#include <fmt/format.h>

#include <fstream>
#include <nlohmann/json.hpp>

#include "cli/commands.h"
#include "gguf/gguf_file.h"
#include "server/chat_prompt_tokens.h"
#include "template/chat_template.h"
#include "util/error.h"
#include "util/json_error.h"
#include "util/log.h"

namespace strata::cli {
namespace {

nlohmann::ordered_json read_json_file(const std::string& path, const char* what) {
  std::ifstream in(path);
  if (!in) fail("cannot open {} file '{}'", what, path);
  try {
    return nlohmann::ordered_json::parse(in);
  } catch (const nlohmann::json::parse_error& e) {
    fail("{} file '{}' is not valid JSON: {}", what, path, plain_json_error(e.what()));
  }
}

}  // namespace

void add_template_command(CLI::App& app) {
  struct Options {
    std::string model;
    std::string messages;
    std::string tools;
    bool no_generation_prompt = false;
    bool no_thinking = false;
  };
  auto o = std::make_shared<Options>();
  CLI::App* cmd = app.add_subcommand(
      "template", "Print the prompt a chat renders to with the model's chat template");
  cmd->add_option("-m,--model,model", o->model, "GGUF file with tokenizer.chat_template")
      ->required();
  cmd->add_option("--messages", o->messages,
                  "JSON file: an array of OpenAI-style messages, or an object with \"messages\"")
      ->required();
  cmd->add_option("--tools", o->tools, "JSON file: an array of OpenAI-style tools");
  cmd->add_flag("--no-generation-prompt", o->no_generation_prompt,
                "Do not open the assistant's turn at the end");
  cmd->add_flag("--no-thinking", o->no_thinking, "Render with enable_thinking = false");
  cmd->callback([o] {
    const GgufFile file = GgufFile::open(o->model);
    const ChatTemplate chat_template(server::chat_template_source(file));
    ChatTemplateInputs inputs;
    nlohmann::ordered_json messages = read_json_file(o->messages, "messages");
    if (messages.is_object() && messages.contains("messages")) messages = messages["messages"];
    if (!messages.is_array())
      fail("messages file '{}' must hold an array of messages", o->messages);
    inputs.messages = normalize_messages(messages);
    if (!o->tools.empty()) {
      inputs.tools = read_json_file(o->tools, "tools");
      if (!inputs.tools.is_array()) fail("tools file '{}' must hold an array of tools", o->tools);
    }
    inputs.add_generation_prompt = !o->no_generation_prompt;
    if (o->no_thinking) inputs.enable_thinking = false;
    auto token_text = [&](const char* key) -> std::string {
      const auto id = file.find_int(std::string("tokenizer.ggml.") + key);
      const GgufArray* tokens = file.find_array("tokenizer.ggml.tokens");
      if (!id || !tokens || *id < 0 || *id >= static_cast<int64_t>(tokens->items.size())) return "";
      return *tokens->items[static_cast<size_t>(*id)].as_string();
    };
    inputs.bos_token = token_text("bos_token_id");
    inputs.eos_token = token_text("eos_token_id");
    fmt::print("{}", chat_template.render(inputs));
  });
}

}  // namespace strata::cli
