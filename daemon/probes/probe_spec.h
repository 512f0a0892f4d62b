// The probes a user asks for, as text: `--usdt 'provider:name'` (globs, and
// an opt-in string argument: 'prov:query__start(str arg0)') and
// `--uprobe 'TARGET:SYMBOL[+OFFSET][(N)][%return]'` (TARGET a path, or a
// library or executable name such as "libc"; N integer arguments to keep;
// %return pairs each call with its return into a latency).
#ifndef LOUPE_DAEMON_PROBES_PROBE_SPEC_H_
#define LOUPE_DAEMON_PROBES_PROBE_SPEC_H_

#include <cstdint>
#include <optional>
#include <string>
#include <string_view>

#include "absl/status/statusor.h"

namespace loupe::probes {

struct UsdtRequest {
  std::string text;  // as given, for messages
  std::string provider;  // glob
  std::string name;      // glob
  int string_arg = -1;   // the argument to read as a string, -1: none
};

struct UprobeRequest {
  std::string text;
  std::string target;
  std::string symbol;
  uint64_t offset = 0;
  // TARGET+0xOFFSET, a frame as stacks print code with no symbol (a
  // stripped binary's static function): the function containing that file
  // offset, by its unwind information. symbol is then empty, and the
  // probe is named as the frame was written.
  std::optional<uint64_t> frame_offset;
  std::string frame;
  uint32_t arg_count = 0;
  bool with_return = false;
};

absl::StatusOr<UsdtRequest> ParseUsdtRequest(std::string_view text);
absl::StatusOr<UprobeRequest> ParseUprobeRequest(std::string_view text);

// fnmatch-style: '*' and '?'.
bool GlobMatch(std::string_view pattern, std::string_view text);

}  // namespace loupe::probes

#endif  // LOUPE_DAEMON_PROBES_PROBE_SPEC_H_
