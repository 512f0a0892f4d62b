// Fuzzes the text parsers of symbolization: /proc/<pid>/maps and kallsyms.
#include <cstddef>
#include <cstdint>
#include <string_view>

#include "daemon/symbols/kernel_symbols.h"
#include "daemon/symbols/process_maps.h"

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  using namespace loupe::symbols;
  const std::string_view text(reinterpret_cast<const char*>(data), size);
  const std::vector<Mapping> maps = ParseProcMaps(text);
  for (const Mapping& mapping : maps) {
    if (FindMapping(maps, mapping.start) == nullptr) __builtin_trap();  // sorted and found
  }
  const KernelSymbols kernel(text);
  kernel.Name(size > 8 ? *reinterpret_cast<const uint64_t*>(data) : size);
  return 0;
}
