// Protobuf wire-format primitives for the hot path: the event encoder writes
// blocks directly and the decoder reads them without building messages.
#ifndef LOUPE_DAEMON_FORMAT_WIRE_H_
#define LOUPE_DAEMON_FORMAT_WIRE_H_

#include <cstddef>
#include <cstdint>
#include <string>
#include <string_view>

namespace loupe::format::wire {

enum WireType : uint32_t { kVarint = 0, kFixed64 = 1, kLengthDelimited = 2, kFixed32 = 5 };

inline uint64_t ZigZag(int64_t v) {
  return (static_cast<uint64_t>(v) << 1) ^ static_cast<uint64_t>(v >> 63);
}
inline int64_t UnZigZag(uint64_t v) {
  return static_cast<int64_t>(v >> 1) ^ -static_cast<int64_t>(v & 1);
}

inline size_t VarintSize(uint64_t v) {
  size_t n = 1;
  while (v >= 0x80) {
    v >>= 7;
    ++n;
  }
  return n;
}

// Writes at `out`, which must have room for 10 bytes; returns the new end.
inline uint8_t* WriteVarint(uint8_t* out, uint64_t v) {
  while (v >= 0x80) {
    *out++ = static_cast<uint8_t>(v) | 0x80;
    v >>= 7;
  }
  *out++ = static_cast<uint8_t>(v);
  return out;
}

inline void AppendVarint(std::string* out, uint64_t v) {
  uint8_t buf[10];
  out->append(reinterpret_cast<const char*>(buf), static_cast<size_t>(WriteVarint(buf, v) - buf));
}

inline uint64_t Tag(uint32_t field, WireType type) { return (uint64_t{field} << 3) | type; }

inline void AppendVarintField(std::string* out, uint32_t field, uint64_t v) {
  AppendVarint(out, Tag(field, kVarint));
  AppendVarint(out, v);
}

inline void AppendBytesField(std::string* out, uint32_t field, std::string_view bytes) {
  AppendVarint(out, Tag(field, kLengthDelimited));
  AppendVarint(out, bytes.size());
  out->append(bytes);
}

// Size of a length-delimited field holding `payload_size` bytes.
inline size_t BytesFieldSize(uint32_t field, size_t payload_size) {
  return VarintSize(Tag(field, kLengthDelimited)) + VarintSize(payload_size) + payload_size;
}

// A bounds-checked cursor over encoded bytes. Every read reports failure
// instead of reading past the end, so corrupt input cannot run away.
class Cursor {
 public:
  Cursor() = default;
  explicit Cursor(std::string_view bytes)
      : pos_(reinterpret_cast<const uint8_t*>(bytes.data())), end_(pos_ + bytes.size()) {}

  bool empty() const { return pos_ == end_; }
  size_t remaining() const { return static_cast<size_t>(end_ - pos_); }

  bool ReadVarint(uint64_t* v) {
    // Most values in a block take one byte: that path first, and inlined.
    if (pos_ != end_ && *pos_ < 0x80) {
      *v = *pos_++;
      return true;
    }
    return ReadLongVarint(v);
  }

  bool ReadBytes(size_t n, std::string_view* out) {
    if (n > remaining()) return false;
    *out = std::string_view(reinterpret_cast<const char*>(pos_), n);
    pos_ += n;
    return true;
  }

  bool ReadLengthDelimited(std::string_view* out) {
    uint64_t n;
    return ReadVarint(&n) && ReadBytes(n, out);
  }

  // Skips one field value of the given wire type (for unknown fields).
  bool Skip(uint32_t wire_type) {
    uint64_t unused;
    std::string_view bytes;
    switch (wire_type) {
      case kVarint:
        return ReadVarint(&unused);
      case kFixed64:
        return ReadBytes(8, &bytes);
      case kLengthDelimited:
        return ReadLengthDelimited(&bytes);
      case kFixed32:
        return ReadBytes(4, &bytes);
      default:
        return false;
    }
  }

 private:
  bool ReadLongVarint(uint64_t* v) {
    uint64_t result = 0;
    for (int shift = 0; shift < 64 && pos_ != end_; shift += 7) {
      const uint8_t byte = *pos_++;
      result |= uint64_t{byte & 0x7fu} << shift;
      if (byte < 0x80) {
        *v = result;
        return true;
      }
    }
    return false;
  }

  const uint8_t* pos_ = nullptr;
  const uint8_t* end_ = nullptr;
};

}  // namespace loupe::format::wire

#endif  // LOUPE_DAEMON_FORMAT_WIRE_H_
