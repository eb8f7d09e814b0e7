// A stand-in for NVIDIA's libnvidia-ml.so.1 in tests (STRATA_NVML_LIBRARY points at it): its
// answers come from the file FAKE_NVML_STATE names, read at every call so a test can change them
// while a server runs. Lines "key=value":
//   init=fail            nvmlInit_v2 fails
//   gpus=N               devices (default 1)
//   temperature=C|fail   every device's temperature (default 40)
//   power_mw=N           power draw in milliwatts (default 50000)
//   process=PID:NAME:BYTES   a process holding memory on device 0 (repeatable)
// Anything absent takes its default; a missing file means the defaults.
#include <cstdio>
#include <cstdlib>
#include <cstring>

extern "C" {

typedef struct {
  unsigned long long total, free, used;
} Memory;
typedef struct {
  unsigned int pid;
  unsigned long long used;
  unsigned int gpu_instance, compute_instance;
} ProcessInfo;

enum {
  kSuccess = 0,
  kUninitialized = 1,
  kInvalidArgument = 2,
  kNotSupported = 3,
  kInsufficientSize = 7,
  kUnknown = 999
};

/* The value of `key` in the state file into `value` (size n); 0 when absent. With several lines
   of the key, the `which`-th. */
static int state(const char* key, int which, char* value, size_t n) {
  const char* path = getenv("FAKE_NVML_STATE");
  if (!path) return 0;
  FILE* f = fopen(path, "r");
  if (!f) return 0;
  char line[512];
  int found = 0, seen = 0;
  const size_t k = strlen(key);
  while (fgets(line, sizeof line, f)) {
    line[strcspn(line, "\r\n")] = 0;
    if (strncmp(line, key, k) == 0 && line[k] == '=' && seen++ == which) {
      snprintf(value, n, "%s", line + k + 1);
      found = 1;
      break;
    }
  }
  fclose(f);
  return found;
}

static long number(const char* key, long fallback) {
  char v[64];
  return state(key, 0, v, sizeof v) ? atol(v) : fallback;
}

static int initialized = 0;

int nvmlInit_v2(void) {
  char v[64];
  if (state("init", 0, v, sizeof v) && strcmp(v, "fail") == 0) return kUnknown;
  initialized = 1;
  return kSuccess;
}
int nvmlShutdown(void) {
  initialized = 0;
  return kSuccess;
}
int nvmlDeviceGetCount_v2(unsigned int* n) {
  if (!initialized) return kUninitialized;
  *n = (unsigned int)number("gpus", 1);
  return kSuccess;
}
int nvmlDeviceGetHandleByIndex_v2(unsigned int i, void** device) {
  if (!initialized) return kUninitialized;
  if (i >= (unsigned int)number("gpus", 1)) return kInvalidArgument;
  *device = (void*)(size_t)(i + 1);
  return kSuccess;
}
int nvmlDeviceGetName(void* device, char* name, unsigned int n) {
  snprintf(name, n, "Fake GPU %zu", (size_t)device - 1);
  return kSuccess;
}
int nvmlDeviceGetUUID(void* device, char* uuid, unsigned int n) {
  snprintf(uuid, n, "GPU-00000000-0000-0000-0000-00000000000%zu", (size_t)device - 1);
  return kSuccess;
}
int nvmlDeviceGetTemperature(void* device, int sensor, unsigned int* celsius) {
  (void)device;
  char v[64];
  if (sensor != 0) return kNotSupported;
  if (state("temperature", 0, v, sizeof v) && strcmp(v, "fail") == 0) return kUnknown;
  *celsius = (unsigned int)number("temperature", 40);
  return kSuccess;
}
int nvmlDeviceGetPowerUsage(void* device, unsigned int* milliwatts) {
  (void)device;
  *milliwatts = (unsigned int)number("power_mw", 50000);
  return kSuccess;
}
int nvmlDeviceGetClockInfo(void* device, int type, unsigned int* mhz) {
  (void)device;
  *mhz = type == 1 ? 1800 : type == 2 ? 7000 : 1500;
  return kSuccess;
}
int nvmlDeviceGetMemoryInfo(void* device, Memory* m) {
  (void)device;
  m->total = 8ull << 30;
  m->used = 1ull << 30;
  m->free = m->total - m->used;
  return kSuccess;
}
int nvmlDeviceGetComputeRunningProcesses_v3(void* device, unsigned int* n, ProcessInfo* out) {
  char v[256];
  unsigned int count = 0;
  while ((size_t)device == 1 && state("process", (int)count, v, sizeof v)) ++count;
  if (*n < count) {
    *n = count;
    return kInsufficientSize;
  }
  for (unsigned int i = 0; i < count; ++i) {
    state("process", (int)i, v, sizeof v);
    out[i].pid = (unsigned int)atol(v);
    const char* bytes = strrchr(v, ':');
    out[i].used = bytes ? strtoull(bytes + 1, NULL, 10) : 0;
    out[i].gpu_instance = out[i].compute_instance = 0;
  }
  *n = count;
  return kSuccess;
}
int nvmlSystemGetProcessName(unsigned int pid, char* name, unsigned int n) {
  char v[256];
  for (int i = 0; state("process", i, v, sizeof v); ++i) {
    if ((unsigned int)atol(v) != pid) continue;
    const char* start = strchr(v, ':');
    const char* end = strrchr(v, ':');
    if (!start || end == start) return kUnknown;
    snprintf(name, n, "%.*s", (int)(end - start - 1), start + 1);
    return kSuccess;
  }
  return kUnknown;
}

}  // extern "C"
