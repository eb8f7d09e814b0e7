// Preloaded into the tests of the sanitizer build (CMakePresets.json, test preset `asan`): makes
// dlclose() a no-op. The Vulkan loader unloads its driver (lavapipe) when an instance is
// destroyed; the driver's globals then vanish, and LeakSanitizer reports what they pointed to as
// leaks of an "<unknown module>" that no suppression can name. Kept loaded, the driver's memory
// stays reachable and any leak of ours is still reported with its stack.

extern "C" int dlclose(void*) {
  return 0;
}
