#include "analysis/perfetto_track_event.h"

namespace loupe::analysis {
namespace {

using Strings = PerfettoSequence::Strings;

// TrackEvent (protos/perfetto/trace/track_event/track_event.proto)
constexpr uint32_t kAnnotations = 4, kType = 9, kNameIid = 10, kName = 23,
                   kCounterValue = 30, kDoubleCounterValue = 44;
// DebugAnnotation (debug_annotation.proto)
constexpr uint32_t kArgNameIid = 1, kBool = 2, kUint = 3, kInt = 4, kDouble = 5, kString = 6,
                   kStringIid = 17;

}  // namespace

TrackEventBuilder::TrackEventBuilder(PerfettoSequence& sequence, Type type)
    : sequence_(sequence), event_(sequence.Payload()) {
  event_.Varint(kType, type);
}

void TrackEventBuilder::Name(std::string_view name) {
  event_.Varint(kNameIid, sequence_.Intern(Strings::kEventNames, name));
}

void TrackEventBuilder::UniqueName(std::string_view name) { event_.Bytes(kName, name); }

size_t TrackEventBuilder::BeginArg(std::string_view name) {
  const size_t arg = event_.Begin(kAnnotations);
  event_.Varint(kArgNameIid, sequence_.Intern(Strings::kAnnotationNames, name));
  return arg;
}

void TrackEventBuilder::Arg(std::string_view name, int64_t value) {
  const size_t arg = BeginArg(name);
  event_.SignedVarint(kInt, value);
  event_.End(arg);
}

void TrackEventBuilder::Arg(std::string_view name, const format::Value& value) {
  const size_t arg = BeginArg(name);
  switch (value.type) {
    case format::ValueType::kInt:
      event_.SignedVarint(kInt, value.AsInt());
      break;
    case format::ValueType::kUint:
    case format::ValueType::kBytes:
      event_.Varint(kUint, value.bits);
      break;
    case format::ValueType::kDouble:
      event_.Double(kDouble, value.AsDouble());
      break;
    case format::ValueType::kBool:
      event_.Varint(kBool, value.bits != 0);
      break;
    case format::ValueType::kString:
      event_.Bytes(kString, value.text);
      break;
  }
  event_.End(arg);
}

void TrackEventBuilder::Label(std::string_view name, std::string_view value) {
  InternedArg(name, sequence_.Intern(Strings::kAnnotationValues, value));
}

void TrackEventBuilder::LabelId(std::string_view name, uint64_t value_id) {
  InternedArg(name, sequence_.Use(Strings::kAnnotationValues, value_id));
}

void TrackEventBuilder::InternedArg(std::string_view name, uint64_t value_iid) {
  const size_t arg = BeginArg(name);
  event_.Varint(kStringIid, value_iid);
  event_.End(arg);
}

void TrackEventBuilder::Counter(const format::Value& value) {
  if (value.type == format::ValueType::kDouble) {
    event_.Double(kDoubleCounterValue, value.AsDouble());
  } else {
    event_.SignedVarint(kCounterValue, value.AsInt());
  }
}

}  // namespace loupe::analysis
