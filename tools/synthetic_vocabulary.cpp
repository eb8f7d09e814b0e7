#include "synthetic_vocabulary.h"

#include <fmt/format.h>

#include <vector>

#include "gguf/gguf_file.h"
#include "util/error.h"

namespace strata::tools {

// Copies tokenizer.* metadata from another file, padding the per-token arrays to n_vocab.
void copy_vocabulary(const std::string& path, int64_t n_vocab, GgufWriter& w) {
  const GgufFile src = GgufFile::open(path);
  const GgufArray* tokens = src.find_array("tokenizer.ggml.tokens");
  if (!tokens) fail("{}: no tokenizer.ggml.tokens to copy", path);
  const int64_t have = static_cast<int64_t>(tokens->items.size());
  if (have > n_vocab) {
    fail("{} has {} tokens, more than the model's vocabulary of {} (raise --vocab)", path, have,
         n_vocab);
  }
  for (const auto& kv : src.metadata()) {
    if (kv.key.rfind("tokenizer.", 0) != 0) continue;
    const GgufArray* a = kv.value.as_array();
    const bool per_token =
        a && static_cast<int64_t>(a->items.size()) == have &&
        (kv.key == "tokenizer.ggml.tokens" || kv.key == "tokenizer.ggml.token_type" ||
         kv.key == "tokenizer.ggml.scores");
    if (!per_token) {
      w.set(kv.key, kv.value);
      continue;
    }
    std::vector<GgufValue> items = a->items;
    for (int64_t i = have; i < n_vocab; ++i) {
      if (kv.key == "tokenizer.ggml.tokens")
        items.push_back(GgufValue::string(fmt::format("[PAD{}]", i)));
      if (kv.key == "tokenizer.ggml.token_type") items.push_back(GgufValue(int32_t{5}));  // unused
      if (kv.key == "tokenizer.ggml.scores") items.push_back(GgufValue(0.0f));
    }
    w.set(kv.key, GgufValue::array(a->element_type, std::move(items)));
  }
}

// The built-in byte-level vocabulary (see SyntheticModelSpec::byte_vocab). Byte b is the token
// GPT-2's byte-to-unicode mapping gives it: printable Latin-1 bytes stand for themselves, the
// others for code points from U+0100 on.
void write_byte_vocabulary(int64_t n_vocab, GgufWriter& w) {
  static const char* const kSpecial[] = {"<|endoftext|>", "<|im_start|>", "<|im_end|>",
                                         "<think>",       "</think>",     "<tool_call>",
                                         "</tool_call>",  "<|fim_pad|>"};
  constexpr int64_t kSpecials = sizeof kSpecial / sizeof kSpecial[0];
  if (n_vocab < 256 + kSpecials)
    fail("a byte vocabulary needs at least {} tokens, the model has {}", 256 + kSpecials, n_vocab);
  std::vector<std::string> tokens;
  std::vector<GgufValue> types;
  int next_extra = 256;
  for (int b = 0; b < 256; ++b) {
    const bool printable = (b >= 0x21 && b <= 0x7e) || (b >= 0xa1 && b <= 0xac) || b >= 0xae;
    const uint32_t cp = printable ? static_cast<uint32_t>(b) : static_cast<uint32_t>(next_extra++);
    std::string utf8;
    if (cp < 0x80) {
      utf8 += static_cast<char>(cp);
    } else {
      utf8 += static_cast<char>(0xc0 | (cp >> 6));
      utf8 += static_cast<char>(0x80 | (cp & 0x3f));
    }
    tokens.push_back(utf8);
    types.push_back(GgufValue(int32_t{1}));  // normal
  }
  for (int64_t i = 0; i < kSpecials; ++i) {
    tokens.push_back(kSpecial[i]);
    // <think> and <tool_call> tags are plain text to clients (user-defined), the rest control.
    types.push_back(GgufValue(int32_t{i >= 3 && i <= 6 ? 4 : 3}));
  }
  for (int64_t i = 256 + kSpecials; i < n_vocab; ++i) {
    tokens.push_back(fmt::format("[PAD{}]", i));
    types.push_back(GgufValue(int32_t{5}));  // unused
  }
  w.set_string("tokenizer.ggml.model", "gpt2");
  w.set_string("tokenizer.ggml.pre", "qwen2");
  w.set("tokenizer.ggml.tokens", GgufValue::string_array(tokens));
  w.set("tokenizer.ggml.token_type", GgufValue::array(GgufValueType::i32, std::move(types)));
  w.set("tokenizer.ggml.merges", GgufValue::string_array({}));
  w.set_u32("tokenizer.ggml.bos_token_id", 256);
  w.set_u32("tokenizer.ggml.eos_token_id", 258);
  w.set_u32("tokenizer.ggml.padding_token_id", 256);
  w.set_bool("tokenizer.ggml.add_bos_token", false);
  w.set_string("tokenizer.chat_template",
               "{%- for message in messages %}{{- '<|im_start|>' + message.role + '\\n' + "
               "(message.content if message.content is string else '') + '<|im_end|>\\n' }}"
               "{%- endfor %}{%- if add_generation_prompt %}{{- '<|im_start|>assistant\\n' }}"
               "{%- endif %}");
}

}  // namespace strata::tools
