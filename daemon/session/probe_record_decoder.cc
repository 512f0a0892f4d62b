#include "daemon/session/probe_record_decoder.h"

#include <fmt/compile.h>
#include <fmt/format.h>

#include <cstring>
#include <iterator>

#include "shared/records.h"

namespace loupe::session {
namespace {

template <typename T>
bool LoadPrefix(std::span<const uint8_t> bytes, size_t fixed_part, T* out) {
  if (bytes.size() < fixed_part || bytes.size() > sizeof(T)) return false;
  std::memset(out, 0, sizeof(T));
  std::memcpy(out, bytes.data(), bytes.size());
  return true;
}

format::ValueType FieldType(uint32_t shim_type) {
  return shim_type >= 1 && shim_type <= 6 ? static_cast<format::ValueType>(shim_type)
                                          : format::ValueType::kInt;
}

}  // namespace

bool ProbeRecordDecoder::Handles(uint16_t type) {
  return (type >= LOUPE_REC_SPAN_BEGIN && type <= LOUPE_REC_UPROBE_RETURN) ||
         type == LOUPE_REC_OPERATION_PASS;
}

std::string_view ProbeRecordDecoder::NameAt(uint32_t tgid, uint64_t address) {
  if (std::optional<std::string_view> name = names_.Name(tgid, address)) return *name;
  ++losses_.shim_unreadable;
  unreadable_name_.clear();
  fmt::format_to(std::back_inserter(unreadable_name_), FMT_COMPILE("<unreadable name at {:#x}>"),
                 address);
  return unreadable_name_;
}

std::string_view ProbeRecordDecoder::ProbeName(uint32_t id) {
  if (id < probe_names_->size()) return (*probe_names_)[id];
  return "<unknown probe>";
}

bool ProbeRecordDecoder::Decode(std::span<const uint8_t> bytes, OwnedEvent* event) {
  loupe_record_header header;
  event->Clear();
  if (bytes.size() < sizeof header) return false;
  std::memcpy(&header, bytes.data(), sizeof header);
  event->record.time_ns = header.time_ns;
  event->record.cpu = header.cpu;

  switch (header.type) {
    case LOUPE_REC_INSTANT:
      return DecodeInstant(bytes, event);
    case LOUPE_REC_USDT:
      return DecodeUsdt(bytes, event);
    case LOUPE_REC_UPROBE_ENTRY:
    case LOUPE_REC_UPROBE_RETURN: {
      loupe_uprobe_event r;
      if (bytes.size() != sizeof r) return false;
      std::memcpy(&r, bytes.data(), sizeof r);
      if (r.arg_count > LOUPE_UPROBE_MAX_ARGS) return false;
      event->record.tid = r.tid;
      event->prev_tgid = r.tgid;
      event->user_sp = r.sp;
      if (header.type == LOUPE_REC_UPROBE_ENTRY) {
        if (r.arg_count != 0) event->extras().args.assign(r.values, r.values + r.arg_count);
        event->record.payload = format::UprobeEntry{.probe = ProbeName(r.probe)};
      } else {
        event->record.payload =
            format::UprobeReturn{.probe = ProbeName(r.probe), .retval = r.values[0]};
      }
      return true;
    }
    default:
      break;
  }

  loupe_shim_event r;
  if (bytes.size() != sizeof r) return false;
  std::memcpy(&r, bytes.data(), sizeof r);
  event->record.tid = r.tid;
  event->prev_tgid = r.tgid;
  switch (header.type) {
    case LOUPE_REC_SPAN_BEGIN:
      event->text = NameAt(r.tgid, r.args[0]);
      event->record.payload = format::SpanBegin{
          .span_id = r.args[1], .parent_id = r.args[2], .operation_id = r.args[3]};
      return true;
    case LOUPE_REC_SPAN_END:
      event->record.payload = format::SpanEnd{.span_id = r.args[0]};
      return true;
    case LOUPE_REC_COUNTER:
      event->text = NameAt(r.tgid, r.args[0]);
      event->record.payload = format::Counter{
          .value = {FieldType(static_cast<uint32_t>(r.args[1])), r.args[2], {}}};
      return true;
    case LOUPE_REC_OPERATION_BEGIN:
      event->text = NameAt(r.tgid, r.args[1]);
      event->record.payload = format::OperationBegin{.operation_id = r.args[0]};
      return true;
    case LOUPE_REC_OPERATION_END:
    case LOUPE_REC_OPERATION_PASS:
      event->record.payload = format::OperationEnd{
          .operation_id = r.args[0], .passed = header.type == LOUPE_REC_OPERATION_PASS};
      return true;
    case LOUPE_REC_SHIM_THREAD_NAME:
      if (std::optional<std::string> name =
              NameCache::ReadString(r.tgid, r.args[0], NameCache::kMaxName)) {
        event->text = *std::move(name);
      } else {
        ++losses_.shim_unreadable;
      }
      event->record.payload = format::ThreadInfo{.pid = r.tgid};
      return true;
    case LOUPE_REC_TRIGGER:
      // A trigger is an instant event marked as one.
      event->text = NameAt(r.tgid, r.args[0]);
      event->extras().fields.push_back({.key = "loupe.trigger", .type = format::ValueType::kBool, .bits = 1});
      event->record.payload = format::Instant{};
      return true;
    default:
      return false;
  }
}

bool ProbeRecordDecoder::DecodeInstant(std::span<const uint8_t> bytes, OwnedEvent* event) {
  loupe_shim_instant r;
  if (!LoadPrefix(bytes, offsetof(loupe_shim_instant, strings), &r)) return false;
  if (r.count > LOUPE_SHIM_MAX_FIELDS) return false;
  const bool has_strings = bytes.size() == sizeof r;
  event->record.tid = r.tid;
  event->prev_tgid = r.tgid;
  if (r.read_error != 0) ++losses_.shim_unreadable;
  event->text = NameAt(r.tgid, r.name);
  for (uint32_t i = 0; i < r.count; ++i) {
    const loupe_shim_field& field = r.fields[i];
    OwnedField owned{.key = std::string(NameAt(r.tgid, field.key)), .type = FieldType(field.type),
                     .bits = field.value};
    if (owned.type == format::ValueType::kString) {
      const size_t captured = std::min<size_t>(field.length, LOUPE_SHIM_MAX_STRING);
      if (field.length > LOUPE_SHIM_MAX_STRING) ++losses_.shim_strings_cut;
      const std::string_view value =
          has_strings ? std::string_view(r.strings[i], captured) : std::string_view();
      owned.text = filter_.Apply(value, field.length);
      owned.bits = 0;
    }
    event->extras().fields.push_back(std::move(owned));
  }
  event->record.payload = format::Instant{.operation_id = r.operation};
  return true;
}

bool ProbeRecordDecoder::DecodeUsdt(std::span<const uint8_t> bytes, OwnedEvent* event) {
  loupe_usdt_event r;
  if (!LoadPrefix(bytes, offsetof(loupe_usdt_event, string), &r)) return false;
  if (r.arg_count > LOUPE_USDT_MAX_ARGS) return false;
  event->record.tid = r.tid;
  event->prev_tgid = r.tgid;
  if (r.arg_count != 0) event->extras().args.assign(r.args, r.args + r.arg_count);
  if ((r.flags & LOUPE_USDT_STRING) != 0) {
    const size_t header = offsetof(loupe_usdt_event, string);
    if (r.string_length < 0) {
      ++losses_.usdt_unreadable;
    } else if (static_cast<size_t>(r.string_length) > LOUPE_USDT_MAX_STRING ||
               bytes.size() != header + static_cast<size_t>(r.string_length)) {
      return false;  // a length the record does not carry
    } else {
      if ((r.flags & LOUPE_USDT_STRING_CUT) != 0) ++losses_.usdt_strings_cut;
      const std::string_view text(reinterpret_cast<const char*>(bytes.data()) + header,
                                  static_cast<size_t>(r.string_length));
      event->extras().value_text = filter_.Apply(text, text.size());
    }
  } else if (bytes.size() != offsetof(loupe_usdt_event, string)) {
    return false;
  }
  event->record.payload = format::UsdtEvent{.probe = ProbeName(r.probe)};
  return true;
}

}  // namespace loupe::session
