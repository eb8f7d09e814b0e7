#pragma once
// A rank other than 0 of a distributed run: holds a contiguous range of the model's layers with
// their keys, values and recurrent states, and runs them on each step's hidden states as rank 0's
// commands say, until rank 0 says stop.

#include "backend/mpi/mpi_link.h"
#include "model/decoder_model.h"
#include "plan/pipeline_split.h"
#include "util/thread_pool.h"

namespace strata::mpi {

// Returns when rank 0 sends shutdown; throws strata::DeviceLost when a rank it waits on is gone.
void run_pipeline_worker(MpiLink& link, DecoderModel& model, plan::LayerRange range,
                         ThreadPool& pool);

}  // namespace strata::mpi
