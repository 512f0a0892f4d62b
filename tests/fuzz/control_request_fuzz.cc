// Fuzzes what louped makes of a control request, which any member of the
// socket's group can send: the bytes as a v1::AttachRequest, then
// BuildSessionOptions (defaults + request + caller) with louped's default
// config for root and for another user, and with tracectl's embedded
// defaults. Whatever the bytes, it must not crash; a refusal must say why,
// the same way each time; and what it accepts must be options the session
// engine accepts, carrying what the request asked for, to be carried out
// with the caller's rights.
#include <google/protobuf/stubs/logging.h>
#include <unistd.h>

#include <algorithm>
#include <climits>
#include <cstddef>
#include <cstdint>
#include <cstdio>
#include <cstdlib>
#include <string_view>

#include "daemon/control/session_options.h"
#include "daemon/louped/session_defaults.h"
#include "daemon/session/session.h"
#include "loupe/v1/control.pb.h"

namespace {

using loupe::control::AttachCaller;
using loupe::control::BuildSessionOptions;
using loupe::session::SessionOptions;

void Check(bool ok, std::string_view what) {
  if (ok) return;
  std::fprintf(stderr, "control_request_fuzz: %.*s\n", static_cast<int>(what.size()),
               what.data());
  std::abort();
}

void CheckCaller(const SessionOptions& defaults, const loupe::v1::AttachRequest& request,
                 const AttachCaller& caller) {
  const absl::StatusOr<SessionOptions> options = BuildSessionOptions(defaults, request, caller);
  const absl::StatusOr<SessionOptions> again = BuildSessionOptions(defaults, request, caller);
  Check(options.ok() == again.ok() && options.status() == again.status(),
        "the same request, built twice, gets two answers");
  if (!options.ok()) {
    Check(!options.status().message().empty(), "a refusal without a message");
    return;
  }
  const SessionOptions& o = *options;
  Check(loupe::session::ValidateSessionOptions(o).ok(),
        "accepted options that ValidateSessionOptions refuses");
  Check(o.pids.size() == static_cast<size_t>(request.pids_size()) &&
            std::equal(o.pids.begin(), o.pids.end(), request.pids().begin()),
        "the targets are not the request's pids");
  Check(o.caller_uid == caller.uid && o.caller_pid == caller.pid, "the caller is not the asker");
  Check(o.writer.session_id == request.session_id(), "the session is not named as asked");
  Check(o.duration_ns / 1'000'000 == request.duration_ms() && o.duration_ns % 1'000'000 == 0,
        "the duration is not the request's");
  Check(request.sample_hz() == 0 || o.sources.sample_hz == request.sample_hz(),
        "sample_hz is not the request's");
  Check(request.ring_buffer_size() == 0 || o.sources.ring_bytes == request.ring_buffer_size(),
        "ring_buffer_size is not the request's");
  Check(o.sources.follow_children == request.follow_children(),
        "follow_children is not the request's");
  Check(o.writer.directory ==
            (request.output_dir().empty() ? defaults.writer.directory : request.output_dir()),
        "the output directory is neither the request's nor the default");
  // Caller-scoped authority: what louped opens or makes for a caller other
  // than root, outside the caller's own process, it does with the caller's
  // rights, for the files it writes and the files it probes alike.
  const bool as_caller = caller.uid != 0 && !caller.in_process;
  Check(o.writer.credentials.has_value() == as_caller &&
            o.probes.credentials == o.writer.credentials,
        "files are not opened with the caller's rights, or differently for writing and probing");
  Check(!as_caller || (o.writer.credentials->uid == caller.uid &&
                       o.writer.credentials->gid == caller.gid),
        "files would be made with rights other than the caller's");
  // Resource bounds and the kernel's layout (issue 15 review): a caller
  // other than root gets no larger ring than louped's, and no kernel stacks.
  Check(!as_caller || o.sources.ring_bytes <= defaults.sources.ring_bytes,
        "a caller other than root got a ring larger than louped's");
  Check(!as_caller || (!o.sources.offcpu_kernel_stacks && !o.sources.cpu_kernel_stacks),
        "a caller other than root gets kernel stacks");
  Check(o.probes.usdt.size() + o.probes.uprobes.size() <=
            static_cast<size_t>(request.usdt_size() + request.uprobes_size()),
        "more probe requests than the request holds");
}

}  // namespace

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  // Not a line per string field that is not UTF-8.
  static const bool quiet = (google::protobuf::SetLogHandler(nullptr), true);
  (void)quiet;
  loupe::v1::AttachRequest request;
  // What gRPC would refuse to decode never reaches the daemon.
  if (size > INT_MAX || !request.ParseFromArray(data, static_cast<int>(size))) return 0;

  static const SessionOptions daemon_defaults =
      loupe::louped::SessionDefaults(loupe::louped::DaemonConfig{});
  static const SessionOptions embedded_defaults = loupe::control::EmbeddedDefaults();
  CheckCaller(daemon_defaults, request, {.pid = 1, .uid = 0, .gid = 0});
  CheckCaller(daemon_defaults, request,
              {.pid = static_cast<uint32_t>(getpid()), .uid = 65534, .gid = 65534});
  CheckCaller(embedded_defaults, request, {.uid = 1000, .gid = 1000, .in_process = true});
  return 0;
}
