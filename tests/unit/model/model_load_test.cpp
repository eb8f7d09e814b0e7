// Loading checks every declared tensor: a missing tensor, a wrong shape, an unsupported type or
// an unknown architecture fails with a message naming what was expected and what was found.

#include <gtest/gtest.h>

#include <functional>

#include "gguf/gguf_file.h"
#include "gguf/gguf_writer.h"
#include "model/model.h"
#include "runtime/session.h"
#include "support/test_support.h"
#include "util/fp16.h"

namespace strata {
namespace {

using TensorEdit = std::function<bool(const GgufTensorInfo&, GgufWriter&)>;
using MetadataEdit = std::function<void(GgufWriter&)>;

// Copies an oracle model (by default the qwen3moe one) through the writer, letting `edit` change
// one tensor (return false to drop it) and `edit_metadata` change keys.
std::vector<uint8_t> modified_model(
    const TensorEdit& edit, const MetadataEdit& edit_metadata = nullptr,
    const std::string& model =
        (test::oracle_dir() / "models" / "tiny-qwen3moe-Q8_0.gguf").string()) {
  const GgufFile src = GgufFile::open(model);
  GgufWriter w;
  for (const auto& kv : src.metadata()) {
    if (kv.key != "general.alignment") w.set(kv.key, kv.value);
  }
  if (edit_metadata) edit_metadata(w);
  for (const auto& t : src.tensors()) {
    if (edit(t, w)) {
      w.add_tensor(t.name, t.type, t.shape, std::vector<uint8_t>(t.data.begin(), t.data.end()));
    }
  }
  return w.to_bytes();
}

std::string load_error(const std::vector<uint8_t>& bytes) {
  try {
    Model::from_file(GgufFile::parse("edited.gguf", bytes));
  } catch (const std::exception& e) {
    return e.what();
  }
  return "";
}

TEST(ModelLoad, UnmodifiedCopyLoads) {
  const auto bytes = modified_model([](const GgufTensorInfo&, GgufWriter&) { return true; });
  EXPECT_EQ(load_error(bytes), "");
}

TEST(ModelLoad, MissingTensorIsNamed) {
  const auto bytes = modified_model(
      [](const GgufTensorInfo& t, GgufWriter&) { return t.name != "blk.1.ffn_down_exps.weight"; });
  const std::string e = load_error(bytes);
  EXPECT_NE(e.find("'blk.1.ffn_down_exps.weight' is missing"), std::string::npos) << e;
  EXPECT_NE(e.find("[256, 256, 8]"), std::string::npos) << e;
}

TEST(ModelLoad, WrongShapeNamesExpectedAndActual) {
  const auto bytes = modified_model([](const GgufTensorInfo& t, GgufWriter& w) {
    if (t.name != "blk.0.attn_q.weight") return true;
    w.add_tensor(t.name, t.type, {256, 128},
                 std::vector<uint8_t>(t.data.begin(), t.data.begin() + t.data.size() / 2));
    return false;
  });
  const std::string e = load_error(bytes);
  EXPECT_NE(e.find("'blk.0.attn_q.weight' has shape [256, 128], expected [256, 256]"),
            std::string::npos)
      << e;
}

TEST(ModelLoad, UnsupportedTypeIsNamed) {
  const auto bytes = modified_model([](const GgufTensorInfo& t, GgufWriter& w) {
    if (t.name != "blk.0.attn_k.weight") return true;
    // 256 x 128 as IQ2_XXS: one 66-byte block per row of 256.
    w.add_tensor(t.name, GgmlType::IQ2_XXS, {256, 128}, std::vector<uint8_t>(66 * 128));
    return false;
  });
  const std::string e = load_error(bytes);
  EXPECT_NE(e.find("'blk.0.attn_k.weight' has type IQ2_XXS"), std::string::npos) << e;
  EXPECT_NE(e.find("supported: F32"), std::string::npos) << e;
}

TEST(ModelLoad, UnknownArchitectureListsSupported) {
  const auto bytes =
      modified_model([](const GgufTensorInfo&, GgufWriter&) { return true; },
                     [](GgufWriter& w) { w.set_string("general.architecture", "mamba"); });
  const std::string e = load_error(bytes);
  EXPECT_NE(e.find("architecture 'mamba' is not supported (supported: qwen3moe, qwen3, llama"),
            std::string::npos)
      << e;
}

TEST(ModelLoad, BadHyperParameters) {
  auto bytes = modified_model([](const GgufTensorInfo&, GgufWriter&) { return true; },
                              [](GgufWriter& w) { w.set_u32("qwen3moe.expert_used_count", 9); });
  EXPECT_NE(load_error(bytes).find("expert_used_count is 9, expected 1..8"), std::string::npos)
      << load_error(bytes);
  bytes = modified_model([](const GgufTensorInfo&, GgufWriter&) { return true; },
                         [](GgufWriter& w) { w.set_u32("qwen3moe.attention.head_count_kv", 3); });
  EXPECT_NE(load_error(bytes).find("not a multiple of the 3 KV heads"), std::string::npos)
      << load_error(bytes);
}

// The architectures of ../shared/oracle/archs: each malformed file names the tensor or key, what
// was expected and what was found.
std::string arch_model(const std::string& name) {
  return (test::oracle_dir() / "archs" / "models" / name).string();
}

std::string arch_load_error(const std::string& name, const TensorEdit& edit,
                            const MetadataEdit& edit_metadata = nullptr) {
  return load_error(modified_model(edit, edit_metadata, arch_model(name)));
}

TensorEdit dropping(const std::string& tensor) {
  return [tensor](const GgufTensorInfo& t, GgufWriter&) { return t.name != tensor; };
}

const TensorEdit keep_all = [](const GgufTensorInfo&, GgufWriter&) { return true; };

TEST(ModelLoad, EveryArchitectureFileLoadsUnmodified) {
  for (const char* name :
       {"tiny-gpt-oss-MXFP4_MOE.gguf", "tiny-glm4moe-Q8_0.gguf", "tiny-qwen3next-Q8_0.gguf",
        "tiny-qwen3next-ssmin-Q8_0.gguf", "tiny-mixtral-Q8_0.gguf"}) {
    EXPECT_EQ(arch_load_error(name, keep_all), "") << name;
  }
}

TEST(ModelLoad, GptOssMalformedFiles) {
  const std::string file = "tiny-gpt-oss-MXFP4_MOE.gguf";
  std::string e = arch_load_error(file, dropping("blk.1.attn_sinks.weight"));
  EXPECT_NE(e.find("'blk.1.attn_sinks.weight' is missing"), std::string::npos) << e;
  EXPECT_NE(e.find("[8]"), std::string::npos) << e;
  e = arch_load_error(file, keep_all, [](GgufWriter& w) { w.set_u32("gpt-oss.expert_count", 6); });
  EXPECT_NE(e.find("'blk.0.ffn_gate_inp.weight' has shape [256, 8], expected [256, 6]"),
            std::string::npos)
      << e;
  e = arch_load_error(file, keep_all,
                      [](GgufWriter& w) { w.set_u32("gpt-oss.attention.sliding_window", 0); });
  EXPECT_NE(e.find("gpt-oss.attention.sliding_window must be positive, found 0"), std::string::npos)
      << e;
  e = arch_load_error(file, keep_all, [](GgufWriter& w) {
    w.set_string("gpt-oss.rope.scaling.type", "yarn");
    w.set_f32("gpt-oss.rope.scaling.factor", 0.5f);
  });
  EXPECT_NE(e.find("rope.scaling.factor must be at least 1 for yarn, found 0.5"), std::string::npos)
      << e;
  e = arch_load_error(file, dropping("blk.0.ffn_down_exps.bias"));
  EXPECT_NE(e.find("'blk.0.ffn_down_exps.bias' is missing"), std::string::npos) << e;
}

TEST(ModelLoad, Glm4MoeMalformedFiles) {
  const std::string file = "tiny-glm4moe-Q8_0.gguf";
  std::string e = arch_load_error(file, dropping("blk.2.exp_probs_b.bias"));
  EXPECT_NE(e.find("'blk.2.exp_probs_b.bias' is missing"), std::string::npos) << e;
  e = arch_load_error(file, keep_all, [](GgufWriter& w) { w.set_u32("glm4moe.expert_count", 16); });
  EXPECT_NE(e.find("'blk.1.ffn_gate_inp.weight' has shape [256, 8], expected [256, 16]"),
            std::string::npos)
      << e;
  e = arch_load_error(file, keep_all,
                      [](GgufWriter& w) { w.set_u32("glm4moe.leading_dense_block_count", 2); });
  EXPECT_NE(e.find("'blk.1.ffn_gate.weight' is missing"), std::string::npos) << e;
  e = arch_load_error(file, keep_all,
                      [](GgufWriter& w) { w.set_u32("glm4moe.expert_gating_func", 3); });
  EXPECT_NE(e.find("glm4moe.expert_gating_func is 3, expected 1 (softmax) or 2 (sigmoid)"),
            std::string::npos)
      << e;
  // Without q/k norms (GLM-4.5-Air) it loads; one of the pair alone is an error.
  EXPECT_EQ(arch_load_error(file,
                            [](const GgufTensorInfo& t, GgufWriter&) {
                              return t.name.find("attn_q_norm") == std::string::npos &&
                                     t.name.find("attn_k_norm") == std::string::npos;
                            }),
            "");
  e = arch_load_error(file, dropping("blk.0.attn_k_norm.weight"));
  EXPECT_NE(e.find("attn_q_norm and attn_k_norm come in pairs"), std::string::npos) << e;
}

TEST(ModelLoad, Qwen3NextMalformedFiles) {
  std::string e = arch_load_error("tiny-qwen3next-Q8_0.gguf", dropping("blk.1.ssm_ba.weight"));
  EXPECT_NE(e.find("'blk.1.ssm_ba.weight' is missing"), std::string::npos) << e;
  EXPECT_NE(e.find("[256, 8]"), std::string::npos) << e;
  e = arch_load_error("tiny-qwen3next-ssmin-Q8_0.gguf", keep_all,
                      [](GgufWriter& w) { w.set_u32("qwen3next.ssm.group_count", 4); });
  EXPECT_NE(e.find("'blk.0.ssm_in.weight' has shape [256, 768], expected [256, 1024]"),
            std::string::npos)
      << e;
  e = arch_load_error("tiny-qwen3next-Q8_0.gguf", keep_all,
                      [](GgufWriter& w) { w.set_u32("qwen3next.ssm.time_step_rank", 3); });
  EXPECT_NE(e.find("do not divide"), std::string::npos) << e;
}

TEST(ModelLoad, MixtralMalformedFiles) {
  const std::string file = "tiny-mixtral-Q8_0.gguf";
  std::string e =
      arch_load_error(file, keep_all, [](GgufWriter& w) { w.set_u32("llama.expert_count", 4); });
  EXPECT_NE(e.find("'blk.0.ffn_gate_inp.weight' has shape [256, 8], expected [256, 4]"),
            std::string::npos)
      << e;
  e = arch_load_error(file, dropping("blk.1.ffn_up_exps.weight"));
  EXPECT_NE(e.find("'blk.1.ffn_up_exps.weight' is missing"), std::string::npos) << e;
  e = arch_load_error(file, keep_all,
                      [](GgufWriter& w) { w.set_u32("llama.expert_used_count", 0); });
  EXPECT_NE(e.find("expert_used_count is 0, expected 1..8"), std::string::npos) << e;
}

// Norm vectors stored as F16 are converted to floats at load, and those floats live as long as
// the model (not the loader that made them): the logits equal those of F32 norms holding the same
// values, bit for bit, on a plain and on a hybrid (Gated DeltaNet) architecture.
TEST(ModelLoad, F16NormsLiveAsLongAsTheModel) {
  for (const std::string& model :
       {(test::oracle_dir() / "models" / "tiny-qwen3moe-Q8_0.gguf").string(),
        (test::oracle_dir() / "gdn" / "models" / "tiny-qwen35moe-Q8_0.gguf").string()}) {
    const auto is_norm = [](const GgufTensorInfo& t) {
      return t.type == GgmlType::F32 && t.shape.size() == 1 &&
             t.name.find("norm.weight") != std::string::npos;
    };
    // Each norm rounded to F16, stored as F16 (as_f16) or as the F32 values of those halves.
    const auto rounded = [&](bool as_f16) {
      return modified_model(
          [&](const GgufTensorInfo& t, GgufWriter& w) {
            if (!is_norm(t)) return true;
            const auto* v = reinterpret_cast<const float*>(t.data.data());
            const auto n = static_cast<size_t>(t.shape[0]);
            std::vector<uint8_t> bytes(n * (as_f16 ? 2 : 4));
            for (size_t i = 0; i < n; ++i) {
              const f16_bits h = f32_to_f16(v[i]);
              const float f = f16_to_f32(h);
              if (as_f16) {
                std::memcpy(bytes.data() + 2 * i, &h, 2);
              } else {
                std::memcpy(bytes.data() + 4 * i, &f, 4);
              }
            }
            w.add_tensor(t.name, as_f16 ? GgmlType::F16 : GgmlType::F32, t.shape, std::move(bytes));
            return false;
          },
          nullptr, model);
    };
    const std::vector<uint8_t> half_bytes = rounded(true), float_bytes = rounded(false);
    ThreadPool pool(2);
    std::vector<float> logits[2];
    int i = 0;
    for (const auto* bytes : {&half_bytes, &float_bytes}) {
      auto m = Model::from_file(GgufFile::parse("norms.gguf", *bytes));
      Session session(*m, 64, GgmlType::F16, pool);
      session.eval(std::vector<int32_t>{1, 17, 300, 42, 7}, true, logits[i++]);
    }
    ASSERT_FALSE(logits[0].empty());
    EXPECT_EQ(logits[0], logits[1]) << model;
  }
}

}  // namespace
}  // namespace strata
