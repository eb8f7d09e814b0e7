// `strata quantize IN.gguf OUT.gguf TYPE`: a GGUF file's matrices in another weight type or a
// GGUF tools' mix (Q4_K_M, MXFP4_MOE), the rest (norms, routers, convolution kernels) kept as
// they are, with strata's reference quantizers (quant/). Everything is checked before the first
// byte is written; progress is shown per tensor.
#include <fmt/format.h>

#include <algorithm>
#include <chrono>
#include <filesystem>
#include <map>
#include <regex>
#include <set>
#include <vector>

#include "cli/commands.h"
#include "gguf/gguf_file.h"
#include "gguf/gguf_writer.h"
#include "quality/importance.h"
#include "quant/quant.h"
#include "quant/type_mix.h"
#include "util/cpu_features.h"
#include "util/error.h"
#include "util/format_bytes.h"
#include "util/fp16.h"
#include "util/log.h"
#include "util/thread_pool.h"

namespace strata::cli {
namespace {

// What a tensor is to the mix: its role and layer, from its GGUF name.
quant::MatrixRole role_of(const std::string& name, const quant::MatrixRole& model, int64_t cols) {
  quant::MatrixRole m = model;
  m.cols = cols;
  std::string base = name.substr(0, name.rfind(".weight"));
  if (base.rfind("blk.", 0) == 0) {
    const size_t dot = base.find('.', 4);
    m.layer = std::stoll(base.substr(4, dot - 4));
    base = base.substr(dot + 1);
  }
  for (const std::string suffix : {"_exps", "_shexp"}) {
    if (base.size() > suffix.size() && base.ends_with(suffix)) {
      m.routed_expert = suffix == "_exps";
      base.resize(base.size() - suffix.size());
    }
  }
  m.role = base;
  return m;
}

// Matrices a quantizer converts; vectors, routers and the small kernels GGUF tools keep in F32
// stay as they are.
bool quantizable(const GgufTensorInfo& t) {
  if (t.shape.size() < 2 || !t.name.ends_with(".weight")) return false;
  // Whole name parts ("ssm_a" is not "ssm_alpha", which is quantized).
  for (const std::string kept :
       {"norm", "ffn_gate_inp", "ssm_conv1d", "ssm_a", "ssm_dt", "attn_sinks"})
    if (t.name.find(kept + ".") != std::string::npos || t.name.ends_with(kept)) return false;
  return true;
}

// One row of `type` to floats.
void row_to_floats(GgmlType type, const uint8_t* row, int64_t n, float* out) {
  switch (type) {
    case GgmlType::F32:
      std::copy_n(reinterpret_cast<const float*>(row), n, out);
      return;
    case GgmlType::BF16:
      for (int64_t i = 0; i < n; ++i)
        out[i] = bf16_to_f32(reinterpret_cast<const uint16_t*>(row)[i]);
      return;
    case GgmlType::F16:
      for (int64_t i = 0; i < n; ++i)
        out[i] = f16_to_f32(reinterpret_cast<const uint16_t*>(row)[i]);
      return;
    default:
      quant::traits(type).kernels.dequantize_row(row, out, n);
  }
}

// Floats to one row of `type`.
void floats_to_row(GgmlType type, const float* in, int64_t n, uint8_t* row) {
  switch (type) {
    case GgmlType::F32:
      std::copy_n(in, n, reinterpret_cast<float*>(row));
      return;
    case GgmlType::F16:
      for (int64_t i = 0; i < n; ++i) reinterpret_cast<uint16_t*>(row)[i] = f32_to_f16(in[i]);
      return;
    default:
      // The reference (scalar) quantizer: the same bytes on every CPU.
      quant::kernels_exact(type, quant::Isa::scalar).quantize_row(in, row, n);
  }
}

bool readable(GgmlType t) {
  return t == GgmlType::F32 || t == GgmlType::F16 || t == GgmlType::BF16 ||
         (quant::is_supported(t) && quant::traits(t).kernels.dequantize_row);
}

// One line of progress (or of a dry run): "[3/29] blk.0.attn_v.weight  F16 -> Q8_0  2.1 KiB".
void print_tensor_line(size_t i, size_t n, const GgufTensorInfo& t, GgmlType to, uint64_t bytes) {
  fmt::print(stderr, "[{}/{}] {:<32} {:>6} -> {:<6} {}\n", i + 1, n, t.name, ggml_type_name(t.type),
             ggml_type_name(to), format_bytes(bytes));
}

// The importance of each column of a tensor's matrices (one per expert of a stacked tensor), as
// the weighted quantizers take it; empty where there is none.
struct ColumnWeights {
  int64_t rows_per_matrix = 0;
  std::vector<std::vector<float>> matrices;  // an empty one: that expert saw no row
  const float* of_row(int64_t row) const {
    if (matrices.empty()) return nullptr;
    const auto& m = matrices[static_cast<size_t>(row / rows_per_matrix)];
    return m.empty() ? nullptr : m.data();
  }
};

// From --imatrix: each matrix's column weights (types with a weighted search), the mean squares
// plus a hundredth of their mean (a column the text never used still counts a little). Says what it
// covered.
std::vector<ColumnWeights> importance_weights(const std::string& path, const GgufFile& in,
                                              const std::vector<GgmlType>& target) {
  std::vector<ColumnWeights> out(in.tensors().size());
  if (path.empty()) return out;
  const quality::ImportanceMatrix m = quality::ImportanceMatrix::read(path);
  int weighted = 0, missing = 0;
  std::set<std::string> unweighted_types;
  for (size_t i = 0; i < in.tensors().size(); ++i) {
    const GgufTensorInfo& t = in.tensors()[i];
    if (target[i] == t.type) continue;                         // copied as it is
    if (ggml_type_info(target[i]).block_elems == 1) continue;  // F32/F16: nothing to weigh
    if (!quant::has_weighted_search(target[i])) {
      unweighted_types.insert(std::string(ggml_type_name(target[i])));
      continue;
    }
    const auto it = m.entries.find(t.name);
    if (it == m.entries.end()) {
      ++missing;
      continue;
    }
    const int64_t matrices = t.shape.size() > 2 ? t.shape[2] : 1;
    STRATA_CHECK(it->second.cols == t.row_length() && it->second.matrices == matrices,
                 "--imatrix {}: {} has {} matrices of {} columns there, {} of {} in {}", path,
                 t.name, it->second.matrices, it->second.cols, matrices, t.row_length(), in.name());
    ColumnWeights& w = out[i];
    w.rows_per_matrix = t.rows() / matrices;
    for (int64_t e = 0; e < matrices; ++e) {
      std::vector<float> ms = m.mean_squares(t.name, e);
      if (!ms.empty()) {
        double mean = 0;
        for (float v : ms) mean += v;
        mean /= static_cast<double>(ms.size());
        for (float& v : ms) v += static_cast<float>(0.01 * mean);
      }
      w.matrices.push_back(std::move(ms));
    }
    ++weighted;
  }
  log::info("--imatrix {}: {} matrices weighted ({} not in it)", path, weighted, missing);
  for (const std::string& type : unweighted_types)
    log::warn(
        "--imatrix: {} has no weighted search (nor has it in llama-quantize); those matrices "
        "are quantized without the importance matrix",
        type);
  return out;
}

struct Override {
  std::regex pattern;
  std::string text;
  GgmlType type;
};

}  // namespace

void add_quantize_command(CLI::App& app) {
  struct Options {
    std::string in, out, type;
    std::vector<std::string> overrides;
    bool allow_requantize = false;
    bool pure = false;
    bool dry_run = false;
    std::string imatrix;
    int threads = 0;
  };
  auto o = std::make_shared<Options>();
  CLI::App* cmd = app.add_subcommand(
      "quantize", "Write a GGUF file's matrices in another weight type or a mix (Q4_K_M, ...)");
  cmd->add_option("input", o->in, "GGUF file to read")->required()->check(CLI::ExistingFile);
  cmd->add_option("output", o->out, "GGUF file to write")->required();
  cmd->add_option("type", o->type, "File type: " + quant::file_type_names())->required();
  cmd->add_option("--override-tensor,--tensor-type", o->overrides,
                  "REGEX=TYPE (repeatable): matrices whose name the regex finds get TYPE (the "
                  "first that matches wins), e.g. 'ffn_down_exps=Q6_K'");
  cmd->add_flag("--pure", o->pure,
                "No mix: every matrix in the file type's own weight type (Q4_K_M: Q4_K)");
  cmd->add_option(
         "--imatrix", o->imatrix,
         "Importance matrix (`strata perplexity --save-imatrix`, or llama-imatrix's GGUF): "
         "K-quant and IQ4 matrices weigh each column's error by how much it matters on that "
         "text")
      ->check(CLI::ExistingFile);
  cmd->add_flag("--dry-run", o->dry_run,
                "List each matrix's type and the file's size; write nothing");
  cmd->add_flag("--allow-requantize", o->allow_requantize,
                "Quantize matrices that are quantized already (each round loses precision)");
  cmd->add_option("-t,--threads", o->threads, "Threads (default: every core)")
      ->check(CLI::Range(1, 4096));
  cmd->callback([o] {
    const auto started = std::chrono::steady_clock::now();
    STRATA_CHECK(
        std::filesystem::weakly_canonical(o->in) != std::filesystem::weakly_canonical(o->out),
        "the output would overwrite the input {}", o->in);
    const GgufFile in = GgufFile::open(o->in);
    const std::string arch = in.architecture();
    // What the mix needs of the model; then each V-like matrix's place among them, layer by layer.
    quant::MatrixRole model;
    model.n_layer = in.find_int(arch + ".block_count").value_or(0);
    model.n_expert = in.find_int(arch + ".expert_count").value_or(0);
    const int64_t n_head = in.find_int(arch + ".attention.head_count").value_or(1);
    model.n_gqa = n_head / std::max<int64_t>(
                               1, in.find_int(arch + ".attention.head_count_kv").value_or(n_head));
    model.tied_output = in.find_tensor("output.weight") == nullptr;
    std::vector<std::pair<int64_t, std::string>> v_like;
    for (const GgufTensorInfo& t : in.tensors()) {
      const quant::MatrixRole r = role_of(t.name, model, t.row_length());
      if (quantizable(t) && (r.role == "attn_v" || r.role == "attn_qkv"))
        v_like.emplace_back(r.layer, t.name);
    }
    std::sort(v_like.begin(), v_like.end());
    std::map<std::string, int64_t> v_index;  // each V-like matrix's place, by name
    for (size_t i = 0; i < v_like.size(); ++i) v_index[v_like[i].second] = static_cast<int64_t>(i);
    std::vector<Override> overrides;
    for (const std::string& spec : o->overrides) {
      const size_t eq = spec.rfind('=');
      STRATA_CHECK(eq != std::string::npos && eq > 0, "--override-tensor '{}': expected REGEX=TYPE",
                   spec);
      const auto t = ggml_type_from_name(spec.substr(eq + 1));
      STRATA_CHECK(t && (*t == GgmlType::F32 || *t == GgmlType::F16 || quant::is_supported(*t)),
                   "--override-tensor '{}': '{}' is not a weight type strata writes", spec,
                   spec.substr(eq + 1));
      try {
        overrides.push_back({std::regex(spec.substr(0, eq)), spec, *t});
      } catch (const std::regex_error& e) {
        fail("--override-tensor '{}': the regex does not compile ({})", spec, e.what());
      }
    }
    // Every tensor's type, checked before anything is written.
    std::vector<GgmlType> target;
    int64_t requantized = 0;
    for (const GgufTensorInfo& t : in.tensors()) {
      GgmlType to = t.type;
      if (quantizable(t)) {
        quant::MatrixRole r = role_of(t.name, model, t.row_length());
        if (const auto v = v_index.find(t.name); v != v_index.end()) {
          r.v_index = v->second;
          r.n_v = static_cast<int64_t>(v_index.size());
        }
        to = quant::matrix_type(o->type, r, o->pure);
        for (const Override& ov : overrides) {
          if (!std::regex_search(t.name, ov.pattern)) continue;
          to = ov.type;
          STRATA_CHECK(t.row_length() % ggml_type_info(to).block_elems == 0,
                       "{}: rows of {} values are no whole number of {} blocks ({} values)", t.name,
                       t.row_length(), ggml_type_name(to), ggml_type_info(to).block_elems);
          break;
        }
      }
      if (to != t.type) {
        STRATA_CHECK(readable(t.type), "{} is {}, which strata cannot read", t.name,
                     ggml_type_name(t.type));
        if (t.type != GgmlType::F32 && t.type != GgmlType::F16 && t.type != GgmlType::BF16)
          ++requantized;
      }
      target.push_back(to);
    }
    STRATA_CHECK(requantized == 0 || o->allow_requantize,
                 "{} matrices of {} are quantized already: quantizing them again loses "
                 "precision twice; start from an F16/BF16/F32 file, or give --allow-requantize",
                 requantized, o->in);

    const size_t n_tensors = in.tensors().size();
    const std::vector<ColumnWeights> weights = importance_weights(o->imatrix, in, target);
    if (o->dry_run) {
      uint64_t bytes_out = 0;
      for (size_t i = 0; i < n_tensors; ++i) {
        const GgufTensorInfo& t = in.tensors()[i];
        const uint64_t bytes = static_cast<uint64_t>(quant::row_bytes(target[i], t.row_length())) *
                               static_cast<uint64_t>(t.rows());
        bytes_out += bytes;
        print_tensor_line(i, n_tensors, t, target[i], bytes);
      }
      fmt::print(stderr, "{}: general.file_type {}, {} of tensors (dry run: nothing written)\n",
                 o->type, quant::gguf_file_type(o->type), format_bytes(bytes_out));
      return;
    }
    GgufWriter out(static_cast<uint32_t>(in.alignment()));
    for (const GgufKeyValue& kv : in.metadata()) out.set(kv.key, kv.value);
    out.set_u32("general.file_type", quant::gguf_file_type(o->type));
    out.set_string("general.quantized_by", "strata quantize");
    ThreadPool pool(o->threads > 0 ? o->threads : physical_core_count());
    uint64_t bytes_in = 0, bytes_out = 0;
    for (size_t i = 0; i < n_tensors; ++i) {
      const GgufTensorInfo& t = in.tensors()[i];
      const GgmlType to = target[i];
      bytes_in += t.bytes;
      bytes_out += static_cast<uint64_t>(quant::row_bytes(to, t.row_length())) * t.rows();
      const std::span<const uint8_t> src = t.data;
      out.add_tensor(t.name, to, t.shape, [&, i, to, src](std::span<uint8_t> dst) {
        const GgufTensorInfo& info = in.tensors()[i];
        if (to == info.type) {
          std::copy(src.begin(), src.end(), dst.begin());
        } else {
          const int64_t n = info.row_length(), rows = info.rows();
          const int64_t in_row = quant::row_bytes(info.type, n), out_row = quant::row_bytes(to, n);
          constexpr int64_t kRowsPerTask = 16;
          pool.run((rows + kRowsPerTask - 1) / kRowsPerTask, [&](int64_t task, int) {
            thread_local std::vector<float> values;
            values.resize(static_cast<size_t>(n));
            for (int64_t r = task * kRowsPerTask; r < std::min(rows, (task + 1) * kRowsPerTask);
                 ++r) {
              row_to_floats(info.type, src.data() + r * in_row, n, values.data());
              const float* w = weights[i].of_row(r);
              if (!w ||
                  !quant::quantize_row_weighted(to, values.data(), dst.data() + r * out_row, n, w))
                floats_to_row(to, values.data(), n, dst.data() + r * out_row);
            }
          });
        }
        print_tensor_line(i, n_tensors, info, to, dst.size());
      });
    }
    out.write(o->out);
    log::info("wrote {} ({}; {} from {} in {:.1f} s)", o->out, o->type, format_bytes(bytes_out),
              format_bytes(bytes_in),
              std::chrono::duration<double>(std::chrono::steady_clock::now() - started).count());
  });
}

}  // namespace strata::cli
