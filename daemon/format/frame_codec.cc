#include "daemon/format/frame_codec.h"

// For ZSTD_getFrameHeader, ZSTD_decompressBound and the stable-buffer
// parameters (exported by libzstd).
#define ZSTD_STATIC_LINKING_ONLY
#include <fmt/format.h>
#include <zstd.h>
#include <zstd_errors.h>

#include <algorithm>
#include <cstring>

#include "absl/base/internal/endian.h"

namespace loupe::format {
namespace {

void AppendLittleEndian32(std::string* out, uint32_t v) {
  char bytes[4];
  absl::little_endian::Store32(bytes, v);
  out->append(bytes, 4);
}

// The most the blocks of a whole zstd frame can decompress to: raw and RLE
// blocks state their size, a compressed block holds at most blockSizeMax.
// (ZSTD_decompressBound trusts the frame's content size instead.) 0 when the
// blocks cannot be walked.
uint64_t BlocksBound(std::string_view frame, const ZSTD_frameHeader& header) {
  constexpr size_t kBlockHeaderSize = 3;
  uint64_t bound = 0;
  size_t pos = header.headerSize;
  while (pos + kBlockHeaderSize <= frame.size()) {
    const auto* p = reinterpret_cast<const uint8_t*>(frame.data() + pos);
    const uint32_t block = p[0] | (p[1] << 8) | (uint32_t{p[2]} << 16);
    const bool last = block & 1;
    const uint32_t type = (block >> 1) & 3;
    const uint32_t size = block >> 3;
    pos += kBlockHeaderSize;
    switch (type) {
      case 0:  // raw: `size` bytes follow
        bound += size;
        pos += size;
        break;
      case 1:  // RLE: one byte repeated `size` times
        bound += size;
        pos += 1;
        break;
      case 2:  // compressed: `size` bytes follow
        bound += header.blockSizeMax;
        pos += size;
        break;
      default:
        return 0;
    }
    if (last) return bound;
  }
  return 0;
}

}  // namespace

std::string SignatureFrame() {
  std::string frame;
  AppendLittleEndian32(&frame, kSignatureMagic);
  AppendLittleEndian32(&frame, kSignatureText.size() + 4);
  frame += kSignatureText;
  AppendLittleEndian32(&frame, kFormatVersion);
  return frame;
}

absl::StatusOr<uint32_t> ParseSignature(std::string_view bytes) {
  if (bytes.size() < kSignatureSize ||
      absl::little_endian::Load32(bytes.data()) != kSignatureMagic ||
      absl::little_endian::Load32(bytes.data() + 4) != kSignatureText.size() + 4 ||
      bytes.substr(8, kSignatureText.size()) != kSignatureText) {
    return absl::InvalidArgumentError("not a Loupe trace segment (no LOUPESEG signature)");
  }
  const uint32_t version = absl::little_endian::Load32(bytes.data() + 16);
  if (version == 0 || version > kFormatVersion) {
    return absl::FailedPreconditionError(
        fmt::format("segment format version {} is not supported (this reader knows 1..{})", version,
                    kFormatVersion));
  }
  return version;
}

absl::StatusOr<FrameCompressor> FrameCompressor::Create(int level) {
  if (level < ZSTD_minCLevel() || level > ZSTD_maxCLevel()) {
    return absl::InvalidArgumentError(
        fmt::format("zstd level {} is outside {}..{}", level, ZSTD_minCLevel(), ZSTD_maxCLevel()));
  }
  FrameCompressor compressor;
  compressor.cctx_.reset(ZSTD_createCCtx());
  if (!compressor.cctx_) return absl::ResourceExhaustedError("zstd: cannot create context");
  ZSTD_CCtx_setParameter(compressor.cctx_.get(), ZSTD_c_compressionLevel, level);
  ZSTD_CCtx_setParameter(compressor.cctx_.get(), ZSTD_c_checksumFlag, 1);
  ZSTD_CCtx_setParameter(compressor.cctx_.get(), ZSTD_c_contentSizeFlag, 1);
  // Compress hands zstd the whole payload and output at once, however many
  // blocks it ends early: without these, streaming keeps copies of both
  // (1.3 MiB more per context for 1 MiB frames).
  ZSTD_CCtx_setParameter(compressor.cctx_.get(), ZSTD_c_stableInBuffer, 1);
  ZSTD_CCtx_setParameter(compressor.cctx_.get(), ZSTD_c_stableOutBuffer, 1);
  return compressor;
}

absl::Status FrameCompressor::Compress(std::string_view payload, std::string* out,
                                       std::span<const size_t> block_starts) {
  // Each block ended early adds at most a block header to zstd's bound.
  constexpr size_t kBlockHeaderSize = 3;
  const size_t start = out->size();
  out->resize(start + ZSTD_compressBound(payload.size()) + kBlockHeaderSize * block_starts.size());
  ZSTD_CCtx* cctx = cctx_.get();
  ZSTD_CCtx_reset(cctx, ZSTD_reset_session_only);  // after a failed call, too
  ZSTD_CCtx_setPledgedSrcSize(cctx, payload.size());
  ZSTD_outBuffer output{out->data() + start, out->size() - start, 0};
  // One input throughout, as the stable buffers require; it grows to each
  // block start in turn.
  ZSTD_inBuffer input{payload.data(), 0, 0};
  // Compresses up to `to`; ZSTD_e_flush ends the zstd block there.
  auto compress = [&](size_t to, ZSTD_EndDirective directive) -> absl::Status {
    input.size = to;
    size_t left;
    do {
      left = ZSTD_compressStream2(cctx, &output, &input, directive);
    } while (!ZSTD_isError(left) && left != 0 && output.pos < output.size);
    if (ZSTD_isError(left)) {
      return absl::InternalError(fmt::format("zstd compress: {}", ZSTD_getErrorName(left)));
    }
    if (left != 0) return absl::InternalError("zstd compress: output over its bound");
    return absl::OkStatus();
  };
  absl::Status status;
  for (size_t block_start : block_starts) {
    if (block_start < input.size + kMinBlockBytes || block_start >= payload.size()) continue;
    status = compress(block_start, ZSTD_e_flush);
    if (!status.ok()) break;
  }
  if (status.ok()) status = compress(payload.size(), ZSTD_e_end);
  out->resize(status.ok() ? start + output.pos : start);
  return status;
}

FrameScan ScanFrame(std::string_view data, size_t* frame_size, std::string* error) {
  const size_t n = ZSTD_findFrameCompressedSize(data.data(), data.size());
  if (!ZSTD_isError(n)) {
    *frame_size = n;
    return FrameScan::kWhole;
  }
  if (ZSTD_getErrorCode(n) == ZSTD_error_srcSize_wrong && data.size() < kMaxCompressedFrame) {
    return FrameScan::kNeedMore;
  }
  *error = data.size() >= kMaxCompressedFrame
               ? std::string("frame larger than the format allows")
               : fmt::format("not a valid zstd frame: {}", ZSTD_getErrorName(n));
  return FrameScan::kCorrupt;
}

FrameDecompressor::FrameDecompressor() : dctx_(ZSTD_createDCtx()) {}

absl::Status FrameDecompressor::Decompress(std::string_view frame, size_t limit,
                                          std::string* out) {
  ZSTD_frameHeader header;
  if (ZSTD_getFrameHeader(&header, frame.data(), frame.size()) != 0 ||
      header.frameType != ZSTD_frame) {
    return absl::DataLossError("damaged: unreadable zstd frame header");
  }
  if (header.frameContentSize == ZSTD_CONTENTSIZE_UNKNOWN) {
    return absl::DataLossError("damaged: zstd frame without a content size");
  }
  if (!header.checksumFlag) return absl::DataLossError("damaged: zstd frame without a checksum");
  const unsigned long long size = header.frameContentSize;
  limit = std::min(limit, kMaxDecompressedFrame);
  if (size > limit) {
    return absl::DataLossError(fmt::format(
        "damaged: frame decompresses to {} bytes, over the reader's bound of {}", size, limit));
  }
  // What the frame's blocks can hold: a lying content size costs nothing.
  const uint64_t bound = BlocksBound(frame, header);
  if (size > bound) {
    return absl::DataLossError(
        fmt::format("damaged: frame claims {} bytes but its blocks hold at most {}", size, bound));
  }
  if (!dctx_) return absl::ResourceExhaustedError("zstd: cannot create context");
  // Grown exactly, without a copy of the old content next to the new.
  if (size > out->capacity()) std::string().swap(*out);
  out->resize(size);
  const size_t n =
      ZSTD_decompressDCtx(dctx_.get(), out->data(), out->size(), frame.data(), frame.size());
  if (ZSTD_isError(n)) {
    return absl::DataLossError(fmt::format("corrupt frame: zstd: {}", ZSTD_getErrorName(n)));
  }
  if (n != size) return absl::DataLossError("corrupt frame: shorter than its content size");
  return absl::OkStatus();
}

}  // namespace loupe::format
