// Reading /proc entries never throws: a read that fails (a process gone
// between open and read, here a directory, whose reads fail the same way)
// is an error naming the file.
#include "daemon/base/read_file.h"

#include <gtest/gtest.h>
#include <sys/wait.h>
#include <unistd.h>

#include <string>

#include "daemon/symbols/process_maps.h"

namespace loupe {
namespace {

TEST(ReadFileTest, AFailingReadIsAnErrorNotAnException) {
  absl::StatusOr<std::string> text = ReadWholeFile("/proc/self");
  ASSERT_FALSE(text.ok());
  EXPECT_EQ(text.status().message(), "read /proc/self: Is a directory");
}

TEST(ReadFileTest, ReadsAProcFileWhole) {
  absl::StatusOr<std::string> maps = ReadWholeFile("/proc/self/maps");
  ASSERT_TRUE(maps.ok()) << maps.status();
  EXPECT_NE(maps->find("[stack]"), std::string::npos);
  EXPECT_EQ(maps->back(), '\n');
}

TEST(ReadFileTest, MapsOfAProcessThatHasExitedAreAnError) {
  const pid_t child = fork();
  if (child == 0) _exit(0);
  ASSERT_GT(child, 0);
  ASSERT_EQ(waitpid(child, nullptr, 0), child);
  absl::StatusOr<std::vector<symbols::Mapping>> maps =
      symbols::ReadProcMaps(static_cast<uint32_t>(child));
  ASSERT_FALSE(maps.ok());
  EXPECT_NE(maps.status().message().find(std::to_string(child)), std::string_view::npos);
}

}  // namespace
}  // namespace loupe
