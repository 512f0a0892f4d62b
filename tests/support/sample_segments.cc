#include "tests/support/sample_segments.h"

#include <cstdlib>

#include "daemon/format/segment_writer.h"
#include "tools/synthetic/synthetic_trace.h"

namespace loupe::testing {

std::vector<std::string> WriteSampleSegments(const SampleSegments& sample) {
  format::WriterOptions options{.directory = sample.directory, .session_id = sample.session};
  options.max_file_size = sample.max_file_size;
  options.max_total_size = sample.max_total_size;
  options.rotation_period_ns = 0;
  options.block_bytes = sample.block_bytes;
  v1::SegmentHeader header;
  header.set_host(sample.host);
  header.set_boot_id("0f1e2d3c-4b5a-6978-8796-a5b4c3d2e1f0");
  header.set_session_id(sample.session);
  synthetic::Trace trace({.seed = sample.seed});
  const std::vector<format::Record> identity = trace.Identity();
  auto writer = format::SegmentWriter::Create(options, header, [&](format::SegmentWriter& w) {
    for (const format::Record& record : identity) w.AppendPreamble(record);
  });
  if (!writer.ok()) std::abort();
  for (uint64_t i = 0; i < sample.events; ++i) (void)(*writer)->Append(trace.Next());
  (void)(*writer)->Close();
  return (*writer)->sealed_paths();
}

}  // namespace loupe::testing
