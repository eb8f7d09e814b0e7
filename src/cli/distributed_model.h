#pragma once
// --distributed: the model's layers split across the ranks of an MPI job
// (mpirun -np N [-H host1,host2,...] strata run|logits|bench|serve ... --distributed).

#include <memory>

#include "cli/model_options.h"
#include "model/model.h"

namespace strata::cli {

// Rank 0 gets the model the command runs (its layers spread over the ranks). Every other rank
// loads the same file, checks it is the same, runs its layers for rank 0 until rank 0 ends, then
// ends this process (exit status 0; 1 when it failed), so it never returns there.
// Throws strata::Error (rank 0) with the reason a job cannot run: not under mpirun, one rank,
// another strata build or model file on a rank, a bad --layer-split, a GPU asked for.
std::unique_ptr<Model> load_distributed_model(const ModelOptions& options);

}  // namespace strata::cli
