#include "analysis/requests.h"

#include <fmt/format.h>

#include <array>
#include <variant>

#include "absl/hash/hash.h"
#include "daemon/base/overloaded.h"

namespace loupe::analysis {
namespace {

constexpr std::array<std::string_view, 4> kSourceNames = {"uprobe", "operation", "span", "usdt"};

// "/srv/bin/lock_service:handle_request" -> "lock_service:handle_request"
std::string UprobeDisplayName(std::string_view probe) {
  const size_t colon = probe.rfind(':');
  if (colon == std::string_view::npos) return std::string(probe);
  std::string_view target = probe.substr(0, colon);
  if (const size_t slash = target.rfind('/'); slash != std::string_view::npos) {
    target.remove_prefix(slash + 1);
  }
  return fmt::format("{}:{}", target, probe.substr(colon + 1));
}

std::string_view AfterColon(std::string_view name) {
  const size_t colon = name.rfind(':');
  return colon == std::string_view::npos ? name : name.substr(colon + 1);
}

// "query__start" and "query__done" -> "query".
std::string CommonStem(std::string_view a, std::string_view b) {
  const auto separator = [](char c) { return c == '_' || c == '-' || c == '.'; };
  size_t n = 0;
  while (n < a.size() && n < b.size() && a[n] == b[n]) ++n;
  // Whole words only: request__startup and request__shutdown share
  // "request", not "request__s".
  if (n < a.size() && n < b.size()) {
    while (n > 0 && !separator(a[n - 1])) --n;
  }
  while (n > 0 && separator(a[n - 1])) --n;
  return std::string(n > 0 ? a.substr(0, n) : a);
}

}  // namespace

std::string_view RequestSourceName(RequestSource source) {
  return kSourceNames[static_cast<int>(source)];
}

absl::StatusOr<UsdtPair> ParseUsdtPair(std::string_view text) {
  auto bad = [&](std::string_view why) {
    return absl::InvalidArgumentError(fmt::format(
        "--request '{}': {} (expected [NAME=]PROVIDER:BEGIN..[PROVIDER:]END, e.g. "
        "'postgresql:query__start..query__done')",
        text, why));
  };
  UsdtPair pair;
  std::string_view rest = text;
  if (const size_t equals = rest.find('='); equals != std::string_view::npos) {
    pair.name = std::string(rest.substr(0, equals));
    rest.remove_prefix(equals + 1);
    if (pair.name.empty()) return bad("the name before '=' is empty");
  }
  const size_t dots = rest.find("..");
  if (dots == std::string_view::npos) return bad("no '..' between the begin and end probes");
  const std::string_view begin = rest.substr(0, dots), end = rest.substr(dots + 2);
  const size_t colon = begin.find(':');
  if (colon == std::string_view::npos || colon == 0 || colon + 1 == begin.size()) {
    return bad("the begin probe is not PROVIDER:NAME");
  }
  if (end.empty() || end.back() == ':') return bad("the end probe is empty");
  pair.begin_probe = std::string(begin);
  pair.end_probe =
      end.find(':') == std::string_view::npos ? fmt::format("{}{}", begin.substr(0, colon + 1), end)
                                              : std::string(end);
  if (pair.begin_probe == pair.end_probe) return bad("begin and end are the same probe");
  if (pair.name.empty()) {
    pair.name = fmt::format("{}{}", begin.substr(0, colon + 1),
                            CommonStem(AfterColon(pair.begin_probe), AfterColon(pair.end_probe)));
  }
  return pair;
}

void RequestKinds::AddHeader(const v1::SegmentHeader& header) {
  auto it = header.config().find("uprobes");
  if (it == header.config().end()) return;
  std::string_view requests = it->second;
  while (!requests.empty()) {
    const size_t space = requests.find(' ');
    std::string_view request = requests.substr(0, space);
    requests.remove_prefix(space == std::string_view::npos ? requests.size() : space + 1);
    if (!request.ends_with("%return")) continue;
    request.remove_suffix(7);
    if (request.ends_with(")")) request = request.substr(0, request.rfind('('));
    returning_uprobes_.insert(std::string(request));
  }
}

bool RequestKinds::Returns(std::string_view probe) const {
  return returning_uprobes_.contains(absl::string_view(probe.data(), probe.size()));
}

uint32_t RequestKinds::KindOf(RequestSource source, std::string_view name) {
  auto& ids = kind_ids_[static_cast<int>(source)];
  if (auto it = ids.find(absl::string_view(name.data(), name.size())); it != ids.end()) {
    return it->second;
  }
  auto it = ids.try_emplace(std::string(name), static_cast<uint32_t>(kinds_.size())).first;
  {
    RequestKind kind{source, std::string(name), std::string(name)};
    if (source == RequestSource::kUprobe) {
      kind.name = UprobeDisplayName(name);
      kind.short_name = std::string(AfterColon(name));
    } else if (source == RequestSource::kUsdt) {
      kind.short_name = std::string(AfterColon(name));
    }
    kinds_.push_back(std::move(kind));
  }
  return it->second;
}

RequestMark RequestKinds::Mark(const format::Record& record) {
  using namespace format;
  RequestMark mark;
  std::visit(
      Overloaded{
          [&](const SpanBegin& begin) {
            mark = {RequestMark::kBegin, KindOf(RequestSource::kSpan, begin.name), begin.span_id};
            mark.operation_id = begin.operation_id;
          },
          [&](const SpanEnd& end) {  // spans end by id, whatever their name
            mark = {RequestMark::kEnd, UINT32_MAX, end.span_id};
          },
          [&](const OperationBegin& begin) { mark = MarkOperation(begin); },
          [&](const OperationEnd& end) {
            mark = {RequestMark::kEnd, UINT32_MAX, end.operation_id | 1ull << 63};
            mark.passes = end.passed;
          },
          [&](const UprobeEntry& entry) {
            if (!Returns(entry.probe)) return;
            mark = {RequestMark::kBegin, KindOf(RequestSource::kUprobe, entry.probe),
                    absl::HashOf(entry.probe)};
            mark.args = entry.args;
          },
          [&](const UprobeReturn& ret) {
            if (!Returns(ret.probe)) return;
            mark = {RequestMark::kEnd, KindOf(RequestSource::kUprobe, ret.probe),
                    absl::HashOf(ret.probe)};
            if (ret.duration_ns != 0 && ret.duration_ns <= record.time_ns) {
              mark.begin_ns = record.time_ns - ret.duration_ns;
            }
            mark.unwound = ret.unwound;
          },
          [&](const UsdtEvent& usdt) { mark = MarkUsdt(usdt); },
          // Neither begin nor end a request.
          [](const ClockSync&) {}, [](const ProcessInfo&) {}, [](const ThreadInfo&) {},
          [](const ProcessFork&) {}, [](const ProcessExec&) {}, [](const ThreadExit&) {},
          [](const SchedSwitch&) {}, [](const SchedWakeup&) {}, [](const SchedMigrate&) {},
          [](const CpuSample&) {}, [](const OffCpu&) {}, [](const Instant&) {},
          [](const Counter&) {}, [](const Loss&) {}},
      record.payload);
  return mark;
}

RequestMark RequestKinds::MarkOperation(const format::OperationBegin& begin) {
  RequestMark mark = {RequestMark::kBegin, KindOf(RequestSource::kOperation, begin.name),
                      begin.operation_id | 1ull << 63};
  mark.operation_id = begin.operation_id;
  operation_arg_ = static_cast<int64_t>(begin.operation_id);
  mark.args = {&operation_arg_, 1};
  return mark;
}

RequestMark RequestKinds::MarkUsdt(const format::UsdtEvent& usdt) {
  for (const UsdtPair& pair : pairs_) {
    if (usdt.probe == pair.begin_probe || usdt.probe == pair.end_probe) {
      const bool begins = usdt.probe == pair.begin_probe;
      RequestMark mark = {begins ? RequestMark::kBegin : RequestMark::kEnd,
                          KindOf(RequestSource::kUsdt, pair.name), absl::HashOf(pair.name)};
      if (begins) mark.args = usdt.args;
      return mark;
    }
  }
  return {};
}

}  // namespace loupe::analysis
