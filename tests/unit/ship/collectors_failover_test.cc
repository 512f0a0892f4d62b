// Several collectors: two loupe-collector processes sharing one store
// folder, one connection balancing over both. The collector receiving an
// upload is SIGKILLed halfway; the upload is finished through the other,
// resumed from the bytes the first one staged, and stored once with its
// digest. Real processes on 127.0.0.1, every wait bounded.
#include <fmt/format.h>
#include <gtest/gtest.h>
#include <signal.h>

#include <filesystem>
#include <fstream>
#include <mutex>
#include <thread>

#include "daemon/ship/collector_connection.h"
#include "daemon/ship/segment_upload.h"
#include "daemon/ship/sha256.h"
#include "tests/support/child_process.h"
#include "tests/support/sample_segments.h"
#include "tests/support/temp_dir.h"

namespace loupe {
namespace {

namespace fs = std::filesystem;
using namespace std::chrono_literals;

// Polls `done` every 20 ms for at most `limit`; whether it became true.
template <typename Condition>
bool WaitFor(Condition done, std::chrono::milliseconds limit) {
  const auto give_up = std::chrono::steady_clock::now() + limit;
  while (!done()) {
    if (std::chrono::steady_clock::now() > give_up) return false;
    std::this_thread::sleep_for(20ms);
  }
  return true;
}

class CollectorsFailoverTest : public ::testing::Test {
 protected:
  struct Collector {
    std::unique_ptr<testing::ChildProcess> process;
    std::string port;
  };

  void SetUp() override {
    std::ofstream(work_.File("tokens")) << "louped-1 failover-token-0123456789 upload=test-host "
                                           "read=test-host\n";
    std::ofstream(work_.File("token")) << "failover-token-0123456789\n";
    for (Collector& collector : collectors_) {
      const std::string port_file = work_.File(fmt::format("port{}", &collector - collectors_));
      collector.process = std::make_unique<testing::ChildProcess>(std::vector<std::string>{
          LOUPE_COLLECTOR_BINARY, "--listen", "127.0.0.1:0", "--port-file", port_file, "--store",
          store(), "--tokens-file", work_.File("tokens"), "--log-level", "warn"});
      ASSERT_TRUE(WaitFor([&] { return fs::exists(port_file); }, 10s)) << "no port from collector";
      std::ifstream(port_file) >> collector.port;
    }
    // One segment of about a megabyte, sent slowly enough to be cut.
    segment_ = testing::WriteSampleSegments(
        {.directory = local_.path(), .events = 220'000, .max_file_size = 4 << 20})[0];
    ASSERT_GT(fs::file_size(segment_), 512u << 10);
  }

  std::string store() const { return work_.File("store"); }
  std::string Target() const {
    return fmt::format("127.0.0.1:{},127.0.0.1:{}", collectors_[0].port, collectors_[1].port);
  }
  uint64_t StagedBytes() const {
    uint64_t bytes = 0;
    std::error_code error;
    for (const auto& entry : fs::directory_iterator(store() + "/.staging", error)) {
      bytes += entry.file_size(error);
    }
    return bytes;
  }
  std::vector<fs::path> StoredFiles() const {
    std::vector<fs::path> files;
    for (const auto& entry : fs::recursive_directory_iterator(store() + "/test-host")) {
      if (entry.is_regular_file()) files.push_back(entry.path());
    }
    return files;
  }

  testing::TempDir work_, local_;
  Collector collectors_[2];
  std::string segment_;
};

TEST_F(CollectorsFailoverTest, AnUploadCutOnOneCollectorIsFinishedThroughTheOther) {
  auto opened = ship::CollectorConnection::Open({Target(), work_.File("token"), ""});
  ASSERT_TRUE(opened.ok()) << opened.status();
  ship::CollectorConnection& connection = **opened;

  // The call's context tells which collector took the upload (its peer).
  std::mutex mutex;
  grpc::ClientContext* call = nullptr;
  absl::StatusOr<ship::UploadOutcome> cut = absl::UnknownError("not run");
  std::thread upload([&] {
    cut = ship::UploadSegment(connection, segment_,
                              {.chunk_bytes = 16 << 10, .rate_limit_bytes_per_s = 256 << 10},
                              [&](grpc::ClientContext* context) {
                                std::lock_guard<std::mutex> lock(mutex);
                                call = context;
                              });
  });
  ASSERT_TRUE(WaitFor([&] { return StagedBytes() >= (128u << 10); }, 10s))
      << "nothing staged on either collector";
  std::string peer;
  {
    std::lock_guard<std::mutex> lock(mutex);
    ASSERT_NE(call, nullptr) << "the upload ended before it could be cut";
    peer = call->peer();
  }
  Collector* receiving = nullptr;
  for (Collector& collector : collectors_) {
    if (peer.ends_with(":" + collector.port)) receiving = &collector;
  }
  ASSERT_NE(receiving, nullptr) << "peer " << peer;
  kill(receiving->process->pid(), SIGKILL);
  receiving->process->Wait();
  upload.join();
  ASSERT_FALSE(cut.ok()) << "the upload finished before its collector was killed";
  const uint64_t staged = StagedBytes();

  // What louped's shipper does after a failure: try again, a little later.
  absl::StatusOr<ship::UploadOutcome> finished = absl::UnknownError("not tried");
  for (int attempt = 0; attempt < 20 && !finished.ok(); ++attempt) {
    finished = ship::UploadSegment(connection, segment_, {});
    if (!finished.ok()) std::this_thread::sleep_for(250ms);
  }
  ASSERT_TRUE(finished.ok()) << finished.status();
  EXPECT_FALSE(finished->duplicate);
  EXPECT_EQ(finished->resumed_from, staged) << "the surviving collector did not resume";
  EXPECT_EQ(finished->bytes_sent, fs::file_size(segment_) - staged);

  const std::vector<fs::path> stored = StoredFiles();
  ASSERT_EQ(stored.size(), 1u);
  EXPECT_EQ(*ship::Sha256OfFile(stored[0].string()), *ship::Sha256OfFile(segment_));
  EXPECT_NE(stored[0].filename().string().find(ship::HexOf(*ship::Sha256OfFile(segment_))),
            std::string::npos);
  EXPECT_EQ(StagedBytes(), 0u);

  // The survivor serves the rest: the repeat is acknowledged as stored, and
  // listing through the list of addresses skips the dead collector.
  absl::StatusOr<ship::UploadOutcome> again = ship::UploadSegment(connection, segment_, {});
  ASSERT_TRUE(again.ok()) << again.status();
  EXPECT_TRUE(again->duplicate);
  auto context = connection.NewContext(10s);
  v1::ListSegmentsResponse listed;
  grpc::Status status = connection.stub().ListSegments(context.get(), {}, &listed);
  ASSERT_TRUE(status.ok()) << status.error_message();
  ASSERT_EQ(listed.segments_size(), 1);
  EXPECT_EQ(listed.segments(0).sha256(), *ship::Sha256OfFile(segment_));
}

}  // namespace
}  // namespace loupe
