#pragma once
// A parsed GGUF file (v2 or v3): metadata, tensor infos and zero-copy views of tensor data.
// Every count, length, offset and size is validated before use; a bad file raises strata::Error
// naming the file, the field or tensor, what was expected and what was found.

#include <cstdint>
#include <memory>
#include <optional>
#include <span>
#include <string>
#include <string_view>
#include <unordered_map>
#include <vector>

#include "gguf/ggml_type.h"
#include "gguf/gguf_value.h"
#include "util/mapped_file.h"

namespace strata {

constexpr uint32_t kGgufMagic = 0x46554747;  // "GGUF" little-endian
constexpr uint32_t kGgufDefaultAlignment = 32;
constexpr int kGgufMaxDims = 4;

struct GgufTensorInfo {
  std::string name;
  std::vector<int64_t> shape;  // GGUF order: shape[0] is the row length (contiguous)
  GgmlType type = GgmlType::F32;
  uint64_t offset = 0;  // relative to the start of the data section
  uint64_t bytes = 0;
  std::span<const uint8_t> data;  // view into the mapped file

  int64_t elements() const;
  int64_t row_length() const { return shape.empty() ? 1 : shape[0]; }
  int64_t rows() const { return row_length() ? elements() / row_length() : 0; }
  std::string shape_string() const;  // e.g. "[2048, 768, 128]"
};

class GgufFile {
 public:
  // Opens and parses a file; the tensor views stay valid as long as this object lives.
  // only: the byte ranges this process will use (empty: all; see MappedFile).
  static GgufFile open(const std::string& path, LoadMode mode = LoadMode::mmap,
                       std::span<const ByteRange> only = {});
  // Parses bytes owned by the caller (they must outlive the result); `name` appears in errors.
  static GgufFile parse(std::string name, std::span<const uint8_t> bytes);

  GgufFile(GgufFile&&) noexcept;
  GgufFile& operator=(GgufFile&&) noexcept;
  ~GgufFile();

  const std::string& name() const { return name_; }
  uint32_t version() const { return version_; }
  uint64_t alignment() const { return alignment_; }
  uint64_t data_offset() const { return data_offset_; }  // absolute offset of the data section
  uint64_t file_size() const { return bytes_.size(); }
  std::span<const uint8_t> bytes() const { return bytes_; }
  // Whether the bytes are this process's own copy (LoadMode::ram), which a model may rewrite
  // (compact tiles, ops/compact_tiles.h); mapped files and caller-owned bytes are read-only.
  bool writable() const { return mapped_ && mapped_->mode() == LoadMode::ram; }

  const std::vector<GgufKeyValue>& metadata() const { return metadata_; }
  const GgufValue* find(std::string_view key) const;
  bool has(std::string_view key) const { return find(key) != nullptr; }

  // Typed getters. The non-optional forms throw when the key is missing or of the wrong kind;
  // the optional forms return nullopt when missing and throw when present but of the wrong kind.
  std::string get_string(std::string_view key) const;
  std::optional<std::string> find_string(std::string_view key) const;
  int64_t get_int(std::string_view key) const;
  std::optional<int64_t> find_int(std::string_view key) const;
  double get_float(std::string_view key) const;
  std::optional<double> find_float(std::string_view key) const;
  std::optional<bool> find_bool(std::string_view key) const;
  const GgufArray& get_array(std::string_view key) const;
  const GgufArray* find_array(std::string_view key) const;

  // general.architecture, or "" when the file does not say.
  std::string architecture() const;

  const std::vector<GgufTensorInfo>& tensors() const { return tensors_; }
  const GgufTensorInfo* find_tensor(std::string_view name) const;

 private:
  GgufFile() = default;
  void parse_all();
  [[noreturn]] void fail_key(std::string_view key, std::string_view expected,
                             const GgufValue* found) const;

  std::string name_;
  std::unique_ptr<MappedFile> mapped_;
  std::span<const uint8_t> bytes_;
  uint32_t version_ = 0;
  uint64_t alignment_ = kGgufDefaultAlignment;
  uint64_t data_offset_ = 0;
  std::vector<GgufKeyValue> metadata_;
  std::unordered_map<std::string, size_t> metadata_index_;
  std::vector<GgufTensorInfo> tensors_;
  std::unordered_map<std::string, size_t> tensor_index_;
};

}  // namespace strata
