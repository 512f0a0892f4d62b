// tracectl: drives Loupe and reads its traces. One file per subcommand.
#include <CLI/CLI.hpp>
#include <cstdlib>

#include "tools/tracectl/attach.h"
#include "tools/tracectl/daemon_client.h"
#include "tools/tracectl/demo.h"
#include "tools/tracectl/export.h"
#include "tools/tracectl/report.h"
#include "tools/tracectl/exit_codes.h"
#include "tools/tracectl/sessions.h"
#include "tools/tracectl/verify.h"

int main(int argc, char** argv) {
  using namespace loupe::tracectl;
  CLI::App app{"tracectl: trace native Linux services with Loupe, and read the traces"};
  app.require_subcommand(1);
  std::string socket = kDefaultSocket;
  if (const char* from_env = std::getenv("LOUPE_SOCKET")) socket = from_env;
  app.add_option("--socket", socket, "louped's control socket (env LOUPE_SOCKET)")
      ->capture_default_str();
  AttachOptions attach;
  AddAttachCommand(app, attach);
  SessionsOptions sessions;
  AddSessionCommands(app, sessions);
  VerifyOptions verify;
  AddVerifyCommand(app, verify);
  DemoOptions demo;
  AddDemoCommand(app, demo);
  ExportOptions export_options;
  AddExportCommand(app, export_options);
  ReportOptions report;
  AddReportCommand(app, report);
  try {
    app.parse(argc, argv);
  } catch (const CLI::ParseError& error) {
    return app.exit(error) == 0 ? kExitOk : kExitError;
  }
  attach.socket = sessions.socket = socket;
  if (app.got_subcommand("attach")) return RunAttach(attach);
  if (app.got_subcommand("detach") || app.got_subcommand("status") || app.got_subcommand("list")) {
    return RunSessionCommand(app, sessions);
  }
  if (app.got_subcommand("verify")) return RunVerify(verify);
  if (app.got_subcommand("demo")) return RunDemo(demo);
  if (app.got_subcommand("export")) return RunExport(export_options);
  if (app.got_subcommand("report")) return RunReport(report);
  return kExitError;
}
