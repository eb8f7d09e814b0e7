// Block layouts checked against an independent GGUF quantizer: every tensor of every oracle model
// dequantizes (reference and dispatched kernels agree), and a quantized model's tensors decode
// close to the same tensors of the F16 model they were quantized from.

#include <gtest/gtest.h>

#include <cmath>
#include <filesystem>
#include <map>

#include "gguf/gguf_file.h"
#include "quant/quant.h"
#include "support/test_support.h"

namespace strata::quant {
namespace {

std::vector<float> dequantize(const GgufTensorInfo& t, Isa isa) {
  const TypeKernels k = kernels_at(t.type, isa);
  std::vector<float> out(static_cast<size_t>(t.elements()));
  const int64_t row = t.row_length();
  const int64_t row_size = row_bytes(t.type, row);
  for (int64_t r = 0; r < t.rows(); ++r) {
    k.dequantize_row(t.data.data() + r * row_size, out.data() + r * row, row);
  }
  return out;
}

std::vector<std::filesystem::path> models_in(const std::filesystem::path& dir) {
  std::vector<std::filesystem::path> out;
  if (!std::filesystem::is_directory(dir)) return out;
  for (const auto& e : std::filesystem::directory_iterator(dir)) {
    if (e.path().extension() == ".gguf") out.push_back(e.path());
  }
  std::sort(out.begin(), out.end());
  return out;
}

TEST(OracleDequantize, EveryTensorOfEveryModelDecodes) {
  auto models = models_in(test::oracle_dir() / "models");
  const auto gdn = models_in(test::oracle_dir() / "gdn" / "models");
  models.insert(models.end(), gdn.begin(), gdn.end());
  ASSERT_GE(models.size(), 23u);
  std::map<std::string, int> tensors_by_type;
  for (const auto& path : models) {
    const GgufFile f = GgufFile::open(path.string());
    for (const auto& t : f.tensors()) {
      SCOPED_TRACE(path.filename().string() + " " + t.name);
      ASSERT_TRUE(is_supported(t.type)) << ggml_type_name(t.type);
      const auto reference = dequantize(t, Isa::scalar);
      for (float v : reference) ASSERT_TRUE(std::isfinite(v));
      const auto fast = dequantize(t, best_isa());
      for (size_t i = 0; i < reference.size(); ++i) {
        ASSERT_NEAR(fast[i], reference[i], 1e-6f * std::fabs(reference[i]) + 1e-7f) << i;
      }
      tensors_by_type[std::string(ggml_type_name(t.type))]++;
    }
  }
  // The oracle set covers every weight type strata supports.
  for (const char* type : {"F32", "F16", "Q8_0", "Q4_0", "Q4_1", "Q5_0", "Q5_1", "Q2_K", "Q3_K",
                           "Q4_K", "Q5_K", "Q6_K", "IQ4_NL", "IQ4_XS"}) {
    EXPECT_GT(tensors_by_type[type], 0) << type;
  }
}

// NMSE of each quantized model's tensors against the F16 model's. Bounds are per tensor type,
// from what the block format can represent (measured on these files, then given headroom); a
// wrong layout (nibble order, scale packing, high bits) lands orders of magnitude above them.
double nmse_bound(GgmlType type) {
  switch (type) {
    case GgmlType::F32:
      return 1e-12;
    case GgmlType::F16:
      return 1e-12;
    case GgmlType::Q8_0:
      return 2e-4;
    case GgmlType::Q6_K:
      return 2e-3;
    case GgmlType::Q5_0:
    case GgmlType::Q5_1:
    case GgmlType::Q5_K:
      return 6e-3;
    case GgmlType::Q4_0:
    case GgmlType::Q4_1:
    case GgmlType::Q4_K:
    case GgmlType::IQ4_NL:
    case GgmlType::IQ4_XS:
      return 2e-2;
    case GgmlType::Q3_K:
      return 8e-2;
    case GgmlType::Q2_K:
      return 2.5e-1;
    default:
      return 0;
  }
}

TEST(OracleDequantize, QuantizedTensorsDecodeCloseToTheF16Model) {
  for (const char* family : {"tiny-qwen3moe", "tiny-qwen3", "tiny-llama"}) {
    const auto dir = test::oracle_dir() / "models";
    const GgufFile f16 = GgufFile::open((dir / (std::string(family) + "-F16.gguf")).string());
    for (const auto& path : models_in(dir)) {
      const std::string file = path.filename().string();
      if (file.rfind(std::string(family) + "-", 0) != 0 || file.find("-F16") != std::string::npos)
        continue;
      if (std::string(family) == "tiny-qwen3" && file.rfind("tiny-qwen3moe", 0) == 0) continue;
      const GgufFile q = GgufFile::open(path.string());
      for (const auto& t : q.tensors()) {
        SCOPED_TRACE(file + " " + t.name + " " + std::string(ggml_type_name(t.type)));
        const GgufTensorInfo* ref = f16.find_tensor(t.name);
        ASSERT_NE(ref, nullptr);
        ASSERT_EQ(ref->shape, t.shape);
        const auto expected = dequantize(*ref, Isa::scalar);
        const auto got = dequantize(t, Isa::scalar);
        const double error = test::nmse(got.data(), expected.data(), got.size());
        EXPECT_LE(error, nmse_bound(t.type));
      }
    }
  }
}

}  // namespace
}  // namespace strata::quant
