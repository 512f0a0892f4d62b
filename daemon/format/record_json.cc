#include "daemon/format/record_json.h"

#include <fmt/format.h>

#include <charconv>

#include "daemon/base/utf8.h"

namespace loupe::format {
namespace {

// Numbers straight into the line: fmt's back_inserter grows the string a
// character at a time, which was a third of the JSON export's time.
template <typename T>
void AppendNumber(T value, std::string* out, int base = 10) {
  char digits[24];
  const auto [end, error] = std::to_chars(digits, digits + sizeof digits, value, base);
  out->append(digits, end);
}

// Keys given as string literals are this file's own plain names and go in
// as they are; only a user's field names (UserField) are escaped, as are
// string values. A key was scanned for escapes on every field: a sixth of
// the export's time.
class JsonObject {
 public:
  explicit JsonObject(std::string* out) : out_(out) { out_->push_back('{'); }
  ~JsonObject() { out_->push_back('}'); }

  JsonObject& Num(std::string_view key, uint64_t v) {
    Key(key);
    AppendNumber(v, out_);
    return *this;
  }
  JsonObject& Int(std::string_view key, int64_t v) {
    Key(key);
    AppendNumber(v, out_);
    return *this;
  }
  JsonObject& Str(std::string_view key, std::string_view v) {
    Key(key);
    AppendJsonString(v, out_);
    return *this;
  }
  // A name of ours (a kind, a reason): nothing in it needs escaping.
  JsonObject& Name(std::string_view key, std::string_view v) {
    Key(key);
    Quoted(v);
    return *this;
  }
  JsonObject& Bool(std::string_view key, bool v) {
    Key(key);
    out_->append(v ? std::string_view("true") : std::string_view("false"));
    return *this;
  }
  JsonObject& Stack(std::string_view key, format::Stack frames) {
    Key(key);
    out_->push_back('[');
    for (size_t i = 0; i < frames.size(); ++i) {
      out_->append(i ? std::string_view(",\"0x") : std::string_view("\"0x"));
      AppendNumber(frames[i], out_, 16);
      out_->push_back('"');
    }
    out_->push_back(']');
    return *this;
  }
  JsonObject& Args(std::string_view key, format::Args args) {
    Key(key);
    fmt::format_to(std::back_inserter(*out_), "[{}]", fmt::join(args, ","));
    return *this;
  }
  JsonObject& Val(std::string_view key, const Value& v) {
    Key(key);
    AppendValue(v);
    return *this;
  }
  JsonObject& UserField(std::string_view key, const Value& v) {
    Separate();
    AppendJsonString(key, out_);
    out_->push_back(':');
    AppendValue(v);
    return *this;
  }
  std::string* Nested(std::string_view key) {
    Key(key);
    return out_;
  }

 private:
  void Separate() {
    if (!first_) out_->push_back(',');
    first_ = false;
  }
  void Quoted(std::string_view plain) {
    out_->push_back('"');
    out_->append(plain);
    out_->push_back('"');
  }
  void Key(std::string_view key) {
    Separate();
    Quoted(key);
    out_->push_back(':');
  }
  void AppendValue(const Value& v) {
    switch (v.type) {
      case ValueType::kInt:
        AppendNumber(v.AsInt(), out_);
        return;
      case ValueType::kUint:
        AppendNumber(v.bits, out_);
        return;
      case ValueType::kDouble:
        fmt::format_to(std::back_inserter(*out_), "{}", v.AsDouble());
        return;
      case ValueType::kBool:
        out_->append(v.bits != 0 ? std::string_view("true") : std::string_view("false"));
        return;
      case ValueType::kString:
        AppendJsonString(v.text, out_);
        return;
      case ValueType::kBytes:
        fmt::format_to(std::back_inserter(*out_), "{{\"bytes\":{}}}", v.bits);
        return;
    }
  }
  std::string* out_;
  bool first_ = true;
};

struct PayloadJson {
  JsonObject& o;
  void operator()(const ClockSync& r) { o.Num("realtime_ns", r.realtime_ns); }
  void operator()(const ProcessInfo& r) {
    o.Num("ppid", r.ppid).Num("ns_pid", r.ns_pid).Num("uid", r.uid);
    o.Num("start_time", r.start_time).Str("name", r.name).Str("exe", r.exe);
  }
  void operator()(const ThreadInfo& r) {
    o.Num("pid", r.pid).Num("ns_tid", r.ns_tid).Str("name", r.name);
    if (r.foreign) o.Bool("foreign", true).Str("process_name", r.process_name);
  }
  void operator()(const ProcessFork& r) {
    o.Num("child_pid", r.child_pid).Num("child_tid", r.child_tid);
  }
  void operator()(const ProcessExec& r) {
    o.Num("pid", r.pid).Str("filename", r.filename).Num("old_tid", r.old_tid);
  }
  void operator()(const ThreadExit& r) {
    o.Num("pid", r.pid).Int("exit_code", r.exit_code).Bool("group_dead", r.group_dead);
  }
  void operator()(const SchedSwitch& r) {
    o.Num("next_tid", r.next_tid).Num("prev_state", r.prev_state);
  }
  void operator()(const SchedWakeup& r) {
    o.Num("woken_tid", r.woken_tid).Num("target_cpu", r.target_cpu).Bool("is_new", r.is_new);
    o.Name("waker_context", WakerContextName(r.context));
  }
  void operator()(const SchedMigrate& r) {
    o.Num("orig_cpu", r.orig_cpu).Num("dest_cpu", r.dest_cpu);
  }
  void operator()(const CpuSample& r) {
    o.Stack("user_stack", r.user_stack).Stack("kernel_stack", r.kernel_stack);
    o.Num("operation_id", r.operation_id);
  }
  void operator()(const OffCpu& r) {
    o.Num("duration_ns", r.duration_ns).Num("runq_ns", r.runq_ns);
    o.Num("prev_state", r.prev_state).Num("waker_tid", r.waker_tid);
    o.Stack("user_stack", r.user_stack).Stack("kernel_stack", r.kernel_stack);
    o.Num("operation_id", r.operation_id);
  }
  void operator()(const UprobeEntry& r) { o.Str("probe", r.probe).Args("args", r.args); }
  void operator()(const UprobeReturn& r) {
    o.Str("probe", r.probe);
    // A call an exception or a longjmp left returned nothing.
    if (r.unwound != Unwound::kNo) {
      o.Str("unwound", r.unwound == Unwound::kByLongjmp ? "longjmp" : "exception");
    } else {
      o.Int("retval", r.retval);
    }
    o.Num("duration_ns", r.duration_ns);
  }
  void operator()(const UsdtEvent& r) {
    o.Str("probe", r.probe).Args("args", r.args);
    if (!r.str_arg.empty()) o.Str("str_arg", r.str_arg);
  }
  void operator()(const SpanBegin& r) {
    o.Num("span_id", r.span_id).Num("parent_id", r.parent_id);
    o.Num("operation_id", r.operation_id).Str("name", r.name);
  }
  void operator()(const SpanEnd& r) { o.Num("span_id", r.span_id); }
  void operator()(const Instant& r) {
    o.Str("name", r.name).Num("operation_id", r.operation_id);
    JsonObject fields(o.Nested("fields"));
    for (const Field& field : r.fields) fields.UserField(field.key, field.value);
  }
  void operator()(const Counter& r) { o.Str("name", r.name).Val("value", r.value); }
  void operator()(const OperationBegin& r) {
    o.Num("operation_id", r.operation_id).Str("name", r.name);
  }
  void operator()(const OperationEnd& r) {
    o.Num("operation_id", r.operation_id);
    if (r.passed) o.Bool("passed", true);
  }
  void operator()(const Loss& r) {
    o.Name("source", LossSourceName(r.source)).Name("reason", LossReasonName(r.reason));
    o.Num("count", r.count);
  }
};

}  // namespace

void AppendJsonString(std::string_view text, std::string* out) {
  out->push_back('"');
  // Runs that need no escaping (ASCII, and whole UTF-8 sequences) go in whole.
  size_t plain = 0;
  const auto flush = [&](size_t until) {
    out->append(text.data() + plain, until - plain);
  };
  for (size_t i = 0; i < text.size(); ++i) {
    const unsigned char c = static_cast<unsigned char>(text[i]);
    if (c >= 0x20 && c < 0x7f && c != '"' && c != '\\') continue;
    if (c >= 0x80) {
      if (const size_t length = Utf8SequenceLength(text, i); length > 0) {
        i += length - 1;
        continue;
      }
    }
    flush(i);
    plain = i + 1;
    switch (c) {
      case '"':
        *out += "\\\"";
        break;
      case '\\':
        *out += "\\\\";
        break;
      case '\n':
        *out += "\\n";
        break;
      case '\t':
        *out += "\\t";
        break;
      case '\r':
        *out += "\\r";
        break;
      default:
        if (c >= 0x80) {
          *out += "\\ufffd";  // not UTF-8: JSON text cannot hold the byte itself
        } else {
          fmt::format_to(std::back_inserter(*out), "\\u{:04x}", c);
        }
    }
  }
  flush(text.size());
  out->push_back('"');
}

void AppendRecordJson(const Record& record, std::string* out) {
  JsonObject o(out);
  o.Num("time_ns", record.time_ns).Num("tid", record.tid).Num("cpu", record.cpu);
  o.Name("kind", KindName(record.kind()));
  std::visit(PayloadJson{o}, record.payload);
}

std::string RecordJson(const Record& record) {
  std::string out;
  AppendRecordJson(record, &out);
  return out;
}

}  // namespace loupe::format
