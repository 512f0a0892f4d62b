// Bytes made UTF-8 text for proto3 strings and JSON.
#include "daemon/base/utf8.h"

#include <gtest/gtest.h>

namespace loupe {
namespace {

TEST(Utf8Test, TextKeepsUtf8AndReplacesEveryOtherByte) {
  EXPECT_EQ(Utf8Text("/srv/caf\xc3\xa9/app"), "/srv/caf\xc3\xa9/app");
  EXPECT_EQ(Utf8Text("/srv/caf\xe9/app"), "/srv/caf\xef\xbf\xbd/app");  // Latin-1
  EXPECT_EQ(Utf8Text("\xf0\x9f\x94\x8d\xf0\x9f"), "\xf0\x9f\x94\x8d\xef\xbf\xbd\xef\xbf\xbd");
  EXPECT_EQ(Utf8Text(""), "");
  EXPECT_EQ(Utf8SequenceLength("\xe5\xb7\xa5", 0), 3u);
  EXPECT_EQ(Utf8SequenceLength("\xed\xa0\x80", 0), 0u);  // a surrogate
  EXPECT_EQ(Utf8SequenceLength("\xc1\x81", 0), 0u);      // overlong 'A'
}

}  // namespace
}  // namespace loupe
