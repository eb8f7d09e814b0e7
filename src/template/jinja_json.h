#pragma once
// JSON in and out of the Jinja interpreter: request data (nlohmann::ordered_json, key order kept)
// becomes Values, and `tojson` writes Values exactly as Python's json.dumps does.

#include <nlohmann/json.hpp>

#include <optional>
#include <string>

#include "template/jinja_value.h"

namespace strata::jinja {

// Converts request data; throws strata::Error when it nests deeper than the interpreter allows.
Value from_json(const nlohmann::ordered_json& json);

// json.dumps(value, ensure_ascii=..., indent=..., separators=..., sort_keys=...).
struct JsonDumpOptions {
  bool ensure_ascii = false;
  std::optional<std::string> indent;          // nullopt: one line
  std::optional<std::string> item_separator;  // default ", " (or "," with an indent)
  std::string key_separator = ": ";
  bool sort_keys = false;
};
std::string json_dumps(const Value& value, const JsonDumpOptions& options);

}  // namespace strata::jinja
