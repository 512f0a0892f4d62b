// The zstd frames a segment file is made of: the leading signature (a zstd
// skippable frame, so `zstd -d` still reads the file), and one compressed
// frame per Frame message, each with its content size and checksum.
#ifndef LOUPE_DAEMON_FORMAT_FRAME_CODEC_H_
#define LOUPE_DAEMON_FORMAT_FRAME_CODEC_H_

#include <zstd.h>

#include <cstdint>
#include <memory>
#include <span>
#include <string>
#include <string_view>

#include "absl/status/status.h"
#include "absl/status/statusor.h"

namespace loupe::format {

// 2: event blocks may use coding 2 (EventBlock.coding), which readers of
// version 1 would misread; they refuse the file instead. 3: coding 3, which
// readers of version 2 would call corrupt; they refuse the file instead.
// 4: the `unreported` waker context, which readers of 3 would call corrupt.
inline constexpr uint32_t kFormatVersion = 4;
inline constexpr uint32_t kSignatureMagic = 0x184D2A5E;  // in zstd's skippable range
inline constexpr std::string_view kSignatureText = "LOUPESEG";
inline constexpr size_t kSignatureSize = 8 + 8 + 4;  // zstd header, text, version

// Frames larger than these are damaged: the writer never makes them. A
// reader also holds each frame to a smaller bound of its own (see
// SegmentReader), so a small file cannot make it allocate this much.
inline constexpr size_t kMaxCompressedFrame = 64 << 20;
inline constexpr size_t kMaxDecompressedFrame = 256 << 20;

std::string SignatureFrame();
// Checks the signature at the start of a file; returns the format version.
absl::StatusOr<uint32_t> ParseSignature(std::string_view bytes);

class FrameCompressor {
 public:
  static absl::StatusOr<FrameCompressor> Create(int level);
  // Appends one zstd frame holding `payload` to *out. At each offset of
  // `block_starts` (ascending) that lies at least kMinBlockBytes past the last
  // one taken, a new zstd block begins: zstd keeps one set of entropy tables
  // per block, and columns of unlike values sharing a block would share them
  // (event blocks pass their columns' starts). Readers see an ordinary frame.
  absl::Status Compress(std::string_view payload, std::string* out,
                        std::span<const size_t> block_starts = {});

  // Below this, a column's own tables cost more than they save.
  static constexpr size_t kMinBlockBytes = 4096;

 private:
  struct Free {
    void operator()(ZSTD_CCtx* cctx) const { ZSTD_freeCCtx(cctx); }
  };
  std::unique_ptr<ZSTD_CCtx, Free> cctx_;
};

enum class FrameScan { kWhole, kNeedMore, kCorrupt };

// Measures the zstd frame at the start of `data` without decompressing it.
// kNeedMore: `data` ends inside the frame. On kCorrupt, *error says why.
FrameScan ScanFrame(std::string_view data, size_t* frame_size, std::string* error);

class FrameDecompressor {
 public:
  FrameDecompressor();
  // Replaces *out with the content of the one whole frame `frame`; verifies
  // its checksum. A frame without content size or checksum, one that claims
  // more than `limit` bytes (and kMaxDecompressedFrame), or more than its
  // blocks can hold, is refused before anything is allocated.
  absl::Status Decompress(std::string_view frame, size_t limit, std::string* out);

 private:
  struct Free {
    void operator()(ZSTD_DCtx* dctx) const { ZSTD_freeDCtx(dctx); }
  };
  std::unique_ptr<ZSTD_DCtx, Free> dctx_;
};

}  // namespace loupe::format

#endif  // LOUPE_DAEMON_FORMAT_FRAME_CODEC_H_
