// One record as one line of JSON, for scripts and for comparing records in
// tests. Strings are escaped; UTF-8 text stays as it is, and each byte that
// is not part of well-formed UTF-8 becomes U+FFFD.
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
