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
#include "ops/matmul.h"
#include "util/mapped_file.h"
#include "util/thread_pool.h"

namespace strata {

class ActivationObserver;

// What one forward call did, for benchmarks and expert-popularity profiles.
struct ForwardStats {
  int64_t distinct_experts = 0;         // sum over MoE layers of experts that ran
  std::vector<uint64_t> expert_counts;  // [n_layer * n_expert] selections, when sized by caller
};

// One sequence's KV cache: a view per layer.
using SequenceKv = std::span<const ops::KvLayerView>;

// The tokens of one forward call. Two forms:
// - single sequence (`sequences` empty): token i sits at pos0 + i of sequence 0;
// - several sequences: token i belongs to sequence sequences[i] (an index into the caches) at
//   positions[i]. A sequence's tokens are consecutive positions in row order, so a later token
//   sees the keys and values its predecessors wrote in the same call. Logits are produced for
//   the rows in logit_rows, in that order (none when it is empty: a prefill chunk).
// Models with recurrent layers (recurrent_state_floats() > 0) also need `recurrent`: one state
// buffer of recurrent_state_floats() floats per sequence, in the order of the KV caches. All
// zeros is a fresh sequence; after the call each buffer reflects exactly the tokens its sequence
// has processed (a sequence's tokens are consumed in position order). Its layout is the
// model's business; copying the buffer is a snapshot that can be restored later (together with
// truncating the KV cache to the same length).
struct ForwardBatch {
  std::span<const int32_t> tokens;
  int64_t pos0 = 0;         // single sequence: position of tokens[0]
  bool all_logits = false;  // single sequence: logits for every token, else only the last
  std::span<const int32_t> sequences;
  std::span<const int64_t> positions;
  std::span<const int32_t> logit_rows;
  std::span<float* const> recurrent;  // [sequences] state buffers (recurrent models only)
  // Where a model that exports_hidden() writes every row's last hidden state after the output
  // norm (what the output matrix reads), [rows][n_embd] in row order: what a NextN head drafts
  // from. Null: not wanted.
  float* hidden = nullptr;
};

class NextnHead;

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

  // Runs the batch through the model: every weight matrix streams once for all its tokens.
  // kv[s] is sequence s's cache, one view per layer, with storage for every position the batch
  // writes. logits: [rows][n_vocab] for the requested rows (single-sequence form: every token,
  // or only the last). Throws strata::Error for an inconsistent batch.
  virtual void forward(const ForwardBatch& batch, std::span<const SequenceKv> kv, float* logits,
                       ThreadPool& pool, ForwardStats* stats = nullptr) = 0;

  // Weight bytes a single-token step reads outside the routed experts (attention, router,
  // shared/dense FFN, norms, output head, one embedding row).
  virtual int64_t dense_bytes_per_token() const = 0;
  // Bytes of one routed expert in one layer (gate + up + down); 0 for dense models.
  virtual int64_t expert_bytes() const = 0;
  // Bytes of recurrent state a single-token step reads and writes (0 without recurrent layers).
  virtual int64_t recurrent_bytes_per_token() const { return 0; }

  // The runtime copied n storage slots [from, from + n) to [to, to + n) in every layer of the
  // cache whose first KV layer's keys start at `storage` (a shared page it made private).
  // Models that keep keys and values elsewhere (a GPU) copy theirs too.
  virtual void kv_slots_copied(const void* storage, int64_t from, int64_t to, int64_t n) {
    (void)storage, (void)from, (void)to, (void)n;
  }

  // Recurrent state buffers (ForwardBatch::recurrent) of a model that keeps the states elsewhere
  // (a GPU), with the buffer's header still kept on the host. The runtime calls
  // recurrent_state_read(P) right before it reads buffer P (a snapshot, a copy into another
  // buffer): the model brings P up to date. recurrent_state_written(P) right after it wrote P
  // (zeroed it, restored a snapshot into it, a new buffer): the model takes P's contents on its
  // next forward. recurrent_state_released(P) when P goes away (its address may be reused).
  virtual void recurrent_state_read(float* state) { (void)state; }
  virtual void recurrent_state_written(const float* state) { (void)state; }
  virtual void recurrent_state_released(const float* state) { (void)state; }

  // The file's multi-token-prediction block, when the model keeps and can run it (null: none),
  // and whether forward writes ForwardBatch::hidden (which that block drafts from).
  virtual const NextnHead* nextn_head() const { return nullptr; }
  virtual bool exports_hidden() const { return false; }

  // Floats of recurrent state one sequence needs (0: a pure transformer, KV cache only).
  virtual int64_t recurrent_state_floats() const { return 0; }
  // Whether `layer` reads and writes the KV cache (false for recurrent layers: caches may give
  // them empty views and no storage).
  virtual bool layer_has_kv(int64_t layer) const {
    (void)layer;
    return true;
  }
  // layer_has_kv for every layer.
  std::vector<bool> kv_layers() const;

  // How the model's CPU matrix products run (repacked tiles, GEMV prefetch): the results are
  // the same bits either way, only the speed differs.
  virtual void set_matmul_settings(const ops::MatmulSettings& settings) { (void)settings; }
  // Bytes of CPU weights rewritten into compact tiles (MatmulSettings::compact_tiles).
  virtual int64_t compact_tile_bytes() const { return 0; }
  // Shows `observer` (null: nobody) the input rows of every product of the CPU blocks; false
  // where the model does not run its blocks on the CPU.
  virtual bool set_activation_observer(ActivationObserver* observer) {
    (void)observer;
    return false;
  }

  // Where the model runs, for /props and /metrics: one line (e.g. the hybrid plan in force) and
  // the memory each device holds for it.
  struct DeviceMemory {
    std::string device;
    uint64_t allocated_bytes = 0;
    uint64_t budget_bytes = 0;  // what it may use (0: not limited / unknown)
    uint64_t pinned_bytes = 0;  // host memory its driver holds for it (RAM experts it copies)
  };
  virtual std::string placement_summary() const { return "every tensor on the CPU"; }
  virtual std::vector<DeviceMemory> device_memory() const { return {}; }
  // Where each layer runs, for the server's status page: the device of its attention (or
  // recurrent) part and how many of its routed experts each device holds.
  struct LayerDevices {
    std::string attention;
    std::vector<std::pair<std::string, int64_t>> experts;  // (device, experts), in device order
  };
  virtual std::vector<LayerDevices> layer_devices() const;
  virtual std::string output_head_device() const { return kCpuDeviceName; }
  static constexpr const char* kCpuDeviceName = "CPU";

 protected:
  Model(GgufFile file, ModelHParams hparams)
      : file_(std::move(file)), hparams_(std::move(hparams)) {}

  GgufFile file_;
  ModelHParams hparams_;
};

}  // namespace strata
