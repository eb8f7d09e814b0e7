#pragma once
// SPIR-V of every compute shader in shaders/, compiled by glslc at build time and embedded
// (the generated embedded_kernels.cpp): no shader files are read at run time.

#include <cstddef>
#include <cstdint>
#include <span>

namespace strata::vk {

struct SpirvBlob {
  const char* name;            // the shader's file stem, plus "_<variant>" for per-type builds
  const unsigned char* bytes;  // 4-byte aligned
  size_t size;
};

std::span<const SpirvBlob> embedded_kernels();

}  // namespace strata::vk
