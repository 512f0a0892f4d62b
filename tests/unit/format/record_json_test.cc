#include "daemon/format/record_json.h"

#include <gtest/gtest.h>

#include <nlohmann/json.hpp>
#include <string>

#include "daemon/format/record.h"

namespace loupe::format {
namespace {

// Names and values the traced program chose are escaped (quotes,
// backslashes, control bytes); the line parses back to what was written.
TEST(RecordJsonTest, AUsersNamesAndStringsAreEscapedAndTheLineParsesBack) {
  const std::string odd_key = "say \"hi\"\\\n\x01";
  const std::string odd_value = "tab\there, bell\x07 and \"quotes\"";
  const Field fields[] = {{odd_key, Value::String(odd_value)}, {"plain", Value::Int(-3)}};
  Record record;
  record.time_ns = 42;
  record.tid = 7;
  record.payload = Instant{.name = "na\"me", .operation_id = 9, .fields = fields};

  const nlohmann::json line = nlohmann::json::parse(RecordJson(record));
  EXPECT_EQ(line["kind"], "instant");
  EXPECT_EQ(line["name"], "na\"me");
  EXPECT_EQ(line["operation_id"], 9);
  EXPECT_EQ(line["fields"][odd_key], odd_value);
  EXPECT_EQ(line["fields"]["plain"], -3);
}

// Names are bytes the program chose (a thread's comm, a span's name): UTF-8
// text stays readable, and each byte that is not well-formed UTF-8 (a stray
// lead or continuation byte, an overlong form, a surrogate, a cut sequence)
// becomes U+FFFD, so the line is valid JSON for any reader.
TEST(RecordJsonTest, UtfEightNamesStayAndOtherBytesBecomeReplacementCharacters) {
  const auto json_name = [](const std::string& name) {
    Record record;
    record.payload = SpanBegin{.name = name};
    return nlohmann::json::parse(RecordJson(record))["name"].get<std::string>();
  };
  const std::string replacement = "\xef\xbf\xbd";
  EXPECT_EQ(json_name("r\xc3\xa9sum\xc3\xa9 \xe5\xb7\xa5 \xf0\x9f\x94\x8d"),
            "r\xc3\xa9sum\xc3\xa9 \xe5\xb7\xa5 \xf0\x9f\x94\x8d");
  EXPECT_EQ(json_name("w\xff\xfe"), "w" + replacement + replacement);
  EXPECT_EQ(json_name("\x80x"), replacement + "x");            // continuation without a lead
  EXPECT_EQ(json_name("\xc0\xafx"), replacement + replacement + "x");  // overlong '/'
  EXPECT_EQ(json_name("\xed\xa0\x80"), replacement + replacement + replacement);  // surrogate
  EXPECT_EQ(json_name("ok\xe5\xb7"), "ok" + replacement + replacement);  // cut at the end
  EXPECT_EQ(json_name("\xf4\x90\x80\x80"), replacement + replacement + replacement + replacement);
}

}  // namespace
}  // namespace loupe::format
