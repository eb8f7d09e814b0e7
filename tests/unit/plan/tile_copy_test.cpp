// The plan counts the weight tiles the CPU executor packs (plan/tile_copy.h) to the byte: for
// every oracle file and a generated file of each other architecture, the planner's figure is what
// a loaded model allocates under the packing rule the CLI applies, and the CPU's memory line
// carries it; weights that stream from RAM get no copy.

#include <gtest/gtest.h>

#include <filesystem>
#include <string>
#include <vector>

#include "gguf/gguf_file.h"
#include "model/decode_prefetch.h"
#include "model/decoder_model.h"
#include "model/model.h"
#include "ops/matmul.h"
#include "plan/architecture_presets.h"
#include "plan/hardware.h"
#include "plan/inventory.h"
#include "plan/placement.h"
#include "plan/tile_copy.h"
#include "quant/quant.h"
#include "support/test_support.h"
#include "synthetic_model.h"

namespace strata::plan {
namespace {

std::vector<std::string> model_files() {
  std::vector<std::string> files;
  for (const auto& e : std::filesystem::directory_iterator(test::oracle_dir() / "models"))
    if (e.path().extension() == ".gguf") files.push_back(e.path().string());
  // The architectures the oracle has no file of, with their own tensor types (gpt-oss's MXFP4
  // experts) and blocks the layers do not run (NextN / MTP heads).
  struct Generated {
    const char* arch;
    const char* ftype;
    int64_t nextn;
  };
  for (const Generated& g : {Generated{"gpt-oss", "MXFP4_MOE", 0}, Generated{"glm4moe", "Q8_0", 1},
                             Generated{"qwen35moe", "Q4_0", 1}, Generated{"qwen3next", "Q8_0", 0},
                             Generated{"mixtral", "IQ4_NL", 0}}) {
    tools::SyntheticModelSpec s;
    s.arch = g.arch;
    s.ftype = g.ftype;
    s.n_layer = 4;
    s.n_nextn = g.nextn;
    s.n_ff_exp = 128;
    const std::string path =
        (test::temp_dir() / (std::string("tiles-") + g.arch + ".gguf")).string();
    tools::write_synthetic_model(s, path);
    files.push_back(path);
  }
  return files;
}

TEST(TileCopy, ThePlanCountsWhatTheModelPacks) {
  const bool q8_tiles = quant::traits(GgmlType::Q8_0).kernels.packed.pack != nullptr;
  int packed_files = 0;
  for (const std::string& path : model_files()) {
    SCOPED_TRACE(path);
    const ModelInventory inv = inventory_from_gguf(GgufFile::open(path));
    auto model = Model::load(path);
    auto* decoder = dynamic_cast<DecoderModel*>(model.get());
    ASSERT_NE(decoder, nullptr);
    // The CLI's rule (apply_matmul_settings): pack where the file's matrices stay in cache.
    ops::MatmulSettings settings;
    settings.pack_tiles = weight_matrix_bytes(model->file(), {}) < ops::kStreamedWeightBytes;
    ASSERT_TRUE(settings.pack_tiles);  // every file here is a few MB
    model->set_matmul_settings(settings);
    const uint64_t counted = packed_tile_copy_bytes(inv);
    EXPECT_EQ(counted, static_cast<uint64_t>(decoder->packed_tile_bytes()));
    packed_files += counted > 0;

    HardwareProfile hw;
    hw.ram_total_bytes = hw.ram_available_bytes = uint64_t{16} << 30;
    const std::vector<DeviceUsage> usage =
        device_usage(inv, hw, cpu_placement(inv), 256, 2.0, MemoryConstants{});
    EXPECT_EQ(usage[0].tile_bytes, counted);
    EXPECT_EQ(usage[0].weight_bytes, inv.total_bytes() + counted);
  }
  // Q8_0 tiles exist wherever VNNI does; then most files here have some.
  if (q8_tiles) {
    EXPECT_GE(packed_files, 10);
  }
}

TEST(TileCopy, WeightsThatStreamFromRamAreNotCopied) {
  const auto spec = architecture_preset("qwen3-30b-a3b");
  ASSERT_TRUE(spec);
  EXPECT_EQ(packed_tile_copy_bytes(inventory_from_architecture(*spec, {4.5, 0})), 0u);
}

}  // namespace
}  // namespace strata::plan
