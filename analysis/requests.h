// Requests: any interval of a thread a user cares about, from whatever
// marks it — a shim span or operation, a uprobe'd function's call to its
// return, or a begin/end pair of USDT probes the user names. Each record is
// turned into "a request of kind K begins (or ends) on this thread".
#ifndef LOUPE_ANALYSIS_REQUESTS_H_
#define LOUPE_ANALYSIS_REQUESTS_H_

#include <array>
#include <cstdint>
#include <span>
#include <string>
#include <string_view>
#include <vector>

#include "absl/container/flat_hash_map.h"
#include "absl/container/flat_hash_set.h"
#include "absl/status/statusor.h"
#include "daemon/format/record.h"
#include "loupe/v1/trace.pb.h"

namespace loupe::analysis {

enum class RequestSource : uint8_t { kUprobe, kOperation, kSpan, kUsdt };
std::string_view RequestSourceName(RequestSource source);  // "uprobe", "operation", ...

// `--request 'NAME=PROVIDER:BEGIN..END'`: END may leave out the provider,
// NAME= may be left out (the probes' common stem names it).
struct UsdtPair {
  std::string name;
  std::string begin_probe, end_probe;  // "provider:name"
};
absl::StatusOr<UsdtPair> ParseUsdtPair(std::string_view text);

struct RequestKind {
  RequestSource source;
  std::string name;  // as reported: "lock_service:handle_request", "request", ...
  // The function or span alone, for sentences: "handle_request".
  std::string short_name;
};

// One record's meaning for requests.
struct RequestMark {
  enum Type : uint8_t { kNone, kBegin, kEnd } type = kNone;
  uint32_t kind = 0;  // index into kinds()
  uint64_t key = 0;   // pairs a begin with its end on the thread
  std::span<const int64_t> args;  // a begin's: captured arguments
  uint64_t operation_id = 0;      // the shim operation it belongs to, 0 none
  // An end that passes the operation on to the next thread that binds it.
  bool passes = false;
  // An end that knows its begin's time (a uprobe return paired by louped,
  // by the stack pointer): it ends that one, not the innermost open; 0
  // unknown.
  uint64_t begin_ns = 0;
  // An end where an exception or a longjmp left the call, not a return.
  format::Unwound unwound = format::Unwound::kNo;
};

class RequestKinds {
 public:
  explicit RequestKinds(std::vector<UsdtPair> pairs) : pairs_(std::move(pairs)) {}
  // Learns from a segment header which uprobes were asked for with %return:
  // only their calls are requests (an entry-only probe never ends).
  void AddHeader(const v1::SegmentHeader& header);

  RequestMark Mark(const format::Record& record);
  const std::vector<RequestKind>& kinds() const { return kinds_; }

 private:
  uint32_t KindOf(RequestSource source, std::string_view name);
  bool Returns(std::string_view probe) const;
  RequestMark MarkOperation(const format::OperationBegin& begin);
  RequestMark MarkUsdt(const format::UsdtEvent& usdt);  // a begin or end of a pair, or none

  std::vector<UsdtPair> pairs_;
  absl::flat_hash_set<std::string> returning_uprobes_;
  std::vector<RequestKind> kinds_;
  // Per source, by name: looked up per record without building a string.
  std::array<absl::flat_hash_map<std::string, uint32_t>, 4> kind_ids_;
  int64_t operation_arg_ = 0;
};

}  // namespace loupe::analysis

#endif  // LOUPE_ANALYSIS_REQUESTS_H_
