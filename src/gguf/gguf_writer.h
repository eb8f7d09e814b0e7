#pragma once
// Writes GGUF v3 files that other GGUF tools read: metadata in insertion order, tensor data
// aligned to general.alignment. Used by tests and by the synthetic model generator.

#include <cstdint>
#include <functional>
#include <span>
#include <string>
#include <vector>

#include "gguf/ggml_type.h"
#include "gguf/gguf_value.h"

namespace strata {

class GgufWriter {
 public:
  // Fills the tensor's bytes (exactly its byte size) when the file is written; lets generators
  // produce large tensors one at a time instead of holding the whole model in memory.
  using TensorFiller = std::function<void(std::span<uint8_t> out)>;

  explicit GgufWriter(uint32_t alignment = 32);

  // Sets a metadata key (replacing an earlier value, keeping its position).
  void set(const std::string& key, GgufValue value);
  void set_string(const std::string& key, std::string value) {
    set(key, GgufValue::string(std::move(value)));
  }
  void set_u32(const std::string& key, uint32_t value) { set(key, GgufValue(value)); }
  void set_f32(const std::string& key, float value) { set(key, GgufValue(value)); }
  void set_bool(const std::string& key, bool value) { set(key, GgufValue(value)); }

  // Adds a tensor; shape in GGUF order (shape[0] = row length). Throws on a duplicate name, a
  // row length that is not a multiple of the block size, or data of the wrong size.
  void add_tensor(const std::string& name, GgmlType type, std::vector<int64_t> shape,
                  std::vector<uint8_t> data);
  void add_tensor(const std::string& name, GgmlType type, std::vector<int64_t> shape,
                  TensorFiller filler);

  // Writes to `path` via a temporary file renamed into place, so a failed write leaves nothing.
  void write(const std::string& path) const;
  // The whole file in memory (small files: tests, fuzz seeds).
  std::vector<uint8_t> to_bytes() const;

 private:
  struct Tensor {
    std::string name;
    GgmlType type;
    std::vector<int64_t> shape;
    uint64_t bytes;
    uint64_t offset;
    std::vector<uint8_t> data;
    TensorFiller filler;
  };
  void add(Tensor tensor);
  std::vector<uint8_t> header_bytes() const;  // header, metadata, tensor infos, padding
  template <typename Sink>
  void emit(Sink&& sink) const;

  uint32_t alignment_;
  std::vector<GgufKeyValue> metadata_;
  std::vector<Tensor> tensors_;
  uint64_t data_size_ = 0;
};

}  // namespace strata
