#include "tools/tracectl/sessions.h"

#include <fmt/format.h>
#include <google/protobuf/util/json_util.h>

#include "tools/tracectl/daemon_client.h"
#include "daemon/format/loss_tally.h"
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
  const format::LossTally tally =
      format::TallyLosses({status.losses().begin(), status.losses().end()});
  uint64_t lost = 0;
  for (const auto& [what, count] : tally.lost) lost += count;
  fmt::print("{}  {}  uid {}  targets {}  {} events  {} lost  {} segment(s)  {:.1f} MB  {}\n",
             status.session_id(), status.running() ? "running" : "ended  ", status.owner_uid(),
             fmt::join(status.targets(), ","), status.events(), lost, status.segments(),
             static_cast<double>(status.bytes_written()) / 1e6, status.output_dir());
  for (const std::string& line : tally.Lines()) fmt::print("    {}\n", line);
  if (!status.last_error().empty()) fmt::print("    error: {}\n", status.last_error());
  if (!status.end_error().empty()) fmt::print("    error at the end: {}\n", status.end_error());
  if (!status.ended_because().empty()) fmt::print("    ended: {}\n", status.ended_because());
  if (status.probe_sites() != 0) fmt::print("    probe sites: {}\n", status.probe_sites());
  for (const std::string& warning : status.warnings()) fmt::print("    warning: {}\n", warning);
}

std::string Ago(uint64_t unix_ms) {
  if (unix_ms == 0) return "never";
  const auto now = std::chrono::duration_cast<std::chrono::milliseconds>(
                       std::chrono::system_clock::now().time_since_epoch())
                       .count();
  return fmt::format("{:.1f} s ago", static_cast<double>(now - static_cast<int64_t>(unix_ms)) / 1e3);
}

void PrintShipping(const v1::ShippingStatus& shipping, bool json) {
  if (json) {
    std::string text;
    (void)google::protobuf::util::MessageToJsonString(shipping, &text);
    fmt::print("{{\"shipping\": {}}}\n", text);
    return;
  }
  fmt::print("shipping to {}: {} segment(s) queued ({:.1f} MB), {} shipped ({:.1f} MB), "
             "last success {}\n",
             shipping.collector(), shipping.queued_segments(),
             static_cast<double>(shipping.queued_bytes()) / 1e6, shipping.shipped_segments(),
             static_cast<double>(shipping.shipped_bytes()) / 1e6,
             Ago(shipping.last_success_unix_ms()));
  if (!shipping.last_error().empty()) {
    fmt::print("    last error ({}): {}\n", Ago(shipping.last_error_unix_ms()),
               shipping.last_error());
  }
  if (shipping.rejected_segments() > 0) {
    fmt::print("    {} segment(s) refused by the collector, kept as .rejected\n",
               shipping.rejected_segments());
  }
  if (shipping.resumed_uploads() > 0) {
    fmt::print("    {} upload(s) resumed after an interruption\n", shipping.resumed_uploads());
  }
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
    const format::LossTally tally =
        format::TallyLosses({final_status->losses().begin(), final_status->losses().end()});
    return tally.complete() && final_status->end_error().empty() ? kExitOk : kExitIncomplete;
  }
  const bool all = !app.got_subcommand("status") || options.session_id.empty();
  absl::StatusOr<v1::StatusResponse> response = daemon->Status(all ? "" : options.session_id);
  if (!response.ok()) return Fail(response.status());
  for (const v1::SessionStatus& status : response->sessions()) Print(status, options.json);
  if (response->sessions().empty() && !options.json) fmt::print("no sessions\n");
  if (app.got_subcommand("status") && all && response->has_shipping()) {
    PrintShipping(response->shipping(), options.json);
  }
  return kExitOk;
}

}  // namespace loupe::tracectl
