// The symbolizer's end (issue 15): a thread stuck in a long lookup (a huge
// DWARF file, a debuginfod download) does not hold the destructor, so a
// session's end and louped's shutdown stay bounded; an idle one stops at once.
#include <gtest/gtest.h>

#include <atomic>
#include <chrono>
#include <condition_variable>
#include <mutex>

#include "daemon/symbols/symbolizer.h"

namespace loupe::symbols {
namespace {

using Clock = std::chrono::steady_clock;

struct Hang {
  std::mutex mutex;
  std::condition_variable released_changed;
  bool released = false;
  std::atomic<bool> entered = false;
  std::atomic<bool> finished = false;
};

TEST(SymbolizerStopTest, ALookupStuckInItsJobDoesNotHoldTheDestructor) {
  auto hang = std::make_shared<Hang>();
  auto object = std::make_shared<ObjectFile>();
  object->path = "/stuck/library.so";
  object->build_id = "stuck";
  const auto started = Clock::now();
  {
    Symbolizer symbolizer(
        [hang](const ObjectFile&, uint64_t) {
          hang->entered = true;
          std::unique_lock<std::mutex> lock(hang->mutex);
          hang->released_changed.wait(lock, [&] { return hang->released; });
          hang->finished = true;
          return std::vector<SourceFrame>{{.function = "late"}};
        },
        std::chrono::milliseconds(100));
    symbolizer.Prefetch(object, 0x10);
    for (int i = 0; i < 500 && !hang->entered; ++i) {
      std::this_thread::sleep_for(std::chrono::milliseconds(2));
    }
    ASSERT_TRUE(hang->entered);
    EXPECT_FALSE(symbolizer.WaitIdle(10'000'000));  // 10 ms: still busy
  }
  EXPECT_LT(Clock::now() - started, std::chrono::seconds(5))
      << "~Symbolizer waited for a stuck lookup";
  EXPECT_FALSE(hang->finished);
  // The job, left on its own, still finishes safely with what it owns.
  {
    std::lock_guard<std::mutex> lock(hang->mutex);
    hang->released = true;
  }
  hang->released_changed.notify_all();
  for (int i = 0; i < 500 && !hang->finished; ++i) {
    std::this_thread::sleep_for(std::chrono::milliseconds(2));
  }
  EXPECT_TRUE(hang->finished);
  std::this_thread::sleep_for(std::chrono::milliseconds(20));  // the thread's last steps
}

TEST(SymbolizerStopTest, AnIdleSymbolizerStopsAtOnceAndResolvesWithItsResolver) {
  auto object = std::make_shared<ObjectFile>();
  object->build_id = "idle";
  const auto started = Clock::now();
  {
    Symbolizer symbolizer(
        [](const ObjectFile&, uint64_t offset) {
          return std::vector<SourceFrame>{{.function = "f", .line = static_cast<uint32_t>(offset)}};
        },
        std::chrono::seconds(30));
    symbolizer.Prefetch(object, 7);
    ASSERT_TRUE(symbolizer.WaitIdle(5'000'000'000));
    auto frames = symbolizer.Lookup(*object, 7);
    ASSERT_TRUE(frames.has_value());
    ASSERT_EQ(frames->size(), 1u);
    EXPECT_EQ((*frames)[0].line, 7u);
  }
  EXPECT_LT(Clock::now() - started, std::chrono::seconds(5));
}

}  // namespace
}  // namespace loupe::symbols
