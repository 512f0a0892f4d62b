// libdw asks debuginfod servers for missing debug files only when
// DEBUGINFOD_URLS is set in the process environment. Loupe contacts none
// unless configured: this sets or clears it from Loupe's own setting, once,
// at start (before any thread that reads the environment).
#ifndef LOUPE_DAEMON_SYMBOLS_DEBUGINFOD_H_
#define LOUPE_DAEMON_SYMBOLS_DEBUGINFOD_H_

#include <cstdlib>
#include <string>

namespace loupe::symbols {

inline void ConfigureDebuginfod(const std::string& urls) {
  if (urls.empty()) {
    unsetenv("DEBUGINFOD_URLS");
  } else {
    setenv("DEBUGINFOD_URLS", urls.c_str(), 1);
  }
}

}  // namespace loupe::symbols

#endif  // LOUPE_DAEMON_SYMBOLS_DEBUGINFOD_H_
