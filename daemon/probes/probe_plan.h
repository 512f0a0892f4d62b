// Turns what the user asked for (shim, USDT requests, uprobe requests) into
// the uprobes to attach in a set of target processes: every matching USDT
// site in the executable and the libraries each target maps, with its
// decoded argument spec and semaphore, and every requested function. What
// cannot be resolved becomes a warning that names it; the rest still runs.
#ifndef LOUPE_DAEMON_PROBES_PROBE_PLAN_H_
#define LOUPE_DAEMON_PROBES_PROBE_PLAN_H_

#include <cstdint>
#include <map>
#include <optional>
#include <string>
#include <vector>

#include "daemon/base/credentials.h"
#include "daemon/probes/probe_spec.h"
#include "shared/records.h"

namespace loupe::probes {

enum class ProbeProgram {
  kShimSpanBegin,
  kShimSpanEnd,
  kShimInstant,
  kShimCounter,
  kShimOperationBegin,
  kShimOperationEnd,
  kShimOperationPass,
  kShimThreadName,
  kShimTrigger,
  kUsdt,
  kUprobeEntry,
  kUprobeReturn,  // the kernel's return probe (a uretprobe)
  // The same program as a uprobe on an instruction that leaves the
  // function (x86_sites.h): for code that exceptions unwind through.
  kUprobeReturnSite,
  // kExceptionCaughtProbe's: an entry that also records the bounds of the
  // stack it runs on.
  kExceptionCatch,
  // kLongjmpProbe's: an entry that records the stack pointer the jump
  // restores, and the bounds of the stack it is on.
  kLongjmp,
};

// The name of the entry probe louped places on `__cxa_begin_catch` where
// calls are probed at their returns: where a C++ exception is caught, the
// calls it unwound (their frames below the catch's) end
// (session/uprobe_pairer.h). Bracketed, it names no user probe.
inline constexpr std::string_view kExceptionCaughtProbe = "[exception caught]";
// The same for a longjmp: the entry probe on glibc's longjmp functions.
inline constexpr std::string_view kLongjmpProbe = "[longjmp]";

struct ProbeAttachment {
  ProbeProgram program = ProbeProgram::kUsdt;
  std::string path;  // openable by the daemon (through /proc/PID/root)
  uint64_t file_offset = 0;
  uint64_t semaphore_offset = 0;  // file offset of the USDT semaphore, 0 = none
  uint64_t cookie = 0;  // kUsdt: spec index; uprobes: probe id << 8 | argument count
  uint32_t pid = 0;     // the process it is attached for
};

struct ProbeRequests {
  std::vector<UsdtRequest> usdt;
  std::vector<UprobeRequest> uprobes;
  // The caller's: every file is found and read with its rights, so a path
  // it cannot read fails the same whether or not the file exists. A caller
  // that is not root also gets its probes per target process only.
  std::optional<Credentials> credentials;
};

// Parses --usdt and --uprobe values; the first bad one is the error.
absl::Status ParseProbeRequests(const std::vector<std::string>& usdt,
                                const std::vector<std::string>& uprobes, ProbeRequests* out);

struct ProbePlan {
  std::vector<ProbeAttachment> attachments;
  std::vector<loupe_usdt_spec> usdt_specs;  // indexed by a kUsdt cookie
  std::vector<std::string> probe_names;     // by probe id: "provider:name", "libc:malloc"
  std::vector<bool> probe_returns;          // by probe id: its returns are probed
  std::vector<std::string> warnings;
  uint32_t shim_sites = 0;
  // Function entries whose first instruction the kernel must single-step.
  std::vector<std::string> slow_entries;
  // Attach for each target process, never for every process (a caller that
  // is not root must not probe other users' processes).
  bool per_pid = false;
  // Whose rights attach the probes: the kernel resolves each path again at
  // attach, and it must do so as the caller did when planning.
  std::optional<Credentials> credentials;
};

// `pids` are kernel-global process ids. `shim`: attach the shim's probes
// wherever they are found. `system_wide`: the probes will be
// attached for every process that maps a file (to follow children), so each
// file is attached once, not once per target; ignored (with a warning) for
// a caller that is not root, whose probes are per pid.
ProbePlan PlanProbes(const std::vector<uint32_t>& pids, const ProbeRequests& requests, bool shim,
                     bool system_wide);

// The files a process maps executable code from: its executable first;
// with `map_files`, each one's /proc/PID/map_files link too (the very file
// mapped, also when the path names another by now or only inside a chroot).
std::vector<std::string> MappedObjects(uint32_t pid,
                                       std::map<std::string, std::string>* map_files = nullptr);

}  // namespace loupe::probes

#endif  // LOUPE_DAEMON_PROBES_PROBE_PLAN_H_
