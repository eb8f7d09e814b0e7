#include "cli/distributed_model.h"

#include <csignal>
#include <cstdlib>
#include <map>

#include "util/error.h"
#include "util/format_bytes.h"
#include "util/log.h"

#ifdef STRATA_HAVE_MPI
#include "backend/mpi/mpi_link.h"
#include "backend/mpi/pipeline_model.h"
#include "backend/mpi/pipeline_worker.h"
#include "backend/mpi/rank_identity.h"
#include "plan/inventory.h"
#include "plan/pipeline_split.h"
#endif

namespace strata::cli {

#ifndef STRATA_HAVE_MPI

std::unique_ptr<Model> load_distributed_model(const ModelOptions&) {
  fail(
      "--distributed: this strata was built without MPI (install libopenmpi-dev and "
      "openmpi-bin, or run scripts/setup.sh, then rebuild)");
}

#else

namespace {

using mpi::MpiLink;
using mpi::RankIdentity;
using mpi::Tag;
using mpi::WireReader;
using mpi::WireWriter;

// What rank 0 tells each rank at start: the hosts, every rank's layers, or why there is no job.
struct Assignment {
  std::string error;
  std::vector<std::string> hosts;
  std::vector<plan::LayerRange> ranges;

  void write(WireWriter& w) const {
    w.put_string(error);
    w.put<int64_t>(static_cast<int64_t>(hosts.size()));
    for (const std::string& h : hosts) w.put_string(h);
    w.put_array<plan::LayerRange>(ranges);
  }
  static Assignment read(WireReader& r) {
    Assignment a;
    a.error = r.get_string();
    const auto n = r.get<int64_t>();
    STRATA_CHECK(n >= 0 && n < (1 << 20), "an assignment names {} hosts", n);
    for (int64_t i = 0; i < n; ++i) a.hosts.push_back(r.get_string());
    a.ranges = r.get_array<plan::LayerRange>();
    return a;
  }
};

// Each rank's share of the weights: the RAM its host has available, divided among the ranks that
// run on that host.
std::vector<double> rank_capacities(const std::vector<RankIdentity>& ranks) {
  std::map<std::string, int> per_host;
  for (const RankIdentity& r : ranks) ++per_host[r.host];
  std::vector<double> out;
  for (const RankIdentity& r : ranks)
    out.push_back(std::max(1.0, static_cast<double>(r.ram_available)) / per_host[r.host]);
  return out;
}

// Rank 0: checks what every rank said and splits the layers.
Assignment assign_layers(const ModelOptions& options, const GgufFile& file,
                         const std::vector<RankIdentity>& ranks) {
  Assignment a;
  for (const RankIdentity& r : ranks) a.hosts.push_back(r.host);
  for (size_t r = 1; r < ranks.size(); ++r) {
    a.error = mpi::identity_mismatch(ranks[0], ranks[r], static_cast<int>(r));
    if (!a.error.empty()) return a;
  }
  try {
    const plan::ModelInventory inventory = plan::inventory_from_gguf(file);
    if (!options.layer_split.empty()) {
      a.ranges = plan::parse_layer_split(options.layer_split, inventory.n_layer,
                                         static_cast<int64_t>(ranks.size()));
    } else {
      a.ranges = plan::split_layers(plan::layer_weight_bytes(inventory),
                                    plan::head_weight_bytes(inventory), rank_capacities(ranks));
    }
  } catch (const Error& e) {
    a.error = e.what();
  }
  return a;
}

[[noreturn]] void end_worker(std::unique_ptr<MpiLink> link, int status) {
  link.reset();  // MPI_Finalize
  std::exit(status);
}

}  // namespace

std::unique_ptr<Model> load_distributed_model(const ModelOptions& options) {
  STRATA_CHECK(options.device == "none" || options.device == "auto",
               "--distributed runs each rank's layers on its CPU for now; --device {} is not "
               "supported with it (leave --device unset)",
               options.device);
  STRATA_CHECK(!options.placement.any_flag(),
               "--distributed places layers on ranks; the GPU placement flags (--plan, "
               "--n-cpu-moe, --cpu-moe, --gpu-layers, --ot) do not apply to it");
  auto link = std::make_unique<MpiLink>();
  const int rank = link->rank(), size = link->size();
  STRATA_CHECK(size >= 2,
               "--distributed: this MPI job has one rank; start it with mpirun -np N (N >= 2), "
               "or leave --distributed out to run on this machine alone");
  if (rank != 0) {
    // mpirun's SIGTERM ends a worker at once (a command may have blocked it for its own use).
    sigset_t signals;
    sigemptyset(&signals);
    sigaddset(&signals, SIGTERM);
    sigaddset(&signals, SIGINT);
    pthread_sigmask(SIG_UNBLOCK, &signals, nullptr);
  }

  // First only the header and the fingerprint's samples: which layers this rank holds decides
  // what it reads of the rest.
  const ByteRange header_part{0, uint64_t{1} << 20};
  const GgufFile header = GgufFile::open(options.path, LoadMode::mmap, {&header_part, 1});
  const RankIdentity self = mpi::identify(header, link->host(), options.thread_count());
  Assignment a;
  std::vector<RankIdentity> ranks{self};
  if (rank != 0) {
    WireWriter hello;
    self.write(hello);
    link->send(0, Tag::hello, hello.bytes());
    const std::vector<uint8_t> message =
        link->receive(0, Tag::assign, "the layer assignment", /*idle=*/true);
    WireReader r(message);
    a = Assignment::read(r);
    if (!a.error.empty()) {
      log::error("rank {}: rank 0 refused the job: {}", rank, a.error);
      end_worker(std::move(link), 1);
    }
  } else {
    for (int r = 1; r < size; ++r) {
      const std::vector<uint8_t> message = link->receive(r, Tag::hello, "its start-up message");
      WireReader reader(message);
      ranks.push_back(RankIdentity::read(reader));
    }
    a = assign_layers(options, header, ranks);
    WireWriter w;
    a.write(w);
    for (int r = 1; r < size; ++r) link->send(r, Tag::assign, w.bytes());
    STRATA_CHECK(a.error.empty(), "--distributed: {}", a.error);
  }
  link->set_rank_hosts(a.hosts);

  // This rank's tensors only: mapped (read ahead) or read into RAM (--load); the rest of the file
  // takes no memory here.
  const std::vector<ByteRange> held = plan::rank_byte_ranges(header, a.ranges, rank);
  std::unique_ptr<Model> loaded =
      Model::from_file(GgufFile::open(options.path, options.load_mode(), held));
  std::unique_ptr<DecoderModel> model(dynamic_cast<DecoderModel*>(loaded.get()));
  STRATA_CHECK(model, "--distributed: {} is not a decoder model", options.path);
  loaded.release();
  STRATA_CHECK(a.ranges.back().last == model->hparams().n_layer,
               "--distributed: the split covers {} layers, {} has {}", a.ranges.back().last,
               options.path, model->hparams().n_layer);
  // The prefetch decision is a measurement of memory reads: ranks sharing a host would disturb
  // each other's, so they take turns.
  const std::vector<uint8_t> nothing;
  if (rank > 0) link->receive(rank - 1, Tag::turn, "its turn to measure", /*idle=*/true);
  apply_matmul_settings(*model, options, [&](const GgufTensorInfo& t) {
    return plan::rank_holds_tensor(t.name, a.ranges, rank);
  });
  if (rank + 1 < size) link->send(rank + 1, Tag::turn, nothing);
  uint64_t held_bytes = 0;
  for (const ByteRange& r : held) held_bytes += r.size;

  if (rank != 0) {
    const plan::LayerRange range = a.ranges[static_cast<size_t>(rank)];
    log::info("{}: layers {}-{} of {} ({} {}), {} threads", link->describe(rank), range.first,
              range.last - 1, options.path, format_bytes(held_bytes),
              options.load_mode() == LoadMode::ram ? "read into RAM" : "mapped",
              options.thread_count());
    int status = 0;
    try {
      ThreadPool pool(options.thread_count());
      mpi::run_pipeline_worker(*link, *model, range, pool);
    } catch (const std::exception& e) {
      log::error("{}: {}", link->describe(rank), e.what());
      status = 1;
    }
    model.reset();
    end_worker(std::move(link), status);
  }

  auto pipeline =
      std::make_unique<mpi::PipelineModel>(std::move(link), std::move(model), a.ranges, ranks);
  log::info("{} (rank 0: {} {})", pipeline->placement_summary(), format_bytes(held_bytes),
            options.load_mode() == LoadMode::ram ? "read into RAM" : "mapped");
  for (const Model::DeviceMemory& m : pipeline->device_memory()) {
    if (m.allocated_bytes > m.budget_bytes) {
      log::warn("{} holds {} of weights with {} of RAM available: it will page from disk", m.device,
                format_bytes(m.allocated_bytes), format_bytes(m.budget_bytes));
    }
  }
  return pipeline;
}

#endif

}  // namespace strata::cli
