// `tracectl detach <session>`, `tracectl status [<session>]`, `tracectl list`:
// louped's sessions (these need the daemon).
#ifndef LOUPE_TOOLS_TRACECTL_SESSIONS_H_
#define LOUPE_TOOLS_TRACECTL_SESSIONS_H_

#include <CLI/App.hpp>
#include <string>

namespace loupe::tracectl {

struct SessionsOptions {
  std::string socket;
  std::string session_id;
  bool json = false;
};

void AddSessionCommands(CLI::App& app, SessionsOptions& options);
// Runs whichever of detach/status/list was given; returns the exit code.
int RunSessionCommand(const CLI::App& app, const SessionsOptions& options);

}  // namespace loupe::tracectl

#endif  // LOUPE_TOOLS_TRACECTL_SESSIONS_H_
