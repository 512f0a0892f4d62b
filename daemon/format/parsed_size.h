// What a protobuf message takes in memory once parsed, bounded from its wire
// bytes before parsing it. A few bytes of wire format can stand for an empty
// sub-message, a map entry or an unknown field, each far larger once parsed:
// a reader checks this bound against what it may spend, then parses.
#ifndef LOUPE_DAEMON_FORMAT_PARSED_SIZE_H_
#define LOUPE_DAEMON_FORMAT_PARSED_SIZE_H_

#include <google/protobuf/descriptor.h>

#include <cstdint>
#include <optional>
#include <string_view>

namespace loupe::format {

// An upper estimate of the bytes that parsing `bytes` as a `type` allocates,
// or nullopt when they are not well-formed wire format (or nest deeper than
// protobuf parses). Stops counting once past `limit` (the result is then
// some value above it).
std::optional<uint64_t> ParsedSizeBound(const google::protobuf::Descriptor& type,
                                        std::string_view bytes, uint64_t limit);

}  // namespace loupe::format

#endif  // LOUPE_DAEMON_FORMAT_PARSED_SIZE_H_
