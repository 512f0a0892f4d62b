// Counts the C++ allocations the whole process makes from a point on, to
// prove that a hot path allocates nothing per event. Linking
// allocation_counter.cc replaces the global operator new, so it goes into
// one test binary's sources, never into a library or a sanitizer build
// (which replaces operator new itself).
#ifndef LOUPE_TESTS_SUPPORT_ALLOCATION_COUNTER_H_
#define LOUPE_TESTS_SUPPORT_ALLOCATION_COUNTER_H_

#include <cstdint>

namespace loupe::testing {

// Counts from its construction on.
class AllocationCounter {
 public:
  AllocationCounter();
  ~AllocationCounter();
  AllocationCounter(const AllocationCounter&) = delete;
  AllocationCounter& operator=(const AllocationCounter&) = delete;

  // Allocations by any thread since construction.
  uint64_t count() const;

 private:
  uint64_t start_;
};

}  // namespace loupe::testing

#endif  // LOUPE_TESTS_SUPPORT_ALLOCATION_COUNTER_H_
