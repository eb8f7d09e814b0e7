#pragma once
// What every chat front end (the server's chat endpoint, `strata run --chat`, `strata template`)
// does alike around a chat template: take the model's template (ChatML when the file has none),
// give it the vocabulary's BOS/EOS texts, and tokenize what it renders without a second BOS.

#include <cstdint>
#include <string>
#include <vector>

#include "gguf/gguf_file.h"
#include "template/chat_template.h"
#include "tokenizer/tokenizer.h"

namespace strata::server {

// tokenizer.chat_template of `file`, or ChatML with a warning naming the file.
std::string chat_template_source(const GgufFile& file);

// in.bos_token and in.eos_token from the vocabulary (left empty when it has none).
void set_special_tokens(const Tokenizer& tokenizer, ChatTemplateInputs& in);

// The rendered prompt as tokens: BOS added only when the template did not write it.
std::vector<int32_t> encode_rendered(const Tokenizer& tokenizer, const std::string& text,
                                     const ChatTemplateInputs& in);

}  // namespace strata::server
