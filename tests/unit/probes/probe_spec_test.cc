#include "daemon/probes/probe_spec.h"

#include <fmt/format.h>
#include <gtest/gtest.h>

#include "daemon/probes/probe_plan.h"

namespace loupe::probes {
namespace {

TEST(ProbeSpecTest, UsdtRequests) {
  auto plain = ParseUsdtRequest("postgresql:query__start");
  ASSERT_TRUE(plain.ok());
  EXPECT_EQ(plain->provider, "postgresql");
  EXPECT_EQ(plain->name, "query__start");
  EXPECT_EQ(plain->string_arg, -1);
  auto with_string = ParseUsdtRequest("prov:query__start(str arg0)");
  ASSERT_TRUE(with_string.ok());
  EXPECT_EQ(with_string->string_arg, 0);
  auto globbed = ParseUsdtRequest("postgresql:*");
  ASSERT_TRUE(globbed.ok());
  EXPECT_TRUE(GlobMatch(globbed->name, "anything"));
  EXPECT_FALSE(GlobMatch("lib*", "stdcxx"));
  for (const char* bad : {"noprovider", ":name", "prov:", "prov:name(str arg12)",
                          "prov:name(int arg0)", "prov:name(str arg0", "pr ov:name", "prov:na/me"}) {
    auto request = ParseUsdtRequest(bad);
    ASSERT_FALSE(request.ok()) << bad;
    EXPECT_NE(request.status().ToString().find(bad), std::string::npos) << request.status();
  }
}

TEST(ProbeSpecTest, UprobeRequests) {
  auto simple = ParseUprobeRequest("libc:malloc");
  ASSERT_TRUE(simple.ok());
  EXPECT_EQ(simple->target, "libc");
  EXPECT_EQ(simple->symbol, "malloc");
  EXPECT_EQ(simple->offset, 0u);
  EXPECT_EQ(simple->arg_count, 0u);
  EXPECT_FALSE(simple->with_return);
  auto full = ParseUprobeRequest("/usr/bin/app:handle+0x10(3)%return");
  ASSERT_TRUE(full.ok());
  EXPECT_EQ(full->target, "/usr/bin/app");
  EXPECT_EQ(full->symbol, "handle");
  EXPECT_EQ(full->offset, 16u);
  EXPECT_EQ(full->arg_count, 3u);
  EXPECT_TRUE(full->with_return);
  // Go's symbols: package paths, pointer receivers, generics.
  for (const char* go : {"net/http.(*conn).serve", "main.F[go.shape.int]", "main.(*T).M-fm"}) {
    auto request = ParseUprobeRequest(fmt::format("/srv/server:{}(2)", go));
    ASSERT_TRUE(request.ok()) << go << ": " << request.status();
    EXPECT_EQ(request->symbol, go);
    EXPECT_EQ(request->arg_count, 2u);
  }
  // A frame as stacks print code with no symbol: the function holding it.
  auto frame = ParseUprobeRequest("postgres+0x47259d(1)%return");
  ASSERT_TRUE(frame.ok()) << frame.status();
  EXPECT_EQ(frame->target, "postgres");
  EXPECT_EQ(frame->frame_offset, 0x47259du);
  EXPECT_EQ(frame->frame, "postgres+0x47259d");
  EXPECT_TRUE(frame->symbol.empty());
  EXPECT_EQ(frame->arg_count, 1u);
  EXPECT_TRUE(frame->with_return);
  for (const char* bad : {"malloc", ":malloc", "libc:", "libc:malloc(7)", "libc:malloc(x)",
                          "libc:malloc+zz", "libc:mal loc", "libc:mal\tloc", "postgres+123",
                          "postgres+0xzz", "+0x10"}) {
    auto request = ParseUprobeRequest(bad);
    ASSERT_FALSE(request.ok()) << bad;
    EXPECT_NE(request.status().ToString().find(bad), std::string::npos) << request.status();
  }
  // A misspelt suffix is named as such, not as a bad symbol.
  auto misspelt = ParseUprobeRequest("libc:malloc%retur");
  ASSERT_FALSE(misspelt.ok());
  EXPECT_NE(misspelt.status().ToString().find("unknown suffix '%retur': the only one is %return"),
            std::string::npos)
      << misspelt.status();
}

TEST(ProbeSpecTest, ParseProbeRequestsStopsAtTheFirstBadOne) {
  ProbeRequests requests;
  EXPECT_TRUE(ParseProbeRequests({"a:b", "c:*"}, {"libc:free"}, &requests).ok());
  EXPECT_EQ(requests.usdt.size(), 2u);
  EXPECT_EQ(requests.uprobes.size(), 1u);
  ProbeRequests bad;
  auto status = ParseProbeRequests({"a:b"}, {"nocolon"}, &bad);
  EXPECT_FALSE(status.ok());
  EXPECT_NE(status.ToString().find("--uprobe 'nocolon'"), std::string::npos);
}

}  // namespace
}  // namespace loupe::probes
