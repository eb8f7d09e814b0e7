// libFuzzer target: any bytes as a JSON schema through the grammar compiler, then a walk through
// its grammar steered by the rest of the input over a small byte-level vocabulary. A schema is
// either compiled or refused with strata::Error (no other exception, crash or sanitizer report);
// every step of the walk has an allowed token or may end (no dead end); every token the mask
// allows is accepted; and a finished output parses as JSON.
//   input: SCHEMA-JSON \0 STEERING-BYTES

#include <cstdint>
#include <cstdlib>
#include <memory>
#include <nlohmann/json.hpp>
#include <string>
#include <vector>

#include "grammar/json_schema.h"
#include "grammar/token_mask.h"
#include "util/error.h"

namespace {

std::vector<std::string> vocabulary() {
  std::vector<std::string> v;
  for (int b = 1; b < 256; ++b) v.push_back(std::string(1, static_cast<char>(b)));
  for (const char* t :
       {"\", \"", "\": ", "true", "false", "null", "{\"", "\"}", "[]", "{}", "0.", "e+", "\\u00e9",
        "\\n", "\xc3\xa9", "\xe2\x82\xac", "\xf0\x9f\x98\x80", "  ", "\n  "})
    v.push_back(t);
  return v;
}

const std::shared_ptr<const strata::grammar::TokenTrie> trie =
    std::make_shared<const strata::grammar::TokenTrie>(vocabulary());

}  // namespace

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  if (size > 2048) return 0;
  const std::string input(reinterpret_cast<const char*>(data), size);
  const size_t split = input.find('\0');
  const std::string schema_text = input.substr(0, split);
  const std::string steering = split == std::string::npos ? "" : input.substr(split + 1);
  bool too_deep = false;
  const auto schema = nlohmann::ordered_json::parse(
      schema_text,
      [&](int depth, nlohmann::ordered_json::parse_event_t, nlohmann::ordered_json&) {
        too_deep = too_deep || depth > 32;
        return !too_deep;
      },
      /*allow_exceptions=*/false);
  if (too_deep || schema.is_discarded()) return 0;

  strata::grammar::CompiledJsonSchema compiled;
  try {
    compiled = strata::grammar::grammar_for_json_schema(schema);
  } catch (const strata::Error&) {
    return 0;  // refused with a message: fine
  }
  strata::grammar::TokenConstraint constraint(compiled.grammar, trie, 16);
  std::string output;
  std::vector<uint8_t> allowed;
  for (size_t step = 0; step < 512; ++step) {
    constraint.allowed_tokens(allowed);
    std::vector<int32_t> ids;
    for (size_t i = 0; i < allowed.size(); ++i) {
      if (allowed[i]) ids.push_back(static_cast<int32_t>(i));
    }
    if (ids.empty() && !constraint.can_end()) std::abort();  // a dead end
    const uint8_t choice = step < steering.size() ? static_cast<uint8_t>(steering[step]) : 0;
    if (ids.empty() || (constraint.can_end() && (choice == 0 || step >= steering.size()))) {
      const auto parsed = nlohmann::json::parse(output, nullptr, false);
      if (parsed.is_discarded()) std::abort();  // a finished output that is not JSON
      return 0;
    }
    const int32_t id = ids[choice % ids.size()];
    if (!constraint.accept_token(id)) std::abort();  // the mask allowed what the matcher refuses
    output += trie->token(id);
  }
  return 0;
}
