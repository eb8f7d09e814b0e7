#pragma once
// nlohmann::json's exception texts in plain words for users:
//   "[json.exception.parse_error.101] parse error at line 1, column 2: syntax error while parsing
//    value - invalid literal; last read: 'no'"
// becomes "line 1, column 2: invalid literal; last read: 'no'". String work only, so any layer
// may use it without the JSON library.

#include <string>
#include <string_view>

namespace strata {

inline std::string plain_json_error(std::string_view what) {
  std::string s(what);
  if (s.rfind("[json.exception.", 0) == 0) {
    const size_t close = s.find("] ");
    if (close != std::string::npos) s.erase(0, close + 2);
  }
  for (std::string_view noise :
       {"parse error at ", "syntax error while parsing value - ",
        "syntax error while parsing object - ", "syntax error while parsing array - "}) {
    for (size_t at = s.find(noise); at != std::string::npos; at = s.find(noise))
      s.erase(at, noise.size());
  }
  return s;
}

}  // namespace strata
