#pragma once
// Rank 0 of a distributed run: the model as the runtime sees it, its layers split across the
// ranks of an MPI job. Rank 0 embeds the tokens, runs its own layers, sends the hidden states down
// the pipeline (each rank runs its layers and passes them on; the last sends them back) and
// computes the output head. The scheduler, sampler and server do not know there are other ranks.
//
// The other ranks keep the keys and values of their layers in the slots rank 0's caches name
// (rank 0's own cache storage for their layers is never written, so never committed), and their
// part of each recurrent state, kept current through the Model's recurrent_state_* calls as the
// GPU decoder keeps its copies.

#include <memory>
#include <set>
#include <vector>

#include "backend/mpi/mpi_link.h"
#include "backend/mpi/rank_identity.h"
#include "backend/mpi/step_message.h"
#include "model/batch_layout.h"
#include "model/decoder_model.h"
#include "plan/pipeline_split.h"

namespace strata::mpi {

class PipelineModel : public Model {
 public:
  // ranges[r]: rank r's layers (ranges[0] are this rank's); ranks: what each said at start.
  PipelineModel(std::unique_ptr<MpiLink> link, std::unique_ptr<DecoderModel> local,
                std::vector<plan::LayerRange> ranges, std::vector<RankIdentity> ranks);
  // Tells every other rank to stop.
  ~PipelineModel() override;

  void forward(const ForwardBatch& batch, std::span<const SequenceKv> kv, float* logits,
               ThreadPool& pool, ForwardStats* stats) override;
  int64_t dense_bytes_per_token() const override { return local_->dense_bytes_per_token(); }
  int64_t expert_bytes() const override { return local_->expert_bytes(); }
  int64_t recurrent_bytes_per_token() const override { return local_->recurrent_bytes_per_token(); }
  int64_t recurrent_state_floats() const override { return local_->recurrent_state_floats(); }
  bool layer_has_kv(int64_t layer) const override { return local_->layer_has_kv(layer); }
  void kv_slots_copied(const void* storage, int64_t from, int64_t to, int64_t n) override;
  void recurrent_state_read(float* state) override;
  void recurrent_state_written(const float* state) override;
  void recurrent_state_released(const float* state) override;
  const NextnHead* nextn_head() const override { return local_->nextn_head(); }
  bool exports_hidden() const override { return true; }
  void set_matmul_settings(const ops::MatmulSettings& settings) override {
    local_->set_matmul_settings(settings);
  }
  std::string placement_summary() const override;
  std::vector<DeviceMemory> device_memory() const override;
  std::vector<LayerDevices> layer_devices() const override;

  const std::vector<plan::LayerRange>& ranges() const { return ranges_; }

 private:
  StepCommand step_command(const ForwardBatch& batch, std::span<const SequenceKv> kv) const;
  // Tells every other rank the step (with the state parts it lacks).
  void send_step(StepCommand& step, std::span<float* const> states);
  // Runs this rank's layers on each micro-batch of x_, sends it on, and takes back what the last
  // rank returns (x_ then holds every row's final hidden state).
  void run_pipeline(const StepCommand& step, std::span<float* const> states,
                    std::span<const SequenceKv> kv, ThreadPool& pool, ForwardStats* stats);
  void send_command(int rank, const std::vector<uint8_t>& bytes) const;
  void send_to_others(const std::vector<uint8_t>& bytes) const;  // every rank but 0

  std::unique_ptr<MpiLink> link_;
  std::unique_ptr<DecoderModel> local_;
  std::vector<plan::LayerRange> ranges_;
  std::vector<RankIdentity> ranks_;
  std::vector<StateSlice> slices_;  // [rank] each rank's part of a recurrent state
  std::vector<uint64_t> rank_bytes_;
  int64_t first_kv_layer_ = -1;
  std::set<const float*> written_;  // state buffers rank 0 changed since the ranks last saw them
  BatchRows rows_;
  std::vector<float> x_;
  BlockWorkspace head_workspace_;
  bool said_micro_batches_ = false;  // logged once, when steps first split
};

}  // namespace strata::mpi
