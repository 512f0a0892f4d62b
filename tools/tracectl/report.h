// `tracectl report PATH... [--pid P] [--since T] [--until T] [--operation ID]
//  [--slow T] [--list N] [--request 'NAME=PROV:BEGIN..END'] [--json]`
#ifndef LOUPE_TOOLS_TRACECTL_REPORT_H_
#define LOUPE_TOOLS_TRACECTL_REPORT_H_

#include <CLI/CLI.hpp>
#include <optional>
#include <string>
#include <vector>

#include "tools/tracectl/collector_source.h"

namespace loupe::tracectl {

struct ReportOptions {
  std::vector<std::string> paths;
  CollectorQuery collector;
  std::optional<uint32_t> pid;
  std::string since, until;  // from the start of the trace: "2s", "500ms"
  std::optional<uint64_t> operation;
  std::string slow;  // a duration; default: each kind's p90
  std::vector<std::string> requests;  // USDT begin/end pairs
  bool json = false;
  size_t top = 10;
  size_t list = 5;
};

void AddReportCommand(CLI::App& app, ReportOptions& options);
int RunReport(const ReportOptions& options);

}  // namespace loupe::tracectl

#endif  // LOUPE_TOOLS_TRACECTL_REPORT_H_
