#pragma once
// Random weights for synthetic models, and the weight type each matrix gets under a file type.

#include <cstdint>
#include <random>
#include <string>
#include <vector>

#include "gguf/gguf_writer.h"
#include "synthetic_model.h"

namespace strata::tools {

// The type of a matrix with rows of `cols` values: the file type's mix (Q4_K_M as GGUF quantizers
// make it, MXFP4_MOE as the published gpt-oss files), or its one type. `role` is the tensor's
// base name without _exps / _shexp ("ffn_down", "attn_v", "output"...). Rows that K-quant or
// IQ4_XS blocks do not divide fall back to a 32-value type, as GGUF quantizers do.
GgmlType tensor_type(const SyntheticModelSpec& s, const std::string& role, int64_t layer,
                     int64_t cols, bool routed_expert = false);

class RandomWeights {
 public:
  explicit RandomWeights(const SyntheticModelSpec& s);

  // A tensor of `rows` rows of `cols`: rows are drawn from a pool of 64 quantized random rows
  // (std 1/sqrt(cols), plus `bias` times the shared direction), so even GB-sized tensors are
  // written at memcpy speed.
  GgufWriter::TensorFiller matrix(GgmlType type, int64_t cols, int64_t rows, float bias = 0.0f);
  // Router [n_embd] -> [n_expert] in F32: random rows, hot experts tilted toward the direction.
  std::vector<uint8_t> router();
  // Norm weights around 1.
  std::vector<uint8_t> norm(int64_t n) { return normal_f32(n, 1.0f, 0.05f); }
  // n F32 values from N(mean, stddev).
  std::vector<uint8_t> normal_f32(int64_t n, float mean, float stddev);
  // ssm_a = -exp(A_log), A_log uniform in [0, log 16) as the model initializes it.
  std::vector<uint8_t> ssm_a(int64_t n);

 private:
  const SyntheticModelSpec& s_;
  std::mt19937_64 rng_;
  // The direction every token embedding shares a little of: hot experts' router rows point
  // along it, so they win the top-k more often.
  std::vector<float> direction_;
};

}  // namespace strata::tools
