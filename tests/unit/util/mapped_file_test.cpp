#include "util/mapped_file.h"

#include <gtest/gtest.h>

#include <fstream>
#include <vector>

#include "support/test_support.h"
#include "util/error.h"

namespace strata {
namespace {

std::string write_pattern(size_t n) {
  const std::string path = (test::temp_dir() / "mapped-file-pattern.bin").string();
  std::vector<char> bytes(n);
  for (size_t i = 0; i < n; ++i) bytes[i] = static_cast<char>(1 + i % 251);
  std::ofstream(path, std::ios::binary).write(bytes.data(), static_cast<std::streamsize>(n));
  return path;
}

TEST(MappedFile, BothModesReadTheWholeFile) {
  const std::string path = write_pattern(100000);
  for (LoadMode mode : {LoadMode::mmap, LoadMode::ram}) {
    MappedFile f(path, mode);
    ASSERT_EQ(f.size(), 100000u);
    for (size_t i = 0; i < f.size(); i += 997) EXPECT_EQ(f.bytes()[i], 1 + i % 251) << i;
  }
}

// A rank of a distributed run reads only its tensors: in RAM the rest reads as zeros.
TEST(MappedFile, APartialReadHoldsTheRangesAndZerosElsewhere) {
  const std::string path = write_pattern(3 << 20);
  const std::vector<ByteRange> only{{0, 100}, {1 << 20, 5000}, {(3 << 20) - 10, 10}};
  MappedFile ram(path, LoadMode::ram, only);
  ASSERT_EQ(ram.size(), size_t{3} << 20);
  auto inside = [&](size_t i) {
    for (const ByteRange& r : only)
      if (i >= r.offset && i < r.offset + r.size) return true;
    return false;
  };
  for (size_t i = 0; i < ram.size(); i += (i < 200 || i > ram.size() - 20) ? 1 : 331) {
    EXPECT_EQ(ram.bytes()[i], inside(i) ? 1 + i % 251 : 0) << i;
  }
  // Mapped, every byte is the file's (the ranges only say what to read ahead).
  MappedFile mapped(path, LoadMode::mmap, only);
  EXPECT_EQ(mapped.bytes()[2 << 20], 1 + (2 << 20) % 251);
  const std::vector<ByteRange> outside{{(3 << 20) - 10, 11}};
  EXPECT_THROW(MappedFile(path, LoadMode::ram, outside), Error);
}

}  // namespace
}  // namespace strata
