#include "cli/llama_flags.h"

#include <fmt/format.h>

#include <algorithm>
#include <optional>
#include <regex>
#include <string_view>

#include "util/error.h"

namespace strata::cli {
namespace {

// Whether a flag takes a value: always, never, or an optional switch value (llama.cpp's
// `-fa` was a bare flag before it took on|off|auto).
enum class Arity { none, one, optional_switch };

// One llama.cpp flag in some sub-commands: renamed to strata's `to`, or dropped ("" to) with
// `note` said to the user.
struct Rule {
  std::vector<std::string_view> names;  // llama.cpp's spellings
  Arity arity = Arity::one;
  std::vector<std::string_view> commands;  // where the rule holds; empty: every model command
  std::string_view to;                     // strata's flag; empty: no meaning here
  std::string_view note;
};

constexpr std::string_view kModelCommands[] = {"run",  "bench",   "serve",
                                               "plan", "profile", "logits"};
const std::vector<std::string_view> kNotServe = {"run", "bench", "plan", "profile", "logits"};
const std::vector<std::string_view> kNotPlan = {"run", "bench", "serve", "profile", "logits"};
const std::vector<std::string_view> kNoSampling = {"bench", "plan", "profile", "logits"};

// The table. Flags strata spells the same way (-m, -t, --temp, --host, ...) are not here.
const std::vector<Rule>& rules() {
  static const std::vector<Rule> table = {
      // Renamed: the same meaning under strata's name.
      {{"-c", "--ctx-size"}, Arity::one, {}, "--ctx", ""},
      {{"-t", "--threads"}, Arity::one, {}, "--threads", ""},
      {{"-ngl", "--n-gpu-layers"}, Arity::one, {}, "--gpu-layers", ""},
      {{"-ncmoe", "--n-cpu-moe"}, Arity::one, {}, "--n-cpu-moe", ""},
      {{"-cmoe", "--cpu-moe"}, Arity::none, {}, "--cpu-moe", ""},
      {{"-ot", "--override-tensor"}, Arity::one, {}, "--ot", ""},
      {{"-ctk", "--cache-type-k"}, Arity::one, {}, "--kv-type", ""},
      {{"-b", "--batch-size"}, Arity::one, {"serve", "bench"}, "--batch", ""},
      {{"-np", "--parallel"}, Arity::one, {"serve"}, "--parallel", ""},
      {{"-n", "--n-predict"}, Arity::one, {"serve"}, "--max-tokens", ""},
      {{"-a", "--alias"}, Arity::one, {"serve"}, "--alias", ""},
      {{"-s", "--seed"}, Arity::one, {"run"}, "--seed", ""},
      {{"-cnv", "--conversation"}, Arity::none, {"run"}, "--chat", ""},
      {{"-sys", "--system-prompt"}, Arity::one, {"run"}, "--system", ""},
      {{"-dev", "--device"}, Arity::one, {}, "--device", ""},
      {{"-md", "--model-draft"}, Arity::one, {"run", "serve"}, "--draft-model", ""},
      {{"--no-mmap"}, Arity::none, kNotPlan, "--load", ""},
      {{"--no-mmap"},
       Arity::none,
       {"plan"},
       "",
       "the plan does not depend on how the file is read"},
      // Accepted, with no meaning here.
      {{"-fa", "--flash-attn"},
       Arity::optional_switch,
       {},
       "",
       "strata's attention always reads the KV cache in blocks (flash attention): nothing to "
       "switch"},
      {{"-ub", "--ubatch-size"}, Arity::one, {}, "", "strata has one batch size (-b on serve)"},
      {{"-b", "--batch-size"},
       Arity::one,
       {"run", "plan", "profile", "logits"},
       "",
       "only serve and bench take a batch size"},
      {{"-np", "--parallel"}, Arity::one, kNotServe, "", "only serve runs parallel sequences"},
      {{"-tb", "--threads-batch"}, Arity::one, {}, "", "strata uses -t threads for prompts too"},
      {{"--jinja"},
       Arity::none,
       {},
       "",
       "strata always applies the model's chat template with its own Jinja renderer"},
      {{"-cb", "--cont-batching"}, Arity::none, {}, "", "serve always batches continuously"},
      {{"--mlock"}, Arity::none, {}, "", "use --load ram to read the whole file into memory"},
      {{"--no-warmup"}, Arity::none, {}, "", "strata does not run a warm-up step"},
      {{"--metrics"}, Arity::none, {}, "", "serve always answers /metrics"},
      {{"--fit"},
       Arity::optional_switch,
       {},
       "",
       "strata always plans what fits the GPU's free memory (cap it with --vram-budget)"},
      {{"-sm", "--split-mode"},
       Arity::one,
       {},
       "",
       "strata splits by layers across GPUs (--device vk0,vk1)"},
      {{"-ts", "--tensor-split"},
       Arity::one,
       {},
       "",
       "the planner sizes each GPU's layers from its memory"},
      {{"-mg", "--main-gpu"}, Arity::one, {}, "", "the first GPU of --device holds the embeddings"},
      {{"--numa"}, Arity::one, {}, "", "strata pins no NUMA policy"},
      {{"--log-disable"}, Arity::none, {}, "", "set STRATA_LOG=error to quieten the log"},
      {{"--no-context-shift"},
       Arity::none,
       {},
       "",
       "strata never shifts the context: a request past it is refused"},
      {{"--swa-full"}, Arity::none, {}, "", "sliding-window layers keep what their window needs"},
      {{"--spec-draft-n-max", "--spec-draft-n-min", "--draft-max", "--draft-min", "--draft-p-min"},
       Arity::one,
       {},
       "",
       "strata's cost model picks each step's draft length from what checking costs here"},
      {{"-no-cnv", "--no-conversation"},
       Arity::none,
       {"run"},
       "",
       "strata run generates from the prompt"},
      {{"-s", "--seed"}, Arity::one, {"serve"}, "", "each request gives its own seed"},
      {{"-n", "--n-predict"},
       Arity::one,
       {"plan"},
       "",
       "the plan prices the whole context (--ctx)"},
      {{"-s", "--seed"}, Arity::one, kNoSampling, "", "sampling does not change this command"},
      {{"--temp", "--top-k", "--top-p", "--min-p", "--repeat-penalty", "--repeat-last-n",
        "--presence-penalty", "--frequency-penalty"},
       Arity::one,
       kNoSampling,
       "",
       "sampling does not change this command"},
      {{"--host", "--port", "--api-key", "-a", "--alias"},
       Arity::one,
       kNotServe,
       "",
       "only serve listens"},
  };
  return table;
}

bool applies(const Rule& r, std::string_view command) {
  return r.commands.empty() ||
         std::find(r.commands.begin(), r.commands.end(), command) != r.commands.end();
}

const Rule* find_rule(std::string_view name, std::string_view command) {
  for (const Rule& r : rules()) {
    if (applies(r, command) && std::find(r.names.begin(), r.names.end(), name) != r.names.end())
      return &r;
  }
  return nullptr;
}

bool is_switch_value(std::string_view v) {
  return v == "on" || v == "off" || v == "auto" || v == "1" || v == "0" || v == "true" ||
         v == "false";
}

// llama.cpp's device names (Vulkan0, CUDA1, ...) as strata's (vk0, vk1); strata's own pass.
std::string device_value(const std::string& value, std::vector<std::string>& notes) {
  static const std::regex llama_device(R"((Vulkan|CUDA|ROCm|SYCL|Metal)(\d+))");
  std::string out;
  bool renamed = false;
  size_t start = 0;
  while (start <= value.size()) {
    const size_t comma = std::min(value.find(',', start), value.size());
    const std::string item = value.substr(start, comma - start);
    std::smatch m;
    if (std::regex_match(item, m, llama_device)) {
      out += (out.empty() ? "" : ",") + ("vk" + m[2].str());
      renamed = true;
    } else {
      out += (out.empty() ? "" : ",") + item;
    }
    start = comma + 1;
  }
  if (renamed) {
    notes.push_back(
        fmt::format("--device {}: strata runs GPUs through Vulkan, as {} (see "
                    "`strata devices`)",
                    value, out));
  }
  return out;
}

class Rewriter {
 public:
  Rewriter(std::string_view command, bool device_given)
      : command_(command), device_given_(device_given) {
    out_.args.emplace_back(command);
  }

  void run(std::span<const std::string> args) {
    for (size_t i = 0; i < args.size(); ++i) {
      std::string name = args[i];
      std::optional<std::string> inline_value;
      if (const size_t eq = name.find('='); name.rfind("--", 0) == 0 && eq != std::string::npos) {
        inline_value = name.substr(eq + 1);
        name.resize(eq);
      }
      if (name == "--kv-type") {  // strata's own spelling: -ctv is checked against it too
        if (inline_value) k_type_ = inline_value;
        if (!inline_value && i + 1 < args.size()) k_type_ = args[i + 1];
      }
      if (name == "-ctv" || name == "--cache-type-v") {  // checked against -ctk in finish()
        STRATA_CHECK(inline_value || i + 1 < args.size(), "{} needs a value", name);
        v_type_ = inline_value ? *inline_value : args[++i];
        continue;
      }
      const Rule* rule = name.size() > 1 && name[0] == '-' ? find_rule(name, command_) : nullptr;
      if (!rule) {
        out_.args.push_back(args[i]);
        continue;
      }
      std::optional<std::string> value = inline_value;
      if (!value && rule->arity == Arity::one && i + 1 < args.size()) value = args[++i];
      if (!value && rule->arity == Arity::optional_switch && i + 1 < args.size() &&
          is_switch_value(args[i + 1]))
        value = args[++i];
      STRATA_CHECK(value || rule->arity != Arity::one, "{} needs a value", name);
      apply(*rule, name, value);
    }
  }

  RewrittenArgs finish() {
    if (v_type_) {
      // Alone, -ctv sets the one KV type; with -ctk (or --kv-type) the two must agree.
      STRATA_CHECK(!k_type_ || *v_type_ == *k_type_,
                   "-ctv {} with keys in {}: strata keeps keys and values in one type; give -ctk "
                   "and -ctv the same type",
                   *v_type_, k_type_.value_or(""));
      if (!k_type_) out_.args.insert(out_.args.end(), {"--kv-type", *v_type_});
      out_.notes.push_back(fmt::format("-ctv {}: keys and values share --kv-type", *v_type_));
    }
    return std::move(out_);
  }

 private:
  void apply(const Rule& r, const std::string& name, const std::optional<std::string>& value) {
    const std::string shown = value ? name + " " + *value : name;
    if (r.to.empty()) {
      out_.notes.push_back(fmt::format("{}: accepted for llama.cpp's sake; {}", shown, r.note));
      return;
    }
    if (r.to == "--kv-type") k_type_ = value;
    if (r.to == "--load") {
      out_.args.insert(out_.args.end(), {"--load", "ram"});
      return;
    }
    out_.args.emplace_back(r.to);
    if (!value) return;
    if (r.to == "--device") {
      out_.args.push_back(device_value(*value, out_.notes));
    } else if (r.to == "--gpu-layers" && *value == "0" && !device_given_) {
      out_.args.back() = "--device";  // llama.cpp's "no layer on the GPU"
      out_.args.emplace_back("none");
      out_.notes.emplace_back("-ngl 0: every layer on the CPU (--device none)");
    } else if (r.to == "--threads" && *value == "-1") {
      out_.args.emplace_back("0");  // llama.cpp's "choose for me"
      out_.notes.emplace_back("-t -1: strata's default, one thread per physical core");
    } else {
      out_.args.push_back(*value);
    }
  }

  std::string_view command_;
  bool device_given_;  // --device on the line: -ngl 0 keeps its own meaning there
  RewrittenArgs out_;
  std::optional<std::string> k_type_, v_type_;
};

}  // namespace

RewrittenArgs rewrite_llama_flags(std::span<const std::string> args) {
  if (args.empty() || std::find(std::begin(kModelCommands), std::end(kModelCommands), args[0]) ==
                          std::end(kModelCommands))
    return {std::vector<std::string>(args.begin(), args.end()), {}};
  const bool device_given = std::any_of(args.begin(), args.end(), [](const std::string& a) {
    return a == "--device" || a == "-dev" || a.rfind("--device=", 0) == 0;
  });
  Rewriter rewriter(args[0], device_given);
  rewriter.run(args.subspan(1));
  return rewriter.finish();
}

}  // namespace strata::cli
