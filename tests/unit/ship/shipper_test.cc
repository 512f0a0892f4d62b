// louped's shipper against a real collector service on 127.0.0.1: ships
// every sealed segment and lets go of it only after the acknowledgement,
// keeps marked copies on request, ships what a crash left behind, and gives
// up at the shutdown deadline when the collector is gone.
#include <gtest/gtest.h>
#include <spdlog/sinks/null_sink.h>

#include <filesystem>
#include <thread>

#include "daemon/format/segment_writer.h"
#include "daemon/ship/sha256.h"
#include "daemon/ship/shipper.h"
#include "tests/unit/ship/collector_fixture.h"

namespace loupe {
namespace {

namespace fs = std::filesystem;
using ShipperTest = testing::CollectorFixture;

std::vector<std::string> Names(const std::string& dir, std::string_view suffix) {
  std::vector<std::string> names;
  for (auto& entry : fs::directory_iterator(dir)) {
    const std::string name = entry.path().filename().string();
    if (entry.is_regular_file() && name.ends_with(suffix)) names.push_back(name);
  }
  std::sort(names.begin(), names.end());
  return names;
}

template <typename Predicate>
bool WaitFor(Predicate done, std::chrono::seconds limit = std::chrono::seconds(30)) {
  const auto deadline = std::chrono::steady_clock::now() + limit;
  while (!done()) {
    if (std::chrono::steady_clock::now() > deadline) return false;
    std::this_thread::sleep_for(std::chrono::milliseconds(20));
  }
  return true;
}

class ShipperFixture : public ShipperTest {
 protected:
  ship::ShipperOptions Options(bool keep_shipped = false) {
    ship::ShipperOptions options;
    options.collector = {.address = "127.0.0.1:" + std::to_string(port_),
                         .token_file = token_path()};
    options.directory = local_.path();
    options.keep_shipped = keep_shipped;
    options.scan_interval = std::chrono::milliseconds(20);
    options.retry_min = std::chrono::milliseconds(20);
    options.retry_max = std::chrono::milliseconds(200);
    return options;
  }
};

TEST_F(ShipperFixture, ShipsEverySegmentOnceAndDeletesItOnlyAfterTheAcknowledgement) {
  // A second session in the same folder: both are shipped, each in order.
  testing::WriteSampleSegments(
      {.directory = local_.path(), .session = "other", .events = 60'000, .seed = 2});
  const std::vector<std::string> files = Names(local_.path(), ".loupe");
  const size_t total = files.size();
  ASSERT_GT(total, segments_.size());
  std::map<std::string, std::string> digests;
  for (const std::string& name : files) {
    digests[local_.path() + "/" + name] = *ship::Sha256OfFile(local_.path() + "/" + name);
  }
  auto shipper = ship::Shipper::Start(Options(), log_);
  ASSERT_TRUE(shipper.ok()) << shipper.status();
  ASSERT_TRUE(WaitFor([&] { return (*shipper)->Status().shipped_segments() == total; }))
      << (*shipper)->Status().DebugString();
  (*shipper)->Drain(std::chrono::steady_clock::now() + std::chrono::seconds(5));

  EXPECT_TRUE(Names(local_.path(), ".loupe").empty());
  auto connection = Connect();
  std::vector<v1::StoredSegment> listed = Listed(*connection);
  ASSERT_EQ(listed.size(), total);
  std::map<std::string, std::vector<uint64_t>> sequences;
  for (const v1::StoredSegment& segment : listed) {
    sequences[segment.id().session_id()].push_back(segment.id().sequence());
    const std::string local = fmt::format("{}/{}-{:06}.loupe", local_.path(),
                                          segment.id().session_id(), segment.id().sequence());
    EXPECT_EQ(segment.sha256(), digests.at(local)) << local;
    EXPECT_EQ(*ship::Sha256OfFile(store_dir() + "/" + segment.name()), digests.at(local));
  }
  EXPECT_EQ(sequences["sample"].size(), segments_.size());
  EXPECT_EQ(sequences["other"].size(), total - segments_.size());
  const v1::ShippingStatus status = (*shipper)->Status();
  EXPECT_EQ(status.queued_segments(), 0u);
  EXPECT_GT(status.last_success_unix_ms(), 0u);
  EXPECT_TRUE(status.last_error().empty()) << status.last_error();
}

TEST_F(ShipperFixture, KeptCopiesAreMarkedAndEvictingThemIsNoLoss) {
  auto shipper = ship::Shipper::Start(Options(/*keep_shipped=*/true), log_);
  ASSERT_TRUE(shipper.ok()) << shipper.status();
  ASSERT_TRUE(WaitFor([&] { return (*shipper)->Status().shipped_segments() == segments_.size(); }));
  (*shipper)->Drain(std::chrono::steady_clock::now() + std::chrono::seconds(5));
  EXPECT_EQ(Names(local_.path(), ".loupe").size(), segments_.size());
  EXPECT_EQ(Names(local_.path() + "/.shipped", ".loupe").size(), segments_.size());
  ship::OutboxTotals totals;
  EXPECT_FALSE(ship::Outbox(local_.path(), true).Next(&totals).has_value());
  EXPECT_EQ(totals.segments, 0u);

  // A writer that needs the room evicts the shipped copies, losing nothing
  // (a writer of the same identity: host and writer id, as the sample's).
  format::WriterOptions options{.directory = local_.path(), .session_id = "next"};
  options.max_file_size = 64 << 10;
  options.max_total_size = 256 << 10;
  options.shipped = ship::Outbox::ReleaseShippedCopy;
  v1::SegmentHeader header;
  header.set_host(testing::SampleSegments{}.host);
  auto writer = format::SegmentWriter::Create(options, header);
  ASSERT_TRUE(writer.ok()) << writer.status();
  ASSERT_TRUE((*writer)->Close().ok());
  EXPECT_EQ((*writer)->stats().segments_evicted, 0u);
  EXPECT_EQ((*writer)->stats().events_lost, 0u);
  EXPECT_LT(Names(local_.path(), ".loupe").size(), segments_.size());
  EXPECT_EQ(Names(local_.path() + "/.shipped", ".loupe").size(),
            Names(local_.path(), ".loupe").size());
}

TEST_F(ShipperFixture, ShipsTheActiveFileACrashLeftBehind) {
  for (size_t i = 1; i < segments_.size(); ++i) fs::remove(segments_[i]);
  const std::string active = local_.path() + "/crashed-000000.loupe.active";
  // Cut mid-file, as a crash leaves it: header and some blocks, no trailer.
  const testing::SampleSegments crashed{.directory = root_.path(), .session = "crashed",
                                        .events = 20'000};
  const std::string whole = testing::WriteSampleSegments(crashed).front();
  fs::copy_file(whole, active);
  fs::resize_file(active, fs::file_size(whole) * 2 / 3);

  auto shipper = ship::Shipper::Start(Options(), log_);
  ASSERT_TRUE(shipper.ok()) << shipper.status();
  ASSERT_TRUE(WaitFor([&] { return (*shipper)->Status().shipped_segments() == 2; }))
      << (*shipper)->Status().DebugString();
  (*shipper)->Drain(std::chrono::steady_clock::now() + std::chrono::seconds(5));
  std::vector<v1::StoredSegment> listed = Listed(*Connect());
  ASSERT_EQ(listed.size(), 2u);
  std::set<std::string> sessions;
  for (const auto& segment : listed) sessions.insert(segment.id().session_id());
  EXPECT_TRUE(sessions.contains("crashed"));
}

TEST_F(ShipperFixture, ADownCollectorLeavesSegmentsQueuedAndShutdownKeepsItsDeadline) {
  ship::ShipperOptions options = Options();
  StopServer();  // nothing listens on the port any more
  auto shipper = ship::Shipper::Start(options, log_);
  ASSERT_TRUE(shipper.ok()) << shipper.status();
  ASSERT_TRUE(WaitFor([&] { return !(*shipper)->Status().last_error().empty(); }));
  const auto started = std::chrono::steady_clock::now();
  (*shipper)->Drain(started + std::chrono::milliseconds(500));
  EXPECT_LT(std::chrono::steady_clock::now() - started, std::chrono::seconds(3));
  const v1::ShippingStatus status = (*shipper)->Status();
  EXPECT_NE(status.last_error().find("collector 127.0.0.1:"), std::string::npos)
      << status.last_error();
  EXPECT_EQ(status.shipped_segments(), 0u);
  EXPECT_EQ(status.queued_segments(), segments_.size());
  EXPECT_EQ(Names(local_.path(), ".loupe").size(), segments_.size());
}

TEST(OutboxTest, OffersEachSessionsLowestSequenceOldestSessionFirst) {
  testing::TempDir dir;
  auto touch = [&](const std::string& name, int age_s) {
    const std::string path = dir.path() + "/" + name;
    std::ofstream(path) << "x";
    fs::last_write_time(path, fs::file_time_type::clock::now() - std::chrono::seconds(age_s));
  };
  touch("b-000003.loupe", 50);
  touch("b-000002.loupe", 10);  // renamed late, still goes before b-000003
  touch("a-000007.loupe", 30);
  touch("a-000008.loupe.active", 100);
  touch("notes.txt", 200);
  ship::Outbox outbox(dir.path(), false);
  ship::OutboxTotals totals;
  auto next = outbox.Next(&totals);
  ASSERT_TRUE(next.has_value());
  EXPECT_EQ(fs::path(next->path).filename(), "a-000007.loupe");
  EXPECT_EQ(totals.segments, 3u);
  ASSERT_TRUE(outbox.Shipped(next->path).ok());
  EXPECT_EQ(fs::path(outbox.Next(&totals)->path).filename(), "b-000002.loupe");
  ASSERT_TRUE(outbox.RecoverInterrupted().ok());
  EXPECT_TRUE(fs::exists(dir.path() + "/a-000008.loupe"));
}

}  // namespace
}  // namespace loupe
