// The filesystem store's staging budget: unfinished uploads stay a day for a
// resume and are outside the retention budget, so new ones are refused once
// the staged bytes would pass a tenth of it, while a resume is always taken.
#include <gtest/gtest.h>

#include <string>

#include "daemon/base/status_util.h"
#include "tests/support/quiet_log.h"
#include "tests/support/temp_dir.h"
#include "tools/collector/fs_segment_store.h"

namespace loupe::collector {
namespace {

v1::UploadBegin Begin(const std::string& session, uint64_t size) {
  v1::UploadBegin begin;
  begin.mutable_id()->set_host("web-a");
  begin.mutable_id()->set_boot_id("boot");
  begin.mutable_id()->set_session_id(session);
  begin.set_sha256(std::string(32, 's'));
  begin.set_size(size);
  begin.set_start_realtime_ns(1'764'786'296'000'000'000);
  return begin;
}

TEST(FsStoreStagingTest, AbandonedUploadsCannotFillTheDiskButResumesGoOn) {
  testing::TempDir root;
  // Budget: max(1 MiB / 10, 256 KiB) = 256 KiB of staged bytes.
  auto store = FsSegmentStore::Open(
      {.root = root.path(), .max_total_bytes = 1 << 20, .max_segment_bytes = 256 << 10},
      testing::QuietLog());
  ASSERT_TRUE(store.ok()) << store.status();
  {
    auto abandoned = (*store)->Stage(Begin("first", 200 << 10));
    ASSERT_TRUE(abandoned.ok()) << abandoned.status();
    ASSERT_TRUE((*abandoned)->Append(0, std::string(200 << 10, 'x')).ok());
  }
  auto refused = (*store)->Stage(Begin("second", 100 << 10));
  ASSERT_FALSE(refused.ok());
  EXPECT_TRUE(absl::IsResourceExhausted(refused.status())) << refused.status();
  EXPECT_NE(MessageOf(refused.status()).find("staging holds 204800 bytes"), std::string_view::npos)
      << refused.status();
  auto resumed = (*store)->Stage(Begin("first", 200 << 10));
  ASSERT_TRUE(resumed.ok()) << resumed.status();
  EXPECT_EQ((*resumed)->offset(), 200u << 10);
  EXPECT_TRUE((*store)->Stage(Begin("small", 50 << 10)).ok());  // 250 KiB fits
}

}  // namespace
}  // namespace loupe::collector
