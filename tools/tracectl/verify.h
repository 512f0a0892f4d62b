// `tracectl verify PATH...`: reads every segment and states whether the
// trace can be trusted: per segment and overall, the verdict with every
// reason, counts by kind, time range and targets. Exit 0 only if complete.
#ifndef LOUPE_TOOLS_TRACECTL_VERIFY_H_
#define LOUPE_TOOLS_TRACECTL_VERIFY_H_

#include <CLI/App.hpp>
#include <string>
#include <vector>

#include "tools/tracectl/collector_source.h"

namespace loupe::tracectl {

struct VerifyOptions {
  std::vector<std::string> paths;
  CollectorQuery collector;
  bool json = false;
};

void AddVerifyCommand(CLI::App& app, VerifyOptions& options);
// Returns the process exit code.
int RunVerify(const VerifyOptions& options);

}  // namespace loupe::tracectl

#endif  // LOUPE_TOOLS_TRACECTL_VERIFY_H_
