// Where a Go program's stacks end. Go's runtime runs each thread on two
// stacks: the goroutine's and its own (g0), and switches between them in a
// few assembly functions. Call frame information read above one of those
// finds an earlier use of the stack, not the caller (a walk through it
// invented frames: `sysmon ← mstart ← runtime/cgo ← sysmon …`), so a
// walk stops there, as Go's own traceback does.
#ifndef LOUPE_DAEMON_SYMBOLS_GO_STACK_ENDS_H_
#define LOUPE_DAEMON_SYMBOLS_GO_STACK_ENDS_H_

#include <libelf.h>

#include <vector>

#include "daemon/symbols/unwind_table.h"

namespace loupe::symbols {

// Whether Go's linker wrote the file: it has one of the sections only that
// linker writes, which strip keeps (the runtime reads them).
bool IsGoProgram(Elf* elf);

// For a Go program with its symbol table: a kOutermost row over each of
// those functions and a kNone row where each ends, sorted (to lay over the
// file's own rows with Overlay). Empty for other files, and for a Go
// program stripped of its symbols.
std::vector<UnwindRow> GoStackEnds(Elf* elf);

}  // namespace loupe::symbols

#endif  // LOUPE_DAEMON_SYMBOLS_GO_STACK_ENDS_H_
