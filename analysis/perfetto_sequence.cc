#include "analysis/perfetto_sequence.h"

#include <iterator>

namespace loupe::analysis {
namespace {

// Trace
constexpr uint32_t kPacket = 1;
// TracePacket
constexpr uint32_t kClockSnapshot = 6;
constexpr uint32_t kTimestamp = 8;
constexpr uint32_t kSequenceIdField = 10;
constexpr uint32_t kInternedData = 12;
constexpr uint32_t kSequenceFlags = 13;
constexpr uint32_t kTimestampClockId = 58;  // also TracePacketDefaults'
constexpr uint32_t kDefaults = 59;
constexpr uint64_t kStateCleared = 1, kNeedsState = 2;  // sequence_flags
// TracePacketDefaults.track_event_defaults, TrackEventDefaults.track_uuid
constexpr uint32_t kTrackEventDefaults = 11, kDefaultTrack = 11;
// ClockSnapshot, ClockSnapshot.Clock
constexpr uint32_t kClocks = 1, kPrimaryClock = 2;
constexpr uint32_t kClockId = 1, kClockTimestamp = 2, kIncremental = 3;
constexpr uint64_t kRealtime = 1, kMonotonic = 3, kBoottime = 6;  // BuiltinClock
// InternedString, EventName, DebugAnnotationName
constexpr uint32_t kIid = 1, kString = 2;

// InternedData field numbers, by PerfettoStream::Strings.
constexpr uint32_t kStringTables[] = {2, 3, 5, 17, 16, 29};
static_assert(std::size(kStringTables) == size_t(PerfettoStream::Strings::kCount));

void Clock(ProtoBuilder& snapshot, uint64_t id, uint64_t ns, bool incremental) {
  const size_t clock = snapshot.Begin(kClocks);
  snapshot.Varint(kClockId, id);
  snapshot.Varint(kClockTimestamp, ns);
  if (incremental) snapshot.Varint(kIncremental, 1);
  snapshot.End(clock);
}

}  // namespace

void PerfettoSequence::Start(uint64_t monotonic_ns, uint64_t realtime_ns) {
  Begin(monotonic_ns, &realtime_ns, 0);
}

void PerfettoSequence::StartTrack(uint64_t monotonic_ns, uint64_t track_uuid) {
  Begin(monotonic_ns, nullptr, track_uuid);
}

void PerfettoSequence::Begin(uint64_t monotonic_ns, const uint64_t* realtime_ns,
                             uint64_t track_uuid) {
  clocks_.fill(monotonic_ns);
  packet_.clear();
  ProtoBuilder packet(&packet_);
  if (realtime_ns != nullptr) {
    packet.Varint(kTimestamp, monotonic_ns);
    packet.Varint(kTimestampClockId, kMonotonic);
  }
  packet.Varint(kSequenceIdField, id_);
  packet.Varint(kSequenceFlags, kStateCleared);
  const size_t defaults = packet.Begin(kDefaults);
  packet.Varint(kTimestampClockId, kClock);
  if (track_uuid != 0) {
    const size_t track_event = packet.Begin(kTrackEventDefaults);
    packet.Varint(kDefaultTrack, track_uuid);
    packet.End(track_event);
  }
  packet.End(defaults);
  const size_t snapshot = packet.Begin(kClockSnapshot);
  Clock(packet, kMonotonic, monotonic_ns, false);
  if (realtime_ns != nullptr) {
    Clock(packet, kRealtime, *realtime_ns, false);
    // Perfetto reads kernel scheduling data (PerfettoCompactSched) as boot
    // time; ours is monotonic. Declared equal here, those times are read as
    // they are: boot time differs only by time suspended before the trace.
    Clock(packet, kBoottime, monotonic_ns, false);
  }
  for (uint32_t clock = kClock; clock <= kClock + kLateClocks; ++clock) {
    Clock(packet, clock, monotonic_ns, true);
  }
  packet.Varint(kPrimaryClock, kMonotonic);
  packet.End(snapshot);
  Write();
}

uint64_t PerfettoSequence::Use(Strings table, uint64_t id) {
  if (defined_[static_cast<size_t>(table)].insert(id).second) {
    ProtoBuilder interned(&interned_);
    const size_t entry = interned.Begin(kStringTables[static_cast<size_t>(table)]);
    interned.Varint(kIid, id);
    interned.Bytes(kString, stream_.Text(table, id));
    interned.End(entry);
  }
  return id;
}

std::pair<uint32_t, uint64_t> PerfettoSequence::Stamp(uint64_t time_ns) {
  size_t best = 0;
  if (time_ns < clocks_[0]) {  // else the default clock, which needs no clock id
    best = clocks_.size();
    for (size_t i = 1; i < clocks_.size(); ++i) {
      if (clocks_[i] <= time_ns && (best == clocks_.size() || clocks_[i] > clocks_[best])) best = i;
    }
    if (best == clocks_.size()) return {static_cast<uint32_t>(kMonotonic), time_ns};
  }
  const uint64_t delta = time_ns - clocks_[best];
  clocks_[best] = time_ns;
  return {kClock + static_cast<uint32_t>(best), delta};
}

// The packet is framed straight into the output: its size is known once its
// leading fields are.
void PerfettoSequence::Emit(uint64_t time_ns, uint32_t field) {
  packet_.clear();
  ProtoBuilder packet(&packet_);
  const auto [clock, timestamp] = Stamp(time_ns);
  packet.Varint(kTimestamp, timestamp);
  if (clock != kClock) packet.Varint(kTimestampClockId, clock);
  packet.Varint(kSequenceIdField, id_);
  packet.Varint(kSequenceFlags, kNeedsState);
  size_t size = packet_.size() + format::wire::BytesFieldSize(field, payload_.size());
  if (!interned_.empty()) size += format::wire::BytesFieldSize(kInternedData, interned_.size());
  std::string& pending = stream_.pending();
  format::wire::AppendVarint(&pending, format::wire::Tag(kPacket, format::wire::kLengthDelimited));
  format::wire::AppendVarint(&pending, size);
  pending += packet_;
  ProtoBuilder framed(&pending);
  if (!interned_.empty()) {
    framed.Bytes(kInternedData, interned_);
    interned_.clear();
  }
  framed.Bytes(field, payload_);
  stream_.Written();
}

void PerfettoSequence::EmitPlain(uint32_t field, std::string_view payload) {
  packet_.clear();
  ProtoBuilder packet(&packet_);
  packet.Varint(kSequenceIdField, id_);
  packet.Bytes(field, payload);
  Write();
}

void PerfettoSequence::Write() {
  ProtoBuilder(&stream_.pending()).Bytes(kPacket, packet_);
  stream_.Written();
}

}  // namespace loupe::analysis
