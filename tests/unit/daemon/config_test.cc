// louped's configuration layers: file, then LOUPE_* environment, then flags;
// every bad value names its key, where it came from and what is allowed; and
// the effective settings are checked as an attach will take them
// (--check-config refuses what every attach would).
#include "daemon/louped/config.h"
#include "daemon/louped/session_defaults.h"

#include <gtest/gtest.h>
#include <stdlib.h>

#include <filesystem>
#include <fstream>

#include "tests/support/temp_dir.h"

namespace loupe::louped {
namespace {

std::string WriteConfig(const testing::TempDir& dir, const std::string& text) {
  const std::string path = dir.File("louped.toml");
  std::ofstream(path) << text;
  return path;
}

TEST(ConfigTest, DefaultsWithoutAFile) {
  auto config = LoadConfig("/nonexistent/louped.toml", /*file_required=*/false, {});
  ASSERT_TRUE(config.ok()) << config.status();
  EXPECT_EQ(config->socket, "/run/loupe/louped.sock");
  EXPECT_EQ(config->sample_hz, 99u);
  EXPECT_EQ(config->ring_buffer_size, 4u << 20);
}

TEST(ConfigTest, FlagsBeatEnvironmentBeatsFile) {
  testing::TempDir dir;
  const std::string file =
      WriteConfig(dir, "sample_hz = 199\nmax_file_size = 1048576\noutput_dir = \"/srv/t\"\n");
  setenv("LOUPE_SAMPLE_HZ", "299", 1);
  setenv("LOUPE_OUTPUT_DIR", "/env/t", 1);
  auto config = LoadConfig(file, true, {{"sample_hz", "399"}});
  unsetenv("LOUPE_SAMPLE_HZ");
  unsetenv("LOUPE_OUTPUT_DIR");
  ASSERT_TRUE(config.ok()) << config.status();
  EXPECT_EQ(config->sample_hz, 399u);          // flag
  EXPECT_EQ(config->output_dir, "/env/t");     // environment
  EXPECT_EQ(config->max_file_size, 1u << 20);  // file
}

TEST(ConfigTest, BadInputNamesKeyOriginAndRange) {
  testing::TempDir dir;
  struct Case {
    std::string file;
    std::map<std::string, std::string> flags;
    std::string expected;
  };
  const Case cases[] = {
      {"sample_hz = 0\n",
       {},
       "sample_hz (" + dir.File("louped.toml") + "): '0' is not a whole number in 1 .. 10000"},
      {"colour = \"blue\"\n", {}, "unknown key 'colour'"},
      {"sample_hz = \"fast\"\n", {}, "'fast' is not a whole number"},
      {"sample_hz = [1]\n", {}, "key 'sample_hz' must be a non-negative integer"},
      {"sample_hz = \n", {}, dir.File("louped.toml") + ":1:"},
      {"", {{"log_level", "loud"}}, "log_level (flag): 'loud' is not one of"},
      {"", {{"ring_buffer_size", "12"}}, "ring_buffer_size (flag): '12'"},
  };
  for (const Case& c : cases) {
    auto config = LoadConfig(WriteConfig(dir, c.file), true, c.flags);
    ASSERT_FALSE(config.ok()) << c.expected;
    EXPECT_NE(config.status().ToString().find(c.expected), std::string::npos) << config.status();
  }
  auto missing = LoadConfig(dir.File("absent.toml"), /*file_required=*/true, {});
  ASSERT_FALSE(missing.ok());
  EXPECT_NE(missing.status().ToString().find("does not exist"), std::string::npos);
}

TEST(ConfigTest, PathsMustBeStrings) {
  testing::TempDir dir;
  auto config = LoadConfig(WriteConfig(dir, "output_dir = 5\n"), true, {});
  ASSERT_FALSE(config.ok());
  EXPECT_NE(config.status().ToString().find("key 'output_dir' must be a string"),
            std::string::npos)
      << config.status();
  auto socket = LoadConfig(WriteConfig(dir, "socket = 1\n"), true, {});
  ASSERT_FALSE(socket.ok());
  EXPECT_NE(socket.status().ToString().find("key 'socket' must be a string"), std::string::npos);
  // A number may still be written as a string.
  auto quoted = LoadConfig(WriteConfig(dir, "sample_hz = \"199\"\n"), true, {});
  ASSERT_TRUE(quoted.ok()) << quoted.status();
  EXPECT_EQ(quoted->sample_hz, 199u);
}

TEST(ConfigTest, ShutdownTimeoutHasADefaultAndARange) {
  testing::TempDir dir;
  auto config = LoadConfig(WriteConfig(dir, ""), true, {});
  ASSERT_TRUE(config.ok());
  EXPECT_EQ(config->shutdown_timeout_s, 30u);
  auto set = LoadConfig(WriteConfig(dir, "shutdown_timeout_s = 5\n"), true, {});
  ASSERT_TRUE(set.ok()) << set.status();
  EXPECT_EQ(set->shutdown_timeout_s, 5u);
  EXPECT_FALSE(LoadConfig(WriteConfig(dir, "shutdown_timeout_s = 0\n"), true, {}).ok());
}

TEST(EffectiveConfigTest, DefaultsAreAcceptedAsAnAttachTakesThem) {
  EXPECT_TRUE(CheckEffectiveConfig(DaemonConfig()).ok()) << CheckEffectiveConfig(DaemonConfig());
  // A group that exists, a missing output directory (louped makes it).
  DaemonConfig config;
  config.socket_group = "root";
  config.output_dir = "/nonexistent/loupe/traces";
  EXPECT_TRUE(CheckEffectiveConfig(config).ok()) << CheckEffectiveConfig(config);
}

TEST(ConfigTest, MaxSessionsPerUserHasADefaultAndARange) {
  testing::TempDir dir;
  auto config = LoadConfig(WriteConfig(dir, ""), true, {});
  ASSERT_TRUE(config.ok());
  EXPECT_EQ(config->max_sessions_per_user, 8u);
  auto set = LoadConfig(WriteConfig(dir, "max_sessions_per_user = 2\n"), true, {});
  ASSERT_TRUE(set.ok()) << set.status();
  EXPECT_EQ(set->max_sessions_per_user, 2u);
  EXPECT_FALSE(LoadConfig(WriteConfig(dir, "max_sessions_per_user = 0\n"), true, {}).ok());
}

TEST(EffectiveConfigTest, SessionsWaitForSymbolsHalfTheShutdownBudgetAtMost) {
  DaemonConfig config;
  EXPECT_EQ(SessionDefaults(config).symbol_wait_ns, 15'000'000'000u);  // 30 s timeout
  config.shutdown_timeout_s = 4;
  EXPECT_EQ(SessionDefaults(config).symbol_wait_ns, 2'000'000'000u);
  config.shutdown_timeout_s = 600;
  EXPECT_EQ(SessionDefaults(config).symbol_wait_ns, 30'000'000'000u);
}

// Values LoadConfig alone lets through but every attach refused (issue 15).
TEST(EffectiveConfigTest, RefusesWhatEveryAttachWouldRefuseNamingTheKey) {
  testing::TempDir dir;
  const std::string file = dir.File("a-file");
  std::ofstream(file) << "not a directory";
  struct Case {
    std::string name;
    void (*change)(DaemonConfig&, const std::string&);
    std::string expected;
  };
  const Case cases[] = {
      {"ring_buffer_size not a power of two",
       [](DaemonConfig& c, const std::string&) { c.ring_buffer_size = 12345; },
       "ring_buffer_size = 12345 must be a power of two"},
      {"ring_buffer_size below a page",
       [](DaemonConfig& c, const std::string&) { c.ring_buffer_size = 2048; },
       "ring_buffer_size = 2048"},
      {"max_total_size below twice max_file_size",
       [](DaemonConfig& c, const std::string&) {
         c.max_file_size = 1 << 20;
         c.max_total_size = (2 << 20) - 1;
       },
       "max_total_size = 2097151 is out of range: at least 2 x max_file_size (2097152)"},
      {"empty socket", [](DaemonConfig& c, const std::string&) { c.socket = ""; },
       "socket = '': a path of 1 .. 107 bytes"},
      {"socket path too long",
       [](DaemonConfig& c, const std::string&) { c.socket = "/run/" + std::string(120, 'x'); },
       "a path of 1 .. 107 bytes"},
      {"relative output_dir", [](DaemonConfig& c, const std::string&) { c.output_dir = "5"; },
       "output_dir = '5': an absolute directory path"},
      {"output_dir a file",
       [](DaemonConfig& c, const std::string& f) { c.output_dir = f; },
       "exists and is not a directory"},
      {"reorder window too long",
       [](DaemonConfig& c, const std::string&) { c.reorder_window_ms = 20'000; },
       "reorder_window_ms = 20000 is out of range"},
      // What startup refused (exit 2) or every attach failed on, but
      // --check-config let through.
      {"socket_group that does not exist",
       [](DaemonConfig& c, const std::string&) { c.socket_group = "no_such_group_loupe"; },
       "socket_group = 'no_such_group_loupe': no such group"},
      {"proc_root that does not exist",
       [](DaemonConfig& c, const std::string&) { c.proc_root = "/nonexistent"; },
       "proc_root = '/nonexistent': No such file or directory"},
      {"proc_root that is no procfs",
       [](DaemonConfig& c, const std::string&) { c.proc_root = "/etc"; },
       "proc_root = '/etc': not a procfs"},
      {"collector with no port",
       [](DaemonConfig& c, const std::string&) { c.collector = "nocolon"; },
       "collector 'nocolon': not <host>:<port>"},
      {"collector port out of range",
       [](DaemonConfig& c, const std::string&) { c.collector = "collector.example:99999"; },
       "port in 1 .. 65535"},
      {"collector token file missing",
       [](DaemonConfig& c, const std::string&) {
         c.collector = "collector.example:7470";
         c.collector_token_file = "/nonexistent/token";
       },
       "collector token file"},
      {"output_dir under a file (ENOTDIR, not 'missing')",
       [](DaemonConfig& c, const std::string& f) { c.output_dir = f + "/x"; },
       "/x': Not a directory"},
  };
  for (const Case& c : cases) {
    DaemonConfig config;
    c.change(config, file);
    absl::Status status = CheckEffectiveConfig(config);
    ASSERT_FALSE(status.ok()) << c.name;
    EXPECT_NE(status.ToString().find(c.expected), std::string::npos) << c.name << ": " << status;
  }
}

// The same values through the file, as `louped --check-config` reads them.
TEST(EffectiveConfigTest, FileValuesFromTheIssueAreRefused) {
  testing::TempDir dir;
  const std::string accepted_by_load[] = {
      "ring_buffer_size = 12345\n",
      "max_file_size = 1048576\nmax_total_size = 1048576\n",
      "socket = \"\"\n",
  };
  for (const std::string& text : accepted_by_load) {
    auto config = LoadConfig(WriteConfig(dir, text), true, {});
    if (!config.ok()) continue;  // refused while loading: fine too
    EXPECT_FALSE(CheckEffectiveConfig(*config).ok()) << text;
  }
  EXPECT_FALSE(LoadConfig(WriteConfig(dir, "output_dir = 5\n"), true, {}).ok());
}

TEST(ConfigTest, EveryKeyHasHelpAndADefault) {
  for (const ConfigKey& key : ConfigKeys()) {
    EXPECT_FALSE(key.help.empty()) << key.name;
    // No default is a choice too, and the help must say what it means.
    if (key.default_value.empty()) {
      EXPECT_NE(key.help.find("(empty: "), std::string::npos) << key.name << ": " << key.help;
    }
  }
}

}  // namespace
}  // namespace loupe::louped
