// `tracectl attach <pid>...`: traces processes until Ctrl-C, --duration, or
// every target has exited, then seals the trace and says where it is and
// whether it is complete. Through louped the session ends with this process
// (killed too) unless --detach leaves it running in louped. With no louped answering, it runs the session
// engine in this process (embedded mode), with the same privileges needed.
#ifndef LOUPE_TOOLS_TRACECTL_ATTACH_H_
#define LOUPE_TOOLS_TRACECTL_ATTACH_H_

#include <CLI/App.hpp>
#include <cstdint>
#include <string>
#include <vector>

namespace loupe::tracectl {

struct AttachOptions {
  std::vector<uint32_t> pids;
  std::string duration;  // "10s", "500ms", "2m"; empty: until stopped
  uint32_t hz = 0;  // 0: the default (99, or louped's sample_hz)
  bool follow_children = false;
  std::string output = "loupe-traces";
  std::vector<std::string> sources = {"sched", "cpu", "shim"};
  std::string sample_event = "cpu-clock";
  std::string offcpu_stacks = "user,kernel";  // at switch-out: user, kernel, both or none
  std::string unwind = "cfi";                 // user stacks: cfi or fp
  std::vector<std::string> usdt;     // provider:name
  std::vector<std::string> uprobes;  // TARGET:SYMBOL...
  std::string content_policy = "names";
  uint32_t ring_buffer_size = 0;  // 0: the default (4 MiB, or louped's)
  uint32_t string_cap = 0;        // 0: the default (256 bytes, or louped's)
  std::string session_id;
  bool quiet = false;
  std::string ring_capture;  // embedded mode: keep the drained ring bytes here
  bool detached = false;  // louped keeps the session after tracectl returns
  bool output_given = false;
  std::string socket;  // louped's control socket
};

void AddAttachCommand(CLI::App& app, AttachOptions& options);
int RunAttach(const AttachOptions& options);

}  // namespace loupe::tracectl

#endif  // LOUPE_TOOLS_TRACECTL_ATTACH_H_
