// How louped's `collector` setting and tracectl's --collector become a gRPC
// target: one name as it is, a list of IP addresses as a static target,
// anything else refused with the reason.
#include "daemon/ship/collector_target.h"

#include <gtest/gtest.h>

#include "daemon/base/status_util.h"

namespace loupe {
namespace {

using ship::ChannelTarget;

TEST(CollectorTargetTest, OneAddressOrATargetIsTakenAsItIs) {
  EXPECT_EQ(*ChannelTarget("collector.example:7470"), "collector.example:7470");
  EXPECT_EQ(*ChannelTarget(" 127.0.0.1:7470 "), "127.0.0.1:7470");
  EXPECT_EQ(*ChannelTarget("[::1]:7470"), "[::1]:7470");
  // gRPC's other schemes go as they are.
  EXPECT_EQ(*ChannelTarget("unix-abstract:loupe"), "unix-abstract:loupe");
  EXPECT_EQ(*ChannelTarget("xds:///collector"), "xds:///collector");
  EXPECT_EQ(*ChannelTarget("dns:///collector.example:7470"), "dns:///collector.example:7470");
  EXPECT_EQ(*ChannelTarget("ipv4:10.0.0.1:1,10.0.0.2:2"), "ipv4:10.0.0.1:1,10.0.0.2:2");
}

TEST(CollectorTargetTest, AListOfAddressesIsOneStaticTarget) {
  EXPECT_EQ(*ChannelTarget("127.0.0.1:7470,127.0.0.1:7471"), "ipv4:127.0.0.1:7470,127.0.0.1:7471");
  EXPECT_EQ(*ChannelTarget("10.0.0.5:7470, 10.0.0.6:7470"), "ipv4:10.0.0.5:7470,10.0.0.6:7470");
  EXPECT_EQ(*ChannelTarget("[::1]:7470,[fd00::2]:7470"), "ipv6:[::1]:7470,[fd00::2]:7470");
}

TEST(CollectorTargetTest, RefusesWhatIsNoAddressOrAddressList) {
  struct Case {
    std::string_view collectors, why;
  } cases[] = {
      {"", "no address"},
      {"a.example:7470,b.example:7470", "'a.example:7470' is not <IPv4>:<port>"},
      {"127.0.0.1:7470,", "'' is not"},
      {"127.0.0.1,127.0.0.2:7470", "'127.0.0.1' is not"},
      {"127.0.0.1:0,127.0.0.2:7470", "'127.0.0.1:0' is not"},
      {"127.0.0.1:70000,127.0.0.2:7470", "'127.0.0.1:70000' is not"},
      {"::1:7470,::2:7470", "'::1:7470' is not"},
      {"127.0.0.1:7470,[::1]:7470", "mixes IPv4 and IPv6"},
      {"nocolon", "'nocolon': not <host>:<port>"},
      {"collector.example:99999", "port in 1 .. 65535"},
      {"collector.example:0", "port in 1 .. 65535"},
      {"collector.example:", "not <host>:<port>"},
      {":7470", "not <host>:<port>"},
      {"::1:7470", "an IPv6 address goes in brackets"},
  };
  for (const Case& c : cases) {
    absl::StatusOr<std::string> target = ChannelTarget(c.collectors);
    ASSERT_FALSE(target.ok()) << c.collectors;
    EXPECT_TRUE(absl::IsInvalidArgument(target.status()));
    EXPECT_NE(MessageOf(target.status()).find(c.why), std::string_view::npos) << target.status();
  }
}

}  // namespace
}  // namespace loupe
