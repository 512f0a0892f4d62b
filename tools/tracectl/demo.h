// `tracectl demo`: writes a trace of a built-in synthetic workload (a busy
// multi-threaded service) through the real segment writer, to try the
// tools on without tracing anything.
#ifndef LOUPE_TOOLS_TRACECTL_DEMO_H_
#define LOUPE_TOOLS_TRACECTL_DEMO_H_

#include <CLI/App.hpp>
#include <cstdint>
#include <string>

namespace loupe::tracectl {

struct DemoOptions {
  std::string output = "loupe-traces";
  uint64_t events = 2'000'000;
  uint64_t max_file_size = 8ull << 20;
};

void AddDemoCommand(CLI::App& app, DemoOptions& options);
int RunDemo(const DemoOptions& options);

}  // namespace loupe::tracectl

#endif  // LOUPE_TOOLS_TRACECTL_DEMO_H_
