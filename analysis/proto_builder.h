// Protobuf wire format appended to a string, for exports that write millions
// of small messages: no message objects, no per-message allocation. Nested
// messages get a one-byte length placeholder that is widened (the body moved)
// only when the body reaches 128 bytes, which small messages never do.
#ifndef LOUPE_ANALYSIS_PROTO_BUILDER_H_
#define LOUPE_ANALYSIS_PROTO_BUILDER_H_

#include <cstdint>
#include <cstring>
#include <string>
#include <string_view>

#include "daemon/format/wire.h"

namespace loupe::analysis {

class ProtoBuilder {
 public:
  explicit ProtoBuilder(std::string* out) : out_(out) {}

  void Varint(uint32_t field, uint64_t value) {
    Raw(format::wire::Tag(field, format::wire::kVarint));
    Raw(value);
  }
  void SignedVarint(uint32_t field, int64_t value) { Varint(field, static_cast<uint64_t>(value)); }
  void Fixed64(uint32_t field, uint64_t value) {
    Raw(format::wire::Tag(field, format::wire::kFixed64));
    char bytes[8];
    std::memcpy(bytes, &value, 8);  // little-endian hosts only, as the rest of Loupe
    out_->append(bytes, 8);
  }
  void Double(uint32_t field, double value) {
    uint64_t bits;
    std::memcpy(&bits, &value, 8);
    Fixed64(field, bits);
  }
  void Bytes(uint32_t field, std::string_view bytes) {
    format::wire::AppendBytesField(out_, field, bytes);
  }

  // Begin() returns where the nested message's length goes; End() writes it.
  size_t Begin(uint32_t field) {
    Raw(format::wire::Tag(field, format::wire::kLengthDelimited));
    out_->push_back(0);
    return out_->size() - 1;
  }
  void End(size_t length_at) {
    const size_t length = out_->size() - length_at - 1;
    if (length < 0x80) {
      (*out_)[length_at] = static_cast<char>(length);
      return;
    }
    uint8_t varint[10];
    const size_t size = static_cast<size_t>(format::wire::WriteVarint(varint, length) - varint);
    out_->replace(length_at, 1, reinterpret_cast<const char*>(varint), size);
  }

 private:
  void Raw(uint64_t value) {
    uint8_t bytes[10];
    out_->append(reinterpret_cast<const char*>(bytes),
                 static_cast<size_t>(format::wire::WriteVarint(bytes, value) - bytes));
  }

  std::string* out_;
};

}  // namespace loupe::analysis

#endif  // LOUPE_ANALYSIS_PROTO_BUILDER_H_
