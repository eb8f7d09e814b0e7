// Loading checks every declared tensor: a missing tensor, a wrong shape, an unsupported type or
// an unknown architecture fails with a message naming what was expected and what was found.

#include <gtest/gtest.h>

#include <functional>

#include "gguf/gguf_file.h"
#include "gguf/gguf_writer.h"
#include "model/model.h"
#include "support/test_support.h"

namespace strata {
namespace {

// Copies the oracle qwen3moe model through the writer, letting `edit` change one tensor (return
// false to drop it) and `edit_metadata` change keys.
std::vector<uint8_t> modified_model(
    const std::function<bool(const GgufTensorInfo&, GgufWriter&)>& edit,
    const std::function<void(GgufWriter&)>& edit_metadata = nullptr) {
  const GgufFile src =
      GgufFile::open((test::oracle_dir() / "models" / "tiny-qwen3moe-Q8_0.gguf").string());
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

}  // namespace
}  // namespace strata
