#pragma once
// A read-only view of a whole file: mmap'ed in place (zero copy), or read fully into RAM. Or of
// the parts of a file one process uses (a rank of a distributed run: its own layers): the view
// spans the whole file, but only those byte ranges are read ahead (mmap) or read (ram); the rest
// takes no memory (ram: it reads as zeros).

#include <cstddef>
#include <cstdint>
#include <span>
#include <string>

namespace strata {

enum class LoadMode { mmap, ram };

struct ByteRange {
  uint64_t offset = 0, size = 0;
};

class MappedFile {
 public:
  // Throws strata::Error naming the path and the OS error when the file cannot be opened or read.
  // only: the ranges to read (empty: the whole file).
  explicit MappedFile(const std::string& path, LoadMode mode = LoadMode::mmap,
                      std::span<const ByteRange> only = {});
  ~MappedFile();
  MappedFile(const MappedFile&) = delete;
  MappedFile& operator=(const MappedFile&) = delete;

  const std::string& path() const { return path_; }
  std::span<const uint8_t> bytes() const { return {data_, size_}; }
  size_t size() const { return size_; }
  LoadMode mode() const { return mode_; }

 private:
  std::string path_;
  const uint8_t* data_ = nullptr;
  size_t size_ = 0;
  LoadMode mode_;
  void* owned_ = nullptr;  // LoadMode::ram: the anonymous mapping data_ lies in
  size_t owned_size_ = 0;
};

}  // namespace strata
