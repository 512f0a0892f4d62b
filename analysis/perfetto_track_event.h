// One TrackEvent, written into the next packet of the PerfettoSequence of
// its track (the sequence's default track: the event names none). Names and
// annotation names are interned; annotation values are interned only when
// they come from a bounded set (thread names, functions, wait classes), so
// that memory does not grow with values seen once.
#ifndef LOUPE_ANALYSIS_PERFETTO_TRACK_EVENT_H_
#define LOUPE_ANALYSIS_PERFETTO_TRACK_EVENT_H_

#include <cstdint>
#include <string_view>

#include "analysis/perfetto_sequence.h"
#include "daemon/format/record.h"

namespace loupe::analysis {

class TrackEventBuilder {
 public:
  enum Type : uint64_t { kSliceBegin = 1, kSliceEnd = 2, kInstant = 3, kCounter = 4 };

  // `sequence` was started for the event's track.
  TrackEventBuilder(PerfettoSequence& sequence, Type type);

  // A name from a bounded set (span, probe, wait class names).
  void Name(std::string_view name);
  // A name made for this one event (it says a count).
  void UniqueName(std::string_view name);

  void Arg(std::string_view name, int64_t value);
  // Strings from the application are written as they are, not interned.
  void Arg(std::string_view name, const format::Value& value);
  // A string from a bounded set: interned.
  void Label(std::string_view name, std::string_view value);
  // A label given by its id (PerfettoStream::Id of Strings::kAnnotationValues).
  void LabelId(std::string_view name, uint64_t value_id);

  void Counter(const format::Value& value);

  void Emit(uint64_t time_ns) { sequence_.Emit(time_ns, perfetto_field::kTrackEvent); }

 private:
  size_t BeginArg(std::string_view name);
  // A string annotation by its iid on this sequence.
  void InternedArg(std::string_view name, uint64_t value_iid);

  PerfettoSequence& sequence_;
  ProtoBuilder event_;
};

}  // namespace loupe::analysis

#endif  // LOUPE_ANALYSIS_PERFETTO_TRACK_EVENT_H_
