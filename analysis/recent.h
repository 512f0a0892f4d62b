// The last N of a sequence, oldest first: a ring that allocates on its
// first push (most threads' never come), then overwrites its oldest.
#ifndef LOUPE_ANALYSIS_RECENT_H_
#define LOUPE_ANALYSIS_RECENT_H_

#include <cstddef>
#include <vector>

namespace loupe::analysis {

template <typename T, size_t N>
class Recent {
 public:
  void Push(const T& value) {
    if (items_.size() < N) {
      items_.push_back(value);
      return;
    }
    items_[oldest_] = value;
    oldest_ = (oldest_ + 1) % N;
    dropped_ = true;
  }
  size_t size() const { return items_.size(); }
  bool empty() const { return items_.empty(); }
  const T& operator[](size_t i) const { return items_[(oldest_ + i) % items_.size()]; }
  // Whether older ones were overwritten.
  bool dropped() const { return dropped_; }

 private:
  std::vector<T> items_;
  size_t oldest_ = 0;
  bool dropped_ = false;
};

}  // namespace loupe::analysis

#endif  // LOUPE_ANALYSIS_RECENT_H_
