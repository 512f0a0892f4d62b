#include "daemon/format/trace_reader.h"

#include <fmt/format.h>

#include <algorithm>
#include <filesystem>
#include <map>
#include <tuple>

#include "daemon/base/status_util.h"

namespace loupe::format {
namespace {

namespace fs = std::filesystem;

bool IsSegmentName(const std::string& name) {
  return name.ends_with(".loupe") || name.ends_with(".loupe.active");
}

}  // namespace

struct TraceReader::Chain {
  uint32_t session = 0;       // its index in the order the sessions began
  bool has_record = false;    // it had a first record
  std::vector<size_t> files;  // indices into summaries_, in sequence order
  size_t next_file = 0;
  std::unique_ptr<SegmentReader> reader;
  size_t current = 0;  // summary index of `reader`
  Record record;
};

absl::StatusOr<std::vector<std::string>> ListSegments(const std::string& directory) {
  std::error_code error;
  std::vector<std::string> paths;
  // Whatever is named like a segment is listed, a regular file or not: a
  // dangling symlink or a FIFO in a segment's place is a segment that cannot
  // be read, which the reader says (and the verdict counts), not a file
  // that was never there.
  for (const fs::directory_entry& entry : fs::directory_iterator(directory, error)) {
    if (IsSegmentName(entry.path().filename().string())) paths.push_back(entry.path().string());
  }
  if (error) return absl::NotFoundError(fmt::format("list {}: {}", directory, error.message()));
  std::sort(paths.begin(), paths.end());
  return paths;
}

absl::StatusOr<std::vector<std::string>> ExpandSegmentPaths(const std::vector<std::string>& paths) {
  std::vector<std::string> files;
  for (const std::string& path : paths) {
    std::error_code error;
    if (fs::is_directory(path, error)) {
      absl::StatusOr<std::vector<std::string>> found = ListSegments(path);
      if (!found.ok()) return found.status();
      if (found->empty()) {
        return absl::NotFoundError(fmt::format("{}: no trace segments (*.loupe) in it", path));
      }
      files.insert(files.end(), found->begin(), found->end());
    } else if (fs::exists(path, error)) {
      files.push_back(path);
    } else {
      return absl::NotFoundError(fmt::format("{}: no such file or directory", path));
    }
  }
  return files;
}

std::vector<size_t> CopiesReadAs(const std::vector<std::string>& paths,
                                 const std::vector<std::optional<SegmentId>>& ids) {
  auto rank = [&](size_t i) {
    std::error_code error;
    const uintmax_t size = fs::file_size(paths[i], error);
    return std::tuple(paths[i].ends_with(".loupe"), error ? 0 : size, paths.size() - i);
  };
  using Key = std::tuple<std::string, std::string, uint64_t>;
  auto key = [&](size_t i) { return Key(ids[i]->boot_id, ids[i]->session, ids[i]->sequence); };
  std::map<Key, size_t> read;
  for (size_t i = 0; i < paths.size(); ++i) {
    if (!ids[i]) continue;
    auto [it, added] = read.try_emplace(key(i), i);
    if (!added && rank(i) > rank(it->second)) it->second = i;
  }
  std::vector<size_t> read_as(paths.size());
  for (size_t i = 0; i < paths.size(); ++i) read_as[i] = ids[i] ? read.at(key(i)) : i;
  return read_as;
}

TraceReader::~TraceReader() = default;

absl::StatusOr<std::unique_ptr<TraceReader>> TraceReader::Open(
    const std::vector<std::string>& paths) {
  absl::StatusOr<std::vector<std::string>> files = ExpandSegmentPaths(paths);
  if (!files.ok()) return files.status();
  std::unique_ptr<TraceReader> trace(new TraceReader());

  std::vector<std::optional<SegmentId>> ids;
  for (const std::string& file : *files) {
    SegmentSummary summary;
    summary.path = file;
    absl::StatusOr<std::unique_ptr<SegmentReader>> reader = SegmentReader::Open(file);
    if (reader.ok()) {
      summary.opened = true;
      summary.header = (*reader)->header();
      ids.push_back(SegmentId{summary.header.boot_id(), summary.header.session_id(),
                              summary.header.sequence()});
    } else {
      summary.problems.emplace_back(MessageOf(reader.status()));
      summary.finished = true;
      ids.emplace_back();
    }
    trace->summaries_.push_back(std::move(summary));
  }
  // Group by session and order each chain by sequence: the header says both.
  // A copy of a segment would repeat its records, out of time order.
  const std::vector<size_t> read_as = CopiesReadAs(*files, ids);
  std::map<std::string, std::vector<std::pair<uint64_t, size_t>>> sessions;
  for (size_t i = 0; i < read_as.size(); ++i) {
    SegmentSummary& summary = trace->summaries_[i];
    if (read_as[i] != i) {
      summary.copy_of = (*files)[read_as[i]];
      summary.finished = true;
      summary.complete = true;
    } else if (summary.opened) {
      sessions[summary.header.session_id()].emplace_back(summary.header.sequence(), i);
    }
  }
  for (auto& [session, members] : sessions) {
    std::sort(members.begin(), members.end());
    auto chain = std::make_unique<Chain>();
    for (const auto& member : members) chain->files.push_back(member.second);
    chain->has_record = trace->Advance(*chain);
    if (chain->has_record) trace->heap_.push_back(chain.get());
    trace->chains_.push_back(std::move(chain));
  }
  // Sessions are numbered in the order they began (their first records):
  // ids are names, which need not sort by time.
  std::vector<Chain*> by_start;
  for (const auto& chain : trace->chains_) by_start.push_back(chain.get());
  std::stable_sort(by_start.begin(), by_start.end(), [](const Chain* a, const Chain* b) {
    return std::tuple(!a->has_record, a->record.time_ns) < std::tuple(!b->has_record, b->record.time_ns);
  });
  for (size_t i = 0; i < by_start.size(); ++i) by_start[i]->session = static_cast<uint32_t>(i);
  return trace;
}

// Moves a chain to its next record, through as many files as it takes.
bool TraceReader::Advance(Chain& chain) {
  while (true) {
    if (chain.reader && chain.reader->Next(&chain.record)) return true;
    if (chain.reader) Finish(chain);
    if (chain.next_file == chain.files.size()) return false;
    chain.current = chain.files[chain.next_file++];
    absl::StatusOr<std::unique_ptr<SegmentReader>> reader =
        SegmentReader::Open(summaries_[chain.current].path);
    if (!reader.ok()) {  // it opened a moment ago; it may have been evicted since
      summaries_[chain.current].problems.emplace_back(MessageOf(reader.status()));
      summaries_[chain.current].finished = true;
      continue;
    }
    chain.reader = *std::move(reader);
  }
}

void TraceReader::Finish(Chain& chain) {
  SegmentSummary& summary = summaries_[chain.current];
  summary.has_trailer = chain.reader->has_trailer();
  summary.trailer = chain.reader->trailer();
  summary.symbols = chain.reader->symbols();
  summary.problems = chain.reader->problems();
  summary.records_read = chain.reader->records_read();
  summary.complete = chain.reader->complete();
  summary.finished = true;
  chain.reader.reset();
}

bool TraceReader::Next(Record* record, const SegmentReader** source) {
  // Later first, so the heap's front is the soonest; ties keep file order.
  auto later = [](const Chain* a, const Chain* b) {
    return std::tie(a->record.time_ns, a->current) > std::tie(b->record.time_ns, b->current);
  };
  if (to_advance_ != nullptr) {
    if (Advance(*to_advance_)) {
      heap_.push_back(to_advance_);
      std::push_heap(heap_.begin(), heap_.end(), later);
    } else {
      ended_sessions_.push_back(to_advance_->session);
    }
    to_advance_ = nullptr;
  } else {
    std::make_heap(heap_.begin(), heap_.end(), later);  // first call
  }
  if (heap_.empty()) return false;
  std::pop_heap(heap_.begin(), heap_.end(), later);
  Chain* chain = heap_.back();
  heap_.pop_back();
  *record = chain->record;
  session_ = chain->session;
  if (source != nullptr) *source = chain->reader.get();
  to_advance_ = chain;  // its record's views must outlive this call
  return true;
}

}  // namespace loupe::format
