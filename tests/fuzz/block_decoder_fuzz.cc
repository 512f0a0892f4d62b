// Fuzzes BlockDecoder with raw block bytes, past the checksums that guard
// it inside files: columns, groups, interning, tid prediction, deltas.
#include <cstddef>
#include <cstdint>
#include <string_view>

#include "daemon/format/block_decoder.h"
#include "daemon/format/record_json.h"

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  loupe::format::InternTables tables;
  loupe::format::BlockDecoder decoder(&tables);
  // Two blocks from one input: the second sees what the first interned.
  const size_t half = size / 2;
  for (std::string_view block :
       {std::string_view(reinterpret_cast<const char*>(data), half),
        std::string_view(reinterpret_cast<const char*>(data) + half, size - half)}) {
    if (!decoder.Start(block).ok()) continue;
    loupe::format::Record record;
    std::string json;
    while (decoder.Next(&record)) {
      json.clear();
      loupe::format::AppendRecordJson(record, &json);  // touches every view
    }
  }
  return 0;
}
