// A growable run of varints: one column of an event block being built.
#ifndef LOUPE_DAEMON_FORMAT_VARINT_COLUMN_H_
#define LOUPE_DAEMON_FORMAT_VARINT_COLUMN_H_

#include <cstdint>
#include <string_view>
#include <vector>

#include "daemon/format/wire.h"

namespace loupe::format {

class VarintColumn {
 public:
  void Put(uint64_t v) {
    if (bytes_.size() - size_ < 10) bytes_.resize(bytes_.empty() ? 256 : bytes_.size() * 2);
    size_ = static_cast<size_t>(wire::WriteVarint(bytes_.data() + size_, v) - bytes_.data());
  }
  void PutSigned(int64_t v) { Put(wire::ZigZag(v)); }
  // The difference to the previous value put this way in the block: ids that
  // follow each other (span ids, a request's operation id) cost a byte.
  void PutDelta(uint64_t v) {
    PutSigned(static_cast<int64_t>(v - last_));
    last_ = v;
  }

  size_t size() const { return size_; }
  bool empty() const { return size_ == 0; }
  std::string_view bytes() const { return {reinterpret_cast<const char*>(bytes_.data()), size_}; }
  // Keeps the allocation: blocks are built over and over.
  void Clear() {
    size_ = 0;
    last_ = 0;
  }

 private:
  std::vector<uint8_t> bytes_;
  size_t size_ = 0;
  uint64_t last_ = 0;
};

}  // namespace loupe::format

#endif  // LOUPE_DAEMON_FORMAT_VARINT_COLUMN_H_
