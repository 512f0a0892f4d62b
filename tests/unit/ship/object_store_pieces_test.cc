// The object-store backend's pure pieces: the resumable digest, reading S3's
// XML, stored names both ways, credentials and S3 errors. The backend as a
// whole runs against a real S3 implementation in object_store_e2e.
#include <gtest/gtest.h>
#include <unistd.h>

#include <fstream>

#include "daemon/ship/sha256.h"
#include "tests/support/temp_dir.h"
#include "tools/collector/s3_client.h"
#include "tools/collector/s3_xml.h"
#include "tools/collector/segment_names.h"
#include "tools/collector/sha256_midstate.h"
#include "tools/collector/store_config.h"

namespace loupe::collector {
namespace {

std::string Bytes(size_t size) {
  std::string bytes(size, '\0');
  for (size_t i = 0; i < size; ++i) bytes[i] = static_cast<char>(i * 131 + i / 7);
  return bytes;
}

TEST(ResumableSha256Test, ResumedDigestIsTheWholeFilesDigest) {
  const std::string data = Bytes(3 * 4096 + 123);
  ship::Sha256 whole;
  whole.Update(data);
  const std::string expected = whole.Finish();
  for (size_t cut : {size_t{0}, size_t{64}, size_t{4096}, size_t{3 * 4096}}) {
    ResumableSha256 first;
    first.Update(std::string_view(data).substr(0, cut));
    // Another process: only the saved text crosses over.
    std::optional<ResumableSha256> resumed = ResumableSha256::Restore(first.Save());
    ASSERT_TRUE(resumed.has_value()) << first.Save();
    EXPECT_EQ(resumed->bytes(), cut);
    resumed->Update(std::string_view(data).substr(cut));
    EXPECT_EQ(resumed->Digest(), expected) << "cut at " << cut;
  }
}

TEST(ResumableSha256Test, RestoreRefusesWhatSaveDoesNotWrite) {
  ResumableSha256 sha;
  sha.Update(Bytes(128));
  std::string saved = sha.Save();
  EXPECT_TRUE(ResumableSha256::Restore(saved).has_value());
  EXPECT_FALSE(ResumableSha256::Restore("").has_value());
  EXPECT_FALSE(ResumableSha256::Restore("sha256-midstate 100 0 0 0 0 0 0 0 0").has_value())
      << "not at a block boundary";
  EXPECT_FALSE(ResumableSha256::Restore(saved.substr(0, saved.size() - 9)).has_value());
  EXPECT_FALSE(ResumableSha256::Restore("sha256-midstate 64 zz 0 0 0 0 0 0 0").has_value());
}

TEST(S3XmlTest, ElementsByExactNameWithEntities) {
  const std::string xml =
      R"(<?xml version="1.0"?><ListBucketResult xmlns="http://s3.amazonaws.com/doc/2006-03-01/">)"
      R"(<KeyCount>2</KeyCount><IsTruncated>true</IsTruncated>)"
      R"(<Contents><Key>a/b&amp;c@1.loupe</Key><Size>10</Size></Contents>)"
      R"(<Contents><Key>a/d&lt;e&gt;</Key><Size>20</Size></Contents>)"
      R"(<NextContinuationToken>x&quot;y</NextContinuationToken></ListBucketResult>)";
  const std::vector<std::string_view> contents = XmlElements(xml, "Contents");
  ASSERT_EQ(contents.size(), 2u);
  EXPECT_EQ(XmlText(contents[0], "Key"), "a/b&c@1.loupe");  // not KeyCount
  EXPECT_EQ(XmlText(contents[1], "Key"), "a/d<e>");
  EXPECT_EQ(XmlText(contents[1], "Size"), "20");
  EXPECT_EQ(XmlText(xml, "KeyCount"), "2");
  EXPECT_EQ(XmlText(xml, "NextContinuationToken"), "x\"y");
  EXPECT_EQ(XmlText(xml, "ListBucketResult").substr(0, 10), "<KeyCount>");
  EXPECT_EQ(XmlText(xml, "Missing"), "");
  EXPECT_TRUE(XmlElements("<Key>unclosed", "Key").empty());
  EXPECT_EQ(XmlEscape(R"(<a & 'b' "c">)"), "&lt;a &amp; &apos;b&apos; &quot;c&quot;&gt;");
}

TEST(S3ErrorTest, NamesTheRequestStatusCodeAndMessage) {
  const absl::Status denied = S3Error(
      "S3 PUT b/k", 403,
      "<Error><Code>AccessDenied</Code><Message>Access Denied</Message></Error>");
  EXPECT_EQ(denied.code(), absl::StatusCode::kPermissionDenied);
  EXPECT_EQ(denied.message(), "S3 PUT b/k: HTTP 403 AccessDenied: Access Denied");
  EXPECT_EQ(S3Error("S3 GET b/k", 404, "").code(), absl::StatusCode::kNotFound);
  EXPECT_EQ(S3Error("S3 GET b/k", 503, "<html>").message(), "S3 GET b/k: HTTP 503");
}

TEST(SegmentNamesTest, StoredNamesReadBackExactly) {
  v1::UploadBegin begin;
  begin.mutable_id()->set_host("web-1.example");
  begin.mutable_id()->set_boot_id("0f1e2d3c-4b5a");
  begin.mutable_id()->set_session_id("checkout_1");
  begin.mutable_id()->set_sequence(42);
  begin.set_sha256(std::string(32, '\xab'));
  begin.set_size(1);
  begin.set_start_realtime_ns(1'764'786'296'123'456'789);  // 2025-12-03T18:24:56.123456789Z
  const std::string name = StoredName(begin);
  EXPECT_EQ(name.substr(0, StoredNamePrefix(begin).size()), StoredNamePrefix(begin));
  EXPECT_EQ(name.substr(0, name.find('@')), "web-1.example/2025-12-03/182456.123456789");
  EXPECT_EQ(DayPrefix("web-1.example", begin.start_realtime_ns()), "web-1.example/2025-12-03/");
  std::optional<v1::StoredSegment> parsed = ParseStoredName(name);
  ASSERT_TRUE(parsed.has_value());
  EXPECT_EQ(parsed->id().SerializeAsString(), begin.id().SerializeAsString());
  EXPECT_EQ(parsed->start_realtime_ns(), begin.start_realtime_ns());
  EXPECT_EQ(parsed->sha256(), begin.sha256());
  EXPECT_EQ(parsed->name(), name);

  // Anything else in a bucket or folder is not a stored segment.
  const std::string file = name.substr(name.rfind('/') + 1);
  for (const std::string& other :
       {std::string(".staging/") + name, "../" + file, "web-1.example/2025-12-03/x/" + file,
        "web-1.example/" + file, name + ".partial",
        "web-1.example/2025-12-03/182456.123456789@checkout_1@42@0f1e2d3c-4b5a@" +
            std::string(64, 'a') + ".loupe",  // sequence not as written (000042)
        "web-1.example/2025-12-03/182456.123456789@checkout_1@000042@0f1e2d3c-4b5a@" +
            std::string(63, 'a') + ".loupe"}) {
    EXPECT_FALSE(ParseStoredName(other).has_value()) << other;
  }
}

class CredentialsTest : public ::testing::Test {
 protected:
  std::string File(const std::string& text) {
    const std::string path = dir_.path() + "/credentials";
    std::ofstream(path) << text;
    return path;
  }
  loupe::testing::TempDir dir_;
};

TEST_F(CredentialsTest, DefaultSectionOfTheFileThenTheEnvironment) {
  absl::StatusOr<S3Credentials> from_file = LoadS3Credentials(
      File("[other]\naws_access_key_id = wrong\n\n[default]\n# comment\naws_access_key_id = "
           "AKID\naws_secret_access_key=SECRET \naws_session_token = TOKEN\n"),
      {{"AWS_ACCESS_KEY_ID", "env"}, {"AWS_SECRET_ACCESS_KEY", "env"}});
  ASSERT_TRUE(from_file.ok()) << from_file.status();
  EXPECT_EQ(from_file->access_key_id, "AKID");
  EXPECT_EQ(from_file->secret_access_key, "SECRET");
  EXPECT_EQ(from_file->session_token, "TOKEN");

  absl::StatusOr<S3Credentials> from_env =
      LoadS3Credentials("", {{"AWS_ACCESS_KEY_ID", "A"}, {"AWS_SECRET_ACCESS_KEY", "S"}});
  ASSERT_TRUE(from_env.ok()) << from_env.status();
  EXPECT_EQ(from_env->access_key_id, "A");
  EXPECT_EQ(from_env->session_token, "");
}

TEST_F(CredentialsTest, MissingOnesAreNamed) {
  absl::StatusOr<S3Credentials> none = LoadS3Credentials("", {{"AWS_ACCESS_KEY_ID", "A"}});
  EXPECT_EQ(none.status().code(), absl::StatusCode::kInvalidArgument);
  EXPECT_NE(none.status().message().find("AWS_SECRET_ACCESS_KEY"), std::string::npos);
  absl::StatusOr<S3Credentials> other_profile =
      LoadS3Credentials(File("[prod]\naws_access_key_id = A\naws_secret_access_key = S\n"), {});
  EXPECT_FALSE(other_profile.ok());
  EXPECT_NE(other_profile.status().message().find("[default]"), std::string::npos);
  absl::StatusOr<S3Credentials> unreadable = LoadS3Credentials(dir_.path() + "/nope", {});
  EXPECT_EQ(unreadable.status().code(), absl::StatusCode::kNotFound);
}

}  // namespace
}  // namespace loupe::collector
