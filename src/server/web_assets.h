#pragma once
// The web page `strata serve` answers at / (src/server/web/, embedded at build time by
// cmake/embed_web.cmake): nothing is fetched from elsewhere, so it works offline.

#include <cstddef>
#include <span>
#include <string_view>

namespace strata::server {

struct WebAsset {
  const char* url;           // "/", "/app.js", ...
  const char* content_type;  // with its charset
  const unsigned char* data;
  size_t size;
  std::string_view text() const { return {reinterpret_cast<const char*>(data), size}; }
};

std::span<const WebAsset> web_assets();

}  // namespace strata::server
