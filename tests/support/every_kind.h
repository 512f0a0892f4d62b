// One record of every kind with non-default values in every field, for
// round-trip tests.
#ifndef LOUPE_TESTS_SUPPORT_EVERY_KIND_H_
#define LOUPE_TESTS_SUPPORT_EVERY_KIND_H_

#include <vector>

#include "daemon/format/record.h"

namespace loupe::testing {

// Times start at `start_ns` and rise by 1 µs per record.
std::vector<format::Record> EveryKind(uint64_t start_ns = 5'000'000'000);

}  // namespace loupe::testing

#endif  // LOUPE_TESTS_SUPPORT_EVERY_KIND_H_
