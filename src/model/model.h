#pragma once
// A loaded decoder model: its file, hyper-parameters, weights and forward pass. One subclass per
// architecture in model/archs/, created by Model::load from general.architecture.

#include <cstdint>
#include <memory>
#include <span>
#include <string>
#include <vector>

#include "gguf/gguf_file.h"
#include "model/hparams.h"
#include "ops/attention.h"
#include "util/mapped_file.h"
#include "util/thread_pool.h"

namespace strata {

// What one forward call did, for benchmarks and expert-popularity profiles.
struct ForwardStats {
  int64_t distinct_experts = 0;         // sum over MoE layers of experts that ran
  std::vector<uint64_t> expert_counts;  // [n_layer * n_expert] selections, when sized by caller
};

struct ForwardBatch {
  std::span<const int32_t> tokens;
  int64_t pos0 = 0;         // position of tokens[0] in the sequence
  bool all_logits = false;  // logits for every token, else only the last
};

class Model {
 public:
  // Opens `path` and builds the architecture it declares. Throws strata::Error naming the file
  // for unknown architectures (listing the supported ones), missing or misshapen tensors.
  static std::unique_ptr<Model> load(const std::string& path, LoadMode mode = LoadMode::mmap);
  static std::unique_ptr<Model> from_file(GgufFile file);
  static std::vector<std::string> supported_architectures();

  virtual ~Model() = default;

  const GgufFile& file() const { return file_; }
  const ModelHParams& hparams() const { return hparams_; }

  // Runs the batch through the model. kv holds one view per layer with room for
  // pos0 + tokens.size() positions. logits: [tokens][n_vocab] or [n_vocab].
  virtual void forward(const ForwardBatch& batch, std::span<const ops::KvLayerView> kv,
                       float* logits, ThreadPool& pool, ForwardStats* stats = nullptr) = 0;

  // Weight bytes a single-token step reads outside the routed experts (attention, router,
  // shared/dense FFN, norms, output head, one embedding row).
  virtual int64_t dense_bytes_per_token() const = 0;
  // Bytes of one routed expert in one layer (gate + up + down); 0 for dense models.
  virtual int64_t expert_bytes() const = 0;

 protected:
  Model(GgufFile file, ModelHParams hparams)
      : file_(std::move(file)), hparams_(std::move(hparams)) {}

  GgufFile file_;
  ModelHParams hparams_;
};

}  // namespace strata
