// A segment's interned strings and stacks, as a reader rebuilds them block by
// block. Views handed out stay valid until the next block is added. The
// tables know what they hold and may be given a limit, which a block decoder
// checks before it adds anything.
#ifndef LOUPE_DAEMON_FORMAT_INTERN_TABLES_H_
#define LOUPE_DAEMON_FORMAT_INTERN_TABLES_H_

#include <cstdint>
#include <deque>
#include <string>
#include <string_view>
#include <utility>
#include <vector>

#include "daemon/format/record.h"

namespace loupe::format {

class InternTables {
 public:
  // What holding `strings` strings of `string_bytes` bytes in all and
  // `stacks` stacks of `frames` frames in all takes, allocations included.
  static uint64_t Cost(uint64_t strings, uint64_t string_bytes, uint64_t stacks,
                       uint64_t frames) {
    return strings * kPerString + string_bytes + stacks * kPerStack + frames * sizeof(uint64_t);
  }
  uint64_t bytes() const { return bytes_; }
  uint64_t limit() const { return limit_; }
  void set_limit(uint64_t bytes) { limit_ = bytes; }

  uint32_t string_count() const { return static_cast<uint32_t>(strings_.size()); }
  uint32_t stack_count() const { return static_cast<uint32_t>(stacks_.size()); }

  // Id 0 is "none". Returns false for an id that was never defined.
  bool FindString(uint64_t id, std::string_view* out) const {
    if (id == 0) {
      *out = {};
      return true;
    }
    if (id > strings_.size()) return false;
    *out = strings_[id - 1];
    return true;
  }
  bool FindStack(uint64_t id, Stack* out) const {
    if (id == 0) {
      *out = {};
      return true;
    }
    if (id > stacks_.size()) return false;
    const auto [offset, depth] = stacks_[id - 1];
    *out = Stack(frames_.data() + offset, depth);
    return true;
  }

  void AddString(std::string_view text) {
    strings_.emplace_back(text);
    bytes_ += Cost(1, text.size(), 0, 0);
  }
  void AddStack(std::vector<uint64_t>::const_iterator begin,
                std::vector<uint64_t>::const_iterator end) {
    const size_t depth = static_cast<size_t>(end - begin);
    stacks_.emplace_back(frames_.size(), depth);
    frames_.insert(frames_.end(), begin, end);
    bytes_ += Cost(0, 0, 1, depth);
  }
  void Clear() {
    strings_.clear();
    stacks_.clear();
    frames_.clear();
    bytes_ = 0;
  }

 private:
  // A std::string with its heap block; an (offset, depth) pair.
  static constexpr uint64_t kPerString = 48;
  static constexpr uint64_t kPerStack = 16;

  uint64_t bytes_ = 0;
  uint64_t limit_ = UINT64_MAX;
  std::deque<std::string> strings_;                // a deque never moves its elements
  std::vector<std::pair<size_t, size_t>> stacks_;  // offset into frames_, depth
  std::vector<uint64_t> frames_;
};

}  // namespace loupe::format

#endif  // LOUPE_DAEMON_FORMAT_INTERN_TABLES_H_
