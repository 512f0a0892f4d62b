// The one body field of a decompressed Frame message (trace.proto): which
// kind of frame it is (block_layout.h's kFrame*) and its bytes.
#ifndef LOUPE_DAEMON_FORMAT_FRAME_BODY_H_
#define LOUPE_DAEMON_FORMAT_FRAME_BODY_H_

#include <cstdint>
#include <string_view>

#include "daemon/format/wire.h"

namespace loupe::format {

inline bool SplitFrame(std::string_view payload, uint32_t* field, std::string_view* body) {
  wire::Cursor cursor(payload);
  uint64_t tag;
  if (!cursor.ReadVarint(&tag) || (tag & 7) != wire::kLengthDelimited) return false;
  *field = static_cast<uint32_t>(tag >> 3);
  return cursor.ReadLengthDelimited(body) && cursor.empty();
}

}  // namespace loupe::format

#endif  // LOUPE_DAEMON_FORMAT_FRAME_BODY_H_
