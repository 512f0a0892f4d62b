// louped's configuration layers: file, then LOUPE_* environment, then flags;
// every bad value names its key, where it came from and what is allowed.
#include "daemon/louped/config.h"

#include <gtest/gtest.h>
#include <stdlib.h>

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
