// Requests from USDT begin/end pairs the user names, and uprobe calls with
// returns; bad pair syntax is refused with the reason.
#include "analysis/requests.h"

#include <gtest/gtest.h>

namespace loupe::analysis {
namespace {

TEST(UsdtPairTest, ParsesNamesAndFillsTheEndsProvider) {
  absl::StatusOr<UsdtPair> pair = ParseUsdtPair("postgresql:query__start..query__done");
  ASSERT_TRUE(pair.ok()) << pair.status();
  EXPECT_EQ(pair->name, "postgresql:query");
  EXPECT_EQ(pair->begin_probe, "postgresql:query__start");
  EXPECT_EQ(pair->end_probe, "postgresql:query__done");
  pair = ParseUsdtPair("php:request__startup..request__shutdown");  // whole words
  ASSERT_TRUE(pair.ok()) << pair.status();
  EXPECT_EQ(pair->name, "php:request");
  pair = ParseUsdtPair("txn=app:begin..other:commit");
  ASSERT_TRUE(pair.ok()) << pair.status();
  EXPECT_EQ(pair->name, "txn");
  EXPECT_EQ(pair->end_probe, "other:commit");
}

TEST(UsdtPairTest, RefusesWhatIsNotAPairWithTheReason) {
  for (const char* bad : {"app:begin", "begin..end", "app:x..app:x", "=app:a..b", "app:a.."}) {
    absl::StatusOr<UsdtPair> pair = ParseUsdtPair(bad);
    EXPECT_FALSE(pair.ok()) << bad;
    EXPECT_NE(std::string(pair.status().message()).find("--request"), std::string::npos) << bad;
  }
}

TEST(RequestKindsTest, UprobeCallsAreRequestsOnlyWhenAskedWithReturns) {
  RequestKinds kinds({});
  v1::SegmentHeader header;
  (*header.mutable_config())["uprobes"] = "/srv/bin/svc:handle(1)%return libc:malloc";
  kinds.AddHeader(header);
  const int64_t args[] = {42};
  RequestMark begin = kinds.Mark(
      {.tid = 7, .payload = format::UprobeEntry{.probe = "/srv/bin/svc:handle", .args = args}});
  ASSERT_EQ(begin.type, RequestMark::kBegin);
  EXPECT_EQ(kinds.kinds()[begin.kind].name, "svc:handle");
  EXPECT_EQ(kinds.kinds()[begin.kind].short_name, "handle");
  ASSERT_EQ(begin.args.size(), 1u);
  EXPECT_EQ(begin.args[0], 42);
  EXPECT_EQ(kinds.Mark({.tid = 7, .payload = format::UprobeReturn{.probe = "/srv/bin/svc:handle"}}).type,
            RequestMark::kEnd);
  EXPECT_EQ(kinds.Mark({.tid = 7, .payload = format::UprobeEntry{.probe = "libc:malloc"}}).type,
            RequestMark::kNone);
}

TEST(RequestKindsTest, UsdtPairsBeginAndEndOneKind) {
  RequestKinds kinds({*ParseUsdtPair("db:query__start..query__done")});
  const int64_t args[] = {9};
  const RequestMark begin =
      kinds.Mark({.tid = 3, .payload = format::UsdtEvent{.probe = "db:query__start", .args = args}});
  const RequestMark end = kinds.Mark({.tid = 3, .payload = format::UsdtEvent{.probe = "db:query__done"}});
  EXPECT_EQ(begin.type, RequestMark::kBegin);
  EXPECT_EQ(end.type, RequestMark::kEnd);
  EXPECT_EQ(begin.kind, end.kind);
  EXPECT_EQ(begin.key, end.key);
  EXPECT_EQ(kinds.kinds()[begin.kind].source, RequestSource::kUsdt);
  EXPECT_EQ(kinds.Mark({.tid = 3, .payload = format::UsdtEvent{.probe = "db:other"}}).type,
            RequestMark::kNone);
}

}  // namespace
}  // namespace loupe::analysis
