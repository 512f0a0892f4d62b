// Fuzzes SegmentReader with whole files: signature, frame scanning,
// decompression limits, frame dispatch and the protobuf header and trailer.
#include <sys/mman.h>
#include <unistd.h>

#include <cstddef>
#include <cstdint>
#include <string>

#include "daemon/base/scoped_fd.h"
#include "daemon/format/segment_reader.h"

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  loupe::ScopedFd fd(memfd_create("segment", MFD_CLOEXEC));
  if (!fd.valid()) return 0;
  for (size_t done = 0; done < size;) {
    const ssize_t n = write(fd.get(), data + done, size - done);
    if (n <= 0) return 0;
    done += static_cast<size_t>(n);
  }
  const std::string path = "/proc/self/fd/" + std::to_string(fd.get());
  auto reader = loupe::format::SegmentReader::Open(path);
  if (!reader.ok()) return 0;
  loupe::format::Record record;
  uint64_t records = 0;
  while ((*reader)->Next(&record)) ++records;
  // A reader that stops must say why, unless the file was whole.
  if (!(*reader)->has_trailer() && (*reader)->problems().empty()) __builtin_trap();
  return 0;
}
