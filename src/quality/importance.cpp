#include "quality/importance.h"

#include <cmath>
#include <cstring>

#include "gguf/gguf_writer.h"
#include "util/error.h"

namespace strata::quality {
namespace {

constexpr const char* kSums = ".in_sum2";
constexpr const char* kCounts = ".counts";

std::vector<float> floats_of(const GgufTensorInfo& t) {
  STRATA_CHECK(t.type == GgmlType::F32, "imatrix tensor {} is {}, expected F32", t.name,
               ggml_type_name(t.type));
  std::vector<float> v(static_cast<size_t>(t.elements()));
  std::memcpy(v.data(), t.data.data(), v.size() * sizeof(float));
  return v;
}

std::vector<uint8_t> bytes_of(const std::vector<double>& v) {
  std::vector<uint8_t> out(v.size() * sizeof(float));
  for (size_t i = 0; i < v.size(); ++i) {
    const auto f = static_cast<float>(v[i]);
    std::memcpy(out.data() + i * sizeof(float), &f, sizeof f);
  }
  return out;
}

void add_squares(double* sums, const float* row, int64_t cols) {
  for (int64_t c = 0; c < cols; ++c) sums[c] += static_cast<double>(row[c]) * row[c];
}

}  // namespace

std::vector<float> ImportanceMatrix::mean_squares(const std::string& tensor, int64_t matrix) const {
  const auto it = entries.find(tensor);
  if (it == entries.end() || matrix < 0 || matrix >= it->second.matrices) return {};
  const ImportanceEntry& e = it->second;
  const double n = e.counts[static_cast<size_t>(matrix)];
  if (!(n > 0)) return {};
  std::vector<float> out(static_cast<size_t>(e.cols));
  for (int64_t c = 0; c < e.cols; ++c)
    out[static_cast<size_t>(c)] = static_cast<float>(e.sums[matrix * e.cols + c] / n);
  return out;
}

void ImportanceMatrix::write(const std::string& path) const {
  GgufWriter out(32);
  out.set_string("general.type", "imatrix");
  out.set("imatrix.datasets", GgufValue::string_array(datasets));
  out.set_u32("imatrix.chunk_count", static_cast<uint32_t>(chunks));
  out.set_u32("imatrix.chunk_size", static_cast<uint32_t>(chunk_size));
  for (const auto& [name, e] : entries) {
    out.add_tensor(name + kSums, GgmlType::F32, {e.cols, e.matrices}, bytes_of(e.sums));
    out.add_tensor(name + kCounts, GgmlType::F32, {1, e.matrices}, bytes_of(e.counts));
  }
  out.write(path);
}

ImportanceMatrix ImportanceMatrix::read(const std::string& path) {
  const GgufFile f = GgufFile::open(path);
  ImportanceMatrix m;
  for (const GgufTensorInfo& t : f.tensors()) {
    if (!t.name.ends_with(kSums)) continue;
    const std::string name = t.name.substr(0, t.name.size() - std::strlen(kSums));
    const GgufTensorInfo* counts = f.find_tensor(name + kCounts);
    STRATA_CHECK(counts, "{}: {} has no {}{}", path, t.name, name, kCounts);
    ImportanceEntry e;
    e.cols = t.row_length();
    e.matrices = t.rows();
    STRATA_CHECK(e.cols > 0 && counts->elements() == e.matrices,
                 "{}: {} holds {} matrices of {} columns but {} counts", path, name, e.matrices,
                 e.cols, counts->elements());
    for (float v : floats_of(t)) e.sums.push_back(v);
    for (float v : floats_of(*counts)) e.counts.push_back(v);
    for (double v : e.sums)
      STRATA_CHECK(std::isfinite(v) && v >= 0, "{}: {} has {}", path, name, v);
    m.entries.emplace(name, std::move(e));
  }
  STRATA_CHECK(!m.entries.empty(), "{} holds no importance matrix (no *{} tensors)", path, kSums);
  if (const GgufArray* d = f.find_array("imatrix.datasets")) {
    for (const GgufValue& v : d->items)
      if (const std::string* text = v.as_string()) m.datasets.push_back(*text);
  }
  m.chunks = f.find_int("imatrix.chunk_count").value_or(0);
  m.chunk_size = f.find_int("imatrix.chunk_size").value_or(0);
  return m;
}

ImportanceCollector::ImportanceCollector(const GgufFile& file) {
  for (const GgufTensorInfo& t : file.tensors()) {
    if (t.shape.size() < 2 || !t.name.starts_with("blk.") || !t.name.ends_with(".weight")) continue;
    ImportanceEntry& e = m_.entries[t.name];
    e.cols = t.row_length();
    e.matrices = t.shape.size() > 2 ? t.shape[2] : 1;
    e.sums.assign(static_cast<size_t>(e.cols * e.matrices), 0.0);
    e.counts.assign(static_cast<size_t>(e.matrices), 0.0);
    by_data_[t.data.data()] = &e;
  }
}

void ImportanceCollector::dense(const void* weights, const float* x, int64_t rows, int64_t cols) {
  const auto it = by_data_.find(weights);
  if (it == by_data_.end() || it->second->cols != cols || it->second->matrices != 1) return;
  ImportanceEntry& e = *it->second;
  for (int64_t r = 0; r < rows; ++r) add_squares(e.sums.data(), x + r * cols, cols);
  e.counts[0] += static_cast<double>(rows);
}

void ImportanceCollector::expert(const void* weights, int64_t expert, const float* x,
                                 const int32_t* ids, int64_t count, int64_t cols) {
  const auto it = by_data_.find(weights);
  if (it == by_data_.end() || it->second->cols != cols || expert >= it->second->matrices) return;
  ImportanceEntry& e = *it->second;
  for (int64_t i = 0; i < count; ++i)
    add_squares(e.sums.data() + expert * cols, x + static_cast<int64_t>(ids[i]) * cols, cols);
  e.counts[static_cast<size_t>(expert)] += static_cast<double>(count);
}

ImportanceMatrix ImportanceCollector::result() const {
  ImportanceMatrix out = m_;
  std::erase_if(out.entries, [](const auto& kv) {
    for (double c : kv.second.counts)
      if (c > 0) return false;
    return true;
  });
  return out;
}

}  // namespace strata::quality
