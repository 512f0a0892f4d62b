#include "tools/collector/segment_names.h"

#include <fmt/format.h>
#include <time.h>

#include <algorithm>
#include <charconv>
#include <tuple>

#include "daemon/base/utf8.h"
#include "daemon/ship/sha256.h"

namespace loupe::collector {
namespace {

constexpr std::string_view kStoredSuffix = ".loupe";

bool NameChars(std::string_view text, size_t max, std::string_view extra) {
  return !text.empty() && text.size() <= max && text.front() != '.' &&
         std::all_of(text.begin(), text.end(), [&](char c) {
           return std::isalnum(static_cast<unsigned char>(c)) ||
                  extra.find(c) != std::string_view::npos;
         });
}

bool ParseUint(std::string_view text, uint64_t* value) {
  auto [end, error] = std::from_chars(text.data(), text.data() + text.size(), *value);
  return error == std::errc() && end == text.data() + text.size() && !text.empty();
}

bool ParseHex(std::string_view hex, std::string* bytes) {
  if (hex.size() % 2 != 0) return false;
  bytes->clear();
  for (size_t i = 0; i < hex.size(); i += 2) {
    unsigned value = 0;
    auto [end, error] = std::from_chars(hex.data() + i, hex.data() + i + 2, value, 16);
    if (error != std::errc() || end != hex.data() + i + 2) return false;
    bytes->push_back(static_cast<char>(value));
  }
  return true;
}

std::vector<std::string_view> Split(std::string_view text, char separator) {
  std::vector<std::string_view> parts;
  for (size_t at; (at = text.find(separator)) != std::string_view::npos;
       text.remove_prefix(at + 1)) {
    parts.push_back(text.substr(0, at));
  }
  parts.push_back(text);
  return parts;
}

struct tm Utc(uint64_t realtime_ns) {
  const time_t seconds = static_cast<time_t>(realtime_ns / 1'000'000'000);
  struct tm utc {};
  gmtime_r(&seconds, &utc);
  return utc;
}

}  // namespace

std::string IdentityKey(const v1::SegmentId& id) {
  return fmt::format("{}@{}@{}@{}", id.host(), id.boot_id(), id.session_id(), id.sequence());
}

absl::Status ValidateUploadNames(const v1::UploadBegin& begin, uint64_t max_segment_bytes) {
  const v1::SegmentId& id = begin.id();
  if (!NameChars(id.host(), 253, "-_.")) {
    return absl::InvalidArgumentError(fmt::format(
        "host '{}': must be 1-253 characters of letters, digits, '-', '_', '.'",
        Utf8Text(id.host())));
  }
  if (!NameChars(id.session_id(), 128, "-_.")) {
    return absl::InvalidArgumentError(fmt::format(
        "session '{}': must be 1-128 characters of letters, digits, '-', '_', '.'",
        id.session_id()));
  }
  if (!NameChars(id.boot_id(), 64, "-")) {
    return absl::InvalidArgumentError(
        fmt::format("boot id '{}': must be 1-64 characters of letters, digits, '-'", id.boot_id()));
  }
  if (begin.sha256().size() != ship::kSha256Bytes) {
    return absl::InvalidArgumentError(
        fmt::format("sha256: {} bytes, must be {}", begin.sha256().size(), ship::kSha256Bytes));
  }
  if (begin.size() == 0 || begin.size() > max_segment_bytes) {
    return absl::InvalidArgumentError(
        fmt::format("size {}: must be 1 to {} bytes", begin.size(), max_segment_bytes));
  }
  return absl::OkStatus();
}

std::string DayPrefix(std::string_view host, uint64_t realtime_ns) {
  const struct tm utc = Utc(realtime_ns);
  return fmt::format("{}/{:04}-{:02}-{:02}/", host, utc.tm_year + 1900, utc.tm_mon + 1,
                     utc.tm_mday);
}

std::string StoredNamePrefix(const v1::UploadBegin& begin) {
  const uint64_t ns = begin.start_realtime_ns();
  const struct tm utc = Utc(ns);
  return fmt::format("{}{:02}{:02}{:02}.{:09}@{}@{:06}@{}@", DayPrefix(begin.id().host(), ns),
                     utc.tm_hour, utc.tm_min, utc.tm_sec, ns % 1'000'000'000,
                     begin.id().session_id(), begin.id().sequence(), begin.id().boot_id());
}

std::string StoredName(const v1::UploadBegin& begin) {
  return fmt::format("{}{}{}", StoredNamePrefix(begin), ship::HexOf(begin.sha256()),
                     kStoredSuffix);
}

std::optional<v1::StoredSegment> ParseStoredName(std::string_view name) {
  const std::vector<std::string_view> path = Split(name, '/');
  if (path.size() != 3 || !path[2].ends_with(kStoredSuffix)) return std::nullopt;
  const std::string_view day = path[1];
  std::string_view file = path[2];
  file.remove_suffix(kStoredSuffix.size());
  const std::vector<std::string_view> parts = Split(file, '@');
  struct tm utc {};
  uint64_t nanos = 0, sequence = 0, year = 0, month = 0, mday = 0, hms = 0;
  if (parts.size() != 5 || day.size() != 10 || parts[0].size() != 16 || parts[0][6] != '.' ||
      !ParseUint(day.substr(0, 4), &year) || !ParseUint(day.substr(5, 2), &month) ||
      !ParseUint(day.substr(8, 2), &mday) || !ParseUint(parts[0].substr(0, 6), &hms) ||
      !ParseUint(parts[0].substr(7), &nanos) || !ParseUint(parts[2], &sequence)) {
    return std::nullopt;
  }
  v1::UploadBegin begin;
  if (!ParseHex(parts[4], begin.mutable_sha256())) return std::nullopt;
  utc.tm_year = static_cast<int>(year) - 1900;
  utc.tm_mon = static_cast<int>(month) - 1;
  utc.tm_mday = static_cast<int>(mday);
  utc.tm_hour = static_cast<int>(hms / 10000);
  utc.tm_min = static_cast<int>(hms / 100 % 100);
  utc.tm_sec = static_cast<int>(hms % 100);
  begin.set_start_realtime_ns(static_cast<uint64_t>(timegm(&utc)) * 1'000'000'000 + nanos);
  begin.mutable_id()->set_host(std::string(path[0]));
  begin.mutable_id()->set_session_id(std::string(parts[1]));
  begin.mutable_id()->set_sequence(sequence);
  begin.mutable_id()->set_boot_id(std::string(parts[3]));
  begin.set_size(1);
  // Only the canonical spelling of valid names: a name that reads back
  // differently (or names something outside the layout) is not ours.
  if (!ValidateUploadNames(begin, 1).ok() || StoredName(begin) != name) return std::nullopt;
  v1::StoredSegment segment;
  *segment.mutable_id() = begin.id();
  segment.set_start_realtime_ns(begin.start_realtime_ns());
  segment.set_sha256(begin.sha256());
  segment.set_name(std::string(name));
  return segment;
}

absl::Status CheckHeader(const v1::SegmentHeader& header, const v1::UploadBegin& begin) {
  if (header.host() != begin.id().host() || header.boot_id() != begin.id().boot_id() ||
      header.session_id() != begin.id().session_id() ||
      header.sequence() != begin.id().sequence() ||
      header.clock().realtime_ns() != begin.start_realtime_ns()) {
    return absl::InvalidArgumentError(fmt::format(
        "the segment's header says host={} boot={} session={} sequence={} start={}, the upload "
        "announced {}@{}",
        header.host(), header.boot_id(), header.session_id(), header.sequence(),
        header.clock().realtime_ns(), IdentityKey(begin.id()), begin.start_realtime_ns()));
  }
  return absl::OkStatus();
}

bool MatchesQuery(const v1::ListSegmentsRequest& query, const v1::StoredSegment& segment) {
  const uint64_t start = segment.start_realtime_ns();
  return (query.host().empty() || segment.id().host() == query.host()) &&
         (query.session_id().empty() || segment.id().session_id() == query.session_id()) &&
         start >= query.since_realtime_ns() &&
         (query.until_realtime_ns() == 0 || start < query.until_realtime_ns());
}

void SortForListing(std::vector<v1::StoredSegment>& segments) {
  std::sort(segments.begin(), segments.end(),
            [](const v1::StoredSegment& a, const v1::StoredSegment& b) {
              return std::make_tuple(a.id().host(), a.start_realtime_ns(), a.id().sequence()) <
                     std::make_tuple(b.id().host(), b.start_realtime_ns(), b.id().sequence());
            });
}

}  // namespace loupe::collector
