#include "gguf/gguf_writer.h"

#include <cerrno>
#include <cstdio>
#include <cstring>
#include <filesystem>
#include <memory>

#include "gguf/gguf_file.h"
#include "util/error.h"

namespace strata {
namespace {

class ByteSink {
 public:
  explicit ByteSink(std::vector<uint8_t>& out) : out_(out) {}
  template <typename T>
  void put(T value) {
    const size_t at = out_.size();
    out_.resize(at + sizeof(T));
    std::memcpy(out_.data() + at, &value, sizeof(T));
  }
  void put_string(const std::string& s) {
    put<uint64_t>(s.size());
    const size_t at = out_.size();
    out_.resize(at + s.size());
    if (!s.empty()) std::memcpy(out_.data() + at, s.data(), s.size());
  }
  void pad_to(uint64_t alignment) {
    while (out_.size() % alignment) out_.push_back(0);
  }

 private:
  std::vector<uint8_t>& out_;
};

void put_value(ByteSink& out, const GgufValue& value) {
  std::visit(
      [&](const auto& v) {
        using T = std::decay_t<decltype(v)>;
        if constexpr (std::is_same_v<T, std::string>) {
          out.put_string(v);
        } else if constexpr (std::is_same_v<T, GgufArray>) {
          out.put<uint32_t>(static_cast<uint32_t>(v.element_type));
          out.put<uint64_t>(v.items.size());
          for (const GgufValue& item : v.items) {
            if (item.type() != v.element_type) {
              fail("GGUF writer: array declared as {} holds a {} item",
                   gguf_value_type_name(v.element_type), gguf_value_type_name(item.type()));
            }
            put_value(out, item);
          }
        } else if constexpr (std::is_same_v<T, bool>) {
          out.put<uint8_t>(v ? 1 : 0);
        } else {
          out.put<T>(v);
        }
      },
      value.storage());
}

uint64_t align_up(uint64_t n, uint64_t alignment) {
  return (n + alignment - 1) / alignment * alignment;
}

}  // namespace

GgufWriter::GgufWriter(uint32_t alignment) : alignment_(alignment) {
  STRATA_CHECK(alignment > 0 && (alignment & (alignment - 1)) == 0,
               "GGUF writer: alignment {} is not a power of two", alignment);
  if (alignment != kGgufDefaultAlignment)
    metadata_.push_back({"general.alignment", GgufValue(alignment)});
}

void GgufWriter::set(const std::string& key, GgufValue value) {
  // The alignment decides the data layout: it is fixed by the constructor, not a free key.
  STRATA_CHECK(key != "general.alignment" || value == GgufValue(alignment_),
               "GGUF writer: set the alignment through the constructor ({} here)", alignment_);
  for (auto& kv : metadata_) {
    if (kv.key == key) {
      kv.value = std::move(value);
      return;
    }
  }
  metadata_.push_back({key, std::move(value)});
}

void GgufWriter::add(Tensor tensor) {
  const GgmlTypeInfo& info = ggml_type_info(tensor.type);
  STRATA_CHECK(!tensor.shape.empty() && tensor.shape.size() <= kGgufMaxDims,
               "GGUF writer: tensor '{}' has {} dimensions, expected 1..{}", tensor.name,
               tensor.shape.size(), kGgufMaxDims);
  STRATA_CHECK(tensor.shape[0] % info.block_elems == 0,
               "GGUF writer: tensor '{}' of type {} has row length {}, not a multiple of {}",
               tensor.name, info.name, tensor.shape[0], info.block_elems);
  for (const Tensor& t : tensors_) {
    STRATA_CHECK(t.name != tensor.name, "GGUF writer: tensor '{}' added twice", tensor.name);
  }
  int64_t elements = 1;
  for (int64_t d : tensor.shape) {
    STRATA_CHECK(d >= 0, "GGUF writer: tensor '{}' has a negative dimension", tensor.name);
    elements *= d;
  }
  tensor.bytes = static_cast<uint64_t>(elements / info.block_elems * info.block_bytes);
  if (!tensor.filler) {
    STRATA_CHECK(tensor.data.size() == tensor.bytes,
                 "GGUF writer: tensor '{}' ({} {}) needs {} bytes, got {}", tensor.name, info.name,
                 elements, tensor.bytes, tensor.data.size());
  }
  tensor.offset = data_size_;
  data_size_ = align_up(data_size_ + tensor.bytes, alignment_);
  tensors_.push_back(std::move(tensor));
}

void GgufWriter::add_tensor(const std::string& name, GgmlType type, std::vector<int64_t> shape,
                            std::vector<uint8_t> data) {
  add({name, type, std::move(shape), 0, 0, std::move(data), nullptr});
}

void GgufWriter::add_tensor(const std::string& name, GgmlType type, std::vector<int64_t> shape,
                            TensorFiller filler) {
  STRATA_CHECK(filler != nullptr, "GGUF writer: tensor '{}' has no filler", name);
  add({name, type, std::move(shape), 0, 0, {}, std::move(filler)});
}

std::vector<uint8_t> GgufWriter::header_bytes() const {
  std::vector<uint8_t> bytes;
  ByteSink out(bytes);
  out.put<uint32_t>(kGgufMagic);
  out.put<uint32_t>(3);
  out.put<uint64_t>(tensors_.size());
  out.put<uint64_t>(metadata_.size());
  for (const auto& kv : metadata_) {
    out.put_string(kv.key);
    out.put<uint32_t>(static_cast<uint32_t>(kv.value.type()));
    put_value(out, kv.value);
  }
  for (const Tensor& t : tensors_) {
    out.put_string(t.name);
    out.put<uint32_t>(static_cast<uint32_t>(t.shape.size()));
    for (int64_t d : t.shape) out.put<uint64_t>(static_cast<uint64_t>(d));
    out.put<uint32_t>(static_cast<uint32_t>(t.type));
    out.put<uint64_t>(t.offset);
  }
  out.pad_to(alignment_);
  return bytes;
}

// Streams the file to `sink(const uint8_t*, size_t)`: header, then each tensor and its padding.
template <typename Sink>
void GgufWriter::emit(Sink&& sink) const {
  const std::vector<uint8_t> header = header_bytes();
  sink(header.data(), header.size());
  static const uint8_t zeros[64] = {};
  std::vector<uint8_t> scratch;
  for (const Tensor& t : tensors_) {
    if (t.filler) {
      scratch.assign(static_cast<size_t>(t.bytes), 0);
      t.filler(std::span<uint8_t>(scratch));
      sink(scratch.data(), scratch.size());
    } else {
      sink(t.data.data(), t.data.size());
    }
    uint64_t pad = align_up(t.bytes, alignment_) - t.bytes;
    while (pad > 0) {
      const size_t n = static_cast<size_t>(std::min<uint64_t>(pad, sizeof zeros));
      sink(zeros, n);
      pad -= n;
    }
  }
}

std::vector<uint8_t> GgufWriter::to_bytes() const {
  std::vector<uint8_t> out;
  emit([&](const uint8_t* p, size_t n) { out.insert(out.end(), p, p + n); });
  return out;
}

void GgufWriter::write(const std::string& path) const {
  const std::string tmp = path + ".partial";
  std::unique_ptr<FILE, int (*)(FILE*)> file(std::fopen(tmp.c_str(), "wb"), &std::fclose);
  if (!file) fail("cannot create '{}': {}", tmp, std::strerror(errno));
  try {
    emit([&](const uint8_t* p, size_t n) {
      if (n && std::fwrite(p, 1, n, file.get()) != n) {
        fail("cannot write '{}': {}", tmp, std::strerror(errno));
      }
    });
  } catch (...) {
    file.reset();
    std::remove(tmp.c_str());
    throw;
  }
  if (std::fclose(file.release()) != 0) {
    std::remove(tmp.c_str());
    fail("cannot finish writing '{}': {}", tmp, std::strerror(errno));
  }
  std::error_code ec;
  std::filesystem::rename(tmp, path, ec);
  if (ec) {
    std::remove(tmp.c_str());
    fail("cannot rename '{}' to '{}': {}", tmp, path, ec.message());
  }
}

}  // namespace strata
