#include "gguf/gguf_file.h"

#include <fmt/format.h>

#include <algorithm>
#include <cctype>
#include <cstring>
#include <limits>
#include <string>

#include "util/error.h"

namespace strata {
namespace {

// Said when a length or count runs past the end of the file.
constexpr const char* kEndsEarly =
    "the file ends early: it is truncated (a download cut short?) or damaged";

// What a file that does not start with "GGUF" is, when it is something people download by
// mistake: a web page, a Git LFS pointer, a safetensors or PyTorch checkpoint.
std::string what_the_file_is(std::span<const uint8_t> bytes) {
  const std::string head(reinterpret_cast<const char*>(bytes.data()),
                         std::min<size_t>(bytes.size(), 64));
  std::string lower = head;
  for (char& c : lower) c = static_cast<char>(std::tolower(static_cast<unsigned char>(c)));
  const size_t start = lower.find_first_not_of(" \t\r\n");
  const std::string text = start == std::string::npos ? "" : lower.substr(start);
  if (text.rfind("<!doctype html", 0) == 0 || text.rfind("<html", 0) == 0)
    return "this is an HTML page (the link saved a web page: download the file itself, e.g. "
           "the 'resolve' link on Hugging Face)";
  if (text.rfind("version https://git-lfs", 0) == 0)
    return "this is a Git LFS pointer to the model, not the model (git lfs pull fetches it)";
  if (bytes.size() > 10 && head.compare(8, 2, "{\"") == 0)
    return "this looks like a safetensors checkpoint; convert it to GGUF first";
  if (bytes.size() > 2 && bytes[0] == 'P' && bytes[1] == 'K')
    return "this is a zip archive (a PyTorch checkpoint?); convert the model to GGUF first";
  uint32_t magic = 0;
  std::memcpy(&magic, bytes.data(), 4);
  return fmt::format("it starts with 0x{:08x}, where a GGUF file starts with \"GGUF\"", magic);
}

constexpr int kMaxArrayNesting = 8;  // real files nest at most 2 levels; deeper is hostile
// Every array item becomes a GgufValue (tens of bytes), so a u8 array could cost far more memory
// than the file's bytes: cap the count at 16x the largest vocabularies (~260k tokens).
constexpr uint64_t kMaxArrayItems = uint64_t{1} << 22;

// Smallest number of bytes one encoded value of this type can occupy; bounds counts before any
// allocation so a bogus count cannot make us reserve memory the file cannot back.
uint64_t min_encoded_size(GgufValueType type) {
  switch (type) {
    case GgufValueType::u8:
    case GgufValueType::i8:
    case GgufValueType::boolean:
      return 1;
    case GgufValueType::u16:
    case GgufValueType::i16:
      return 2;
    case GgufValueType::u32:
    case GgufValueType::i32:
    case GgufValueType::f32:
      return 4;
    case GgufValueType::u64:
    case GgufValueType::i64:
    case GgufValueType::f64:
    case GgufValueType::string:
      return 8;  // a string is at least its u64 length
    case GgufValueType::array:
      return 12;  // element type u32 + count u64
  }
  return 1;
}

// Bounds-checked little-endian reader over the file bytes.
class Cursor {
 public:
  Cursor(const std::string& file, std::span<const uint8_t> bytes) : file_(file), bytes_(bytes) {}

  size_t pos() const { return pos_; }
  uint64_t remaining() const { return bytes_.size() - pos_; }

  template <typename T>
  T read(std::string_view what) {
    need(sizeof(T), what);
    T value;
    std::memcpy(&value, bytes_.data() + pos_, sizeof(T));
    pos_ += sizeof(T);
    return value;
  }

  std::string read_string(std::string_view what) {
    const size_t at = pos_;
    const uint64_t length = read<uint64_t>(what);
    if (length > remaining()) {
      fail("{}: {} at offset {}: string length {} exceeds the {} bytes left in the file: {}", file_,
           what, at, length, remaining(), kEndsEarly);
    }
    std::string s(reinterpret_cast<const char*>(bytes_.data() + pos_), static_cast<size_t>(length));
    pos_ += static_cast<size_t>(length);
    return s;
  }

  void need(uint64_t n, std::string_view what) const {
    if (n > remaining()) {
      fail("{}: reading {} at offset {} needs {} bytes and {} are left: {}", file_, what, pos_, n,
           remaining(), kEndsEarly);
    }
  }

 private:
  const std::string& file_;
  std::span<const uint8_t> bytes_;
  size_t pos_ = 0;
};

GgufValueType read_value_type(Cursor& in, const std::string& file, std::string_view what) {
  const size_t at = in.pos();
  const uint32_t raw = in.read<uint32_t>(what);
  if (raw >= kGgufValueTypeCount) {
    fail("{}: {} at offset {}: value type {} is not a GGUF type (expected 0..{})", file, what, at,
         raw, kGgufValueTypeCount - 1);
  }
  return static_cast<GgufValueType>(raw);
}

GgufValue read_value(Cursor& in, const std::string& file, GgufValueType type,
                     const std::string& what, int depth) {
  switch (type) {
    case GgufValueType::u8:
      return GgufValue(in.read<uint8_t>(what));
    case GgufValueType::i8:
      return GgufValue(in.read<int8_t>(what));
    case GgufValueType::u16:
      return GgufValue(in.read<uint16_t>(what));
    case GgufValueType::i16:
      return GgufValue(in.read<int16_t>(what));
    case GgufValueType::u32:
      return GgufValue(in.read<uint32_t>(what));
    case GgufValueType::i32:
      return GgufValue(in.read<int32_t>(what));
    case GgufValueType::f32:
      return GgufValue(in.read<float>(what));
    case GgufValueType::u64:
      return GgufValue(in.read<uint64_t>(what));
    case GgufValueType::i64:
      return GgufValue(in.read<int64_t>(what));
    case GgufValueType::f64:
      return GgufValue(in.read<double>(what));
    case GgufValueType::boolean: {
      const size_t at = in.pos();
      const uint8_t b = in.read<uint8_t>(what);
      if (b > 1) fail("{}: {} at offset {}: bool byte is {}, expected 0 or 1", file, what, at, b);
      return GgufValue(b == 1);
    }
    case GgufValueType::string:
      return GgufValue::string(in.read_string(what));
    case GgufValueType::array: {
      if (depth >= kMaxArrayNesting) {
        fail("{}: {}: arrays nested deeper than {} levels", file, what, kMaxArrayNesting);
      }
      const GgufValueType element = read_value_type(in, file, what + " (array element type)");
      const size_t at = in.pos();
      const uint64_t count = in.read<uint64_t>(what + " (array length)");
      const uint64_t min_size = min_encoded_size(element);
      if (count > in.remaining() / min_size) {
        fail("{}: {} at offset {}: array of {} {} values cannot fit in the {} bytes left: {}", file,
             what, at, count, gguf_value_type_name(element), in.remaining(), kEndsEarly);
      }
      if (count > kMaxArrayItems) {
        fail("{}: {} at offset {}: array of {} items exceeds the limit of {}", file, what, at,
             count, kMaxArrayItems);
      }
      std::vector<GgufValue> items;
      items.reserve(static_cast<size_t>(count));
      for (uint64_t i = 0; i < count; ++i) {
        items.push_back(read_value(in, file, element, what, depth + 1));
      }
      return GgufValue::array(element, std::move(items));
    }
  }
  fail("{}: {}: unhandled value type", file, what);
}

bool multiply_overflows(int64_t a, int64_t b, int64_t* out) {
  return __builtin_mul_overflow(a, b, out);
}

}  // namespace

int64_t GgufTensorInfo::elements() const {
  int64_t n = 1;
  for (int64_t d : shape) n *= d;
  return n;
}

std::string GgufTensorInfo::shape_string() const {
  return fmt::format("[{}]", fmt::join(shape, ", "));
}

GgufFile::GgufFile(GgufFile&&) noexcept = default;
GgufFile& GgufFile::operator=(GgufFile&&) noexcept = default;
GgufFile::~GgufFile() = default;

GgufFile GgufFile::open(const std::string& path, LoadMode mode, std::span<const ByteRange> only) {
  GgufFile file;
  file.name_ = path;
  file.mapped_ = std::make_unique<MappedFile>(path, mode, only);
  file.bytes_ = file.mapped_->bytes();
  file.parse_all();
  return file;
}

GgufFile GgufFile::parse(std::string name, std::span<const uint8_t> bytes) {
  GgufFile file;
  file.name_ = std::move(name);
  file.bytes_ = bytes;
  file.parse_all();
  return file;
}

void GgufFile::parse_all() {
  Cursor in(name_, bytes_);
  if (bytes_.size() < 4) {
    fail("{}: not a GGUF file: {} bytes, too short for the 4-byte magic", name_, bytes_.size());
  }
  const uint32_t magic = in.read<uint32_t>("magic");
  if (magic != kGgufMagic) {
    fail("{}: not a GGUF file: {}", name_, what_the_file_is(bytes_));
  }
  version_ = in.read<uint32_t>("version");
  if (version_ == 0x02000000u || version_ == 0x03000000u) {
    fail("{}: big-endian GGUF files are not supported (version field reads 0x{:08x})", name_,
         version_);
  }
  if (version_ != 2 && version_ != 3) {
    fail("{}: GGUF version {} is not supported (expected 2 or 3)", name_, version_);
  }
  const uint64_t tensor_count = in.read<uint64_t>("tensor count");
  const uint64_t kv_count = in.read<uint64_t>("metadata key/value count");
  // Each key/value takes at least 8 (key length) + 4 (type) + 1 bytes; each tensor info at
  // least 8 (name length) + 4 (dims) + 4 (type) + 8 (offset).
  if (kv_count > in.remaining() / 13) {
    fail("{}: header claims {} metadata entries, more than the {} bytes of the file can hold",
         name_, kv_count, bytes_.size());
  }
  if (tensor_count > in.remaining() / 24) {
    fail("{}: header claims {} tensors, more than the {} bytes of the file can hold", name_,
         tensor_count, bytes_.size());
  }

  metadata_.reserve(static_cast<size_t>(kv_count));
  for (uint64_t i = 0; i < kv_count; ++i) {
    std::string key = in.read_string(fmt::format("key of metadata entry {}", i));
    const std::string what = fmt::format("metadata '{}'", key);
    const GgufValueType type = read_value_type(in, name_, what + " (type)");
    GgufValue value = read_value(in, name_, type, what, 0);
    if (metadata_index_.count(key)) fail("{}: metadata key '{}' appears twice", name_, key);
    metadata_index_.emplace(key, metadata_.size());
    metadata_.push_back({std::move(key), std::move(value)});
  }

  if (const GgufValue* a = find("general.alignment")) {
    const auto v = a->as_uint();
    if (a->type() != GgufValueType::u32 || !v || *v == 0 || (*v & (*v - 1)) != 0) {
      fail("{}: general.alignment must be a u32 power of two, found {} {}", name_,
           gguf_value_type_name(a->type()), a->to_display_string());
    }
    alignment_ = *v;
  }

  tensors_.reserve(static_cast<size_t>(tensor_count));
  for (uint64_t i = 0; i < tensor_count; ++i) {
    GgufTensorInfo t;
    t.name = in.read_string(fmt::format("name of tensor {}", i));
    const std::string what = fmt::format("tensor '{}'", t.name);
    const uint32_t n_dims = in.read<uint32_t>(what + " dimension count");
    if (n_dims == 0 || n_dims > kGgufMaxDims) {
      fail("{}: {} has {} dimensions, expected 1..{}", name_, what, n_dims, kGgufMaxDims);
    }
    int64_t elements = 1;
    for (uint32_t d = 0; d < n_dims; ++d) {
      const uint64_t dim = in.read<uint64_t>(what + " shape");
      if (dim > static_cast<uint64_t>(std::numeric_limits<int64_t>::max()) ||
          multiply_overflows(elements, static_cast<int64_t>(dim), &elements)) {
        fail("{}: {} dimension {} is {}: the element count overflows", name_, what, d, dim);
      }
      t.shape.push_back(static_cast<int64_t>(dim));
    }
    const uint32_t type_id = in.read<uint32_t>(what + " type");
    const auto info = ggml_type_info(type_id);
    if (!info) fail("{}: {} has unknown tensor type id {}", name_, what, type_id);
    t.type = info->type;
    if (t.shape[0] % info->block_elems != 0) {
      fail("{}: {} of type {} has row length {}, expected a multiple of the block size {}", name_,
           what, info->name, t.shape[0], info->block_elems);
    }
    int64_t bytes = 0;
    if (multiply_overflows(elements / info->block_elems, info->block_bytes, &bytes)) {
      fail("{}: {} byte size overflows", name_, what);
    }
    t.bytes = static_cast<uint64_t>(bytes);
    t.offset = in.read<uint64_t>(what + " data offset");
    if (t.offset % alignment_ != 0) {
      fail("{}: {} data offset {} is not a multiple of the alignment {}", name_, what, t.offset,
           alignment_);
    }
    if (tensor_index_.count(t.name)) fail("{}: tensor name '{}' appears twice", name_, t.name);
    tensor_index_.emplace(t.name, tensors_.size());
    tensors_.push_back(std::move(t));
  }

  data_offset_ = (in.pos() + alignment_ - 1) / alignment_ * alignment_;
  if (tensors_.empty()) return;  // vocab-only files may end without the padding
  if (data_offset_ > bytes_.size()) {
    fail("{}: data section starts at offset {} but the file has only {} bytes", name_, data_offset_,
         bytes_.size());
  }
  const uint64_t data_size = bytes_.size() - data_offset_;
  for (GgufTensorInfo& t : tensors_) {
    if (t.offset > data_size || t.bytes > data_size - t.offset) {
      fail(
          "{}: tensor '{}' ({} {}, {} bytes at data offset {}) runs past the end of the data "
          "section ({} bytes): {}",
          name_, t.name, ggml_type_name(t.type), t.shape_string(), t.bytes, t.offset, data_size,
          kEndsEarly);
    }
    t.data =
        bytes_.subspan(static_cast<size_t>(data_offset_ + t.offset), static_cast<size_t>(t.bytes));
  }
}

const GgufValue* GgufFile::find(std::string_view key) const {
  const auto it = metadata_index_.find(std::string(key));
  return it == metadata_index_.end() ? nullptr : &metadata_[it->second].value;
}

void GgufFile::fail_key(std::string_view key, std::string_view expected,
                        const GgufValue* found) const {
  if (!found) fail("{}: metadata key '{}' is missing (expected {})", name_, key, expected);
  fail("{}: metadata key '{}' should be {}, found {} {}", name_, key, expected,
       gguf_value_type_name(found->type()), found->to_display_string());
}

std::optional<std::string> GgufFile::find_string(std::string_view key) const {
  const GgufValue* v = find(key);
  if (!v) return std::nullopt;
  if (!v->as_string()) fail_key(key, "a string", v);
  return *v->as_string();
}

std::string GgufFile::get_string(std::string_view key) const {
  if (auto s = find_string(key)) return *s;
  fail_key(key, "a string", nullptr);
}

std::optional<int64_t> GgufFile::find_int(std::string_view key) const {
  const GgufValue* v = find(key);
  if (!v) return std::nullopt;
  const auto i = v->as_int();
  if (!i) fail_key(key, "an integer", v);
  return i;
}

int64_t GgufFile::get_int(std::string_view key) const {
  if (auto i = find_int(key)) return *i;
  fail_key(key, "an integer", nullptr);
}

std::optional<double> GgufFile::find_float(std::string_view key) const {
  const GgufValue* v = find(key);
  if (!v) return std::nullopt;
  const auto d = v->as_double();
  if (!d) fail_key(key, "a number", v);
  return d;
}

double GgufFile::get_float(std::string_view key) const {
  if (auto d = find_float(key)) return *d;
  fail_key(key, "a number", nullptr);
}

std::optional<bool> GgufFile::find_bool(std::string_view key) const {
  const GgufValue* v = find(key);
  if (!v) return std::nullopt;
  const auto b = v->as_bool();
  if (!b) fail_key(key, "a bool", v);
  return b;
}

const GgufArray* GgufFile::find_array(std::string_view key) const {
  const GgufValue* v = find(key);
  if (!v) return nullptr;
  if (!v->as_array()) fail_key(key, "an array", v);
  return v->as_array();
}

const GgufArray& GgufFile::get_array(std::string_view key) const {
  if (const GgufArray* a = find_array(key)) return *a;
  fail_key(key, "an array", nullptr);
}

std::string GgufFile::architecture() const {
  return find_string("general.architecture").value_or("");
}

const GgufTensorInfo* GgufFile::find_tensor(std::string_view name) const {
  const auto it = tensor_index_.find(std::string(name));
  return it == tensor_index_.end() ? nullptr : &tensors_[it->second];
}

}  // namespace strata
