// `strata quantize` against an independent GGUF quantizer (the oracle's files, made from the same
// F16 model): the same type for every tensor, the same bytes where the algorithm is the same by
// definition (Q8_0 and the legacy 4/5-bit types), no more error than it where strata's own search
// differs (K-quants, IQ4); refusals before anything is written.
#include <gtest/gtest.h>

#include <cmath>
#include <cstring>
#include <filesystem>
#include <regex>

#include "gguf/gguf_file.h"
#include "quant/quant.h"
#include "support/test_support.h"
#include "unit/cli/cli_test_support.h"
#include "util/fp16.h"

namespace strata {
namespace {

namespace fs = std::filesystem;

std::string oracle_model(const std::string& type) {
  return (test::oracle_dir() / "models" / ("tiny-qwen3moe-" + type + ".gguf")).string();
}

std::string quantize(const std::string& type) {
  const std::string out = (test::temp_dir() / ("quantized-" + type + ".gguf")).string();
  auto r = run_strata("quantize " + oracle_model("F16") + " " + out + " " + type);
  EXPECT_EQ(r.exit_code, 0) << r.output;
  return out;
}

std::vector<float> values(const GgufTensorInfo& t) {
  std::vector<float> out(static_cast<size_t>(t.elements()));
  if (t.type == GgmlType::F32) {
    std::memcpy(out.data(), t.data.data(), out.size() * 4);
  } else if (t.type == GgmlType::F16) {
    for (size_t i = 0; i < out.size(); ++i)
      out[i] = f16_to_f32(reinterpret_cast<const uint16_t*>(t.data.data())[i]);
  } else {
    quant::traits(t.type).kernels.dequantize_row(t.data.data(), out.data(),
                                                 static_cast<int64_t>(out.size()));
  }
  return out;
}

double rms_error(const std::vector<float>& a, const std::vector<float>& b) {
  double sum = 0;
  for (size_t i = 0; i < a.size(); ++i) sum += (double(a[i]) - b[i]) * (double(a[i]) - b[i]);
  return std::sqrt(sum / static_cast<double>(a.size()));
}

TEST(QuantizeCommand, LegacyTypesAreByteIdenticalToAnIndependentQuantizer) {
  for (const std::string type : {"Q8_0", "Q4_0", "Q4_1", "Q5_0", "Q5_1"}) {
    SCOPED_TRACE(type);
    const GgufFile ours = GgufFile::open(quantize(type));
    const GgufFile theirs = GgufFile::open(oracle_model(type));
    ASSERT_EQ(ours.tensors().size(), theirs.tensors().size());
    EXPECT_EQ(ours.get_int("general.file_type"), theirs.get_int("general.file_type"));
    int identical = 0;
    for (const GgufTensorInfo& t : ours.tensors()) {
      const GgufTensorInfo* other = theirs.find_tensor(t.name);
      ASSERT_NE(other, nullptr) << t.name;
      EXPECT_EQ(t.type, other->type) << t.name;
      EXPECT_EQ(t.shape, other->shape) << t.name;
      // The output head is Q6_K: a K-quant search of strata's own (below).
      if (t.type == GgmlType::Q6_K) continue;
      EXPECT_TRUE(std::equal(t.data.begin(), t.data.end(), other->data.begin(), other->data.end()))
          << t.name << " (" << ggml_type_name(t.type) << ")";
      ++identical;
    }
    EXPECT_GE(identical, 26);
  }
}

TEST(QuantizeCommand, KQuantsAndIq4HaveTheTypesAndNoMoreErrorThanAnIndependentQuantizer) {
  const GgufFile source = GgufFile::open(oracle_model("F16"));
  for (const std::string type : {"Q4_K_M", "Q6_K", "IQ4_XS", "IQ4_NL", "Q2_K"}) {
    SCOPED_TRACE(type);
    const GgufFile ours = GgufFile::open(quantize(type));
    const GgufFile theirs = GgufFile::open(oracle_model(type));
    for (const GgufTensorInfo& t : ours.tensors()) {
      const GgufTensorInfo* other = theirs.find_tensor(t.name);
      ASSERT_NE(other, nullptr) << t.name;
      EXPECT_EQ(t.type, other->type) << t.name;
      if (t.type != other->type || t.type == GgmlType::F32) continue;
      const std::vector<float> exact = values(*source.find_tensor(t.name));
      const double e_ours = rms_error(values(t), exact),
                   e_theirs = rms_error(values(*other), exact);
      EXPECT_LE(e_ours, 1.10 * e_theirs + 1e-9)
          << t.name << " (" << ggml_type_name(t.type) << "): " << e_ours << " vs " << e_theirs;
    }
  }
}

// Every mix the oracle has a file of (made by llama-quantize from the same F16 or Q8_0 model),
// over every architecture: the same type for every tensor, and the same file type number. The
// mixes differ by layer (the first and last eighth, every third V and down projection), by the
// model's experts (8-expert models' K/V in Q8_0) and its grouped heads; --dry-run lists the
// types without writing.
TEST(QuantizeCommand, MixesGiveEveryTensorTheTypeAnIndependentQuantizerGave) {
  struct Case {
    std::string source, mix, reference;  // under the oracle directory
  };
  const std::vector<Case> cases = {
      {"models/tiny-qwen3moe-F16.gguf", "Q3_K_M", "models/tiny-qwen3moe-Q3_K_M.gguf"},
      {"models/tiny-qwen3moe-F16.gguf", "Q5_K_M", "models/tiny-qwen3moe-Q5_K_M.gguf"},
      {"models/tiny-llama-F16.gguf", "Q4_K_M", "models/tiny-llama-Q4_K_M.gguf"},
      {"models/tiny-llama-F16.gguf", "Q6_K", "models/tiny-llama-Q6_K.gguf"},
      {"models/tiny-qwen3-F16.gguf", "Q4_K_M", "models/tiny-qwen3-Q4_K_M.gguf"},
      {"models/tiny-qwen3-F16.gguf", "Q6_K", "models/tiny-qwen3-Q6_K.gguf"},
      {"archs/models/tiny-glm4moe-F16.gguf", "Q4_K_M", "archs/models/tiny-glm4moe-Q4_K_M.gguf"},
      {"archs/models/tiny-gpt-oss-F16.gguf", "Q4_K_M", "archs/models/tiny-gpt-oss-Q4_K_M.gguf"},
      {"archs/models/tiny-gpt-oss-F16.gguf", "MXFP4_MOE",
       "archs/models/tiny-gpt-oss-MXFP4_MOE.gguf"},
      {"archs/models/tiny-mixtral-F16.gguf", "Q4_K_M", "archs/models/tiny-mixtral-Q4_K_M.gguf"},
      {"archs/models/tiny-qwen3next-F16.gguf", "Q4_K_M", "archs/models/tiny-qwen3next-Q4_K_M.gguf"},
      {"gdn/models/tiny-qwen35moe-Q8_0.gguf", "Q4_K_M", "gdn/models/tiny-qwen35moe-Q4_K_M.gguf"},
  };
  for (const Case& c : cases) {
    SCOPED_TRACE(c.reference);
    const std::string out = (test::temp_dir() / "mix.gguf").string();
    const auto r = run_strata("quantize --dry-run --allow-requantize " +
                              (test::oracle_dir() / c.source).string() + " " + out + " " + c.mix);
    ASSERT_EQ(r.exit_code, 0) << r.output;
    EXPECT_FALSE(fs::exists(out));
    const GgufFile theirs = GgufFile::open((test::oracle_dir() / c.reference).string());
    int listed = 0;
    for (const GgufTensorInfo& t : theirs.tensors()) {
      // "[i/n] NAME FROM -> TO SIZE"
      const std::regex line(" " + t.name + " +[A-Z0-9_]+ -> ([A-Z0-9_]+) ");
      std::smatch m;
      ASSERT_TRUE(std::regex_search(r.output, m, line)) << t.name << "\n" << r.output;
      EXPECT_EQ(m[1].str(), ggml_type_name(t.type)) << t.name;
      ++listed;
    }
    EXPECT_GT(listed, 10);
    EXPECT_TRUE(contains(
        r.output, "general.file_type " + std::to_string(*theirs.find_int("general.file_type"))))
        << r.output;
  }
}

TEST(QuantizeCommand, RefusesBeforeWritingAnything) {
  const std::string out = (test::temp_dir() / "refused.gguf").string();
  fs::remove(out);
  auto r = run_strata("quantize " + oracle_model("Q8_0") + " " + out + " Q4_0");
  EXPECT_EQ(r.exit_code, 1) << r.output;
  EXPECT_TRUE(contains(r.output, "--allow-requantize")) << r.output;
  r = run_strata("quantize " + oracle_model("F16") + " " + out + " Q7_X");
  EXPECT_EQ(r.exit_code, 1) << r.output;
  EXPECT_TRUE(contains(r.output, "unknown or unsupported file type 'Q7_X'")) << r.output;
  r = run_strata("quantize " + oracle_model("F16") + " " + out +
                 " Q4_0 --override-tensor '[=Q8_0'");
  EXPECT_EQ(r.exit_code, 1) << r.output;
  EXPECT_TRUE(contains(r.output, "does not compile")) << r.output;
  r = run_strata("quantize " + oracle_model("F16") + " " + oracle_model("F16") + " Q4_0");
  EXPECT_EQ(r.exit_code, 1) << r.output;
  EXPECT_TRUE(contains(r.output, "overwrite the input")) << r.output;
  EXPECT_FALSE(fs::exists(out));

  // An override by regex, and a requantization when asked for.
  r = run_strata("quantize " + oracle_model("F16") + " " + out +
                 " Q4_0 --override-tensor 'ffn_down_exps=Q8_0'");
  ASSERT_EQ(r.exit_code, 0) << r.output;
  const GgufFile f = GgufFile::open(out);
  EXPECT_EQ(f.find_tensor("blk.1.ffn_down_exps.weight")->type, GgmlType::Q8_0);
  EXPECT_EQ(f.find_tensor("blk.1.ffn_up_exps.weight")->type, GgmlType::Q4_0);
  EXPECT_EQ(f.find_tensor("blk.1.ffn_norm.weight")->type, GgmlType::F32);
  r = run_strata("quantize " + oracle_model("Q8_0") + " " + out + " Q4_0 --allow-requantize");
  EXPECT_EQ(r.exit_code, 0) << r.output;
}

}  // namespace
}  // namespace strata
