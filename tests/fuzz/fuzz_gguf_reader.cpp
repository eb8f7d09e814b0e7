// libFuzzer target: any byte string either parses as GGUF or raises strata::Error. Everything a
// caller can reach after a successful parse (metadata rendering, tensor views) is exercised too.

#include <cstddef>
#include <cstdint>
#include <span>

#include "gguf/gguf_file.h"
#include "util/error.h"

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  try {
    const strata::GgufFile file = strata::GgufFile::parse("fuzz.gguf", std::span(data, size));
    size_t sink = file.architecture().size();
    for (const auto& kv : file.metadata()) sink += kv.value.to_display_string().size();
    for (const auto& t : file.tensors()) {
      sink += t.shape_string().size() + static_cast<size_t>(t.rows());
      if (!t.data.empty()) sink += t.data.front() + t.data.back();  // views stay in bounds
    }
    if (sink == 0xdeadbeef) return 1;  // keep the work observable
  } catch (const strata::Error&) {
    // Rejected with a message: the expected outcome for malformed input.
  }
  return 0;
}
