#include "analysis/pprof_writer.h"

#include <fmt/format.h>
#include <zlib.h>

#include <algorithm>
#include <fstream>
#include <map>
#include <set>

#include "daemon/base/status_util.h"
#include "pprof/profile.pb.h"

namespace loupe::analysis {
namespace {

class Builder {
 public:
  explicit Builder(const StackProfile& profile) : profile_(profile) { String(""); }

  int64_t String(const std::string& text) {
    auto [it, added] = strings_.emplace(text, proto_.string_table_size());
    if (added) proto_.add_string_table(text);
    return it->second;
  }

  void ValueType(pprof::ValueType* out, const std::string& type, const std::string& unit) {
    out->set_type(String(type));
    out->set_unit(String(unit));
  }

  uint64_t Function(const NamedFrame& frame) {
    const std::string name = frame.kernel ? frame.function + " [kernel]" : frame.function;
    auto [it, added] = functions_.emplace(std::pair(name, frame.file), functions_.size() + 1);
    if (added) {
      pprof::Function* function = proto_.add_function();
      function->set_id(it->second);
      function->set_name(String(name));
      function->set_system_name(String(name));
      function->set_filename(String(frame.file));
    }
    return it->second;
  }

  uint64_t Mapping(uint32_t pid, uint64_t address) {
    const v1::SymbolTable::Mapping* mapping = profile_.MappingOf(pid, address);
    if (mapping == nullptr) return 0;
    auto [it, added] = mappings_.emplace(std::pair(pid, mapping->start()), mappings_.size() + 1);
    if (added) {
      pprof::Mapping* out = proto_.add_mapping();
      out->set_id(it->second);
      out->set_memory_start(mapping->start());
      out->set_memory_limit(mapping->end());
      out->set_file_offset(mapping->file_offset());
      out->set_filename(String(mapping->path()));
      std::string hex;
      for (unsigned char c : mapping->build_id()) hex += fmt::format("{:02x}", c);
      out->set_build_id(String(hex));
      out->set_has_functions(true);
      out->set_has_filenames(true);
      out->set_has_line_numbers(true);
      out->set_has_inline_frames(true);
    }
    return it->second;
  }

  uint64_t Location(uint32_t pid, uint64_t address, bool kernel) {
    const auto key = std::tuple(kernel ? 0 : pid, address);
    auto [it, added] = locations_.emplace(key, locations_.size() + 1);
    if (added) {
      pprof::Location* location = proto_.add_location();
      location->set_id(it->second);
      location->set_address(address);
      if (!kernel) location->set_mapping_id(Mapping(pid, address));
      for (NamedFrame& frame : profile_.Frames(pid, address, kernel)) {
        frame.kernel = kernel;
        pprof::Line* line = location->add_line();
        line->set_function_id(Function(frame));
        line->set_line(frame.line);
      }
    }
    return it->second;
  }

  pprof::Profile& proto() { return proto_; }

 private:
  const StackProfile& profile_;
  pprof::Profile proto_;
  std::map<std::string, int64_t> strings_;
  std::map<std::pair<std::string, std::string>, uint64_t> functions_;
  std::map<std::pair<uint32_t, uint64_t>, uint64_t> mappings_;
  std::map<std::tuple<uint32_t, uint64_t>, uint64_t> locations_;
};

// pprof takes the first mapping for the main binary (`File:` in its
// output): the application's own code that most samples ran through, not
// whichever library the first stack happened to begin in.
void MainMappingFirst(const StackProfile& profile, Builder& builder) {
  std::map<std::pair<uint32_t, uint64_t>, std::pair<uint64_t, uint64_t>> samples;  // -> (n, address)
  for (uint32_t id = 1; id <= profile.stack_count(); ++id) {
    const StackKey& key = profile.key(id);
    std::set<uint64_t> seen;  // each mapping once per stack
    for (uint64_t address : key.user) {
      const v1::SymbolTable::Mapping* mapping = profile.MappingOf(key.pid, address);
      if (mapping == nullptr || IsSystemPath(mapping->path()) ||
          !seen.insert(mapping->start()).second) {
        continue;
      }
      auto& [n, any_address] = samples[{key.pid, mapping->start()}];
      n += profile.totals(id).samples;
      any_address = address;
    }
  }
  const auto main = std::max_element(samples.begin(), samples.end(), [](const auto& a, const auto& b) {
    return a.second.first < b.second.first;
  });
  if (main != samples.end()) builder.Mapping(main->first.first, main->second.second);
}

absl::Status Gzip(const std::string& data, std::string* out) {
  z_stream stream{};
  if (deflateInit2(&stream, Z_DEFAULT_COMPRESSION, Z_DEFLATED, 15 + 16, 8, Z_DEFAULT_STRATEGY) !=
      Z_OK) {
    return absl::InternalError("gzip: deflateInit2 failed");
  }
  out->resize(deflateBound(&stream, data.size()) + 32);
  stream.next_in = reinterpret_cast<Bytef*>(const_cast<char*>(data.data()));
  stream.avail_in = static_cast<uInt>(data.size());
  stream.next_out = reinterpret_cast<Bytef*>(out->data());
  stream.avail_out = static_cast<uInt>(out->size());
  const int result = deflate(&stream, Z_FINISH);
  out->resize(stream.total_out);
  deflateEnd(&stream);
  return result == Z_STREAM_END ? absl::OkStatus() : absl::InternalError("gzip: deflate failed");
}

}  // namespace

absl::Status WritePprof(const StackProfile& profile, const PprofTimes& times,
                        const std::string& path) {
  Builder builder(profile);
  pprof::Profile& proto = builder.proto();
  builder.ValueType(proto.add_sample_type(), "samples", "count");
  builder.ValueType(proto.add_sample_type(), "cpu", "nanoseconds");
  builder.ValueType(proto.add_sample_type(), "offcpu", "nanoseconds");
  builder.ValueType(proto.mutable_period_type(), "cpu", "nanoseconds");
  proto.set_period(static_cast<int64_t>(times.sample_period_ns));
  proto.set_time_nanos(static_cast<int64_t>(times.start_realtime_ns));
  proto.set_duration_nanos(static_cast<int64_t>(times.duration_ns));
  proto.set_default_sample_type(builder.String("cpu"));
  const int64_t pid_key = builder.String("pid");
  MainMappingFirst(profile, builder);
  for (uint32_t id = 1; id <= profile.stack_count(); ++id) {
    const StackKey& key = profile.key(id);
    const StackTotals& totals = profile.totals(id);
    pprof::Sample* sample = proto.add_sample();
    for (uint64_t address : key.kernel) {
      sample->add_location_id(builder.Location(key.pid, address, true));
    }
    for (uint64_t address : key.user) {
      sample->add_location_id(builder.Location(key.pid, address, false));
    }
    sample->add_value(static_cast<int64_t>(totals.samples));
    sample->add_value(static_cast<int64_t>(totals.samples * times.sample_period_ns));
    sample->add_value(static_cast<int64_t>(totals.off_cpu_ns));
    pprof::Label* label = sample->add_label();
    label->set_key(pid_key);
    label->set_num(key.pid);
  }
  std::string compressed;
  if (absl::Status status = Gzip(proto.SerializeAsString(), &compressed); !status.ok()) {
    return status;
  }
  std::ofstream out(path, std::ios::binary | std::ios::trunc);
  if (!out) return ErrnoStatus("open", path);
  out.write(compressed.data(), static_cast<std::streamsize>(compressed.size()));
  out.close();
  if (!out) return ErrnoStatus("write", path);
  return absl::OkStatus();
}

}  // namespace loupe::analysis
