// Writes a GGUF file with our writer, and beside it (as JSON) what our reader sees in it, so an
// independent GGUF implementation can be checked against both (see
// check_with_huggingface_gguf.mjs).
//
//   write_sample_gguf OUT.gguf OUT.json

#include <fmt/format.h>

#include <cstdio>
#include <nlohmann/json.hpp>

#include "gguf/gguf_file.h"
#include "gguf/gguf_writer.h"

namespace {

nlohmann::json to_json(const strata::GgufValue& v) {
  if (const auto* s = v.as_string()) return *s;
  if (const auto* a = v.as_array()) {
    nlohmann::json items = nlohmann::json::array();
    for (const auto& item : a->items) items.push_back(to_json(item));
    return items;
  }
  if (auto b = v.as_bool()) return *b;
  if (v.type() == strata::GgufValueType::f32 || v.type() == strata::GgufValueType::f64)
    return *v.as_double();
  return std::to_string(*v.as_int());  // as a string: 64-bit values exceed JS numbers
}

}  // namespace

int main(int argc, char** argv) {
  using namespace strata;
  if (argc != 3) {
    std::fprintf(stderr, "usage: %s OUT.gguf OUT.json\n", argv[0]);
    return 2;
  }
  GgufWriter w(64);
  w.set_string("general.architecture", "qwen3moe");
  w.set_string("general.name", "interop sample ✓");
  w.set("qwen3moe.block_count", GgufValue(uint32_t{48}));
  w.set("qwen3moe.rope.freq_base", GgufValue(1e6f));
  w.set("u8", GgufValue(uint8_t{7}));
  w.set("i16", GgufValue(int16_t{-12}));
  w.set("i64", GgufValue(int64_t{-1234567890123}));
  w.set("f64", GgufValue(0.125));
  w.set("flag", GgufValue(false));
  w.set("tokenizer.ggml.tokens", GgufValue::string_array({"<|im_start|>", "Ġthe", "\xe4\xbd\xa0"}));
  w.set("tokenizer.ggml.token_type",
        GgufValue::array(GgufValueType::i32,
                         {GgufValue(int32_t{3}), GgufValue(int32_t{1}), GgufValue(int32_t{1})}));
  w.set("sections",
        GgufValue::array(GgufValueType::array,
                         {GgufValue::array(GgufValueType::u32, {GgufValue(uint32_t{4})}),
                          GgufValue::array(GgufValueType::u32, {})}));
  w.add_tensor("token_embd.weight", GgmlType::Q4_K, {256, 3}, std::vector<uint8_t>(144 * 3, 1));
  w.add_tensor("blk.0.ffn_up_exps.weight", GgmlType::Q8_0, {64, 2, 4},
               std::vector<uint8_t>(34 * 2 * 8, 2));
  w.add_tensor("output_norm.weight", GgmlType::F32, {5}, std::vector<uint8_t>(20, 3));
  w.add_tensor("blk.0.attn_q.weight", GgmlType::IQ4_XS, {256, 1}, std::vector<uint8_t>(136, 4));
  w.write(argv[1]);

  const GgufFile f = GgufFile::open(argv[1]);
  nlohmann::json out;
  out["version"] = f.version();
  out["metadata"] = nlohmann::json::object();
  for (const auto& kv : f.metadata()) out["metadata"][kv.key] = to_json(kv.value);
  out["tensors"] = nlohmann::json::array();
  for (const auto& t : f.tensors()) {
    nlohmann::json shape = nlohmann::json::array();
    for (int64_t d : t.shape) shape.push_back(std::to_string(d));
    out["tensors"].push_back({{"name", t.name},
                              {"type", static_cast<uint32_t>(t.type)},
                              {"shape", shape},
                              {"offset", std::to_string(t.offset)}});
  }
  FILE* json = std::fopen(argv[2], "w");
  if (!json) return 1;
  std::fputs(out.dump(2).c_str(), json);
  std::fclose(json);
  return 0;
}
