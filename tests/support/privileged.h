// Guards for tests that need root and BPF. Without the privileges they skip
// with the reason; with LOUPE_REQUIRE_PRIVILEGED=1 (set by CI) a missing
// privilege fails the test instead, so a skip can never pass CI silently.
#ifndef LOUPE_TESTS_SUPPORT_PRIVILEGED_H_
#define LOUPE_TESTS_SUPPORT_PRIVILEGED_H_

#include <gtest/gtest.h>

#include <string>

namespace loupe::testing {

// Empty when this process may load and attach BPF programs; otherwise why not.
std::string MissingPrivilege();
bool PrivilegesRequired();

}  // namespace loupe::testing

#define LOUPE_REQUIRE_PRIVILEGES()                                    \
  do {                                                                \
    const std::string missing = ::loupe::testing::MissingPrivilege(); \
    if (!missing.empty()) {                                           \
      if (::loupe::testing::PrivilegesRequired()) {                   \
        FAIL() << "LOUPE_REQUIRE_PRIVILEGED=1 but " << missing;       \
      }                                                               \
      GTEST_SKIP() << missing;                                        \
    }                                                                 \
  } while (0)

#endif  // LOUPE_TESTS_SUPPORT_PRIVILEGED_H_
