// Hostile and corrupt files: every bad count, length, offset, size and type is reported as a
// strata::Error naming the file and the field; nothing crashes or allocates from a bogus count.

#include <gtest/gtest.h>

#include <cstring>
#include <random>
#include <string>

#include "gguf/gguf_file.h"
#include "gguf/gguf_writer.h"
#include "util/error.h"

namespace strata {
namespace {

// Hand-encodes GGUF bytes so tests can write what the real writer never would.
struct Raw {
  std::vector<uint8_t> b;
  template <typename T>
  Raw& put(T v) {
    const auto* p = reinterpret_cast<const uint8_t*>(&v);
    b.insert(b.end(), p, p + sizeof v);
    return *this;
  }
  Raw& str(const std::string& s) {
    put<uint64_t>(s.size());
    b.insert(b.end(), s.begin(), s.end());
    return *this;
  }
  Raw& header(uint64_t tensors, uint64_t kvs, uint32_t version = 3) {
    return put<uint32_t>(kGgufMagic)
        .put<uint32_t>(version)
        .put<uint64_t>(tensors)
        .put<uint64_t>(kvs);
  }
  Raw& pad(size_t alignment = 32) {
    while (b.size() % alignment) b.push_back(0);
    return *this;
  }
};

// Parses and returns the error message ("" when it parsed).
std::string parse_error(const std::vector<uint8_t>& bytes) {
  try {
    GgufFile::parse("bad.gguf", bytes);
    return "";
  } catch (const Error& e) {
    return e.what();
  }
}

void expect_error(const std::vector<uint8_t>& bytes, const std::string& needle) {
  const std::string message = parse_error(bytes);
  ASSERT_FALSE(message.empty()) << "expected an error mentioning '" << needle << "'";
  EXPECT_NE(message.find("bad.gguf"), std::string::npos) << message;
  EXPECT_NE(message.find(needle), std::string::npos) << message;
}

std::vector<uint8_t> valid_file() {
  GgufWriter w;
  w.set_string("general.architecture", "llama");
  w.set("tokens", GgufValue::string_array({"x", "y"}));
  w.add_tensor("a.weight", GgmlType::Q8_0, {64, 2}, std::vector<uint8_t>(136, 1));
  w.add_tensor("b.weight", GgmlType::F32, {3}, std::vector<uint8_t>(12, 2));
  return w.to_bytes();
}

TEST(GgufValidation, BadMagicAndVersions) {
  expect_error({}, "too short");
  expect_error({'G', 'G', 'M', 'L', 0, 0, 0, 0}, "where a GGUF file starts with \"GGUF\"");
  expect_error(Raw().header(0, 0, 1).b, "version 1 is not supported");
  expect_error(Raw().header(0, 0, 4).b, "version 4");
  expect_error(Raw().header(0, 0, 0x03000000).b, "big-endian");
}

TEST(GgufValidation, EveryTruncationIsAnError) {
  const auto full = valid_file();
  const GgufFile f = GgufFile::parse("ok.gguf", full);
  const auto* last = f.find_tensor("b.weight");
  const size_t needed = static_cast<size_t>(f.data_offset() + last->offset + last->bytes);
  for (size_t n = 0; n < needed; ++n) {
    std::vector<uint8_t> cut(full.begin(), full.begin() + static_cast<long>(n));
    EXPECT_FALSE(parse_error(cut).empty()) << "truncated to " << n << " bytes parsed";
  }
}

TEST(GgufValidation, BogusCountsDoNotAllocate) {
  expect_error(Raw().header(0, uint64_t{1} << 62).b, "metadata entries");
  expect_error(Raw().header(uint64_t{1} << 62, 0).b, "tensors");
  // A string whose length exceeds the file.
  expect_error(Raw().header(0, 1).str("k").put<uint32_t>(8).put<uint64_t>(uint64_t{1} << 40).b,
               "string length");
  // An array claiming 2^60 u32 items.
  expect_error(Raw()
                   .header(0, 1)
                   .str("k")
                   .put<uint32_t>(9)
                   .put<uint32_t>(4)
                   .put<uint64_t>(uint64_t{1} << 60)
                   .b,
               "cannot fit");
  // An array of more items than any real file holds, each backed by a byte of data: refused
  // before it becomes millions of in-memory values.
  {
    Raw big;
    big.header(0, 1).str("k").put<uint32_t>(9).put<uint32_t>(0).put<uint64_t>((uint64_t{1} << 22) +
                                                                              1);
    big.b.resize(big.b.size() + (size_t{1} << 22) + 1, 0);
    expect_error(big.b, "exceeds the limit");
  }
  // A key whose length exceeds the file.
  expect_error(Raw().header(0, 1).put<uint64_t>(~uint64_t{0}).put<uint64_t>(0).put<uint64_t>(0).b,
               "key of metadata entry 0");
}

TEST(GgufValidation, BadValues) {
  expect_error(Raw().header(0, 1).str("k").put<uint32_t>(13).b, "value type 13");
  expect_error(Raw().header(0, 1).str("k").put<uint32_t>(7).put<uint8_t>(2).b, "bool byte is 2");
  expect_error(Raw().header(0, 1).str("k").put<uint32_t>(9).put<uint32_t>(99).b, "value type 99");
  Raw deep;
  deep.header(0, 1).str("k").put<uint32_t>(9);
  for (int i = 0; i < 20; ++i) deep.put<uint32_t>(9).put<uint64_t>(1);
  expect_error(deep.b, "nested deeper");
  Raw dup;
  dup.header(0, 2)
      .str("k")
      .put<uint32_t>(4)
      .put<uint32_t>(1)
      .str("k")
      .put<uint32_t>(4)
      .put<uint32_t>(2);
  expect_error(dup.b, "'k' appears twice");
}

TEST(GgufValidation, BadAlignment) {
  expect_error(Raw().header(0, 1).str("general.alignment").put<uint32_t>(4).put<uint32_t>(48).b,
               "power of two");
  expect_error(Raw().header(0, 1).str("general.alignment").put<uint32_t>(4).put<uint32_t>(0).b,
               "power of two");
  expect_error(Raw().header(0, 1).str("general.alignment").put<uint32_t>(6).put<float>(32).b,
               "power of two");
}

Raw tensor_file(uint32_t n_dims, std::vector<uint64_t> dims, uint32_t type, uint64_t offset,
                size_t data_bytes) {
  Raw r;
  r.header(1, 0).str("t.weight").put<uint32_t>(n_dims);
  for (uint64_t d : dims) r.put<uint64_t>(d);
  r.put<uint32_t>(type).put<uint64_t>(offset).pad();
  r.b.resize(r.b.size() + data_bytes, 0);
  return r;
}

TEST(GgufValidation, BadTensorInfos) {
  EXPECT_EQ(parse_error(tensor_file(1, {8}, 0, 0, 32).b), "");  // the control case parses
  expect_error(tensor_file(0, {}, 0, 0, 32).b, "0 dimensions");
  expect_error(tensor_file(5, {1, 1, 1, 1, 1}, 0, 0, 32).b, "5 dimensions");
  expect_error(tensor_file(2, {uint64_t{1} << 40, uint64_t{1} << 40}, 0, 0, 32).b, "overflows");
  expect_error(tensor_file(1, {~uint64_t{0}}, 0, 0, 32).b, "overflows");
  expect_error(tensor_file(1, {8}, 77, 0, 32).b, "unknown tensor type id 77");
  expect_error(tensor_file(1, {100}, 12, 0, 144).b, "multiple of the block size 256");
  expect_error(tensor_file(1, {8}, 0, 8, 64).b, "not a multiple of the alignment");
  expect_error(tensor_file(1, {8}, 0, 0, 16).b, "runs past the end");
  expect_error(tensor_file(1, {8}, 0, uint64_t{1} << 62, 32).b, "runs past the end");
  expect_error(tensor_file(1, {8}, 0, ~uint64_t{31}, 32).b, "runs past the end");
  Raw dup;
  dup.header(2, 0);
  for (int i = 0; i < 2; ++i)
    dup.str("t").put<uint32_t>(1).put<uint64_t>(8).put<uint32_t>(0).put<uint64_t>(0);
  dup.pad().b.resize(dup.b.size() + 32);
  expect_error(dup.b, "'t' appears twice");
}

TEST(GgufValidation, TypedGettersNameKeyExpectedAndFound) {
  const auto bytes = valid_file();
  const GgufFile f = GgufFile::parse("typed.gguf", bytes);
  try {
    f.get_int("general.architecture");
    FAIL();
  } catch (const Error& e) {
    const std::string m = e.what();
    EXPECT_NE(m.find("typed.gguf"), std::string::npos) << m;
    EXPECT_NE(m.find("general.architecture"), std::string::npos) << m;
    EXPECT_NE(m.find("an integer"), std::string::npos) << m;
    EXPECT_NE(m.find("\"llama\""), std::string::npos) << m;
  }
  EXPECT_THROW(f.get_string("llama.context_length"), Error);
  EXPECT_EQ(f.find_int("llama.context_length"), std::nullopt);
  EXPECT_THROW(f.get_array("general.architecture"), Error);
}

TEST(GgufValidation, RandomCorruptionNeverCrashes) {
  const auto base = valid_file();
  std::mt19937 rng(1234);
  int parsed = 0, rejected = 0;
  for (int i = 0; i < 3000; ++i) {
    auto bytes = base;
    const int flips = 1 + static_cast<int>(rng() % 4);
    for (int k = 0; k < flips; ++k) bytes[rng() % bytes.size()] = static_cast<uint8_t>(rng());
    (parse_error(bytes).empty() ? parsed : rejected)++;
  }
  EXPECT_GT(rejected, 0);
  EXPECT_EQ(parsed + rejected, 3000);
}

}  // namespace
}  // namespace strata
