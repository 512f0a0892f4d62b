// A logger that drops everything, for code under test that wants one.
#ifndef LOUPE_TESTS_SUPPORT_QUIET_LOG_H_
#define LOUPE_TESTS_SUPPORT_QUIET_LOG_H_

#include <spdlog/logger.h>
#include <spdlog/sinks/null_sink.h>

#include <memory>

namespace loupe::testing {

inline std::shared_ptr<spdlog::logger> QuietLog() {
  return std::make_shared<spdlog::logger>("test", std::make_shared<spdlog::sinks::null_sink_mt>());
}

}  // namespace loupe::testing

#endif  // LOUPE_TESTS_SUPPORT_QUIET_LOG_H_
