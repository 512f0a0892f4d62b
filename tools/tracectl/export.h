// `tracectl export --format perfetto|json|folded|pprof PATH... -o OUT`
#ifndef LOUPE_TOOLS_TRACECTL_EXPORT_H_
#define LOUPE_TOOLS_TRACECTL_EXPORT_H_

#include <CLI/CLI.hpp>
#include <string>
#include <vector>

#include "tools/tracectl/collector_source.h"

namespace loupe::tracectl {

struct ExportOptions {
  std::string format;
  std::vector<std::string> paths;
  CollectorQuery collector;
  std::string output;
  std::string stacks = "cpu";  // folded: "cpu" (samples) or "offcpu" (microseconds blocked)
  std::string compress;        // perfetto: "deflate" (when empty) or "none"
};

void AddExportCommand(CLI::App& app, ExportOptions& options);
int RunExport(const ExportOptions& options);

}  // namespace loupe::tracectl

#endif  // LOUPE_TOOLS_TRACECTL_EXPORT_H_
