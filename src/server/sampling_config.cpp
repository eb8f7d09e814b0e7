#include "server/sampling_config.h"

#include <algorithm>
#include <cctype>

namespace strata::server {
namespace {

std::string lower(std::string s) {
  std::transform(s.begin(), s.end(), s.begin(),
                 [](unsigned char c) { return static_cast<char>(std::tolower(c)); });
  return s;
}

// Values from the model cards (generation_config.json) of families users run with strata.
struct Family {
  const char* name;
  bool (*matches)(const std::string& arch, const std::string& name);
  SamplingParams params;
};

bool contains(const std::string& s, const char* part) {
  return s.find(part) != std::string::npos;
}

const Family kFamilies[] = {
    {"Qwen3-Coder model card",
     [](const std::string&, const std::string& n) {
       return contains(n, "qwen3") && contains(n, "coder");
     },
     {.temperature = 0.7f, .top_k = 20, .top_p = 0.8f, .min_p = 0.0f, .repetition_penalty = 1.05f}},
    {"Qwen3 Instruct-2507 model card",
     [](const std::string&, const std::string& n) {
       return contains(n, "qwen3") && contains(n, "instruct");
     },
     {.temperature = 0.7f, .top_k = 20, .top_p = 0.8f, .min_p = 0.0f}},
    {"Qwen3 / Qwen3.5 thinking model card",
     [](const std::string& a, const std::string& n) {
       return contains(n, "qwen3") || a == "qwen3" || a == "qwen3moe" || a == "qwen35moe" ||
              a == "qwen3next";
     },
     {.temperature = 0.6f, .top_k = 20, .top_p = 0.95f, .min_p = 0.0f}},
    {"Llama 3 generation config",
     [](const std::string& a, const std::string& n) {
       return a == "llama" && contains(n, "llama-3");
     },
     {.temperature = 0.6f, .top_p = 0.9f}},
};

}  // namespace

void SamplingOverrides::apply_to(SamplingParams& p) const {
  if (temperature) p.temperature = *temperature;
  if (top_k) p.top_k = *top_k;
  if (top_p) p.top_p = *top_p;
  if (min_p) p.min_p = *min_p;
  if (seed) p.seed = *seed;
  if (repetition_penalty) p.repetition_penalty = *repetition_penalty;
  if (penalty_last_n) p.penalty_last_n = *penalty_last_n;
  if (presence_penalty) p.presence_penalty = *presence_penalty;
  if (frequency_penalty) p.frequency_penalty = *frequency_penalty;
}

ModelSamplingDefaults model_sampling_defaults(const GgufFile& file) {
  // The GGUF keys llama.cpp's converter writes from generation_config.json.
  SamplingOverrides from_file;
  // Any numeric type is accepted (converters differ); other types are ignored.
  auto as_float = [&](const char* key) -> std::optional<float> {
    const GgufValue* v = file.find(key);
    const auto d = v && v->is_number() ? v->as_double() : std::nullopt;
    return d ? std::optional<float>(static_cast<float>(*d)) : std::nullopt;
  };
  auto as_int = [&](const char* key) -> std::optional<int32_t> {
    const GgufValue* v = file.find(key);
    const auto d = v && v->is_number() ? v->as_double() : std::nullopt;
    return d ? std::optional<int32_t>(static_cast<int32_t>(*d)) : std::nullopt;
  };
  from_file.temperature = as_float("general.sampling.temp");
  from_file.top_k = as_int("general.sampling.top_k");
  from_file.top_p = as_float("general.sampling.top_p");
  from_file.min_p = as_float("general.sampling.min_p");
  from_file.repetition_penalty = as_float("general.sampling.penalty_repeat");
  from_file.penalty_last_n = as_int("general.sampling.penalty_last_n");
  const bool file_has_any = from_file.temperature || from_file.top_k || from_file.top_p ||
                            from_file.min_p || from_file.repetition_penalty;

  const std::string arch = file.find_string("general.architecture").value_or("");
  const std::string name = lower(file.find_string("general.name").value_or("") + " " +
                                 file.find_string("general.basename").value_or("") + " " +
                                 file.find_string("general.finetune").value_or(""));
  ModelSamplingDefaults d;
  // llama.cpp's generic defaults when nothing is known about the model.
  d.params = {.temperature = 0.8f, .top_k = 40, .top_p = 0.95f, .min_p = 0.05f};
  d.source = "generic defaults";
  for (const Family& f : kFamilies) {
    if (f.matches(arch, name)) {
      d.params = f.params;
      d.source = f.name;
      break;
    }
  }
  if (file_has_any) {
    from_file.apply_to(d.params);  // the file's own values win over the family table
    d.source = "GGUF general.sampling.*" +
               (d.source == "generic defaults" ? std::string() : " over " + d.source);
  }
  return d;
}

}  // namespace strata::server
