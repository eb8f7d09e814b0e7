#include "plan/gpu_catalog.h"

#include <algorithm>
#include <cctype>

namespace strata::plan {
namespace {

// Vendor specifications (memory size and bandwidth of the reference boards).
constexpr CatalogGpu kGpus[] = {
    {"GTX 1060", 6, 192},        {"GTX 1070", 8, 256},        {"GTX 1070 Ti", 8, 256},
    {"GTX 1080", 8, 320},        {"GTX 1080 Ti", 11, 484},    {"GTX 1660", 6, 192},
    {"GTX 1660 Super", 6, 336},  {"GTX 1660 Ti", 6, 288},     {"RTX 2060", 6, 336},
    {"RTX 2060 Super", 8, 448},  {"RTX 2070", 8, 448},        {"RTX 2070 Super", 8, 448},
    {"RTX 2080", 8, 448},        {"RTX 2080 Super", 8, 496},  {"RTX 2080 Ti", 11, 616},
    {"RTX 3050", 8, 224},        {"RTX 3060", 12, 360},       {"RTX 3060 Ti", 8, 448},
    {"RTX 3070", 8, 448},        {"RTX 3070 Ti", 8, 608},     {"RTX 3080", 10, 760},
    {"RTX 3080 Ti", 12, 912},    {"RTX 3090", 24, 936},       {"RTX 3090 Ti", 24, 1008},
    {"RTX 4060", 8, 272},        {"RTX 4060 Ti", 8, 288},     {"RTX 4070", 12, 504},
    {"RTX 4070 Super", 12, 504}, {"RTX 4070 Ti", 12, 504},    {"RTX 4070 Ti Super", 16, 672},
    {"RTX 4080", 16, 717},       {"RTX 4080 Super", 16, 736}, {"RTX 4090", 24, 1008},
    {"RTX 5060 Ti", 16, 448},    {"RTX 5070", 12, 672},       {"RTX 5070 Ti", 16, 896},
    {"RTX 5080", 16, 960},       {"RTX 5090", 32, 1792},      {"RX 6600", 8, 224},
    {"RX 6600 XT", 8, 256},      {"RX 6700 XT", 12, 384},     {"RX 6800", 16, 512},
    {"RX 6800 XT", 16, 512},     {"RX 6900 XT", 16, 512},     {"RX 7600", 8, 288},
    {"RX 7700 XT", 12, 432},     {"RX 7800 XT", 16, 624},     {"RX 7900 XT", 20, 800},
    {"RX 7900 XTX", 24, 960},    {"Arc A750", 8, 512},        {"Arc A770", 16, 560},
    {"Arc B580", 12, 456},       {"Tesla P40", 24, 347},      {"Tesla T4", 16, 320},
};

// Lower case, without spaces, dashes and vendor words: "GeForce RTX 4060-Ti" -> "rtx4060ti".
std::string key_of(std::string_view name) {
  std::string out;
  for (char c : name) {
    if (std::isalnum(static_cast<unsigned char>(c)))
      out += static_cast<char>(std::tolower(static_cast<unsigned char>(c)));
  }
  for (std::string_view vendor : {"nvidia", "geforce", "amd", "radeon", "intel"}) {
    if (out.rfind(vendor, 0) == 0) out.erase(0, vendor.size());
  }
  return out;
}

}  // namespace

std::optional<CatalogGpu> find_catalog_gpu(std::string_view name) {
  const std::string key = key_of(name);
  for (const CatalogGpu& g : kGpus) {
    if (key_of(g.name) == key) return g;
  }
  return std::nullopt;
}

std::vector<std::string_view> catalog_gpu_names() {
  std::vector<std::string_view> out;
  for (const CatalogGpu& g : kGpus) out.push_back(g.name);
  return out;
}

}  // namespace strata::plan
