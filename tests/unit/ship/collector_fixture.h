// A loupe-collector service on 127.0.0.1 (real gRPC, a real store in a
// temporary folder, token authentication) and real sample segments to send
// it, for the collector and shipper tests.
#ifndef LOUPE_TESTS_UNIT_SHIP_COLLECTOR_FIXTURE_H_
#define LOUPE_TESTS_UNIT_SHIP_COLLECTOR_FIXTURE_H_

#include <grpcpp/server_builder.h>
#include <gtest/gtest.h>
#include <spdlog/sinks/null_sink.h>

#include <filesystem>
#include <fstream>

#include "daemon/ship/collector_connection.h"
#include "daemon/ship/segment_upload.h"
#include "tests/support/sample_segments.h"
#include "tests/support/temp_dir.h"
#include "tools/collector/collector_service.h"
#include "tools/collector/fs_segment_store.h"

namespace loupe::testing {


class CollectorFixture : public ::testing::Test {
 protected:
  static constexpr char kToken[] = "test-token-0123456789";

  void SetUp() override {
    log_ = std::make_shared<spdlog::logger>("test", std::make_shared<spdlog::sinks::null_sink_mt>());
    std::ofstream(tokens_path())
        << "# client token grants\nshipper " << kToken << " upload=* read=*\n";
    std::ofstream(token_path()) << kToken << "\n";
    StartServer({.root = store_dir()});
    segments_ = WriteSampleSegments({.directory = local_.path(), .events = 150'000});
    ASSERT_GE(segments_.size(), 3u);
  }
  void TearDown() override { StopServer(); }

  void StartServer(collector::StoreOptions options) {
    auto store = collector::FsSegmentStore::Open(options, log_);
    ASSERT_TRUE(store.ok()) << store.status();
    store_ = *std::move(store);
    auto auth = collector::TokenAuth::Load(tokens_path());
    ASSERT_TRUE(auth.ok()) << auth.status();
    service_ = std::make_unique<collector::CollectorService>(store_.get(), *auth, log_);
    grpc::ServerBuilder builder;
    builder.AddListeningPort("127.0.0.1:0", grpc::InsecureServerCredentials(), &port_);
    builder.RegisterService(service_.get());
    server_ = builder.BuildAndStart();
    ASSERT_TRUE(server_ && port_ > 0);
  }
  void StopServer() {
    if (server_) server_->Shutdown(std::chrono::system_clock::now());
    server_.reset();
    service_.reset();
    store_.reset();
  }

  std::unique_ptr<ship::CollectorConnection> Connect(const std::string& token_file) {
    auto connection = ship::CollectorConnection::Open(
        {.address = "127.0.0.1:" + std::to_string(port_), .token_file = token_file});
    EXPECT_TRUE(connection.ok()) << connection.status();
    return *std::move(connection);
  }
  std::unique_ptr<ship::CollectorConnection> Connect() { return Connect(token_path()); }

  std::vector<v1::StoredSegment> Listed(ship::CollectorConnection& connection) {
    auto context = connection.NewContext(std::chrono::seconds(10));
    v1::ListSegmentsResponse listed;
    grpc::Status status = connection.stub().ListSegments(context.get(), {}, &listed);
    EXPECT_TRUE(status.ok()) << status.error_message();
    return {listed.segments().begin(), listed.segments().end()};
  }

  // Sends `begin` and the given chunks by hand; returns the call's status.
  grpc::Status RawUpload(ship::CollectorConnection& connection, const v1::UploadBegin& begin,
                         const std::vector<v1::UploadChunk>& chunks) {
    auto context = connection.NewContext(std::chrono::seconds(10));
    auto stream = connection.stub().Upload(context.get());
    v1::UploadRequest request;
    *request.mutable_begin() = begin;
    stream->Write(request);
    for (const v1::UploadChunk& chunk : chunks) {
      *request.mutable_chunk() = chunk;
      if (!stream->Write(request)) break;
    }
    stream->WritesDone();
    v1::UploadResponse response;
    while (stream->Read(&response)) {
    }
    return stream->Finish();
  }

  static v1::UploadBegin BeginFor(const std::string& path) {
    absl::StatusOr<v1::UploadBegin> begin = ship::DescribeSegment(path);
    EXPECT_TRUE(begin.ok()) << begin.status();
    return begin.ok() ? *begin : v1::UploadBegin();
  }

  static std::string Contents(const std::string& path) {
    std::ifstream in(path, std::ios::binary);
    return {std::istreambuf_iterator<char>(in), {}};
  }

  size_t StagedFiles() const {
    size_t count = 0;
    for (auto& entry : std::filesystem::directory_iterator(store_dir() + "/.staging")) count += entry.is_regular_file();
    return count;
  }

  std::string store_dir() const { return root_.path() + "/store"; }
  std::string root_path() const { return root_.path(); }
  std::string tokens_path() const { return root_.path() + "/tokens"; }
  std::string token_path() const { return root_.path() + "/token"; }

  TempDir root_, local_;
  std::shared_ptr<spdlog::logger> log_;
  std::unique_ptr<collector::FsSegmentStore> store_;
  std::unique_ptr<collector::CollectorService> service_;
  std::unique_ptr<grpc::Server> server_;
  int port_ = 0;
  std::vector<std::string> segments_;
};

}  // namespace loupe::testing

#endif  // LOUPE_TESTS_UNIT_SHIP_COLLECTOR_FIXTURE_H_
