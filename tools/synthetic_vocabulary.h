#pragma once
// The vocabulary of a synthetic model: copied from another GGUF file, or a small built-in
// byte-level one.

#include <cstdint>
#include <string>

#include "gguf/gguf_writer.h"

namespace strata::tools {

// Copies tokenizer.* metadata from another file, padding the per-token arrays to n_vocab.
void copy_vocabulary(const std::string& path, int64_t n_vocab, GgufWriter& w);

// The 256 bytes as GPT-2's byte-level tokens, ChatML control tokens, Qwen3's <think> and
// <tool_call> tags, and a ChatML chat template (see SyntheticModelSpec::byte_vocab).
void write_byte_vocabulary(int64_t n_vocab, GgufWriter& w);

}  // namespace strata::tools
