// Names read by address from a process, from its parent once it is gone,
// and not read again from a process found gone.
#include "daemon/session/name_cache.h"

#include <gtest/gtest.h>
#include <sys/wait.h>
#include <unistd.h>

namespace loupe::session {
namespace {

constexpr char kName[] = "checkout.request";

uint64_t AddressOf(const char* text) { return reinterpret_cast<uint64_t>(text); }

// A child that has exited and been reaped: its pid names no process.
uint32_t GoneChild() {
  const pid_t child = fork();
  if (child == 0) _exit(0);
  waitpid(child, nullptr, 0);
  return static_cast<uint32_t>(child);
}

TEST(NameCacheTest, ReadsFromTheProcess) {
  NameCache names;
  EXPECT_EQ(names.Name(getpid(), AddressOf(kName)), kName);
  EXPECT_EQ(names.Name(getpid(), AddressOf(kName)), kName);  // cached
}

TEST(NameCacheTest, GoneProcessIsSaidGone) {
  bool gone = false;
  EXPECT_EQ(NameCache::ReadString(GoneChild(), AddressOf(kName), NameCache::kMaxName, &gone),
            std::nullopt);
  EXPECT_TRUE(gone);
  gone = false;
  EXPECT_EQ(NameCache::ReadString(getpid(), 8, NameCache::kMaxName, &gone), std::nullopt);
  EXPECT_FALSE(gone);  // an unmapped address, in a live process
}

TEST(NameCacheTest, GoneChildReadsThroughItsParent) {
  NameCache names;
  const uint32_t child = GoneChild();
  EXPECT_EQ(names.Name(child, AddressOf(kName)), std::nullopt);
  names.OnFork(getpid(), child);
  // Found gone and its parent read, both times.
  EXPECT_EQ(names.Name(child, AddressOf(kName)), kName);
  EXPECT_EQ(names.Name(child, AddressOf(kName)), kName);
}

}  // namespace
}  // namespace loupe::session
