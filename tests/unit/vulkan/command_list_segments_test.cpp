// Command lists whose host works in the middle (hybrid steps): the GPU hands data over through
// a timeline semaphore, waits for the host's answer on another, and replays the segments.

#include <gtest/gtest.h>

#include <chrono>
#include <cstdlib>
#include <cstring>
#include <memory>
#include <thread>
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
  // In order on one queue (lavapipe) the segments signal fences: Mesa 22.3's emulated timelines
  // are what hung and corrupted the heap under load.
  EXPECT_EQ(cmd.uses_timelines(), dev.submits_ahead() || dev.has_transfer_queue());
}

// With the device's timestamps on, each segment of a step records its start and end: in
// order, the segment waiting for the host task starting once the host is done (the host sleeps 20
// ms before answering). Turning them on re-encodes the same step; off, nothing is timed.
TEST(CommandListSegments, TimestampsTimeEachSegment) {
  auto dev_ptr = std::make_shared<Device>(test_device().info());
  Device& dev = *dev_ptr;
  ASSERT_GT(dev.info().timestamp_period_ns, 0) << dev.label() << " has no compute timestamps";
  Buffer x = upload(dev, std::vector<float>(4096, 1.0f));
  CommandList cmd(dev);
  for (const bool timed : {false, true, false}) {
    dev.set_timestamps(timed);
    cmd.begin();
    GpuOps ops{dev, cmd};
    ops.add(x.address(), x.address(), 4096);
    const int task = cmd.host_task();
    cmd.after_host(task);
    ops.add(x.address(), x.address(), 4096);
    cmd.end();
    cmd.submit();
    cmd.wait_for_gpu(task);
    std::this_thread::sleep_for(std::chrono::milliseconds(20));
    cmd.task_done(task);
    cmd.wait();
    const std::vector<CommandList::SegmentTime> t = cmd.segment_times();
    if (!timed) {
      EXPECT_TRUE(t.empty());
      continue;
    }
    // host_task() ends segment 0, after_host() the (empty) segment 1; segment 2 waits.
    ASSERT_EQ(t.size(), 3u);
    EXPECT_EQ(t[0].start_ms, 0.0);
    for (size_t i = 0; i < t.size(); ++i) {
      EXPECT_LE(t[i].start_ms, t[i].end_ms) << i;
      if (i > 0) {
        EXPECT_LE(t[i - 1].end_ms, t[i].start_ms) << i;
      }
    }
    // The host waits for segment 0 (the task's), so only its end must precede the sleep;
    // the empty segment 1 may finish while the host already sleeps (a busy machine saw 15 ms).
    EXPECT_GE(t[2].start_ms - t[0].end_ms, 19.0) << "the last segment waited for the host";
  }
  EXPECT_EQ(cmd.encodings(), 3) << "turning timestamps on or off re-encodes";
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

// Copies on the transfer queue (uploads of RAM experts): what the GPU read before the transfer
// sees the old contents, what follows after_transfer the new ones, and the host may work in
// between; in both submission modes (ahead, the transfers and their waits on timeline
// semaphores; in order, on lavapipe's one queue by its order alone), over replayed steps.
TEST(CommandListSegments, TransferBetweenGpuSegments) {
  for (const char* mode : {"in-order", "ahead"}) {
    SCOPED_TRACE(mode);
    setenv("STRATA_VK_SUBMIT", mode, 1);
    auto dev_ptr = std::make_shared<Device>(test_device().info());
    unsetenv("STRATA_VK_SUBMIT");
    Device& dev = *dev_ptr;
    const int64_t n = 4096;
    std::vector<float> x0(n);
    for (int64_t i = 0; i < n; ++i) x0[i] = static_cast<float>(i % 251);
    Buffer x = upload(dev, x0);
    Buffer stack = upload(dev, std::vector<float>(n, 0.0f));
    Buffer pinned = dev.allocate(n * 4, MemoryKind::host, "pinned");
    Buffer answer = dev.allocate(n * 4, MemoryKind::host, "answer");
    CommandList cmd(dev);
    std::vector<float> old(n, 0.0f);  // the stack before the step
    for (int step = 1; step <= 3; ++step) {
      auto* p = static_cast<float*>(pinned.mapped());
      for (int64_t i = 0; i < n; ++i) p[i] = static_cast<float>(step * 1000 + i % 7);
      dev.upload(x, 0, x0.data(), n * 4);
      cmd.begin();
      GpuOps ops{dev, cmd};
      ops.add(x.address(), stack.address(), n);  // x + old
      const int t = cmd.transfer(pinned, 0, stack, 0, n * 4);
      ops.add(x.address(), x.address(), n);  // 2 (x + old), while copying
      const int task = cmd.host_task();
      cmd.after_host(task);
      ops.add(x.address(), answer.address(), n);  // + 5 from the host
      cmd.after_transfer(t);
      ops.add(x.address(), stack.address(), n);  // + new
      cmd.end();
      cmd.submit();
      cmd.wait_for_gpu(task);
      auto* a = static_cast<float*>(answer.mapped());
      for (int64_t i = 0; i < n; ++i) a[i] = 5.0f;
      cmd.task_done(task);
      cmd.wait();
      const std::vector<float> got = download<float>(dev, x, n);
      for (int64_t i = 0; i < n; i += 61) {
        ASSERT_EQ(got[i], 2.0f * (x0[i] + old[i]) + 5.0f + p[i]) << "step " << step << " at " << i;
      }
      for (int64_t i = 0; i < n; ++i) old[i] = p[i];
    }
    EXPECT_EQ(cmd.encodings(), 1) << "equal steps replay their transfers";
  }
}

TEST(CommandListSegments, TransferNobodyWaitsForIsAnError) {
  Device& dev = test_device();
  Buffer a = dev.allocate(64, MemoryKind::host, "a");
  Buffer b = upload(dev, std::vector<float>(16, 0.0f));
  CommandList cmd(dev);
  cmd.begin();
  cmd.transfer(a, 0, b, 0, 64);
  EXPECT_THROW(cmd.end(), Error);
  cmd.begin();
  EXPECT_THROW(cmd.transfer(a, 0, b, 32, 64), Error);  // past the end of b
}

}  // namespace
}  // namespace strata::vk::test
