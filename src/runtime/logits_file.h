#pragma once
// The ORCL logits format shared with the oracle references (see ../shared/oracle/README.md):
// u32 magic "ORCL", u32 version 1, u32 n_vocab, n_prompt, n_gen; i32 prompt[n_prompt];
// i32 gen[n_gen]; f32 logits[n_prompt + n_gen - 1][n_vocab]. Little-endian.

#include <cstdint>
#include <string>
#include <vector>

namespace strata {

struct LogitsFile {
  uint32_t n_vocab = 0;
  std::vector<int32_t> prompt;
  std::vector<int32_t> gen;
  std::vector<float> logits;  // rows of n_vocab

  int64_t rows() const { return n_vocab ? static_cast<int64_t>(logits.size() / n_vocab) : 0; }
  const float* row(int64_t i) const { return logits.data() + i * n_vocab; }

  static LogitsFile read(const std::string& path);
  void write(const std::string& path) const;
};

}  // namespace strata
