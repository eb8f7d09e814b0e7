#include "server/chat_prompt_tokens.h"

#include "util/log.h"

namespace strata::server {

std::string chat_template_source(const GgufFile& file) {
  if (auto source = file.find_string("tokenizer.chat_template")) return *source;
  log::warn("{} has no chat template (tokenizer.chat_template); using ChatML", file.name());
  return ChatTemplate::default_chatml_source();
}

void set_special_tokens(const Tokenizer& tokenizer, ChatTemplateInputs& in) {
  const Vocab& v = tokenizer.vocab();
  if (v.bos >= 0) in.bos_token = tokenizer.token_bytes(v.bos, true);
  if (v.eos >= 0) in.eos_token = tokenizer.token_bytes(v.eos, true);
}

std::vector<int32_t> encode_rendered(const Tokenizer& tokenizer, const std::string& text,
                                     const ChatTemplateInputs& in) {
  const bool has_bos = !in.bos_token.empty() && text.starts_with(in.bos_token);
  return tokenizer.encode(text, /*parse_special=*/true, /*add_bos=*/!has_bos);
}

}  // namespace strata::server
