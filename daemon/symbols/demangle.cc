#include "daemon/symbols/demangle.h"

#include <cxxabi.h>
// libiberty would declare basename() its own way, which glibc's clashes with.
#define HAVE_DECL_BASENAME 1
#include <libiberty/demangle.h>

#include <cstdlib>
#include <cstring>
#include <string_view>

namespace loupe::symbols {
namespace {

// Rust's legacy scheme is C++'s nested-name form ending in a 16-digit hash
// segment: _ZN…17h<16 hex>E.
bool IsRustLegacy(std::string_view name) {
  constexpr size_t kHashTail = 3 + 16 + 1;  // "17h", the hash, "E"
  if (!name.starts_with("_ZN") || name.size() < 3 + kHashTail || !name.ends_with('E')) {
    return false;
  }
  const std::string_view tail = name.substr(name.size() - kHashTail);
  return tail.starts_with("17h") &&
         tail.substr(3, 16).find_first_not_of("0123456789abcdef") == std::string_view::npos;
}

std::string Taken(char* readable, const char* name) {
  if (readable == nullptr) return name;
  std::string result(readable);
  std::free(readable);
  return result;
}

}  // namespace

std::string Demangle(const char* name) {
  if (name == nullptr) return "";
  // libiberty reads both Rust schemes, and leaves the legacy hash out, as
  // perf and debuggers print these names.
  if (std::strncmp(name, "_R", 2) == 0 || IsRustLegacy(name)) {
    return Taken(cplus_demangle(name, DMGL_PARAMS | DMGL_ANSI | DMGL_RUST), name);
  }
  // Only Itanium-mangled names: __cxa_demangle also reads a bare type
  // encoding, so a C function named w, x or i would read as wchar_t,
  // long long or int.
  if (std::strncmp(name, "_Z", 2) != 0) return name;
  int status = 0;
  return Taken(abi::__cxa_demangle(name, nullptr, nullptr, &status), name);
}

}  // namespace loupe::symbols
