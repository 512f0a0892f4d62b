#include "daemon/format/parsed_size.h"

#include <google/protobuf/message.h>

#include "absl/container/flat_hash_map.h"
#include "daemon/format/wire.h"

namespace loupe::format {
namespace {

using google::protobuf::Descriptor;
using google::protobuf::FieldDescriptor;

// Allocator overhead and the pointer that holds each heap object.
constexpr uint64_t kPerAllocation = 32;
// An unknown field is kept as a small record (and its bytes, if any).
constexpr uint64_t kPerUnknownField = 32;
// Deeper nesting than protobuf's own parser accepts.
constexpr int kMaxDepth = 100;

class Walker {
 public:
  explicit Walker(uint64_t limit) : limit_(limit) {}

  // Adds the cost of the fields in `bytes`, a message of `type`; false when
  // they are malformed.
  bool Fields(const Descriptor& type, std::string_view bytes, int depth) {
    if (depth > kMaxDepth) return false;
    wire::Cursor cursor(bytes);
    while (!cursor.empty() && total_ <= limit_) {
      uint64_t tag;
      if (!cursor.ReadVarint(&tag)) return false;
      const uint32_t wire_type = tag & 7;
      const FieldDescriptor* field = type.FindFieldByNumber(static_cast<int>(tag >> 3));
      if (wire_type != wire::kLengthDelimited) {
        if (!cursor.Skip(wire_type)) return false;
        // A repeated scalar grows an array; a singular one lives in its message.
        if (field == nullptr) {
          total_ += kPerUnknownField;
        } else if (field->is_repeated()) {
          total_ += 8;
        }
        continue;
      }
      std::string_view value;
      if (!cursor.ReadLengthDelimited(&value)) return false;
      if (field == nullptr) {
        total_ += kPerUnknownField + value.size();
      } else if (field->type() == FieldDescriptor::TYPE_MESSAGE) {
        total_ += kPerAllocation + SizeOf(*field->message_type());
        if (!Fields(*field->message_type(), value, depth + 1)) return false;
      } else if (field->type() == FieldDescriptor::TYPE_STRING ||
                 field->type() == FieldDescriptor::TYPE_BYTES) {
        total_ += kPerAllocation + value.size();
      } else {
        total_ += 8 * value.size();  // packed: at most one element per byte
      }
    }
    return true;
  }

  uint64_t total() const { return total_; }

 private:
  // The size of an empty message of `type` (its generated class).
  uint64_t SizeOf(const Descriptor& type) {
    auto [it, added] = sizes_.try_emplace(&type, 0);
    if (added) {
      const google::protobuf::Message* prototype =
          google::protobuf::MessageFactory::generated_factory()->GetPrototype(&type);
      it->second = prototype != nullptr ? prototype->SpaceUsedLong() : 256;
    }
    return it->second;
  }

  uint64_t limit_;
  uint64_t total_ = 0;
  absl::flat_hash_map<const Descriptor*, uint64_t> sizes_;
};

}  // namespace

std::optional<uint64_t> ParsedSizeBound(const Descriptor& type, std::string_view bytes,
                                        uint64_t limit) {
  Walker walker(limit);
  if (!walker.Fields(type, bytes, 0)) return std::nullopt;
  return walker.total();
}

}  // namespace loupe::format
