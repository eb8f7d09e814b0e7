// Importance matrices: what the collector sums while the model runs, against the same sums
// computed here from the file's own tensors (layer 0's attention input is the normed token
// embedding), the expert rows' bookkeeping, and the file round trip in llama.cpp's imatrix GGUF.
#include "quality/importance.h"

#include <gtest/gtest.h>

#include <cmath>
#include <cstring>
#include <vector>

#include "gguf/gguf_file.h"
#include "model/model.h"
#include "quality/perplexity.h"
#include "quant/quant.h"
#include "runtime/session.h"
#include "support/test_support.h"
#include "util/error.h"
#include "util/fp16.h"

namespace strata::quality {
namespace {

std::vector<float> row_of(const GgufTensorInfo& t, int64_t row) {
  const int64_t n = t.row_length();
  std::vector<float> out(static_cast<size_t>(n));
  const uint8_t* p = t.data.data() + row * quant::row_bytes(t.type, n);
  if (t.type == GgmlType::F32) {
    std::memcpy(out.data(), p, out.size() * sizeof(float));
  } else if (t.type == GgmlType::F16) {
    for (int64_t i = 0; i < n; ++i) out[i] = f16_to_f32(reinterpret_cast<const uint16_t*>(p)[i]);
  } else {
    quant::traits(t.type).kernels.dequantize_row(p, out.data(), n);
  }
  return out;
}

TEST(Importance, CollectedSumsAreTheSquaresOfWhatEachMatrixMultiplied) {
  const std::string path = (test::oracle_dir() / "models" / "tiny-qwen3moe-Q8_0.gguf").string();
  auto model = Model::load(path);
  const GgufFile& file = model->file();
  ThreadPool pool(2);
  ImportanceCollector collector(file);
  ASSERT_TRUE(model->set_activation_observer(&collector));
  constexpr int64_t kCtx = 32, kChunks = 2;
  std::vector<int32_t> tokens;
  for (int64_t i = 0; i < kCtx * kChunks; ++i)
    tokens.push_back(static_cast<int32_t>(1 + i * 7 % 200));
  Session session(*model, kCtx, GgmlType::F16, pool);
  PerplexityOptions options;
  options.ctx = options.batch = kCtx;
  perplexity(session, tokens, options);
  model->set_activation_observer(nullptr);
  const ImportanceMatrix m = collector.result();

  // Layer 0's q, k and v multiply RMSNorm(token embedding) x attn_norm, row by row.
  const ModelHParams& hp = model->hparams();
  const GgufTensorInfo& embd = *file.find_tensor("token_embd.weight");
  const std::vector<float> norm = row_of(*file.find_tensor("blk.0.attn_norm.weight"), 0);
  std::vector<double> expected(static_cast<size_t>(hp.n_embd), 0.0);
  for (int32_t t : tokens) {
    const std::vector<float> x = row_of(embd, t);
    double ss = 0;
    for (float v : x) ss += double(v) * v;
    const double inv = 1.0 / std::sqrt(ss / static_cast<double>(x.size()) + hp.rms_eps);
    for (size_t c = 0; c < x.size(); ++c) {
      const double y = x[c] * inv * norm[c];
      expected[c] += y * y;
    }
  }
  for (const char* name : {"blk.0.attn_q.weight", "blk.0.attn_k.weight", "blk.0.attn_v.weight"}) {
    SCOPED_TRACE(name);
    const ImportanceEntry& e = m.entries.at(name);
    ASSERT_EQ(e.matrices, 1);
    EXPECT_EQ(e.counts[0], static_cast<double>(tokens.size()));
    ASSERT_EQ(e.cols, hp.n_embd);
    for (int64_t c = 0; c < e.cols; ++c)
      EXPECT_NEAR(e.sums[c], expected[c], 1e-4 * expected[c] + 1e-6) << c;
  }
  // Every token went to n_expert_used experts of each MoE layer; gate, up and down saw the same
  // rows; every other matrix of a layer saw every token.
  for (int64_t l = 0; l < hp.n_layer; ++l) {
    const std::string blk = "blk." + std::to_string(l) + ".";
    const ImportanceEntry& gate = m.entries.at(blk + "ffn_gate_exps.weight");
    ASSERT_EQ(gate.matrices, hp.n_expert);
    double routed = 0;
    for (double c : gate.counts) routed += c;
    EXPECT_EQ(routed, static_cast<double>(tokens.size() * hp.n_expert_used));
    EXPECT_EQ(m.entries.at(blk + "ffn_up_exps.weight").counts, gate.counts);
    EXPECT_EQ(m.entries.at(blk + "ffn_down_exps.weight").counts, gate.counts);
    EXPECT_EQ(m.entries.at(blk + "ffn_down_exps.weight").cols, hp.n_ff_exp);
    EXPECT_EQ(m.entries.at(blk + "attn_output.weight").counts[0],
              static_cast<double>(tokens.size()));
  }

  // The file round trip; mean squares per matrix.
  const std::string out = (test::temp_dir() / "collected.imatrix.gguf").string();
  ImportanceMatrix written = m;
  written.datasets = {"text.txt"};
  written.chunks = kChunks;
  written.chunk_size = kCtx;
  written.write(out);
  const ImportanceMatrix back = ImportanceMatrix::read(out);
  EXPECT_EQ(back.datasets, written.datasets);
  EXPECT_EQ(back.chunks, kChunks);
  EXPECT_EQ(back.chunk_size, kCtx);
  ASSERT_EQ(back.entries.size(), m.entries.size());
  const ImportanceEntry& q = back.entries.at("blk.0.attn_q.weight");
  const std::vector<float> ms = back.mean_squares("blk.0.attn_q.weight", 0);
  ASSERT_EQ(ms.size(), static_cast<size_t>(q.cols));
  EXPECT_NEAR(ms[3], expected[3] / static_cast<double>(tokens.size()), 1e-4 * ms[3]);
  EXPECT_TRUE(back.mean_squares("blk.0.attn_q.weight", 1).empty());
  EXPECT_TRUE(back.mean_squares("no.such.weight", 0).empty());
  const GgufFile raw = GgufFile::open(out);
  EXPECT_EQ(raw.find_tensor("blk.0.ffn_gate_exps.weight.in_sum2")->shape,
            (std::vector<int64_t>{hp.n_embd, hp.n_expert}));
  EXPECT_EQ(raw.find_tensor("blk.0.ffn_gate_exps.weight.counts")->shape,
            (std::vector<int64_t>{1, hp.n_expert}));
  EXPECT_THROW(ImportanceMatrix::read(path), Error);  // a model, not an imatrix
}

}  // namespace
}  // namespace strata::quality
