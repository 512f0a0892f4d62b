#include "tests/support/allocation_counter.h"

#include <atomic>
#include <cstdlib>
#include <new>

namespace {

// Counted always (one relaxed add), read as differences: arming then needs
// no flag that a thread could read before another sets it.
std::atomic<uint64_t> allocations{0};

}  // namespace

void* operator new(std::size_t size) {
  allocations.fetch_add(1, std::memory_order_relaxed);
  if (void* memory = std::malloc(size == 0 ? 1 : size)) return memory;
  throw std::bad_alloc();
}

void operator delete(void* memory) noexcept { std::free(memory); }
void operator delete(void* memory, std::size_t) noexcept { std::free(memory); }

namespace loupe::testing {

AllocationCounter::AllocationCounter() : start_(allocations.load(std::memory_order_relaxed)) {}
AllocationCounter::~AllocationCounter() = default;

uint64_t AllocationCounter::count() const {
  return allocations.load(std::memory_order_relaxed) - start_;
}

}  // namespace loupe::testing
