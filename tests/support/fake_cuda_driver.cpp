// A stand-in for the CUDA driver (libcuda.so.1) with two made-up devices, so the planner's GPU
// probe (src/plan/hardware.cpp) runs end to end on machines without a GPU. The entry points and
// their meaning follow the CUDA driver API reference (cuda.h); the values are invented:
//   device 0: "Fake GeForce RTX 2070 SUPER", 8 GiB (7.5 GiB free), memory clock 7001 MHz on a
//             256-bit bus (2 x 7.001e9 x 32 B = 448.064 GB/s), PCI bus 0000:ff:1f.7 (no sysfs);
//   device 1: "Fake GPU without clocks", 4 GiB, whose clock and bus width queries fail.
// Loaded only through LD_LIBRARY_PATH by the CLI test that asks for it.

#include <cstddef>
#include <cstring>

namespace {

constexpr int kSuccess = 0, kInvalidValue = 1, kNotInitialized = 3, kInvalidDevice = 101;
constexpr int kAttrMemoryClockRate = 36, kAttrGlobalMemoryBusWidth = 37;
constexpr size_t kGiB = size_t{1} << 30;
bool initialized = false;
int current_device = -1;

bool valid(int dev) {
  return dev == 0 || dev == 1;
}

}  // namespace

extern "C" {

int cuInit(unsigned flags) {
  if (flags != 0) return kInvalidValue;
  initialized = true;
  return kSuccess;
}

int cuDeviceGetCount(int* count) {
  if (!initialized) return kNotInitialized;
  *count = 2;
  return kSuccess;
}

int cuDeviceGet(int* device, int ordinal) {
  if (!initialized) return kNotInitialized;
  if (!valid(ordinal)) return kInvalidDevice;
  *device = ordinal;
  return kSuccess;
}

int cuDeviceGetName(char* name, int len, int dev) {
  if (!valid(dev) || len <= 0) return kInvalidValue;
  const char* n = dev == 0 ? "Fake GeForce RTX 2070 SUPER" : "Fake GPU without clocks";
  std::strncpy(name, n, static_cast<size_t>(len) - 1);
  name[len - 1] = '\0';
  return kSuccess;
}

int cuDeviceTotalMem_v2(size_t* bytes, int dev) {
  if (!valid(dev)) return kInvalidDevice;
  *bytes = dev == 0 ? 8 * kGiB : 4 * kGiB;
  return kSuccess;
}

int cuDeviceGetAttribute(int* value, int attribute, int dev) {
  if (dev != 0) return kInvalidValue;
  if (attribute == kAttrMemoryClockRate) {
    *value = 7001000;  // kHz
    return kSuccess;
  }
  if (attribute == kAttrGlobalMemoryBusWidth) {
    *value = 256;  // bits
    return kSuccess;
  }
  return kInvalidValue;
}

int cuDeviceGetPCIBusId(char* bus_id, int len, int dev) {
  if (!valid(dev) || len < 13) return kInvalidValue;
  std::strcpy(bus_id, "0000:ff:1f.7");
  return kSuccess;
}

int cuCtxCreate_v2(void** ctx, unsigned /*flags*/, int dev) {
  if (!valid(dev)) return kInvalidDevice;
  current_device = dev;
  *ctx = &current_device;
  return kSuccess;
}

int cuCtxDestroy_v2(void* ctx) {
  if (ctx != &current_device) return kInvalidValue;
  current_device = -1;
  return kSuccess;
}

int cuMemGetInfo_v2(size_t* free_bytes, size_t* total_bytes) {
  if (current_device != 0) return kInvalidValue;  // needs a current context
  *total_bytes = 8 * kGiB;
  *free_bytes = 8 * kGiB - kGiB / 2;
  return kSuccess;
}

}  // extern "C"
