#include "tools/tracectl/sessions.h"

#include <fmt/format.h>
#include <google/protobuf/util/json_util.h>

#include "tools/tracectl/daemon_client.h"
#include "tools/tracectl/exit_codes.h"

namespace loupe::tracectl {
namespace {

void Print(const v1::SessionStatus& status, bool json) {
  if (json) {
    std::string text;
    (void)google::protobuf::util::MessageToJsonString(status, &text);
    fmt::print("{}\n", text);
    return;
  }
  uint64_t lost = 0;
  for (const auto& [what, count] : status.losses()) lost += count;
  fmt::print("{}  {}  uid {}  targets {}  {} events  {} lost  {} segment(s)  {:.1f} MB  {}\n",
             status.session_id(), status.running() ? "running" : "ended  ", status.owner_uid(),
             fmt::join(status.targets(), ","), status.events(), lost, status.segments(),
             static_cast<double>(status.bytes_written()) / 1e6, status.output_dir());
  for (const auto& [what, count] : status.losses()) fmt::print("    lost {} ({})\n", count, what);
  if (!status.last_error().empty()) fmt::print("    error: {}\n", status.last_error());
  if (status.probe_sites() != 0) fmt::print("    probe sites: {}\n", status.probe_sites());
  for (const std::string& warning : status.warnings()) fmt::print("    warning: {}\n", warning);
}

}  // namespace

void AddSessionCommands(CLI::App& app, SessionsOptions& options) {
  CLI::App* detach = app.add_subcommand("detach", "Stop a louped session and seal its trace");
  detach->add_option("session", options.session_id, "Session id")->required();
  CLI::App* status = app.add_subcommand("status", "Figures of louped's sessions");
  status->add_option("session", options.session_id, "Session id (default: all)");
  status->add_flag("--json", options.json, "One JSON object per session");
  CLI::App* list = app.add_subcommand("list", "louped's sessions");
  list->add_flag("--json", options.json, "One JSON object per session");
}

int RunSessionCommand(const CLI::App& app, const SessionsOptions& options) {
  absl::StatusOr<std::unique_ptr<DaemonClient>> connected = DaemonClient::Connect(options.socket);
  if (!connected.ok()) return Fail(connected.status());
  std::unique_ptr<DaemonClient> daemon = *std::move(connected);
  if (!daemon) {
    return Fail(absl::UnavailableError(fmt::format(
        "no louped answering on {} (sessions of tracectl attach in embedded mode end with it)",
        options.socket)));
  }
  if (app.got_subcommand("detach")) {
    absl::StatusOr<v1::SessionStatus> final_status = daemon->Detach(options.session_id);
    if (!final_status.ok()) return Fail(final_status.status());
    Print(*final_status, options.json);
    return final_status->losses().empty() ? kExitOk : kExitIncomplete;
  }
  absl::StatusOr<std::vector<v1::SessionStatus>> sessions =
      daemon->Status(app.got_subcommand("status") ? options.session_id : "");
  if (!sessions.ok()) return Fail(sessions.status());
  for (const v1::SessionStatus& status : *sessions) Print(status, options.json);
  if (sessions->empty() && !options.json) fmt::print("no sessions\n");
  return kExitOk;
}

}  // namespace loupe::tracectl
