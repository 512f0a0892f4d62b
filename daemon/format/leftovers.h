// Segments a writer left unsealed: `<session>-<seq>.loupe.active` files of
// a process that stopped without sealing them (killed, crashed, the power
// went, or its last trailer never found room). Before it writes again, a
// writer identity seals its own leftovers as they are: each is read to its
// last whole block, cut there, given back the symbol table it had, and a
// trailer that says what was read and that the segment is incomplete, with
// the reason; then it takes its sealed name, so it is read, shipped and
// counted in the folder's budget like any other segment.
//
// Only files of the identity are touched, by the rule the budget evicts by
// (directory_budget.h): named like a segment, a regular file with one link,
// not followed through a symlink, with this host and writer_id in its
// header. The rename is done with the file owner's rights and never
// replaces a file already at the sealed name.
#ifndef LOUPE_DAEMON_FORMAT_LEFTOVERS_H_
#define LOUPE_DAEMON_FORMAT_LEFTOVERS_H_

#include <cstdint>
#include <string>
#include <string_view>
#include <vector>

#include "absl/status/status.h"
#include "daemon/format/directory_budget.h"

namespace loupe::format {

// What the trailer of a sealed leftover says, as its verdict's reason.
inline constexpr std::string_view kLeftoverReason = "louped stopped before sealing it";

struct LeftoverReport {
  std::vector<std::string> sealed;  // the sealed paths
  uint64_t records = 0;             // read from them in all
  std::vector<std::string> failures;  // one line each: path and why
};

// Seals the leftovers of `identity` directly in `directory`; `reason` goes
// into each trailer. Call before any writer of the identity writes there
// (a writer's open file is .active too).
LeftoverReport SealLeftovers(const std::string& directory, const WriterIdentity& identity,
                             std::string_view reason = kLeftoverReason);

// Seals one leftover, already known to be of the writer's identity, open
// read-write as `fd` (a regular file); `path` names it in messages. Leaves
// the file as it was if it cannot be read as a segment.
absl::Status SealLeftoverFile(int fd, const std::string& path, std::string_view reason,
                              uint64_t* records = nullptr);

}  // namespace loupe::format

#endif  // LOUPE_DAEMON_FORMAT_LEFTOVERS_H_
