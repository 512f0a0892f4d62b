// Fuzzes what the daemon parses out of files and requests it does not
// control: .note.stapsdt sections, the argument specs inside them, and
// --usdt / --uprobe texts.
#include <cstddef>
#include <cstdint>
#include <span>
#include <string_view>

#include "daemon/probes/probe_spec.h"
#include "daemon/probes/usdt_notes.h"

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  using namespace loupe::probes;
  auto notes = ParseUsdtNotes(std::span<const uint8_t>(data, size));
  if (notes.ok()) {
    for (const UsdtNote& note : *notes) ParseUsdtArgs(note.args).IgnoreError();
  }
  const std::string_view text(reinterpret_cast<const char*>(data), size);
  ParseUsdtArgs(text).IgnoreError();
  ParseUsdtRequest(text).IgnoreError();
  ParseUprobeRequest(text).IgnoreError();
  return 0;
}
