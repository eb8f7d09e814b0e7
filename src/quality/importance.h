#pragma once
// Importance matrices: for each weight matrix (each expert of a stacked expert tensor), the sum of
// the squares of each input column over the rows it multiplied, and how many rows. The mean
// square is how much an error in that column's weights costs the product on such text, which a
// quantizer can weigh its errors by (`strata quantize --imatrix`). Kept as llama.cpp's imatrix
// GGUF files keep them, so files go both ways: tensors NAME.in_sum2 [cols, matrices] and
// NAME.counts [1, matrices] (F32), and the keys imatrix.datasets, imatrix.chunk_count and
// imatrix.chunk_size.

#include <cstdint>
#include <map>
#include <string>
#include <unordered_map>
#include <vector>

#include "gguf/gguf_file.h"
#include "model/activation_observer.h"

namespace strata::quality {

struct ImportanceEntry {
  int64_t cols = 0;
  int64_t matrices = 1;        // experts of a stacked tensor, else 1
  std::vector<double> sums;    // [matrices][cols]
  std::vector<double> counts;  // [matrices] rows seen
};

struct ImportanceMatrix {
  std::map<std::string, ImportanceEntry> entries;  // by weight tensor name
  std::vector<std::string> datasets;               // the texts it was collected on
  int64_t chunks = 0, chunk_size = 0;

  // Matrix `matrix`'s mean squares per column; empty when the tensor is not in it or that matrix
  // saw no rows (an expert the text never chose).
  std::vector<float> mean_squares(const std::string& tensor, int64_t matrix) const;

  void write(const std::string& path) const;
  // Throws strata::Error for a file that is no imatrix GGUF, or whose entries do not agree.
  static ImportanceMatrix read(const std::string& path);
};

// Collects one while a model runs (Model::set_activation_observer): it knows the matrices of
// `file` by where their data lies, so the model must read its weights from that mapping (CPU,
// loaded by mmap). Weights of at least two dimensions named blk.*.weight, as llama-imatrix.
class ImportanceCollector : public ActivationObserver {
 public:
  explicit ImportanceCollector(const GgufFile& file);
  void dense(const void* weights, const float* x, int64_t rows, int64_t cols) override;
  void expert(const void* weights, int64_t expert, const float* x, const int32_t* ids,
              int64_t count, int64_t cols) override;
  // What was collected (entries that saw no row left out).
  ImportanceMatrix result() const;

 private:
  ImportanceMatrix m_;
  std::unordered_map<const void*, ImportanceEntry*> by_data_;
};

}  // namespace strata::quality
