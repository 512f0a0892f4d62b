#include "daemon/session/ring_capture.h"

#include <fmt/format.h>

#include <cerrno>
#include <cstring>
#include <fstream>
#include <iterator>

namespace loupe::session {
namespace {

constexpr uint32_t kBatchEnd = 0xffffffff;
// A ring record is bounded by the ring (at most a few MiB); anything larger
// is a corrupt length, not a record.
constexpr uint32_t kMaxRecordBytes = 1u << 26;

}  // namespace

absl::StatusOr<std::unique_ptr<RingCaptureWriter>> RingCaptureWriter::Create(
    const std::string& path) {
  FILE* file = fopen(path.c_str(), "wbx");
  if (file == nullptr) {
    return absl::InvalidArgumentError(
        fmt::format("ring capture {}: {}", path, std::strerror(errno)));
  }
  fwrite(kRingCaptureMagic, 1, sizeof kRingCaptureMagic, file);
  return std::unique_ptr<RingCaptureWriter>(new RingCaptureWriter(path, file));
}

RingCaptureWriter::~RingCaptureWriter() { fclose(file_); }

void RingCaptureWriter::Record(std::span<const uint8_t> bytes) {
  const uint32_t length = static_cast<uint32_t>(bytes.size());
  failed_ |= fwrite(&length, sizeof length, 1, file_) != 1;
  failed_ |= fwrite(bytes.data(), 1, bytes.size(), file_) != bytes.size();
}

absl::Status RingCaptureWriter::EndBatch(const bpf::BpfCounters& counters) {
  failed_ |= fwrite(&kBatchEnd, sizeof kBatchEnd, 1, file_) != 1;
  failed_ |= fwrite(counters.data(), sizeof counters[0], counters.size(), file_) != counters.size();
  failed_ |= fflush(file_) != 0;
  if (failed_) {
    return absl::DataLossError(fmt::format("ring capture {}: write failed", path_));
  }
  return absl::OkStatus();
}

absl::StatusOr<std::vector<RingBatch>> ReadRingCapture(const std::string& path) {
  std::ifstream in(path, std::ios::binary);
  if (!in) return absl::NotFoundError(fmt::format("ring capture {}: cannot open", path));
  const std::vector<uint8_t> bytes((std::istreambuf_iterator<char>(in)),
                                   std::istreambuf_iterator<char>());
  constexpr size_t kVersionAt = sizeof kRingCaptureMagic - 1;
  if (bytes.size() < sizeof kRingCaptureMagic ||
      std::memcmp(bytes.data(), kRingCaptureMagic, kVersionAt) != 0) {
    return absl::InvalidArgumentError(
        fmt::format("ring capture {}: not a ring capture (bad magic)", path));
  }
  if (bytes[kVersionAt] != static_cast<uint8_t>(kRingCaptureMagic[kVersionAt])) {
    return absl::InvalidArgumentError(fmt::format(
        "ring capture {}: records laid out as in version {}, this build reads version {}; "
        "capture them again",
        path, static_cast<char>(bytes[kVersionAt]), kRingCaptureMagic[kVersionAt]));
  }
  std::vector<RingBatch> batches(1);
  size_t at = sizeof kRingCaptureMagic;
  auto cut = [&](std::string_view what) {
    return absl::DataLossError(
        fmt::format("ring capture {}: cut at byte {} ({})", path, at, what));
  };
  while (at < bytes.size()) {
    uint32_t length = 0;
    if (bytes.size() - at < sizeof length) return cut("in a length");
    std::memcpy(&length, bytes.data() + at, sizeof length);
    at += sizeof length;
    if (length == kBatchEnd) {
      bpf::BpfCounters& counters = batches.back().counters;
      const size_t size = sizeof counters[0] * counters.size();
      if (bytes.size() - at < size) return cut("in the counters");
      std::memcpy(counters.data(), bytes.data() + at, size);
      at += size;
      batches.emplace_back();
      continue;
    }
    if (length > kMaxRecordBytes) return cut(fmt::format("a record of {} bytes", length));
    if (bytes.size() - at < length) return cut("in a record");
    batches.back().records.emplace_back(bytes.begin() + at, bytes.begin() + at + length);
    at += length;
  }
  // Records after the last batch end were drained but never counted: keep
  // them with the counters of the batch before.
  if (batches.back().records.empty()) {
    batches.pop_back();
  } else if (batches.size() > 1) {
    batches.back().counters = batches[batches.size() - 2].counters;
  }
  return batches;
}

}  // namespace loupe::session
