// Writer -> reader round trips: identical metadata (every value type, nested arrays) and tensor
// bytes, alignment honoured, version 2 files read too.

#include <gtest/gtest.h>

#include <cstring>
#include <numeric>

#include "gguf/gguf_file.h"
#include "gguf/gguf_writer.h"
#include "support/test_support.h"
#include "util/error.h"

namespace strata {
namespace {

std::vector<uint8_t> pattern(size_t n, uint8_t seed) {
  std::vector<uint8_t> v(n);
  for (size_t i = 0; i < n; ++i) v[i] = static_cast<uint8_t>(seed + i * 7);
  return v;
}

GgufWriter sample_writer(uint32_t alignment = 32) {
  GgufWriter w(alignment);
  w.set_string("general.architecture", "qwen3moe");
  w.set("u8", GgufValue(uint8_t{200}));
  w.set("i8", GgufValue(int8_t{-100}));
  w.set("u16", GgufValue(uint16_t{60000}));
  w.set("i16", GgufValue(int16_t{-30000}));
  w.set("u32", GgufValue(uint32_t{4000000000u}));
  w.set("i32", GgufValue(int32_t{-2000000000}));
  w.set("f32", GgufValue(1.5f));
  w.set("bool", GgufValue(true));
  w.set("u64", GgufValue(uint64_t{1} << 60));
  w.set("i64", GgufValue(int64_t{-(int64_t{1} << 60)}));
  w.set("f64", GgufValue(2.25));
  w.set("string", GgufValue::string("héllo\nworld"));
  w.set("empty_string", GgufValue::string(""));
  w.set("tokens", GgufValue::string_array({"a", "bb", "<|im_end|>"}));
  w.set("floats", GgufValue::array(GgufValueType::f32, {GgufValue(1.0f), GgufValue(-2.0f)}));
  w.set("nested", GgufValue::array(GgufValueType::array,
                                   {GgufValue::array(GgufValueType::i32, {GgufValue(int32_t{1})}),
                                    GgufValue::array(GgufValueType::string, {})}));
  w.add_tensor("token_embd.weight", GgmlType::F32, {8, 3}, pattern(8 * 3 * 4, 1));
  w.add_tensor("blk.0.ffn_up_exps.weight", GgmlType::Q4_K, {256, 2, 4}, pattern(144 * 8, 9));
  w.add_tensor("odd.weight", GgmlType::F16, {5}, pattern(10, 3));
  w.add_tensor("lazy.weight", GgmlType::Q8_0, {64, 2}, [](std::span<uint8_t> out) {
    for (size_t i = 0; i < out.size(); ++i) out[i] = static_cast<uint8_t>(i);
  });
  return w;
}

TEST(GgufRoundTrip, MetadataAndTensorBytesSurvive) {
  const GgufWriter w = sample_writer();
  const auto bytes = w.to_bytes();
  const GgufFile f = GgufFile::parse("sample.gguf", bytes);
  EXPECT_EQ(f.version(), 3u);
  EXPECT_EQ(f.architecture(), "qwen3moe");
  ASSERT_EQ(f.metadata().size(), 17u);
  EXPECT_EQ(f.metadata()[1].key, "u8");  // insertion order kept
  EXPECT_EQ(f.get_int("u8"), 200);
  EXPECT_EQ(f.get_int("i8"), -100);
  EXPECT_EQ(f.get_int("u16"), 60000);
  EXPECT_EQ(f.get_int("i16"), -30000);
  EXPECT_EQ(f.get_int("u32"), 4000000000LL);
  EXPECT_EQ(f.get_int("i32"), -2000000000LL);
  EXPECT_EQ(f.get_float("f32"), 1.5);
  EXPECT_EQ(f.find_bool("bool"), true);
  EXPECT_EQ(f.get_int("u64"), int64_t{1} << 60);
  EXPECT_EQ(f.get_int("i64"), -(int64_t{1} << 60));
  EXPECT_EQ(f.get_float("f64"), 2.25);
  EXPECT_EQ(f.get_string("string"), "héllo\nworld");
  EXPECT_EQ(f.get_string("empty_string"), "");
  const GgufArray& tokens = f.get_array("tokens");
  ASSERT_EQ(tokens.items.size(), 3u);
  EXPECT_EQ(*tokens.items[2].as_string(), "<|im_end|>");
  const GgufArray& nested = f.get_array("nested");
  ASSERT_EQ(nested.items.size(), 2u);
  EXPECT_EQ(nested.items[0].as_array()->items[0].as_int(), 1);
  EXPECT_EQ(nested.items[1].as_array()->element_type, GgufValueType::string);
  // Every value equal to what was written.
  const GgufFile again = GgufFile::parse("again.gguf", sample_writer().to_bytes());
  for (size_t i = 0; i < f.metadata().size(); ++i) {
    EXPECT_EQ(f.metadata()[i].value, again.metadata()[i].value) << f.metadata()[i].key;
  }

  ASSERT_EQ(f.tensors().size(), 4u);
  const GgufTensorInfo* embd = f.find_tensor("token_embd.weight");
  ASSERT_NE(embd, nullptr);
  EXPECT_EQ(embd->shape, (std::vector<int64_t>{8, 3}));
  EXPECT_EQ(embd->rows(), 3);
  EXPECT_EQ(std::vector<uint8_t>(embd->data.begin(), embd->data.end()), pattern(96, 1));
  const GgufTensorInfo* exps = f.find_tensor("blk.0.ffn_up_exps.weight");
  ASSERT_NE(exps, nullptr);
  EXPECT_EQ(exps->type, GgmlType::Q4_K);
  EXPECT_EQ(exps->bytes, 144u * 8);
  EXPECT_EQ(std::vector<uint8_t>(exps->data.begin(), exps->data.end()), pattern(144 * 8, 9));
  const GgufTensorInfo* lazy = f.find_tensor("lazy.weight");
  ASSERT_NE(lazy, nullptr);
  ASSERT_EQ(lazy->bytes, 136u);
  for (size_t i = 0; i < lazy->data.size(); ++i) EXPECT_EQ(lazy->data[i], i);
  for (const auto& t : f.tensors()) {
    EXPECT_EQ((f.data_offset() + t.offset) % 32, 0u) << t.name;
  }
  EXPECT_EQ(f.find_tensor("missing"), nullptr);
}

TEST(GgufRoundTrip, CustomAlignmentIsWrittenAndHonoured) {
  const auto bytes = sample_writer(64).to_bytes();
  const GgufFile f = GgufFile::parse("aligned.gguf", bytes);
  EXPECT_EQ(f.alignment(), 64u);
  for (const auto& t : f.tensors()) EXPECT_EQ((f.data_offset() + t.offset) % 64, 0u) << t.name;
}

TEST(GgufRoundTrip, FileOnDiskViaMmapAndRam) {
  const auto path = (test::temp_dir() / "model.gguf").string();
  sample_writer().write(path);
  for (LoadMode mode : {LoadMode::mmap, LoadMode::ram}) {
    const GgufFile f = GgufFile::open(path, mode);
    EXPECT_EQ(f.name(), path);
    EXPECT_EQ(f.tensors().size(), 4u);
    const auto* t = f.find_tensor("odd.weight");
    ASSERT_NE(t, nullptr);
    EXPECT_EQ(std::vector<uint8_t>(t->data.begin(), t->data.end()), pattern(10, 3));
  }
  EXPECT_FALSE(std::filesystem::exists(path + ".partial"));
}

TEST(GgufRoundTrip, ReadsVersion2) {
  auto bytes = sample_writer().to_bytes();
  const uint32_t v2 = 2;
  std::memcpy(bytes.data() + 4, &v2, 4);  // v2 and v3 share the layout (v3 added big-endian)
  const GgufFile f = GgufFile::parse("v2.gguf", bytes);
  EXPECT_EQ(f.version(), 2u);
  EXPECT_EQ(f.tensors().size(), 4u);
}

TEST(GgufRoundTrip, VocabOnlyFileWithoutTensors) {
  GgufWriter w;
  w.set_string("tokenizer.ggml.model", "gpt2");
  const auto bytes = w.to_bytes();
  const GgufFile f = GgufFile::parse("vocab.gguf", bytes);
  EXPECT_TRUE(f.tensors().empty());
  EXPECT_EQ(f.get_string("tokenizer.ggml.model"), "gpt2");
}

TEST(GgufWriterChecks, RejectsBadTensors) {
  GgufWriter w;
  EXPECT_THROW(w.add_tensor("a", GgmlType::Q4_K, {100}, std::vector<uint8_t>(144)), Error);
  EXPECT_THROW(w.add_tensor("b", GgmlType::F32, {4}, std::vector<uint8_t>(15)), Error);
  w.add_tensor("c", GgmlType::F32, {4}, std::vector<uint8_t>(16));
  EXPECT_THROW(w.add_tensor("c", GgmlType::F32, {4}, std::vector<uint8_t>(16)), Error);
  EXPECT_THROW(GgufWriter(48), Error);
  // The alignment is the constructor's: setting the key to another value is refused.
  EXPECT_THROW(w.set("general.alignment", GgufValue(uint32_t{64})), Error);
}

TEST(GgufWriterChecks, FailedFillerLeavesNoFile) {
  GgufWriter w;
  w.add_tensor("x", GgmlType::F32, {4}, [](std::span<uint8_t>) { throw Error("generator broke"); });
  const auto path = (test::temp_dir() / "broken.gguf").string();
  EXPECT_THROW(w.write(path), Error);
  EXPECT_FALSE(std::filesystem::exists(path));
  EXPECT_FALSE(std::filesystem::exists(path + ".partial"));
}

}  // namespace
}  // namespace strata
