// louped's shipper against a real collector service on 127.0.0.1: ships
// every sealed segment and lets go of it only after the acknowledgement,
// keeps marked copies on request, ships what a crash left behind, and gives
// up at the shutdown deadline when the collector is gone.
#include <fmt/format.h>
#include <gtest/gtest.h>
#include <spdlog/sinks/null_sink.h>
#include <sys/stat.h>
#include <unistd.h>

#include <filesystem>
#include <thread>

#include "daemon/format/leftovers.h"
#include "daemon/format/segment_writer.h"
#include "daemon/ship/sha256.h"
#include "daemon/ship/shipper.h"
#include "tests/support/privileged.h"
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
  // Every sample segment left is still a marked copy (the writer's own
  // segment, if it left one, is not shipped yet).
  std::vector<std::string> samples = Names(local_.path(), ".loupe");
  std::erase_if(samples, [](const std::string& name) { return !name.starts_with("sample-"); });
  EXPECT_LT(samples.size(), segments_.size());
  EXPECT_EQ(Names(local_.path() + "/.shipped", ".loupe"), samples);
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
  // louped seals its own leftovers before shipping starts.
  const format::LeftoverReport sealed = format::SealLeftovers(
      local_.path(), {crashed.host, fmt::format("embedded uid {}", geteuid())});
  ASSERT_EQ(sealed.sealed.size(), 1u) << ::testing::PrintToString(sealed.failures);

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
  ASSERT_TRUE(outbox.Shipped(next->path, next->id).ok());
  EXPECT_EQ(fs::path(outbox.Next(&totals)->path).filename(), "b-000002.loupe");
  ASSERT_TRUE(outbox.RecoverInterrupted().ok());
  EXPECT_TRUE(fs::exists(dir.path() + "/a-000008.loupe"));
}

// The output folder is shared with the socket group: what a member puts
// there named like a segment is shipped by root only if it is a regular
// file with one link, never followed through a symlink.
TEST_F(ShipperFixture, ASymlinkedOrHardLinkedSegmentIsNotShipped) {
  testing::TempDir elsewhere;
  const std::vector<std::string> linked = testing::WriteSampleSegments(
      {.directory = elsewhere.path(), .session = "linked", .events = 20'000, .seed = 3});
  const std::vector<std::string> hard = testing::WriteSampleSegments(
      {.directory = elsewhere.path(), .session = "hard", .events = 20'000, .seed = 4});
  fs::create_symlink(linked.front(), local_.path() + "/linked-000000.loupe");
  fs::create_hard_link(hard.front(), local_.path() + "/hard-000000.loupe");
  EXPECT_FALSE(ship::DescribeSegment(local_.path() + "/linked-000000.loupe").ok());
  EXPECT_FALSE(ship::DescribeSegment(local_.path() + "/hard-000000.loupe").ok());

  auto shipper = ship::Shipper::Start(Options(), log_);
  ASSERT_TRUE(shipper.ok()) << shipper.status();
  ASSERT_TRUE(WaitFor([&] { return (*shipper)->Status().shipped_segments() == segments_.size(); }))
      << (*shipper)->Status().DebugString();
  (*shipper)->Drain(std::chrono::steady_clock::now() + std::chrono::seconds(5));
  EXPECT_EQ((*shipper)->Status().shipped_segments(), segments_.size());
  for (const v1::StoredSegment& segment : Listed(*Connect())) {
    EXPECT_EQ(segment.id().session_id(), "sample");
  }
  EXPECT_TRUE(fs::is_symlink(local_.path() + "/linked-000000.loupe"));
  EXPECT_TRUE(fs::exists(hard.front()));
  EXPECT_TRUE(fs::exists(linked.front()));
}

// A `.shipped` that is a symlink: its marks would make root's segments look
// shipped (then evicted without a loss recorded) and have root remove and
// create marks in another folder. louped refuses to start shipping.
TEST_F(ShipperFixture, ASymlinkedShippedFolderIsRefused) {
  testing::TempDir planted;
  for (const std::string& path : segments_) {
    std::ofstream(planted.File(fs::path(path).filename().string())) << "fake mark";
  }
  fs::create_directory_symlink(planted.path(), local_.path() + "/.shipped");
  auto shipper = ship::Shipper::Start(Options(/*keep_shipped=*/true), log_);
  ASSERT_FALSE(shipper.ok());
  EXPECT_NE(shipper.status().message().find(".shipped is a symlink"), std::string::npos)
      << shipper.status();
  // The marks count for nothing: every segment still waits, none is a
  // shipped copy to evict without loss, and the planted marks stay.
  ship::OutboxTotals totals;
  ASSERT_TRUE(ship::Outbox(local_.path(), true).Next(&totals).has_value());
  EXPECT_EQ(totals.segments, segments_.size());
  EXPECT_FALSE(ship::Outbox::ReleaseShippedCopy(segments_.front()));
  EXPECT_EQ(Names(planted.path(), ".loupe").size(), segments_.size());
}

// A `.shipped` a member made (the folder is the socket group's) holding
// marks that name root's segments exactly (device, inode and size anyone
// can stat): refused, and its marks count for nothing.
TEST_F(ShipperFixture, AShippedFolderOfAnotherOwnerIsRefused) {
  LOUPE_REQUIRE_PRIVILEGES();
  const std::string folder = local_.path() + "/.shipped";
  fs::create_directory(folder);
  for (const std::string& path : segments_) {
    struct stat st;
    ASSERT_EQ(stat(path.c_str(), &st), 0);
    std::ofstream(folder + "/" + fs::path(path).filename().string())
        << fmt::format("{} {} {}\n", st.st_dev, st.st_ino, st.st_size);
  }
  ASSERT_EQ(chown(folder.c_str(), 12345, 12345), 0);
  auto shipper = ship::Shipper::Start(Options(/*keep_shipped=*/true), log_);
  ASSERT_FALSE(shipper.ok());
  EXPECT_NE(shipper.status().message().find("belongs to uid 12345, not to louped"),
            std::string::npos)
      << shipper.status();
  ship::OutboxTotals totals;
  ASSERT_TRUE(ship::Outbox(local_.path(), true).Next(&totals).has_value());
  EXPECT_EQ(totals.segments, segments_.size());
  EXPECT_FALSE(ship::Outbox::ReleaseShippedCopy(segments_.front()));
  EXPECT_EQ(Names(folder, ".loupe").size(), segments_.size());
}

TEST(OutboxTest, QueuesOnlyRegularFilesWithOneLink) {
  testing::TempDir dir, elsewhere;
  std::ofstream(elsewhere.File("target")) << "root's";
  std::ofstream(elsewhere.File("linked")) << "root's too";
  std::ofstream(dir.File("a-000001.loupe")) << "x";
  fs::create_symlink(elsewhere.File("target"), dir.File("s-000001.loupe"));
  fs::create_hard_link(elsewhere.File("linked"), dir.File("h-000001.loupe"));
  ASSERT_EQ(mkfifo(dir.File("f-000001.loupe").c_str(), 0600), 0);
  fs::create_directory(dir.File("d-000001.loupe"));
  fs::create_symlink(elsewhere.File("target"), dir.File("i-000001.loupe.active"));
  ship::Outbox outbox(dir.path(), false);
  ASSERT_TRUE(outbox.RecoverInterrupted().ok());
  EXPECT_TRUE(fs::is_symlink(dir.File("i-000001.loupe.active")));  // not renamed
  ship::OutboxTotals totals;
  auto next = outbox.Next(&totals);
  ASSERT_TRUE(next.has_value());
  EXPECT_EQ(fs::path(next->path).filename(), "a-000001.loupe");
  EXPECT_EQ(totals.segments, 1u);
}

// Recovery never renames an active file over a file already there.
TEST(OutboxTest, RecoveryReplacesNothing) {
  testing::TempDir dir;
  std::ofstream(dir.File("r-000003.loupe")) << "root's sealed segment";
  std::ofstream(dir.File("r-000003.loupe.active")) << "planted";
  ASSERT_TRUE(ship::Outbox(dir.path(), false).RecoverInterrupted().ok());
  std::ifstream in(dir.File("r-000003.loupe"));
  EXPECT_EQ(std::string(std::istreambuf_iterator<char>(in), {}), "root's sealed segment");
}

// A mark, and the deletion after shipping, are for the very file shipped:
// a file put under its name since is neither a shipped copy nor deleted.
TEST(OutboxTest, MarksAndDeletionsAreForTheVeryFileShipped) {
  testing::TempDir dir;
  fs::create_directory(dir.File(".shipped"));
  chmod(dir.File(".shipped").c_str(), 0755);
  const std::string path = dir.File("a-000001.loupe");
  std::ofstream(path) << "x";
  ship::Outbox keeping(dir.path(), true);
  ASSERT_TRUE(keeping.Prepare().ok());
  struct stat st;
  ASSERT_EQ(lstat(dir.File(".shipped").c_str(), &st), 0);
  EXPECT_EQ(st.st_mode & 07777, 0700u);  // louped's own, tightened
  EXPECT_EQ(st.st_uid, geteuid());
  ship::OutboxTotals totals;
  auto next = keeping.Next(&totals);
  ASSERT_TRUE(next.has_value());
  ASSERT_TRUE(keeping.Shipped(next->path, next->id).ok());
  EXPECT_FALSE(keeping.Next(&totals).has_value());  // a kept copy

  // Replaced by another file: shipped again, not evicted as a copy.
  fs::remove(path);
  std::ofstream(path) << "yy";
  EXPECT_FALSE(ship::Outbox::ReleaseShippedCopy(path));
  next = keeping.Next(&totals);
  ASSERT_TRUE(next.has_value());
  ship::FileId stale = next->id;
  fs::remove(path);
  std::ofstream(path) << "zzz";
  ship::Outbox deleting(dir.path(), false);
  EXPECT_FALSE(deleting.Shipped(path, stale).ok());
  EXPECT_TRUE(fs::exists(path));
  // The very file: its mark is released once.
  next = keeping.Next(&totals);
  ASSERT_TRUE(keeping.Shipped(next->path, next->id).ok());
  EXPECT_TRUE(ship::Outbox::ReleaseShippedCopy(path));
  EXPECT_FALSE(ship::Outbox::ReleaseShippedCopy(path));
}

}  // namespace
}  // namespace loupe
