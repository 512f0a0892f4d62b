// Per-client authorization in loupe-collector, over real gRPC on 127.0.0.1:
// a client uploads only as the hosts it is granted, lists and fetches only
// the hosts it may read, and cannot block another client's upload (the
// forged-copy attack of issue 18).
#include <gtest/gtest.h>

#include <filesystem>
#include <fstream>

#include "daemon/base/status_util.h"
#include "daemon/ship/sha256.h"
#include "tests/unit/ship/collector_fixture.h"

namespace loupe {
namespace {

namespace fs = std::filesystem;

// Host "test-host" is web-a's (the fixture's segments), "host-b" web-b's.
class CollectorAuthzTest : public testing::CollectorFixture {
 protected:
  void SetUp() override {
    CollectorFixture::SetUp();
    std::ofstream(tokens_path()) << "web-a token-of-web-a-0123456789 upload=test-host read=test-host\n"
                                    "web-b token-of-web-b-0123456789 upload=host-b\n"
                                    "ops token-of-ops-0123456789 upload= read=host-*\n"
                                    "legacy token-of-legacy-0123456789\n";
    for (const char* client : {"web-a", "web-b", "ops", "legacy"}) {
      std::ofstream(TokenFile(client)) << "token-of-" << client << "-0123456789\n";
    }
    StopServer();
    StartServer({.root = store_dir()});
    host_b_ = testing::WriteSampleSegments(
        {.directory = local_b_.path(), .host = "host-b", .events = 40'000, .seed = 2});
    ASSERT_FALSE(host_b_.empty());
  }

  std::string TokenFile(const std::string& client) const {
    return root_.path() + "/" + client + ".token";
  }
  std::unique_ptr<ship::CollectorConnection> As(const std::string& client) {
    return Connect(TokenFile(client));
  }

  static absl::StatusOr<std::vector<v1::StoredSegment>> List(ship::CollectorConnection& connection,
                                                             const std::string& host) {
    auto context = connection.NewContext(std::chrono::seconds(10));
    v1::ListSegmentsRequest request;
    request.set_host(host);
    v1::ListSegmentsResponse listed;
    grpc::Status status = connection.stub().ListSegments(context.get(), request, &listed);
    if (!status.ok()) return connection.Explain(status, "list");
    return std::vector<v1::StoredSegment>(listed.segments().begin(), listed.segments().end());
  }

  static absl::StatusOr<std::string> Fetch(ship::CollectorConnection& connection,
                                           const std::string& name) {
    auto context = connection.NewContext(std::chrono::seconds(10));
    v1::FetchSegmentRequest request;
    request.set_name(name);
    auto reader = connection.stub().FetchSegment(context.get(), request);
    std::string bytes;
    v1::FetchSegmentChunk chunk;
    while (reader->Read(&chunk)) bytes += chunk.data();
    grpc::Status status = reader->Finish();
    if (!status.ok()) return connection.Explain(status, "fetch " + name);
    return bytes;
  }

  // The paths of every segment stored under `host`'s folder.
  std::vector<std::string> StoredFiles(const std::string& host) const {
    std::vector<std::string> files;
    if (!fs::exists(store_dir() + "/" + host)) return files;
    for (const auto& entry : fs::recursive_directory_iterator(store_dir() + "/" + host)) {
      if (entry.is_regular_file()) files.push_back(entry.path().string());
    }
    return files;
  }

  static void ExpectDenied(const absl::Status& status, std::string_view message) {
    EXPECT_TRUE(absl::IsPermissionDenied(status)) << status;
    EXPECT_NE(MessageOf(status).find(message), std::string_view::npos) << status;
  }

  testing::TempDir local_b_;
  std::vector<std::string> host_b_;
};

TEST_F(CollectorAuthzTest, UploadsOnlyAsGrantedHosts) {
  auto web_a = As("web-a");
  ASSERT_TRUE(ship::UploadSegment(*web_a, segments_[0], {}).ok());
  absl::StatusOr<ship::UploadOutcome> as_b = ship::UploadSegment(*web_a, host_b_[0], {});
  ExpectDenied(as_b.status(),
               "client web-a may not upload as host host-b (the tokens file grants it "
               "upload=test-host)");
  // A reader-only client and a line without grants upload nothing foreign.
  ExpectDenied(ship::UploadSegment(*As("ops"), host_b_[0], {}).status(),
               "client ops may not upload as host host-b (the tokens file grants it "
               "upload=(none))");
  ExpectDenied(ship::UploadSegment(*As("legacy"), segments_[1], {}).status(),
               "client legacy may not upload as host test-host (the tokens file grants it "
               "upload=legacy)");
  EXPECT_EQ(StagedFiles(), 0u);
  EXPECT_TRUE(StoredFiles("host-b").empty());
  EXPECT_EQ(StoredFiles("test-host").size(), 1u);
}

// A segment stamped far in the future (the client writes its own header)
// comes from a host whose clock is wrong; listed by start it would sit out
// of its place in time. Such an upload is refused before anything is staged.
TEST_F(CollectorAuthzTest, AStartTimeFarAheadOfTheCollectorsClockIsRefused) {
  auto web_a = As("web-a");
  auto context = web_a->NewContext(std::chrono::seconds(10));
  auto stream = web_a->stub().Upload(context.get());
  v1::UploadRequest request;
  v1::UploadBegin& begin = *request.mutable_begin();
  begin.mutable_id()->set_host("test-host");
  begin.mutable_id()->set_boot_id("boot");
  begin.mutable_id()->set_session_id("future");
  begin.set_sha256(std::string(ship::kSha256Bytes, 'x'));
  begin.set_size(4096);
  begin.set_start_realtime_ns(16'725'225'600'000'000'000u);  // 2500-01-01
  ASSERT_TRUE(stream->Write(request));
  stream->WritesDone();
  v1::UploadResponse response;
  while (stream->Read(&response)) {
  }
  const grpc::Status status = stream->Finish();
  EXPECT_EQ(status.error_code(), grpc::StatusCode::INVALID_ARGUMENT);
  EXPECT_NE(status.error_message().find("ahead of this collector's clock"), std::string::npos)
      << status.error_message();
  EXPECT_EQ(StagedFiles(), 0u);
}

// A host or name longer than any can be is refused before it is matched
// against a pattern (a long one costs its length times the pattern's) or
// quoted back in a refusal.
TEST_F(CollectorAuthzTest, OverlongHostsAndNamesAreRefusedUnmatched) {
  auto ops = As("ops");
  const absl::Status listed = List(*ops, "host-" + std::string(1 << 20, 'a')).status();
  EXPECT_TRUE(absl::IsInvalidArgument(listed)) << listed;
  EXPECT_NE(MessageOf(listed).find("a host name has at most 253"), std::string_view::npos);
  EXPECT_LT(MessageOf(listed).size(), 200u);  // the host is not quoted back
  const absl::Status fetched = Fetch(*ops, "host-b/" + std::string(4096, 'a')).status();
  EXPECT_TRUE(absl::IsInvalidArgument(fetched)) << fetched;
  EXPECT_NE(MessageOf(fetched).find("name of 4103 bytes: a stored segment's name has at most 1024"),
            std::string_view::npos);
}

// Issue 18: web-a uploaded a truncated copy of host-b's segment under
// host-b's identity; it was stored, and web-b's genuine upload then failed
// with "different sha256". Now web-a is refused before anything is staged,
// and web-b's upload is stored as its own.
TEST_F(CollectorAuthzTest, AForgedCopyUnderAnotherClientsIdentityCannotBlockIt) {
  const std::string genuine = host_b_[0];
  const std::string forged = local_.path() + "/forged.loupe";
  {
    const std::string bytes = Contents(genuine);
    std::ofstream(forged, std::ios::binary) << bytes.substr(0, bytes.size() / 2);
  }
  const v1::UploadBegin forged_begin = BeginFor(forged);
  ASSERT_EQ(forged_begin.id().SerializeAsString(), BeginFor(genuine).id().SerializeAsString());

  auto web_a = As("web-a");
  absl::StatusOr<ship::UploadOutcome> forgery = ship::UploadSegment(*web_a, forged, {});
  ExpectDenied(forgery.status(), "client web-a may not upload as host host-b");
  // Cut short by hand after a first chunk: still nothing staged.
  const std::string half = Contents(forged);
  grpc::Status raw = RawUpload(*web_a, forged_begin, {[&] {
                                 v1::UploadChunk chunk;
                                 chunk.set_offset(0);
                                 chunk.set_data(half.substr(0, 4096));
                                 return chunk;
                               }()});
  EXPECT_EQ(raw.error_code(), grpc::StatusCode::PERMISSION_DENIED) << raw.error_message();
  EXPECT_EQ(StagedFiles(), 0u);

  auto web_b = As("web-b");
  absl::StatusOr<ship::UploadOutcome> stored = ship::UploadSegment(*web_b, genuine, {});
  ASSERT_TRUE(stored.ok()) << stored.status();
  EXPECT_FALSE(stored->duplicate);
  EXPECT_EQ(stored->resumed_from, 0u);
  const std::vector<std::string> files = StoredFiles("host-b");
  ASSERT_EQ(files.size(), 1u);
  EXPECT_EQ(*ship::Sha256OfFile(files[0]), *ship::Sha256OfFile(genuine));

  // The genuine copy stays the one stored: web-a is still refused (not told
  // of a digest), web-b's repeat is a duplicate.
  ExpectDenied(ship::UploadSegment(*web_a, forged, {}).status(), "may not upload as host host-b");
  absl::StatusOr<ship::UploadOutcome> again = ship::UploadSegment(*web_b, genuine, {});
  ASSERT_TRUE(again.ok()) << again.status();
  EXPECT_TRUE(again->duplicate);
}

TEST_F(CollectorAuthzTest, ListsAndFetchesOnlyReadableHosts) {
  auto web_a = As("web-a");
  auto web_b = As("web-b");
  ASSERT_TRUE(ship::UploadSegment(*web_a, segments_[0], {}).ok());
  ASSERT_TRUE(ship::UploadSegment(*web_b, host_b_[0], {}).ok());
  // web-a reads its own host only.
  ExpectDenied(List(*web_a, "host-b").status(),
               "client web-a may not list segments of host host-b (the tokens file grants it "
               "read=test-host)");
  absl::StatusOr<std::vector<v1::StoredSegment>> own = List(*web_a, "");
  ASSERT_TRUE(own.ok()) << own.status();
  ASSERT_EQ(own->size(), 1u);
  EXPECT_EQ((*own)[0].id().host(), "test-host");
  absl::StatusOr<std::string> fetched = Fetch(*web_a, (*own)[0].name());
  ASSERT_TRUE(fetched.ok()) << fetched.status();
  EXPECT_EQ(*fetched, Contents(segments_[0]));

  // ops reads host-* and sees host-b's segment, which web-a may not fetch.
  absl::StatusOr<std::vector<v1::StoredSegment>> ops = List(*As("ops"), "");
  ASSERT_TRUE(ops.ok()) << ops.status();
  ASSERT_EQ(ops->size(), 1u);
  const std::string b_name = (*ops)[0].name();
  EXPECT_EQ((*ops)[0].id().host(), "host-b");
  ExpectDenied(List(*As("ops"), "test-host").status(), "client ops may not list segments of host test-host");
  ExpectDenied(Fetch(*web_a, b_name).status(),
               "client web-a may not fetch segments of host host-b (the tokens file grants it "
               "read=test-host)");
  // Refused alike whether or not the name exists.
  ExpectDenied(Fetch(*web_a, "host-b/2026-01-01/nothing.loupe").status(),
               "may not fetch segments of host host-b");
  absl::StatusOr<std::string> b_bytes = Fetch(*As("ops"), b_name);
  ASSERT_TRUE(b_bytes.ok()) << b_bytes.status();
  EXPECT_EQ(*b_bytes, Contents(host_b_[0]));

  // Uploading grants no reading: web-b and legacy read nothing, not even
  // their own host.
  ExpectDenied(List(*web_b, "").status(),
               "client web-b may not list segments: the tokens file grants it read=(none)");
  ExpectDenied(List(*web_b, "host-b").status(), "client web-b may not list segments of host host-b");
  ExpectDenied(Fetch(*web_b, b_name).status(), "client web-b may not fetch segments of host host-b");
  ExpectDenied(List(*As("legacy"), "").status(), "client legacy may not list segments");
}

}  // namespace
}  // namespace loupe
