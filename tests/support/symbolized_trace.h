// The stacks of a trace's CPU samples and off-CPU intervals, each address
// named from the symbol table sealed into the segment it is in, as a reader
// of the trace would see them.
#ifndef LOUPE_TESTS_SUPPORT_SYMBOLIZED_TRACE_H_
#define LOUPE_TESTS_SUPPORT_SYMBOLIZED_TRACE_H_

#include <cstdint>
#include <string>
#include <vector>

namespace loupe::testing {

struct NamedFrame {
  std::string function, file;
  uint32_t line = 0;
  bool inlined = false;
  uint64_t address = 0;  // the stack's address it names
};

// Addresses innermost first, as recorded; frames innermost first, an
// address's inlined frames before the function they are inlined into. An
// address the table has without a name reads "?", one it lacks
// "<missing from the table>".
struct SymbolizedStack {
  uint32_t tid = 0;
  std::vector<uint64_t> user, kernel;
  std::vector<NamedFrame> user_frames, kernel_frames;
  uint64_t time_ns = 0, duration_ns = 0;  // of an off-CPU interval: its end and length
};

struct SymbolizedTrace {
  bool readable = false;
  std::vector<SymbolizedStack> samples;
  std::vector<SymbolizedStack> off_cpu;
  std::vector<std::string> notes;
  // The innermost name of every kernel address in the tables.
  std::vector<std::string> kernel_names;
};

// Every segment of the session directory `dir`; not readable when it holds
// none or one cannot be opened.
SymbolizedTrace Symbolize(const std::string& dir);

}  // namespace loupe::testing

#endif  // LOUPE_TESTS_SUPPORT_SYMBOLIZED_TRACE_H_
