// Where a trace's bytes go, and how fast they decode: recodes records with
// this build's segment writer (zstd level 3, the default) and prints bytes
// per event on disk with the symbol tables apart, the decode rate of the
// recoded file (zstd included, per second of CPU, best of 5), and each
// column of the event blocks compressed alone. Run the same inputs through
// two builds to compare encoders on identical records.
//   ./build/tests/bench/size_bench TRACE_DIR_OR_SEGMENT...
//   ./build/tests/bench/size_bench --synthetic   (the format_bench mix, 2 M events)
#include <fmt/format.h>
#include <time.h>
#include <unistd.h>

#include <algorithm>
#include <filesystem>
#include <fstream>
#include <functional>
#include <map>
#include <sstream>
#include <string>
#include <vector>

#include "daemon/format/block_layout.h"
#include "daemon/format/frame_codec.h"
#include "daemon/format/segment_reader.h"
#include "daemon/format/segment_writer.h"
#include "daemon/format/trace_reader.h"
#include "daemon/format/wire.h"
#include "loupe/v1/trace.pb.h"
#include "tools/synthetic/synthetic_trace.h"

namespace loupe {
namespace {

namespace wire = format::wire;

// CPU time, as format_bench counts it: on a shared machine wall time
// measures the neighbours.
uint64_t CpuNs() {
  timespec ts;
  clock_gettime(CLOCK_PROCESS_CPUTIME_ID, &ts);
  return static_cast<uint64_t>(ts.tv_sec) * 1'000'000'000 + static_cast<uint64_t>(ts.tv_nsec);
}

std::string ReadFile(const std::string& path) {
  std::ifstream in(path, std::ios::binary);
  std::ostringstream bytes;
  bytes << in.rdbuf();
  return bytes.str();
}

// Calls visit(kind, compressed_size, body) for every frame of a segment file;
// kind is the Frame field (header, events, symbols, trailer).
template <typename Visit>
void ForEachFrame(const std::string& path, Visit visit) {
  const std::string file = ReadFile(path);
  format::FrameDecompressor decompressor;
  std::string payload;
  for (size_t pos = format::kSignatureSize; pos < file.size();) {
    size_t size = 0;
    std::string error;
    if (format::ScanFrame(std::string_view(file).substr(pos), &size, &error) !=
        format::FrameScan::kWhole) {
      fmt::print(stderr, "{}: unreadable frame at {}\n", path, pos);
      return;
    }
    if (!decompressor.Decompress(std::string_view(file).substr(pos, size), 1 << 30, &payload).ok()) {
      return;
    }
    wire::Cursor cursor(payload);
    uint64_t tag;
    std::string_view body;
    if (cursor.ReadVarint(&tag) && cursor.ReadLengthDelimited(&body)) visit(tag >> 3, size, body);
    pos += size;
  }
}

// Bytes of one column across blocks, raw and compressed alone.
struct ColumnBytes {
  uint64_t raw = 0;
  uint64_t alone = 0;
};

// The columns of an EventBlock by their trace.proto names ("time_deltas",
// "sched_switch.next_tid"); strings and stack fields are columns too.
void AddColumns(std::string_view block, format::FrameCompressor* compressor,
                std::map<std::string, ColumnBytes>* columns) {
  const google::protobuf::Descriptor* descriptor = v1::EventBlock::descriptor();
  std::string compressed;
  auto add = [&](const std::string& name, std::string_view bytes) {
    compressed.clear();
    (void)compressor->Compress(bytes, &compressed);
    ColumnBytes& column = (*columns)[name];
    column.raw += bytes.size();
    column.alone += compressed.size();
  };
  std::string strings;  // all of a block's strings compress as one column
  wire::Cursor cursor(block);
  uint64_t tag;
  while (cursor.ReadVarint(&tag)) {
    const uint32_t number = static_cast<uint32_t>(tag >> 3);
    std::string_view bytes;
    if ((tag & 7) != wire::kLengthDelimited) {
      if (!cursor.Skip(tag & 7)) return;
      continue;
    }
    if (!cursor.ReadLengthDelimited(&bytes)) return;
    const google::protobuf::FieldDescriptor* field = descriptor->FindFieldByNumber(number);
    const std::string name = field != nullptr ? field->name() : fmt::format("field{}", number);
    if (number == format::layout::kStrings) {
      strings.append(bytes);
    } else if (field != nullptr && field->message_type() != nullptr) {
      wire::Cursor group(bytes);
      uint64_t column_tag;
      std::string_view column;
      while (group.ReadVarint(&column_tag) && group.ReadLengthDelimited(&column)) {
        const auto* sub = field->message_type()->FindFieldByNumber(column_tag >> 3);
        add(name + "." + (sub != nullptr ? sub->name() : fmt::format("{}", column_tag >> 3)),
            column);
      }
    } else {
      add(name, bytes);
    }
  }
  if (!strings.empty()) add("strings", strings);
}

struct Sizes {
  uint64_t events = 0;
  uint64_t file_bytes = 0;     // everything but symbol frames
  uint64_t symbol_bytes = 0;   // symbol frames
  std::map<std::string, ColumnBytes> columns;
};

Sizes Measure(const std::vector<std::string>& paths, format::FrameCompressor* compressor) {
  Sizes sizes;
  for (const std::string& path : paths) {
    sizes.file_bytes += std::filesystem::file_size(path);
    ForEachFrame(path, [&](uint64_t kind, size_t size, std::string_view body) {
      if (kind == format::layout::kFrameSymbols) {
        sizes.symbol_bytes += size;
        sizes.file_bytes -= size;
      } else if (kind == format::layout::kFrameEvents) {
        AddColumns(body, compressor, &sizes.columns);
      }
    });
  }
  return sizes;
}

// Reads the segments `repeats` times; the best rate in events/s.
double DecodeRate(const std::vector<std::string>& paths, uint64_t* events) {
  double best = 0;
  for (int repeat = 0; repeat < 5; ++repeat) {
    uint64_t count = 0;
    const uint64_t start = CpuNs();
    for (const std::string& path : paths) {
      auto reader = format::SegmentReader::Open(path);
      if (!reader.ok()) continue;
      format::Record record;
      while ((*reader)->Next(&record)) ++count;
    }
    best = std::max(best, static_cast<double>(count) * 1e9 / static_cast<double>(CpuNs() - start));
    *events = count;
  }
  return best;
}

// `feed` appends the records to the writer and returns how many.
void Report(const std::string& name, const std::vector<std::string>& originals,
            const std::function<uint64_t(format::SegmentWriter&)>& feed,
            format::FrameCompressor* compressor) {
  const std::string dir = std::filesystem::temp_directory_path() /
                          fmt::format("loupe-size-{}", getpid());
  std::filesystem::remove_all(dir);
  format::WriterOptions options{.directory = dir, .session_id = "size"};
  options.max_total_size = 64ull << 30;
  auto writer = format::SegmentWriter::Create(options, {});
  if (!writer.ok()) {
    fmt::print(stderr, "{}: {}\n", name, writer.status().ToString());
    return;
  }
  const uint64_t events = feed(**writer);
  (void)(*writer)->Close();
  const std::vector<std::string> recoded = (*writer)->sealed_paths();

  const Sizes sizes = Measure(recoded, compressor);
  uint64_t decoded = 0;
  const double rate = DecodeRate(recoded, &decoded);
  const double n = static_cast<double>(events);
  fmt::print("{}: {} events, {:.3f} bytes/event (recoded, symbols apart), decode {:.1f} M events/s\n",
             name, events, static_cast<double>(sizes.file_bytes) / n, rate / 1e6);
  if (decoded != events) fmt::print("  DECODED {} of {} events\n", decoded, events);
  if (!originals.empty()) {
    const Sizes original = Measure(originals, compressor);
    fmt::print("  as recorded: {:.3f} bytes/event; symbol tables {:.3f} bytes/event ({} bytes)\n",
               static_cast<double>(original.file_bytes) / n,
               static_cast<double>(original.symbol_bytes) / n, original.symbol_bytes);
  }
  std::vector<std::pair<std::string, ColumnBytes>> columns(sizes.columns.begin(),
                                                           sizes.columns.end());
  std::sort(columns.begin(), columns.end(),
            [](const auto& a, const auto& b) { return a.second.alone > b.second.alone; });
  fmt::print("  {:<32} {:>10} {:>10}\n", "column", "raw B/ev", "zstd B/ev");
  for (const auto& [column, bytes] : columns) {
    if (static_cast<double>(bytes.alone) / n < 0.005) continue;
    fmt::print("  {:<32} {:>10.3f} {:>10.3f}\n", column, static_cast<double>(bytes.raw) / n,
               static_cast<double>(bytes.alone) / n);
  }
  std::filesystem::remove_all(dir);
}

int Main(int argc, char** argv) {
  auto compressor = format::FrameCompressor::Create(3);
  if (!compressor.ok() || argc < 2) {
    fmt::print(stderr, "usage: size_bench --synthetic | TRACE...\n");
    return 2;
  }
  for (int i = 1; i < argc; ++i) {
    const std::string arg = argv[i];
    if (arg == "--synthetic") {
      Report("synthetic mix", {}, [](format::SegmentWriter& writer) {
        synthetic::Trace trace;
        constexpr uint64_t kEvents = 2'000'000;
        for (uint64_t e = 0; e < kEvents; ++e) (void)writer.Append(trace.Next());
        return kEvents;
      }, &*compressor);
      continue;
    }
    auto paths = format::ExpandSegmentPaths({arg});
    if (!paths.ok()) {
      fmt::print(stderr, "{}: {}\n", arg, paths.status().ToString());
      return 2;
    }
    Report(arg, *paths, [&](format::SegmentWriter& writer) {
      uint64_t events = 0;
      auto reader = format::TraceReader::Open({arg});
      format::Record record;
      while (reader.ok() && (*reader)->Next(&record)) {
        (void)writer.Append(record);
        ++events;
      }
      return events;
    }, &*compressor);
  }
  return 0;
}

}  // namespace
}  // namespace loupe

int main(int argc, char** argv) { return loupe::Main(argc, argv); }
