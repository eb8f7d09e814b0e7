#pragma once
// Where the sampling settings of a request come from, weakest first: the model's recommended
// values (GGUF `general.sampling.*` keys when present, else a table of known model families),
// then the server's command-line flags, then the request's own fields.

#include <optional>
#include <string>

#include "gguf/gguf_file.h"
#include "runtime/sampler.h"

namespace strata::server {

// Settings that may or may not be given at one level; set fields override the level below.
struct SamplingOverrides {
  std::optional<float> temperature, top_p, min_p, repetition_penalty, presence_penalty,
      frequency_penalty;
  std::optional<int32_t> top_k, penalty_last_n;
  std::optional<uint64_t> seed;

  void apply_to(SamplingParams& params) const;
};

struct ModelSamplingDefaults {
  SamplingParams params;
  std::string source;  // e.g. "GGUF general.sampling.*", "Qwen3-Coder model card", "generic"
};

// The recommended settings of the model in `file`.
ModelSamplingDefaults model_sampling_defaults(const GgufFile& file);

}  // namespace strata::server
