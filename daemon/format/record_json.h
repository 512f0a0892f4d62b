// One record as one line of JSON, for scripts and for comparing records in
// tests. Strings are escaped; bytes that are not UTF-8 text come out as \u00XX.
#ifndef LOUPE_DAEMON_FORMAT_RECORD_JSON_H_
#define LOUPE_DAEMON_FORMAT_RECORD_JSON_H_

#include <string>

#include "daemon/format/record.h"

namespace loupe::format {

void AppendRecordJson(const Record& record, std::string* out);
std::string RecordJson(const Record& record);

// A JSON string literal (quotes included) for `text`.
void AppendJsonString(std::string_view text, std::string* out);

}  // namespace loupe::format

#endif  // LOUPE_DAEMON_FORMAT_RECORD_JSON_H_
