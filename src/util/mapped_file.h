#pragma once
// A read-only view of a whole file: mmap'ed in place (zero copy), or read fully into RAM.

#include <cstddef>
#include <cstdint>
#include <span>
#include <string>

namespace strata {

enum class LoadMode { mmap, ram };

class MappedFile {
 public:
  // Throws strata::Error naming the path and the OS error when the file cannot be opened or read.
  explicit MappedFile(const std::string& path, LoadMode mode = LoadMode::mmap);
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
  void* owned_ = nullptr;  // heap buffer for LoadMode::ram
};

}  // namespace strata
