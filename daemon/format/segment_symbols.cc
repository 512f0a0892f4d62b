#include "daemon/format/segment_symbols.h"

#include <fcntl.h>
#include <fmt/format.h>
#include <sys/stat.h>
#include <unistd.h>

#include <algorithm>
#include <utility>
#include <vector>

#include "daemon/base/scoped_fd.h"
#include "daemon/base/status_util.h"
#include "daemon/format/block_layout.h"
#include "daemon/format/frame_body.h"
#include "daemon/format/frame_codec.h"
#include "daemon/format/parsed_size.h"
#include "daemon/format/segment_reader.h"

namespace loupe::format {
namespace {

// Bytes read at a time while walking the frames; a frame larger than this is
// read whole once its start is found.
constexpr size_t kChunk = 1 << 20;

// Reads up to `size` bytes at `offset`; fewer at the end of the file.
absl::StatusOr<std::string> ReadAt(int fd, const std::string& path, uint64_t offset, size_t size) {
  std::string bytes(size, '\0');
  size_t have = 0;
  while (have < size) {
    const ssize_t n = ::pread(fd, bytes.data() + have, size - have, static_cast<off_t>(offset + have));
    if (n < 0 && errno == EINTR) continue;
    if (n < 0) return ErrnoStatus("read", path);
    if (n == 0) break;
    have += static_cast<size_t>(n);
  }
  bytes.resize(have);
  return bytes;
}

using Frames = std::vector<std::pair<uint64_t, size_t>>;  // (offset, size)

// The frames after the signature, up to the end of the file or the first
// frame that is cut off or corrupt: SegmentReader reads no further either.
absl::StatusOr<Frames> WholeFrames(int fd, const std::string& path, uint64_t file_size) {
  Frames frames;
  std::string window;  // file bytes from window_offset
  uint64_t window_offset = 0;
  uint64_t offset = kSignatureSize;
  size_t need = 1;  // bytes from `offset` that the window must hold
  while (offset < file_size) {
    const uint64_t window_end = window_offset + window.size();
    if (window_end < std::min(file_size, offset + need)) {
      absl::StatusOr<std::string> bytes = ReadAt(fd, path, offset, std::max(need, kChunk));
      if (!bytes.ok()) return bytes.status();
      window = *std::move(bytes);
      window_offset = offset;
      if (window.size() < need) return frames;  // the file shrank
    }
    const std::string_view available =
        std::string_view(window).substr(static_cast<size_t>(offset - window_offset));
    size_t size = 0;
    std::string error;
    switch (ScanFrame(available, &size, &error)) {
      case FrameScan::kWhole:
        frames.emplace_back(offset, size);
        offset += size;
        need = 1;
        break;
      case FrameScan::kNeedMore:
        if (offset + available.size() >= file_size) return frames;  // cut off
        need = available.size() + 1;
        break;
      case FrameScan::kCorrupt:
        return frames;
    }
  }
  return frames;
}

}  // namespace

absl::StatusOr<SegmentSymbols> ReadSegmentSymbols(const std::string& path) {
  SegmentSymbols out;
  {
    // The same checks and errors as reading the segment, reading little.
    absl::StatusOr<std::unique_ptr<SegmentReader>> reader = SegmentReader::Open(path, 64 << 10);
    if (!reader.ok()) return reader.status();
    out.header = (*reader)->header();
  }
  ScopedFd fd(::open(path.c_str(), O_RDONLY | O_CLOEXEC | O_NONBLOCK | O_NOCTTY));
  if (!fd.valid()) return ErrnoStatus("open", path);
  struct stat st;
  if (::fstat(fd.get(), &st) != 0) return ErrnoStatus("stat", path);
  const uint64_t file_size = static_cast<uint64_t>(st.st_size);
  absl::StatusOr<Frames> frames = WholeFrames(fd.get(), path, file_size);
  if (!frames.ok()) return frames.status();
  // SegmentReader's bound on what a file of this size may decode.
  const uint64_t bound = std::max(kMinDecodeBound, file_size * kDecodedBytesPerFileByte);

  FrameDecompressor decompressor;
  std::string payload;
  for (auto it = frames->rbegin(); it != frames->rend() && it + 1 != frames->rend(); ++it) {  // the first is the header
    absl::StatusOr<std::string> frame = ReadAt(fd.get(), path, it->first, it->second);
    if (!frame.ok()) return frame.status();
    uint32_t field = 0;
    std::string_view body;
    if (!decompressor.Decompress(*frame, bound, &payload).ok() ||
        !SplitFrame(payload, &field, &body) || field == layout::kFrameEvents) {
      break;  // the symbols come after the last events, and after no damage
    }
    if (field != layout::kFrameSymbols) continue;
    const std::optional<uint64_t> cost =
        ParsedSizeBound(*v1::SymbolTable::descriptor(), body, bound);
    if (!cost.has_value() || *cost > bound ||
        !out.symbols.ParseFromArray(body.data(), static_cast<int>(body.size()))) {
      out.symbols.Clear();
    }
    break;
  }
  return out;
}

}  // namespace loupe::format
