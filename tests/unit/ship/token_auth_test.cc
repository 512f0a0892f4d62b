// The collector's tokens file: its lines, the grants they carry, their
// defaults, and the host patterns those grants are written in.
#include "tools/collector/token_auth.h"

#include <gtest/gtest.h>

#include <fstream>

#include "daemon/base/status_util.h"
#include "tests/support/temp_dir.h"

namespace loupe {
namespace {

using collector::HostPatterns;
using collector::TokenAuth;

HostPatterns Patterns(std::string_view list) {
  absl::StatusOr<HostPatterns> parsed = HostPatterns::Parse(list);
  EXPECT_TRUE(parsed.ok()) << parsed.status();
  return parsed.ok() ? *parsed : HostPatterns();
}

TEST(HostPatternsTest, StarStandsForAnyRunOfCharacters) {
  const HostPatterns web = Patterns("web-*,db-1");
  EXPECT_TRUE(web.Matches("web-1"));
  EXPECT_TRUE(web.Matches("web-"));
  EXPECT_TRUE(web.Matches("db-1"));
  EXPECT_FALSE(web.Matches("db-10"));
  EXPECT_FALSE(web.Matches("xweb-1"));
  EXPECT_TRUE(Patterns("*-prod-*.example").Matches("a-prod-b-prod-c.example"));
  EXPECT_FALSE(Patterns("*-prod-*.example").Matches("a-prod.example"));
  EXPECT_TRUE(HostPatterns::Any().Matches("anything"));
  EXPECT_FALSE(Patterns("").Matches("web-1"));
  EXPECT_TRUE(Patterns("").empty());
  EXPECT_EQ(Patterns("").ToString(), "(none)");
  EXPECT_EQ(web.ToString(), "web-*,db-1");
}

TEST(HostPatternsTest, OverlapIsExact) {
  EXPECT_TRUE(Patterns("web-*").Overlap(Patterns("*-1")));  // web-1
  EXPECT_TRUE(Patterns("web-*").Overlap(Patterns("db-1,web-2")));
  EXPECT_TRUE(Patterns("*").Overlap(Patterns("db-1")));
  EXPECT_TRUE(Patterns("a*b*c").Overlap(Patterns("*bc")));  // abc
  EXPECT_FALSE(Patterns("web-*").Overlap(Patterns("db-*")));
  EXPECT_FALSE(Patterns("*-a").Overlap(Patterns("*-b")));
  EXPECT_FALSE(Patterns("web-1").Overlap(Patterns("web-10")));
  EXPECT_FALSE(Patterns("").Overlap(HostPatterns::Any()));
}

TEST(HostPatternsTest, RefusesWhatNoHostNameCouldBe) {
  for (std::string_view bad : {"web/1", "web-1,", ",web", "a b", ".hidden", "web?"}) {
    absl::StatusOr<HostPatterns> parsed = HostPatterns::Parse(bad);
    ASSERT_FALSE(parsed.ok()) << bad;
    EXPECT_NE(parsed.status().message().find("host pattern"), absl::string_view::npos);
  }
}

class TokensFileTest : public ::testing::Test {
 protected:
  absl::StatusOr<TokenAuth> Load(std::string_view text) {
    std::ofstream(path_) << text;
    return TokenAuth::Load(path_);
  }
  void ExpectRefused(std::string_view text, std::string_view why) {
    absl::StatusOr<TokenAuth> loaded = Load(text);
    ASSERT_FALSE(loaded.ok()) << text;
    EXPECT_NE(MessageOf(loaded.status()).find(why), std::string_view::npos) << loaded.status();
  }
  const collector::Client& ClientOf(const TokenAuth& auth, const std::string& token) {
    const std::string header = "Bearer " + token;
    absl::StatusOr<const collector::Client*> client = auth.Check(&header);
    EXPECT_TRUE(client.ok()) << client.status();
    return **client;
  }

  testing::TempDir dir_;
  const std::string path_ = dir_.path() + "/tokens";
};

TEST_F(TokensFileTest, LinesAreCheckedOneByOne) {
  ExpectRefused("alpha 0123456789abcdef\nbeta\n", ":2: expected '<client-name> <token>");
  ExpectRefused("alpha upload=web-1\n", ":1: expected");
  ExpectRefused("alpha short\n", "shorter than 16");
  ExpectRefused("# nobody\n", "holds no tokens");
  ExpectRefused("a 0123456789abcdef\nb 0123456789abcdef\n", ":2: the token of b is used twice");
  ExpectRefused("a 0123456789abcdef write=*\n", "'write=*': expected upload=<hosts> or read=");
  ExpectRefused("a 0123456789abcdef upload\n", "'upload': expected");
  ExpectRefused("a 0123456789abcdef read=* read=web-1\n", "read= given twice");
  ExpectRefused("a 0123456789abcdef upload=web/1\n", "upload=: host pattern 'web/1'");
}

TEST_F(TokensFileTest, GrantsAndTheirConservativeDefaults) {
  absl::StatusOr<TokenAuth> auth = Load(
      "web 0123456789abcdef-w upload=web-*,db-1 read=*  # the web fleet\n"
      "ops 0123456789abcdef-o upload= read=web-*\n"
      "db-2 0123456789abcdef-d\n"
      "odd@name 0123456789abcdef-x\n");
  ASSERT_TRUE(auth.ok()) << auth.status();
  const collector::Client& web = ClientOf(*auth, "0123456789abcdef-w");
  EXPECT_EQ(web.name, "web");
  EXPECT_TRUE(web.upload.Matches("web-7"));
  EXPECT_TRUE(web.upload.Matches("db-1"));
  EXPECT_FALSE(web.upload.Matches("db-2"));
  EXPECT_TRUE(web.read.Matches("db-2"));
  const collector::Client& ops = ClientOf(*auth, "0123456789abcdef-o");
  EXPECT_TRUE(ops.upload.empty());
  EXPECT_TRUE(ops.read.Matches("web-1"));
  EXPECT_FALSE(ops.read.Matches("db-1"));
  // No fields: uploads only as the host named like the client, reads nothing.
  const collector::Client& db = ClientOf(*auth, "0123456789abcdef-d");
  EXPECT_TRUE(db.upload.Matches("db-2"));
  EXPECT_FALSE(db.upload.Matches("db-20"));
  EXPECT_TRUE(db.read.empty());
  // A name no host could have: nothing at all.
  const collector::Client& odd = ClientOf(*auth, "0123456789abcdef-x");
  EXPECT_TRUE(odd.upload.empty());
  EXPECT_TRUE(odd.read.empty());
  EXPECT_EQ(auth->Describe()[0], "client web: upload=web-*,db-1 read=*");
  EXPECT_EQ(auth->Describe()[2], "client db-2: upload=db-2 read=(none)");
}

TEST_F(TokensFileTest, TwoClientsMayNotUploadAsOneHost) {
  ExpectRefused(
      "web 0123456789abcdef-w upload=web-*\nweb-1 0123456789abcdef-1\n",
      ":2: client web-1 may upload as hosts that client web (line 1) may upload as too "
      "('web-1' and 'web-*'");
  ExpectRefused("all 0123456789abcdef-a upload=*\nb 0123456789abcdef-b upload=db-*\n",
                "client b may upload as hosts that client all");
  // One client's two tokens (one being rotated) may, and readers may overlap.
  EXPECT_TRUE(Load("web 0123456789abcdef-w upload=web-*\n"
                   "web 0123456789abcdef-n upload=web-*\n"
                   "ops 0123456789abcdef-o upload= read=*\n"
                   "db 0123456789abcdef-d upload=db-* read=*\n")
                  .ok());
}

TEST_F(TokensFileTest, TokensAreCheckedAsBearerHeaders) {
  absl::StatusOr<TokenAuth> auth = Load("alpha 0123456789abcdef read=*\n");
  ASSERT_TRUE(auth.ok()) << auth.status();
  EXPECT_TRUE(absl::IsUnauthenticated(auth->Check(nullptr).status()));
  const std::string basic = "Basic 0123456789abcdef", wrong = "Bearer 0123456789abcdeX";
  EXPECT_NE(auth->Check(&basic).status().message().find("not 'Bearer <token>'"),
            absl::string_view::npos);
  EXPECT_NE(auth->Check(&wrong).status().message().find("not one this collector accepts"),
            absl::string_view::npos);
  EXPECT_EQ(ClientOf(*auth, "0123456789abcdef").name, "alpha");
}

}  // namespace
}  // namespace loupe
