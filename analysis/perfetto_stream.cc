#include "analysis/perfetto_stream.h"

namespace loupe::analysis {

uint64_t PerfettoStream::Id(Strings table, std::string_view text) {
  const size_t t = static_cast<size_t>(table);
  if (auto it = ids_[t].find(text); it != ids_[t].end()) return it->second;
  const std::string_view stored = storage_[t].emplace_back(text);
  texts_[t].push_back(stored);
  const uint64_t id = texts_[t].size();
  ids_[t].emplace(stored, id);
  return id;
}

PerfettoStream::PerfettoStream(std::ostream& out, PerfettoCompression compression)
    : out_(out),
      deflate_(compression == PerfettoCompression::kDeflate ? std::make_unique<PerfettoDeflate>(out)
                                                            : nullptr),
      batch_bytes_(deflate_ ? PerfettoDeflate::kBatchBytes : size_t{1} << 20) {}

void PerfettoStream::Pass() {
  if (deflate_) {
    deflate_->Write(pending_);
    pending_.reserve(batch_bytes_ + batch_bytes_ / 4);  // the batch went with its buffer
    return;
  }
  out_.write(pending_.data(), static_cast<std::streamsize>(pending_.size()));
  bytes_written_ += pending_.size();
  pending_.clear();
}

void PerfettoStream::Flush() {
  Pass();
  if (deflate_) deflate_->Flush();
}

}  // namespace loupe::analysis
