// loupe-collector's service over real gRPC on 127.0.0.1, with real segment
// files: stored once with their digest, resumed, refused when wrong, and
// kept within the retention budget, counted from when they were stored.
#include <fmt/format.h>
#include <gtest/gtest.h>

#include <cstdio>
#include <filesystem>
#include <fstream>
#include <sstream>
#include <thread>

#include "daemon/ship/segment_upload.h"
#include "daemon/ship/sha256.h"
#include "tests/unit/ship/collector_fixture.h"

namespace loupe {
namespace {

namespace fs = std::filesystem;
using CollectorTest = testing::CollectorFixture;

#if defined(__SANITIZE_ADDRESS__)
#define LOUPE_UNDER_ASAN 1
#elif defined(__has_feature)
#if __has_feature(address_sanitizer)
#define LOUPE_UNDER_ASAN 1
#endif
#endif
#ifndef LOUPE_UNDER_ASAN
#define LOUPE_UNDER_ASAN 0
#endif

TEST_F(CollectorTest, StoresEachSegmentOnceWithItsDigestAndAcknowledgesRepeats) {
  auto connection = Connect();
  for (const std::string& path : segments_) {
    auto outcome = ship::UploadSegment(*connection, path, {.chunk_bytes = 64 << 10});
    ASSERT_TRUE(outcome.ok()) << outcome.status();
    EXPECT_FALSE(outcome->duplicate);
    EXPECT_EQ(outcome->resumed_from, 0u);
  }
  for (const std::string& path : segments_) {
    auto again = ship::UploadSegment(*connection, path, {});
    ASSERT_TRUE(again.ok()) << again.status();
    EXPECT_TRUE(again->duplicate);
    EXPECT_EQ(again->bytes_sent, 0u);
  }
  std::vector<v1::StoredSegment> listed = Listed(*connection);
  ASSERT_EQ(listed.size(), segments_.size());
  for (size_t i = 0; i < listed.size(); ++i) {
    EXPECT_EQ(listed[i].id().sequence(), i);
    const std::string stored = store_dir() + "/" + listed[i].name();
    EXPECT_EQ(*ship::Sha256OfFile(stored), *ship::Sha256OfFile(segments_[i]));
    EXPECT_EQ(listed[i].sha256(), *ship::Sha256OfFile(segments_[i]));
    EXPECT_TRUE(listed[i].name().starts_with("test-host/")) << listed[i].name();
  }
  EXPECT_EQ(StagedFiles(), 0u);

  // The layout is the index: a restarted collector lists the same.
  StopServer();
  StartServer({.root = store_dir()});
  auto reconnected = Connect();
  std::vector<v1::StoredSegment> reloaded = Listed(*reconnected);
  ASSERT_EQ(reloaded.size(), listed.size());
  for (size_t i = 0; i < listed.size(); ++i) {
    EXPECT_EQ(reloaded[i].SerializeAsString(), listed[i].SerializeAsString());
  }
}

TEST_F(CollectorTest, AnInterruptedUploadResumesWhereItStopped) {
  auto connection = Connect();
  const std::string& path = segments_[0];
  const std::string bytes = Contents(path);
  const uint64_t half = bytes.size() / 2;
  grpc::Status cut = RawUpload(*connection, BeginFor(path),
                               {[&] {
                                 v1::UploadChunk chunk;
                                 chunk.set_data(bytes.substr(0, half));
                                 return chunk;
                               }()});
  EXPECT_FALSE(cut.ok());
  EXPECT_EQ(StagedFiles(), 1u);
  EXPECT_TRUE(Listed(*connection).empty());

  auto outcome = ship::UploadSegment(*connection, path, {.chunk_bytes = 16 << 10});
  ASSERT_TRUE(outcome.ok()) << outcome.status();
  EXPECT_EQ(outcome->resumed_from, half);
  EXPECT_EQ(outcome->bytes_sent, bytes.size() - half);
  std::vector<v1::StoredSegment> listed = Listed(*connection);
  ASSERT_EQ(listed.size(), 1u);
  EXPECT_EQ(Contents(store_dir() + "/" + listed[0].name()), bytes);
  EXPECT_EQ(StagedFiles(), 0u);
}

TEST_F(CollectorTest, RefusesGarbageWrongDigestTruncationAndMislabelsThenServesOthers) {
  auto connection = Connect();
  const std::string garbage(70'000, 'x');
  v1::UploadBegin garbage_begin = BeginFor(segments_[0]);
  garbage_begin.set_size(garbage.size());
  ship::Sha256 hash;
  hash.Update(garbage);
  garbage_begin.set_sha256(hash.Finish());
  v1::UploadChunk whole;
  whole.set_data(garbage);
  whole.set_last(true);
  grpc::Status status = RawUpload(*connection, garbage_begin, {whole});
  EXPECT_EQ(status.error_code(), grpc::StatusCode::INVALID_ARGUMENT);
  EXPECT_NE(status.error_message().find("not a Loupe segment"), std::string::npos)
      << status.error_message();

  const std::string bytes = Contents(segments_[1]);
  v1::UploadBegin wrong_digest = BeginFor(segments_[1]);
  wrong_digest.set_sha256(std::string(32, '\x01'));
  whole.set_data(bytes);
  status = RawUpload(*connection, wrong_digest, {whole});
  EXPECT_EQ(status.error_code(), grpc::StatusCode::DATA_LOSS);
  EXPECT_NE(status.error_message().find("sha256 of the received bytes"), std::string::npos);

  v1::UploadChunk short_last;
  short_last.set_data(bytes.substr(0, 1000));
  short_last.set_last(true);
  status = RawUpload(*connection, BeginFor(segments_[1]), {short_last});
  EXPECT_EQ(status.error_code(), grpc::StatusCode::INVALID_ARGUMENT);
  EXPECT_NE(status.error_message().find("ended at byte 1000"), std::string::npos)
      << status.error_message();

  v1::UploadBegin mislabelled = BeginFor(segments_[2]);
  mislabelled.mutable_id()->set_sequence(99);
  whole.set_data(Contents(segments_[2]));
  status = RawUpload(*connection, mislabelled, {whole});
  EXPECT_EQ(status.error_code(), grpc::StatusCode::INVALID_ARGUMENT);
  EXPECT_NE(status.error_message().find("header says"), std::string::npos);

  v1::UploadBegin escaping = BeginFor(segments_[0]);
  escaping.mutable_id()->set_host("../etc");
  status = RawUpload(*connection, escaping, {});
  EXPECT_EQ(status.error_code(), grpc::StatusCode::INVALID_ARGUMENT);
  EXPECT_NE(status.error_message().find("host '../etc'"), std::string::npos);

  // A host name is bytes (sethostname takes any): one that is not UTF-8 is
  // refused by name, for good, not failed as a request that would not parse.
  v1::UploadBegin not_utf8 = BeginFor(segments_[0]);
  not_utf8.mutable_id()->set_host("web\xff" "1");
  status = RawUpload(*connection, not_utf8, {});
  EXPECT_EQ(status.error_code(), grpc::StatusCode::INVALID_ARGUMENT) << status.error_message();
  EXPECT_NE(status.error_message().find("host 'web\uFFFD1'"), std::string::npos)
      << status.error_message();

  v1::UploadChunk misplaced;
  misplaced.set_offset(5);
  misplaced.set_data("abc");
  status = RawUpload(*connection, BeginFor(segments_[0]), {misplaced});
  EXPECT_EQ(status.error_code(), grpc::StatusCode::INVALID_ARGUMENT);
  EXPECT_NE(status.error_message().find("chunk at byte 5"), std::string::npos);

  EXPECT_TRUE(Listed(*connection).empty());
  for (const std::string& path : segments_) {
    auto outcome = ship::UploadSegment(*connection, path, {});
    ASSERT_TRUE(outcome.ok()) << outcome.status();
  }
  EXPECT_EQ(Listed(*connection).size(), segments_.size());
}

TEST_F(CollectorTest, RefusesCallsWithoutAValidToken) {
  auto anonymous = Connect("");
  auto outcome = ship::UploadSegment(*anonymous, segments_[0], {});
  ASSERT_FALSE(outcome.ok());
  EXPECT_TRUE(absl::IsUnauthenticated(outcome.status()));
  EXPECT_NE(outcome.status().message().find("no bearer token"), absl::string_view::npos)
      << outcome.status();

  const std::string wrong = root_.path() + "/wrong";
  std::ofstream(wrong) << "not-the-token-at-all\n";
  auto impostor = Connect(wrong);
  outcome = ship::UploadSegment(*impostor, segments_[0], {});
  ASSERT_FALSE(outcome.ok());
  EXPECT_TRUE(absl::IsUnauthenticated(outcome.status()));
  EXPECT_NE(outcome.status().message().find("not one this collector accepts"),
            absl::string_view::npos);

  auto context = impostor->NewContext(std::chrono::seconds(5));
  v1::ListSegmentsResponse listed;
  EXPECT_EQ(impostor->stub().ListSegments(context.get(), {}, &listed).error_code(),
            grpc::StatusCode::UNAUTHENTICATED);
  EXPECT_TRUE(Listed(*Connect()).empty());
}

TEST_F(CollectorTest, RetentionEvictsTheOldestBeyondTheSizeLimit) {
  StopServer();
  uint64_t two_newest = fs::file_size(segments_[segments_.size() - 1]) +
                        fs::file_size(segments_[segments_.size() - 2]);
  StartServer({.root = store_dir(), .max_total_bytes = two_newest});
  auto connection = Connect();
  for (const std::string& path : segments_) {
    ASSERT_TRUE(ship::UploadSegment(*connection, path, {}).ok());
  }
  std::vector<v1::StoredSegment> listed = Listed(*connection);
  ASSERT_EQ(listed.size(), 2u);
  EXPECT_EQ(listed[0].id().sequence(), segments_.size() - 2);
  EXPECT_EQ(listed[1].id().sequence(), segments_.size() - 1);
  EXPECT_LE(store_->total_bytes(), two_newest);
}

// Segments a host wrote with its clock a month behind, written by the
// shipper's own code under faketime. The age limit counts from when the
// collector stored them, on its own clock: kept, also across a restart
// (before, they were deleted as they were stored, and the shipper dropped
// its copy). Under the size limit the one stored first goes first, not the
// one whose header says it is older.
TEST_F(CollectorTest, AgeAndOrderCountFromStoringNotFromTheSendersClock) {
#if LOUPE_UNDER_ASAN
  // libfaketime's preload deadlocks AddressSanitizer's start-up; the
  // ordinary build runs this.
  GTEST_SKIP() << "faketime cannot run a program built with AddressSanitizer";
#endif
  const std::string behind_dir = root_path() + "/behind";
  fs::create_directory(behind_dir);
  const std::string command =
      fmt::format("timeout 60 faketime -f -30d {} write {} behind 20000 262144 2>&1",
                  LOUPE_UPLOAD_SEGMENTS_BINARY, behind_dir);
  FILE* pipe = popen(command.c_str(), "r");
  ASSERT_NE(pipe, nullptr);
  std::string output;
  char buffer[512];
  while (fgets(buffer, sizeof buffer, pipe) != nullptr) output += buffer;
  ASSERT_EQ(pclose(pipe), 0) << output
                             << " (faketime: Debian's package, installed by tools/install-deps.sh)";
  std::istringstream lines(output);
  const std::string behind = [&] {
    std::string first;
    std::getline(lines, first);
    return first;
  }();
  const uint64_t month_ago_ns = BeginFor(segments_[0]).start_realtime_ns() - 25ull * 86'400'000'000'000;
  ASSERT_LT(BeginFor(behind).start_realtime_ns(), month_ago_ns) << "not written a month behind";

  const uint64_t week_s = 7 * 86'400;
  StopServer();
  StartServer({.root = store_dir(), .max_age_s = week_s});
  auto connection = Connect();
  ASSERT_TRUE(ship::UploadSegment(*connection, segments_[0], {}).ok());
  // Apart by more than a file time's granularity (a jiffy): restarted, the
  // store orders them by their files' times.
  std::this_thread::sleep_for(std::chrono::milliseconds(50));
  ASSERT_TRUE(ship::UploadSegment(*connection, behind, {}).ok());
  store_->EnforceRetention();
  EXPECT_EQ(Listed(*connection).size(), 2u);

  StopServer();
  StartServer({.root = store_dir(), .max_total_bytes = fs::file_size(behind), .max_age_s = week_s});
  store_->EnforceRetention();
  connection = Connect();
  const std::vector<v1::StoredSegment> kept = Listed(*connection);
  ASSERT_EQ(kept.size(), 1u);
  EXPECT_EQ(kept[0].id().session_id(), "behind");
}

}  // namespace
}  // namespace loupe
