// Readable function names from mangled ones: C++ (Itanium), and Rust's two
// schemes, legacy (C++-like, ending in a hash) and v0 (_R…), which recent
// toolchains use for std. Anything else is a name already.
#ifndef LOUPE_DAEMON_SYMBOLS_DEMANGLE_H_
#define LOUPE_DAEMON_SYMBOLS_DEMANGLE_H_

#include <string>

namespace loupe::symbols {

std::string Demangle(const char* name);

}  // namespace loupe::symbols

#endif  // LOUPE_DAEMON_SYMBOLS_DEMANGLE_H_
