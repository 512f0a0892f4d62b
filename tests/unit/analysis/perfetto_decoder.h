// Reads a Perfetto export back the way Perfetto would, to test it: every
// packet is parsed at run time against Perfetto's official schema
// (tests/fixtures/perfetto/perfetto_trace.proto, loaded with protobuf's
// compiler::Importer, no generated code), and each packet sequence's
// incremental state is replayed — interned ids resolved against what the
// sequence defined since its state was cleared, timestamps from its
// incremental clocks, events without a track on its default track.
// Compressed packets are inflated (with zlib, as Perfetto does) and their
// packets read in their place. Whatever Perfetto would reject or misread is
// listed in problems.
#ifndef LOUPE_TESTS_UNIT_ANALYSIS_PERFETTO_DECODER_H_
#define LOUPE_TESTS_UNIT_ANALYSIS_PERFETTO_DECODER_H_

#include <cstdint>
#include <map>
#include <optional>
#include <string>
#include <string_view>
#include <vector>

namespace loupe::testing {

struct DecodedTrack {
  uint64_t parent = 0;
  std::string name;
  int64_t pid = 0, tid = 0;
  std::string process_name, thread_name;
  bool counter = false;
};

struct DecodedEvent {
  uint64_t time_ns = 0;
  std::string type;  // "TYPE_SLICE_BEGIN", ...
  uint64_t track = 0;
  std::string name;
  // Values as text; an array's elements joined by "; ".
  std::map<std::string, std::string> args;
  std::vector<uint64_t> flows, terminating_flows;
  double counter = 0;
};

struct DecodedSample {
  uint64_t time_ns = 0;
  uint32_t cpu = 0, pid = 0, tid = 0;
  std::vector<std::string> frames;    // function names, outermost first
  std::vector<std::string> mappings;  // each frame's mapping path ("" none)
};

// Kernel scheduling data (FtraceEventBundle.compact_sched), one per event,
// times in the trace clock, thread names resolved from the bundle's table.
struct DecodedSwitch {
  uint32_t cpu = 0;
  uint64_t time_ns = 0;
  int64_t prev_state = 0;
  uint32_t next_tid = 0;
  std::string next_comm;
};
struct DecodedWaking {
  uint32_t cpu = 0;  // where the waker ran
  uint64_t time_ns = 0;
  uint32_t tid = 0, target_cpu = 0;
  std::string comm;
};

struct DecodedTrace {
  std::vector<std::string> problems;  // empty: Perfetto reads it all
  size_t packets = 0;  // not counting compressed ones, counting those inside
  size_t compressed_packets = 0;
  std::string inflated;  // what the compressed packets held, in order
  std::map<uint64_t, DecodedTrack> tracks;
  std::vector<DecodedEvent> events;
  std::vector<DecodedSample> samples;
  std::vector<DecodedSwitch> switches;
  std::vector<DecodedWaking> wakings;
  uint64_t realtime_at_start_ns = 0;
};

DecodedTrace DecodePerfetto(std::string_view trace);

// A zlib stream whole, as Perfetto's trace processor inflates a
// compressed_packets field; nullopt if it is not one. zlib's window_bits
// choose the wrapper: 15 zlib (Perfetto's), 15 + 16 gzip (pprof's).
inline constexpr int kZlibWindow = 15, kGzipWindow = 15 + 16;
std::optional<std::string> Inflate(std::string_view deflated, int window_bits = kZlibWindow);

}  // namespace loupe::testing

#endif  // LOUPE_TESTS_UNIT_ANALYSIS_PERFETTO_DECODER_H_
