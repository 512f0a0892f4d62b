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
// ClockSnapshot, ClockSnapshot.Clock
constexpr uint32_t kClocks = 1, kPrimaryClock = 2;
constexpr uint32_t kClockId = 1, kClockTimestamp = 2, kIncremental = 3;
constexpr uint64_t kRealtime = 1, kMonotonic = 3, kBoottime = 6;  // BuiltinClock
// InternedString, EventName, DebugAnnotationName
constexpr uint32_t kIid = 1, kString = 2;

constexpr size_t kFlushBytes = 1 << 20;

// InternedData field numbers, by PerfettoSequence::Strings.
constexpr uint32_t kStringTables[] = {2, 3, 5, 17, 16, 29};
static_assert(std::size(kStringTables) == size_t(PerfettoSequence::Strings::kCount));

void Clock(ProtoBuilder& snapshot, uint64_t id, uint64_t ns, bool incremental) {
  const size_t clock = snapshot.Begin(kClocks);
  snapshot.Varint(kClockId, id);
  snapshot.Varint(kClockTimestamp, ns);
  if (incremental) snapshot.Varint(kIncremental, 1);
  snapshot.End(clock);
}

}  // namespace

PerfettoSequence::~PerfettoSequence() { Flush(); }

void PerfettoSequence::Start(uint64_t monotonic_ns, uint64_t realtime_ns) {
  clocks_.fill(monotonic_ns);
  packet_.clear();
  ProtoBuilder packet(&packet_);
  packet.Varint(kTimestamp, monotonic_ns);
  packet.Varint(kTimestampClockId, kMonotonic);
  packet.Varint(kSequenceIdField, kSequenceId);
  packet.Varint(kSequenceFlags, kStateCleared);
  const size_t defaults = packet.Begin(kDefaults);
  packet.Varint(kTimestampClockId, kClock);
  packet.End(defaults);
  const size_t snapshot = packet.Begin(kClockSnapshot);
  Clock(packet, kMonotonic, monotonic_ns, false);
  Clock(packet, kRealtime, realtime_ns, false);
  // Perfetto reads kernel scheduling data (PerfettoCompactSched) as boot
  // time; ours is monotonic. Declared equal here, those times are read as
  // they are: boot time differs only by time suspended before the trace.
  Clock(packet, kBoottime, monotonic_ns, false);
  for (uint32_t clock = kClock; clock <= kClock + kLateClocks; ++clock) {
    Clock(packet, clock, monotonic_ns, true);
  }
  packet.Varint(kPrimaryClock, kMonotonic);
  packet.End(snapshot);
  Write();
}

uint64_t PerfettoSequence::Intern(Strings table, std::string_view text) {
  auto& ids = strings_[static_cast<size_t>(table)];
  // This Abseil's string_view is its own type, not std::string_view.
  if (auto it = ids.find(absl::string_view(text.data(), text.size())); it != ids.end()) {
    return it->second;
  }
  const uint64_t iid = ids.size() + 1;
  ids.emplace(text, iid);
  ProtoBuilder interned(&interned_);
  const size_t entry = interned.Begin(kStringTables[static_cast<size_t>(table)]);
  interned.Varint(kIid, iid);
  interned.Bytes(kString, text);
  interned.End(entry);
  return iid;
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
  packet.Varint(kSequenceIdField, kSequenceId);
  packet.Varint(kSequenceFlags, kNeedsState);
  size_t size = packet_.size() + format::wire::BytesFieldSize(field, payload_.size());
  if (!interned_.empty()) size += format::wire::BytesFieldSize(kInternedData, interned_.size());
  format::wire::AppendVarint(&pending_, format::wire::Tag(kPacket, format::wire::kLengthDelimited));
  format::wire::AppendVarint(&pending_, size);
  pending_ += packet_;
  ProtoBuilder framed(&pending_);
  if (!interned_.empty()) {
    framed.Bytes(kInternedData, interned_);
    interned_.clear();
  }
  framed.Bytes(field, payload_);
  if (pending_.size() >= kFlushBytes) Flush();
}

void PerfettoSequence::EmitPlain(uint32_t field, std::string_view payload) {
  packet_.clear();
  ProtoBuilder packet(&packet_);
  packet.Varint(kSequenceIdField, kSequenceId);
  packet.Bytes(field, payload);
  Write();
}

void PerfettoSequence::Write() {
  ProtoBuilder(&pending_).Bytes(kPacket, packet_);
  if (pending_.size() >= kFlushBytes) Flush();
}

void PerfettoSequence::Flush() {
  out_.write(pending_.data(), static_cast<std::streamsize>(pending_.size()));
  bytes_written_ += pending_.size();
  pending_.clear();
}

}  // namespace loupe::analysis
