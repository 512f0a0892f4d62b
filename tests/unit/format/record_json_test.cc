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

}  // namespace
}  // namespace loupe::format
