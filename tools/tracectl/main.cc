// tracectl: drives Loupe and reads its traces. One file per subcommand.
#include <CLI/CLI.hpp>

#include "tools/tracectl/attach.h"
#include "tools/tracectl/demo.h"
#include "tools/tracectl/exit_codes.h"
#include "tools/tracectl/verify.h"

int main(int argc, char** argv) {
  using namespace loupe::tracectl;
  CLI::App app{"tracectl: trace native Linux services with Loupe, and read the traces"};
  app.require_subcommand(1);
  AttachOptions attach;
  AddAttachCommand(app, attach);
  VerifyOptions verify;
  AddVerifyCommand(app, verify);
  DemoOptions demo;
  AddDemoCommand(app, demo);
  try {
    app.parse(argc, argv);
  } catch (const CLI::ParseError& error) {
    return app.exit(error) == 0 ? kExitOk : kExitError;
  }
  if (app.got_subcommand("attach")) return RunAttach(attach);
  if (app.got_subcommand("verify")) return RunVerify(verify);
  if (app.got_subcommand("demo")) return RunDemo(demo);
  return kExitError;
}
