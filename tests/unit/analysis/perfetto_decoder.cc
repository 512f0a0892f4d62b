#include "perfetto_decoder.h"

#include <fmt/format.h>
#include <google/protobuf/compiler/importer.h>
#include <google/protobuf/dynamic_message.h>
#include <zlib.h>

#include <memory>
#include <optional>
#include <stdexcept>

#include "daemon/format/wire.h"

namespace loupe::testing {
namespace {

using google::protobuf::FieldDescriptor;
using google::protobuf::Message;

constexpr uint64_t kStateCleared = 1, kNeedsState = 2;  // TracePacket.sequence_flags
constexpr uint64_t kMonotonic = 3, kRealtime = 1, kBoottime = 6;  // BuiltinClock

class ImportErrors : public google::protobuf::compiler::MultiFileErrorCollector {
 public:
  void AddError(const std::string& file, int line, int column, const std::string& message) override {
    errors += fmt::format("{}:{}:{}: {}\n", file, line, column, message);
  }
  std::string errors;
};

// Perfetto's schema, parsed once per test binary (15k lines).
struct Schema {
  Schema() : importer(&tree, &errors) {
    tree.MapPath("", LOUPE_PERFETTO_PROTO_DIR);
    if (importer.Import("perfetto_trace.proto") != nullptr) {
      packet = factory.GetPrototype(importer.pool()->FindMessageTypeByName("perfetto.protos.TracePacket"));
    }
  }
  google::protobuf::compiler::DiskSourceTree tree;
  ImportErrors errors;
  google::protobuf::compiler::Importer importer;
  google::protobuf::DynamicMessageFactory factory;
  const Message* packet = nullptr;
};

const Schema& OfficialSchema() {
  static const Schema* schema = new Schema();
  return *schema;
}

// Reflection, by field name (the names are Perfetto's).
const FieldDescriptor* Field(const Message& m, const char* name) {
  const FieldDescriptor* field = m.GetDescriptor()->FindFieldByName(name);
  if (field == nullptr) {
    throw std::logic_error(fmt::format("{} has no field {}", m.GetDescriptor()->name(), name));
  }
  return field;
}
bool Has(const Message& m, const char* name) {
  return m.GetReflection()->HasField(m, Field(m, name));
}
uint64_t Number(const Message& m, const FieldDescriptor* f, int index = -1) {
  const auto* r = m.GetReflection();
  switch (f->cpp_type()) {
    case FieldDescriptor::CPPTYPE_UINT64:
      return index < 0 ? r->GetUInt64(m, f) : r->GetRepeatedUInt64(m, f, index);
    case FieldDescriptor::CPPTYPE_UINT32:
      return index < 0 ? r->GetUInt32(m, f) : r->GetRepeatedUInt32(m, f, index);
    case FieldDescriptor::CPPTYPE_INT64:
      return static_cast<uint64_t>(index < 0 ? r->GetInt64(m, f) : r->GetRepeatedInt64(m, f, index));
    case FieldDescriptor::CPPTYPE_INT32:
      return static_cast<uint64_t>(index < 0 ? r->GetInt32(m, f) : r->GetRepeatedInt32(m, f, index));
    case FieldDescriptor::CPPTYPE_BOOL:
      return index < 0 ? r->GetBool(m, f) : r->GetRepeatedBool(m, f, index);
    case FieldDescriptor::CPPTYPE_ENUM:
      return static_cast<uint64_t>(index < 0 ? r->GetEnumValue(m, f)
                                             : r->GetRepeatedEnumValue(m, f, index));
    default:
      throw std::logic_error(fmt::format("{} is not a number", f->full_name()));
  }
}
uint64_t U64(const Message& m, const char* name) { return Number(m, Field(m, name)); }
std::string Str(const Message& m, const char* name) {
  return m.GetReflection()->GetString(m, Field(m, name));
}
const Message& Sub(const Message& m, const char* name) {
  return m.GetReflection()->GetMessage(m, Field(m, name));
}
std::vector<const Message*> Each(const Message& m, const char* name) {
  const FieldDescriptor* f = Field(m, name);
  std::vector<const Message*> all;
  for (int i = 0; i < m.GetReflection()->FieldSize(m, f); ++i) {
    all.push_back(&m.GetReflection()->GetRepeatedMessage(m, f, i));
  }
  return all;
}
std::vector<uint64_t> Numbers(const Message& m, const char* name) {
  const FieldDescriptor* f = Field(m, name);
  std::vector<uint64_t> all;
  for (int i = 0; i < m.GetReflection()->FieldSize(m, f); ++i) all.push_back(Number(m, f, i));
  return all;
}

// Fields the official schema does not know are bytes Perfetto ignores.
void CheckKnown(const Message& m, const std::string& where, std::vector<std::string>* problems) {
  const auto* r = m.GetReflection();
  if (!r->GetUnknownFields(m).empty()) {
    problems->push_back(fmt::format("{}: {} has fields unknown to Perfetto", where,
                                    m.GetDescriptor()->name()));
  }
  std::vector<const FieldDescriptor*> fields;
  r->ListFields(m, &fields);
  for (const FieldDescriptor* f : fields) {
    if (f->cpp_type() != FieldDescriptor::CPPTYPE_MESSAGE) continue;
    if (!f->is_repeated()) {
      CheckKnown(r->GetMessage(m, f), where, problems);
      continue;
    }
    for (int i = 0; i < r->FieldSize(m, f); ++i) {
      CheckKnown(r->GetRepeatedMessage(m, f, i), where, problems);
    }
  }
}

class Replay {
 public:
  explicit Replay(DecodedTrace* out) : out_(*out) {}

  void Packet(const Message& packet) {
    where_ = fmt::format("packet {}", out_.packets);
    CheckKnown(packet, where_, &out_.problems);
    const uint64_t sequence = U64(packet, "trusted_packet_sequence_id");
    if (sequence == 0) Problem("no sequence id");
    seq_ = &sequences_[sequence];
    const uint64_t flags = U64(packet, "sequence_flags");
    if (flags & kStateCleared) *seq_ = Sequence{.cleared = true};
    const bool uses_state = Has(packet, "timestamp") || Has(packet, "interned_data") ||
                            Has(packet, "track_event") || Has(packet, "perf_sample");
    if (uses_state && !seq_->cleared) Problem("uses the sequence's state before it was cleared");
    if (uses_state && !(flags & (kStateCleared | kNeedsState))) {
      Problem("uses the sequence's state without saying so (SEQ_NEEDS_INCREMENTAL_STATE)");
    }
    if (Has(packet, "trace_packet_defaults")) {
      const Message& defaults = Sub(packet, "trace_packet_defaults");
      seq_->default_clock = U64(defaults, "timestamp_clock_id");
      if (Has(defaults, "track_event_defaults")) {
        seq_->default_track = U64(Sub(defaults, "track_event_defaults"), "track_uuid");
      }
    }
    if (Has(packet, "interned_data")) Intern(Sub(packet, "interned_data"));
    if (Has(packet, "clock_snapshot")) Clocks(Sub(packet, "clock_snapshot"));
    uint64_t time = 0;
    if (Has(packet, "timestamp")) {
      time = Time(Has(packet, "timestamp_clock_id") ? U64(packet, "timestamp_clock_id")
                                                    : seq_->default_clock,
                  U64(packet, "timestamp"));
    }
    if (Has(packet, "track_descriptor")) Track(Sub(packet, "track_descriptor"));
    if (Has(packet, "track_event")) Event(Sub(packet, "track_event"), time);
    if (Has(packet, "perf_sample")) Sample(Sub(packet, "perf_sample"), time);
    if (Has(packet, "ftrace_events")) Bundle(Sub(packet, "ftrace_events"));
  }

 private:
  void Problem(std::string_view what) { out_.problems.push_back(fmt::format("{}: {}", where_, what)); }

  void Intern(const Message& data) {
    const google::protobuf::Reflection* r = data.GetReflection();
    std::vector<const FieldDescriptor*> fields;
    r->ListFields(data, &fields);
    for (const FieldDescriptor* f : fields) {
      for (int i = 0; i < r->FieldSize(data, f); ++i) {
        const Message& entry = r->GetRepeatedMessage(data, f, i);
        const uint64_t iid = U64(entry, "iid");
        if (iid == 0) Problem(fmt::format("{} with iid 0", f->name()));
        auto [it, added] = seq_->interned[f->name()].try_emplace(iid);
        if (!added) Problem(fmt::format("{} {} defined twice", f->name(), iid));
        it->second.reset(entry.New());
        it->second->CopyFrom(entry);
      }
    }
  }

  // The entry `iid` of InternedData's `table`, or nullptr (a problem).
  const Message* Lookup(const char* table, uint64_t iid) {
    auto it = seq_->interned[table].find(iid);
    if (it != seq_->interned[table].end()) return it->second.get();
    Problem(fmt::format("{} {} is used but not defined since the state was cleared", table, iid));
    return nullptr;
  }
  std::string LookupString(const char* table, uint64_t iid) {
    const Message* entry = Lookup(table, iid);
    if (entry == nullptr) return "";
    return Str(*entry, entry->GetDescriptor()->FindFieldByName("str") ? "str" : "name");
  }

  void Clocks(const Message& snapshot) {
    if (U64(snapshot, "primary_trace_clock") != kMonotonic) Problem("trace clock is not monotonic");
    for (const Message* clock : Each(snapshot, "clocks")) {
      const uint64_t id = U64(*clock, "clock_id");
      if (U64(*clock, "is_incremental")) {
        if (id < 64 || id > 127) Problem(fmt::format("incremental clock {} is not sequence-scoped", id));
        seq_->incremental[id] = U64(*clock, "timestamp");
      } else if (id == kRealtime) {
        out_.realtime_at_start_ns = U64(*clock, "timestamp");
      } else if (id == kBoottime) {
        boot_to_trace_ = U64(*clock, "timestamp");
        have_boottime_ = true;
      } else if (id == kMonotonic) {
        monotonic_at_snapshot_ = U64(*clock, "timestamp");
      }
    }
  }

  uint64_t Time(uint64_t clock, uint64_t timestamp) {
    if (auto it = seq_->incremental.find(clock); it != seq_->incremental.end()) {
      return it->second += timestamp;
    }
    if (clock != kMonotonic) Problem(fmt::format("timestamp on unknown clock {}", clock));
    return timestamp;
  }

  void Track(const Message& descriptor) {
    DecodedTrack& track = out_.tracks[U64(descriptor, "uuid")];
    track.parent = U64(descriptor, "parent_uuid");
    track.name = Str(descriptor, "name");
    if (Has(descriptor, "process")) {
      track.pid = static_cast<int64_t>(U64(Sub(descriptor, "process"), "pid"));
      track.process_name = Str(Sub(descriptor, "process"), "process_name");
    }
    if (Has(descriptor, "thread")) {
      track.pid = static_cast<int64_t>(U64(Sub(descriptor, "thread"), "pid"));
      track.tid = static_cast<int64_t>(U64(Sub(descriptor, "thread"), "tid"));
      track.thread_name = Str(Sub(descriptor, "thread"), "thread_name");
    }
    track.counter = Has(descriptor, "counter");
  }

  std::string Value(const Message& arg) {
    const auto* r = arg.GetReflection();
    if (Has(arg, "string_value_iid")) {
      return LookupString("debug_annotation_string_values", U64(arg, "string_value_iid"));
    }
    if (Has(arg, "string_value")) return Str(arg, "string_value");
    if (Has(arg, "int_value")) return std::to_string(static_cast<int64_t>(U64(arg, "int_value")));
    if (Has(arg, "uint_value")) return std::to_string(U64(arg, "uint_value"));
    if (Has(arg, "bool_value")) return U64(arg, "bool_value") ? "true" : "false";
    if (Has(arg, "double_value")) return fmt::format("{}", r->GetDouble(arg, Field(arg, "double_value")));
    std::string joined;
    for (const Message* element : Each(arg, "array_values")) {
      if (!joined.empty()) joined += "; ";
      joined += Value(*element);
    }
    return joined;
  }

  void Event(const Message& event, uint64_t time) {
    DecodedEvent& decoded = out_.events.emplace_back();
    decoded.time_ns = time;
    decoded.type = event.GetReflection()->GetEnum(event, Field(event, "type"))->name();
    decoded.track = Has(event, "track_uuid") ? U64(event, "track_uuid") : seq_->default_track;
    if (decoded.track == 0) Problem("event names no track, and its sequence has no default track");
    if (!out_.tracks.contains(decoded.track)) Problem("event on a track not described before");
    decoded.name = Has(event, "name_iid") ? LookupString("event_names", U64(event, "name_iid"))
                                          : Str(event, "name");
    for (const Message* arg : Each(event, "debug_annotations")) {
      const std::string name = Has(*arg, "name_iid")
                                   ? LookupString("debug_annotation_names", U64(*arg, "name_iid"))
                                   : Str(*arg, "name");
      decoded.args[name] = Value(*arg);
    }
    decoded.flows = Numbers(event, "flow_ids");
    decoded.terminating_flows = Numbers(event, "terminating_flow_ids");
    if (Has(event, "counter_value")) decoded.counter = static_cast<double>(
        static_cast<int64_t>(U64(event, "counter_value")));
    if (Has(event, "double_counter_value")) {
      decoded.counter = event.GetReflection()->GetDouble(event, Field(event, "double_counter_value"));
    }
  }

  void Sample(const Message& sample, uint64_t time) {
    DecodedSample& decoded = out_.samples.emplace_back();
    decoded.time_ns = time;
    decoded.cpu = static_cast<uint32_t>(U64(sample, "cpu"));
    decoded.pid = static_cast<uint32_t>(U64(sample, "pid"));
    decoded.tid = static_cast<uint32_t>(U64(sample, "tid"));
    if (!Has(sample, "callstack_iid")) return;
    const Message* callstack = Lookup("callstacks", U64(sample, "callstack_iid"));
    if (callstack == nullptr) return;
    for (uint64_t frame_iid : Numbers(*callstack, "frame_ids")) {
      const Message* frame = Lookup("frames", frame_iid);
      if (frame == nullptr) continue;
      decoded.frames.push_back(LookupString("function_names", U64(*frame, "function_name_id")));
      std::string path;
      if (const uint64_t mapping_iid = U64(*frame, "mapping_id"); mapping_iid != 0) {
        if (const Message* mapping = Lookup("mappings", mapping_iid)) {
          // Perfetto joins the parts as "/a/b"; a single full path stays as it is.
          for (uint64_t part : Numbers(*mapping, "path_string_ids")) {
            path += "/" + LookupString("mapping_paths", part);
          }
          if (path.starts_with("//")) path.erase(0, 1);
          if (const uint64_t build_id = U64(*mapping, "build_id"); build_id != 0) {
            LookupString("build_ids", build_id);
          }
        }
      }
      decoded.mappings.push_back(path);
    }
  }

  // One CPU's compact_sched columns, as Perfetto reads them: columns of one
  // event kind of equal length, timestamps as deltas from the previous one
  // in the bundle (the first from zero), names by index into intern_table,
  // times in boot time, which the clock snapshot must relate to the trace's.
  void Bundle(const Message& bundle) {
    if (!Has(bundle, "cpu")) Problem("ftrace bundle without a cpu");
    if (!Has(bundle, "compact_sched")) return;
    if (!have_boottime_) Problem("kernel scheduling data without a boot-time clock in the snapshot");
    const uint32_t cpu = static_cast<uint32_t>(U64(bundle, "cpu"));
    const Message& sched = Sub(bundle, "compact_sched");
    const FieldDescriptor* table = Field(sched, "intern_table");
    const int comms = sched.GetReflection()->FieldSize(sched, table);
    auto comm = [&](uint64_t index) -> std::string {
      if (index >= static_cast<uint64_t>(comms)) {
        Problem(fmt::format("comm index {} past the bundle's {} names", index, comms));
        return "";
      }
      return sched.GetReflection()->GetRepeatedString(sched, table, static_cast<int>(index));
    };
    uint64_t& last = last_sched_ns_[cpu];
    const std::vector<uint64_t> times = Numbers(sched, "switch_timestamp"),
                                states = Numbers(sched, "switch_prev_state"),
                                pids = Numbers(sched, "switch_next_pid"),
                                prios = Numbers(sched, "switch_next_prio"),
                                names = Numbers(sched, "switch_next_comm_index");
    if (states.size() != times.size() || pids.size() != times.size() ||
        prios.size() != times.size() || names.size() != times.size()) {
      Problem("compact_sched switch columns of different lengths");
      return;
    }
    uint64_t time = 0;
    for (size_t i = 0; i < times.size(); ++i) {
      time += times[i];
      if (time < last) Problem(fmt::format("cpu {}: a switch before the previous event", cpu));
      last = time;
      out_.switches.push_back({cpu, BootToTrace(time), static_cast<int64_t>(states[i]),
                               static_cast<uint32_t>(pids[i]), comm(names[i])});
    }
    const std::vector<uint64_t> waking_times = Numbers(sched, "waking_timestamp"),
                                waking_pids = Numbers(sched, "waking_pid"),
                                targets = Numbers(sched, "waking_target_cpu"),
                                waking_prios = Numbers(sched, "waking_prio"),
                                waking_names = Numbers(sched, "waking_comm_index");
    if (waking_pids.size() != waking_times.size() || targets.size() != waking_times.size() ||
        waking_prios.size() != waking_times.size() || waking_names.size() != waking_times.size()) {
      Problem("compact_sched waking columns of different lengths");
      return;
    }
    time = 0;
    for (size_t i = 0; i < waking_times.size(); ++i) {
      time += waking_times[i];
      out_.wakings.push_back({cpu, BootToTrace(time), static_cast<uint32_t>(waking_pids[i]),
                              static_cast<uint32_t>(targets[i]), comm(waking_names[i])});
    }
  }
  uint64_t BootToTrace(uint64_t boot_ns) const {
    return boot_ns - boot_to_trace_ + monotonic_at_snapshot_;
  }

  DecodedTrace& out_;
  std::string where_;
  bool have_boottime_ = false;
  uint64_t boot_to_trace_ = 0, monotonic_at_snapshot_ = 0;
  std::map<uint32_t, uint64_t> last_sched_ns_;  // per cpu, across its bundles
  // Each packet sequence's incremental state, by trusted_packet_sequence_id.
  struct Sequence {
    bool cleared = false;
    uint64_t default_clock = 0, default_track = 0;
    std::map<uint64_t, uint64_t> incremental;  // clock id -> its current value
    std::map<std::string, std::map<uint64_t, std::unique_ptr<Message>>> interned;
  };
  std::map<uint64_t, Sequence> sequences_;
  Sequence* seq_ = nullptr;  // the current packet's
};

void DecodeCompressed(const Message& packet, size_t packet_bytes, bool nested,
                      const Schema& schema, DecodedTrace& decoded, Replay& replay);

// Each Trace.packet of `trace`; a compressed one's packets in its place.
void DecodePackets(std::string_view trace, bool compressed, const Schema& schema,
                   DecodedTrace& decoded, Replay& replay) {
  format::wire::Cursor cursor(trace);
  while (!cursor.empty()) {
    uint64_t tag;
    std::string_view bytes;
    if (!cursor.ReadVarint(&tag) || tag != format::wire::Tag(1, format::wire::kLengthDelimited) ||
        !cursor.ReadLengthDelimited(&bytes)) {
      decoded.problems.push_back(fmt::format("after packet {}: not a Trace.packet", decoded.packets));
      return;
    }
    std::unique_ptr<Message> packet(schema.packet->New());
    if (!packet->ParseFromArray(bytes.data(), static_cast<int>(bytes.size()))) {
      decoded.problems.push_back(fmt::format("packet {} does not parse", decoded.packets));
    } else if (Has(*packet, "compressed_packets")) {
      DecodeCompressed(*packet, bytes.size(), compressed, schema, decoded, replay);
    } else {
      replay.Packet(*packet);
      ++decoded.packets;
    }
  }
}

void DecodeCompressed(const Message& packet, size_t packet_bytes, bool nested,
                      const Schema& schema, DecodedTrace& decoded, Replay& replay) {
  const std::string where = fmt::format("compressed packet {}", decoded.compressed_packets++);
  std::vector<const FieldDescriptor*> fields;
  packet.GetReflection()->ListFields(packet, &fields);
  // Perfetto's limit counts the framing too: a tag and a length of up to 3 bytes.
  if (fields.size() != 1 || packet_bytes + 4 >= 512 * 1024 || nested) {
    decoded.problems.push_back(where + ": not alone in its packet, over 512 KiB or nested");
  }
  const std::optional<std::string> inflated = Inflate(Str(packet, "compressed_packets"));
  if (!inflated) {
    decoded.problems.push_back(where + ": not a whole zlib stream");
    return;
  }
  decoded.inflated += *inflated;
  DecodePackets(*inflated, true, schema, decoded, replay);
}

}  // namespace

std::optional<std::string> Inflate(std::string_view deflated, int window_bits) {
  z_stream stream{};
  if (inflateInit2(&stream, window_bits) != Z_OK) return std::nullopt;
  stream.next_in = reinterpret_cast<Bytef*>(const_cast<char*>(deflated.data()));
  stream.avail_in = static_cast<uInt>(deflated.size());
  std::string inflated;
  int result = Z_OK;
  while (result == Z_OK) {
    char chunk[1 << 16];
    stream.next_out = reinterpret_cast<Bytef*>(chunk);
    stream.avail_out = sizeof chunk;
    result = inflate(&stream, Z_NO_FLUSH);
    inflated.append(chunk, sizeof chunk - stream.avail_out);
  }
  const bool whole = result == Z_STREAM_END && stream.avail_in == 0;
  inflateEnd(&stream);
  if (!whole) return std::nullopt;
  return inflated;
}

DecodedTrace DecodePerfetto(std::string_view trace) {
  DecodedTrace decoded;
  const Schema& schema = OfficialSchema();
  if (schema.packet == nullptr) {
    decoded.problems.push_back("perfetto_trace.proto does not load: " + schema.errors.errors);
    return decoded;
  }
  Replay replay(&decoded);
  DecodePackets(trace, false, schema, decoded, replay);
  return decoded;
}

}  // namespace loupe::testing
