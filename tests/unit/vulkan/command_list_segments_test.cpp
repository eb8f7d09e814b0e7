// Command lists whose host works in the middle (hybrid steps): the GPU hands data over through
// a timeline semaphore, waits for the host's answer on another, and replays the segments.

#include <gtest/gtest.h>

#include <cstring>
#include <vector>

#include "backend/vulkan/gpu_ops.h"
#include "unit/vulkan/gpu_test_device.h"

namespace strata::vk::test {
namespace {

// x = [1..n]; the GPU doubles it (x += x) and hands it to the host; the host adds 100 to each
// value of a host buffer, which the GPU adds to x after waiting; repeated steps replay.
TEST(CommandListSegments, HostTaskBetweenGpuSegments) {
  Device& dev = test_device();
  const int64_t n = 1000;
  std::vector<float> x0(n);
  for (int64_t i = 0; i < n; ++i) x0[i] = static_cast<float>(i + 1);
  Buffer x = upload(dev, x0);
  Buffer seen = dev.allocate(n * 4, MemoryKind::host, "seen");
  Buffer answer = dev.allocate(n * 4, MemoryKind::host, "answer");
  CommandList cmd(dev);
  for (int step = 0; step < 3; ++step) {
    dev.upload(x, 0, x0.data(), n * 4);
    cmd.begin();
    GpuOps ops{dev, cmd};
    ops.add(x.address(), x.address(), n);  // 2x
    cmd.copy(x, 0, seen, 0, n * 4);
    const int task = cmd.host_task();
    ops.add(x.address(), x.address(), n);  // 4x, while the host works
    const int gpu_part = cmd.after_host(task);
    ops.add(x.address(), answer.address(), n);  // + the host's answer
    cmd.end();
    EXPECT_EQ(cmd.host_tasks(), 1);
    cmd.submit();
    cmd.wait_for_gpu(task);
    const auto* s = static_cast<const float*>(seen.mapped());
    auto* a = static_cast<float*>(answer.mapped());
    for (int64_t i = 0; i < n; ++i) a[i] = s[i] + 100.0f;  // 2x + 100
    (void)cmd.segment_finished(gpu_part);
    cmd.task_done(task);
    cmd.wait();
    const std::vector<float> got = download<float>(dev, x, n);
    for (int64_t i = 0; i < n; i += 97) ASSERT_EQ(got[i], 6.0f * x0[i] + 100.0f) << i;
    EXPECT_TRUE(cmd.segment_finished(gpu_part));
  }
  EXPECT_EQ(cmd.encodings(), 1) << "equal steps replay their segments";
}

// A host that fails mid-step releases the GPU (abandon_tasks): the step still completes and the
// command list runs the next step normally.
TEST(CommandListSegments, AbandonedTasksLetTheStepFinish) {
  Device& dev = test_device();
  Buffer x = upload(dev, std::vector<float>(64, 1.0f));
  CommandList cmd(dev);
  for (int step = 0; step < 2; ++step) {
    cmd.begin();
    GpuOps ops{dev, cmd};
    const int a = cmd.host_task();
    cmd.after_host(a);
    const int b = cmd.host_task();
    cmd.after_host(b);
    ops.add(x.address(), x.address(), 64);
    cmd.end();
    cmd.submit();
    cmd.wait_for_gpu(a);
    if (step == 0) {
      cmd.abandon_tasks();  // as after an exception in the first task
    } else {
      cmd.task_done(a);
      cmd.wait_for_gpu(b);
      cmd.task_done(b);
    }
    cmd.wait();
  }
  EXPECT_EQ(download<float>(dev, x, 1)[0], 4.0f);
  // Tasks are done in order.
  cmd.submit();
  EXPECT_THROW(cmd.task_done(1), Error);
  cmd.abandon_tasks();
  cmd.wait();
}

}  // namespace
}  // namespace strata::vk::test
