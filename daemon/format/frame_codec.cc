#include "daemon/format/frame_codec.h"

#include <fmt/format.h>
#include <zstd_errors.h>

#include <cstring>

#include "absl/base/internal/endian.h"

namespace loupe::format {
namespace {

void AppendLittleEndian32(std::string* out, uint32_t v) {
  char bytes[4];
  absl::little_endian::Store32(bytes, v);
  out->append(bytes, 4);
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
  return compressor;
}

absl::Status FrameCompressor::Compress(std::string_view payload, std::string* out) {
  const size_t start = out->size();
  out->resize(start + ZSTD_compressBound(payload.size()));
  const size_t n = ZSTD_compress2(cctx_.get(), out->data() + start, out->size() - start,
                                  payload.data(), payload.size());
  if (ZSTD_isError(n)) {
    out->resize(start);
    return absl::InternalError(fmt::format("zstd compress: {}", ZSTD_getErrorName(n)));
  }
  out->resize(start + n);
  return absl::OkStatus();
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

absl::Status FrameDecompressor::Decompress(std::string_view frame, std::string* out) {
  const unsigned long long size = ZSTD_getFrameContentSize(frame.data(), frame.size());
  if (size == ZSTD_CONTENTSIZE_ERROR || size == ZSTD_CONTENTSIZE_UNKNOWN) {
    return absl::DataLossError("zstd frame without a readable content size");
  }
  if (size > kMaxDecompressedFrame) {
    return absl::DataLossError(fmt::format("zstd frame claims {} bytes, over the limit", size));
  }
  if (!dctx_) return absl::ResourceExhaustedError("zstd: cannot create context");
  out->resize(size);
  const size_t n =
      ZSTD_decompressDCtx(dctx_.get(), out->data(), out->size(), frame.data(), frame.size());
  if (ZSTD_isError(n)) {
    return absl::DataLossError(fmt::format("zstd: {}", ZSTD_getErrorName(n)));
  }
  if (n != size) return absl::DataLossError("zstd frame shorter than its content size");
  return absl::OkStatus();
}

}  // namespace loupe::format
