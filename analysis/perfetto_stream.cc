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

void PerfettoStream::Flush() {
  out_.write(pending_.data(), static_cast<std::streamsize>(pending_.size()));
  bytes_written_ += pending_.size();
  pending_.clear();
}

}  // namespace loupe::analysis
