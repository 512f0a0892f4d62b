#include "daemon/ship/segment_upload.h"

#include <fcntl.h>
#include <fmt/format.h>
#include <sys/stat.h>
#include <unistd.h>

#include <algorithm>
#include <thread>

#include "daemon/base/scoped_fd.h"
#include "daemon/base/status_util.h"
#include "daemon/format/segment_reader.h"
#include "daemon/ship/sha256.h"

namespace loupe::ship {
namespace {

// Opens the segment at `path`: not through a symlink, not blocking on a
// FIFO, and only a regular file with one link.
absl::StatusOr<ScopedFd> OpenSegmentFile(const std::string& path, struct stat* st) {
  ScopedFd fd(::open(path.c_str(), O_RDONLY | O_NOFOLLOW | O_NONBLOCK | O_CLOEXEC));
  if (!fd.valid()) return ErrnoStatus("open", path);
  if (fstat(fd.get(), st) != 0) return ErrnoStatus("stat", path);
  if (!S_ISREG(st->st_mode) || st->st_nlink != 1) {
    return absl::FailedPreconditionError(
        fmt::format("{} is not a regular file with one link: not shipped", path));
  }
  return fd;
}

// Everything is read from `fd` (through /proc/self/fd): the file announced
// is the file sent, whatever happens to its name meanwhile.
absl::StatusOr<v1::UploadBegin> DescribeOpen(const std::string& path, int fd,
                                             const struct stat& info) {
  const std::string fd_path = fmt::format("/proc/self/fd/{}", fd);
  // Errors name the segment, not the descriptor.
  auto named = [&](const absl::Status& status) {
    std::string message(status.message());
    if (const size_t at = message.find(fd_path); at != std::string::npos) {
      message.replace(at, fd_path.size(), path);
    }
    return absl::Status(status.code(), message);
  };
  absl::StatusOr<std::unique_ptr<format::SegmentReader>> reader =
      format::SegmentReader::Open(fd_path, /*read_chunk=*/16 << 10);
  if (!reader.ok()) return named(reader.status());
  const v1::SegmentHeader& header = (*reader)->header();
  v1::UploadBegin begin;
  begin.mutable_id()->set_host(header.host());
  begin.mutable_id()->set_boot_id(header.boot_id());
  begin.mutable_id()->set_session_id(header.session_id());
  begin.mutable_id()->set_sequence(header.sequence());
  begin.set_start_realtime_ns(header.clock().realtime_ns());
  begin.set_size(static_cast<uint64_t>(info.st_size));
  absl::StatusOr<std::string> digest = Sha256OfFile(fd_path);
  if (!digest.ok()) return named(digest.status());
  begin.set_sha256(*digest);
  return begin;
}

// Sleeps as long as sending `sent` bytes since `start` should take.
void Pace(uint64_t rate, uint64_t sent, std::chrono::steady_clock::time_point start) {
  if (rate == 0) return;
  const auto due = start + std::chrono::microseconds(sent * 1'000'000 / rate);
  std::this_thread::sleep_until(due);
}

}  // namespace

absl::StatusOr<v1::UploadBegin> DescribeSegment(const std::string& path) {
  struct stat info {};
  absl::StatusOr<ScopedFd> fd = OpenSegmentFile(path, &info);
  if (!fd.ok()) return fd.status();
  return DescribeOpen(path, fd->get(), info);
}

absl::StatusOr<UploadOutcome> UploadSegment(CollectorConnection& connection,
                                            const std::string& path,
                                            const UploadSettings& settings,
                                            const CancelHook& on_call) {
  // Read from one descriptor throughout: if the writer evicts the file
  // meanwhile, the bytes announced are still the bytes sent.
  struct stat info {};
  absl::StatusOr<ScopedFd> opened = OpenSegmentFile(path, &info);
  if (!opened.ok()) return opened.status();
  ScopedFd fd = *std::move(opened);
  absl::StatusOr<v1::UploadBegin> begin = DescribeOpen(path, fd.get(), info);
  if (!begin.ok()) return begin.status();

  UploadOutcome outcome;
  outcome.dev = info.st_dev;
  outcome.ino = info.st_ino;
  outcome.size = begin->size();
  std::unique_ptr<grpc::ClientContext> context = connection.NewContext(settings.timeout);
  if (on_call) on_call(context.get());
  struct CallEnd {
    const CancelHook& hook;
    ~CallEnd() {
      if (hook) hook(nullptr);
    }
  } call_end{on_call};
  auto stream = connection.stub().Upload(context.get());
  const std::string name = path.substr(path.find_last_of('/') + 1);

  auto fail = [&](std::string_view what) {
    stream->WritesDone();
    return connection.Explain(stream->Finish(), fmt::format("upload {}: {}", name, what));
  };

  v1::UploadRequest request;
  *request.mutable_begin() = *begin;
  if (!stream->Write(request)) return fail("the stream closed");
  v1::UploadResponse response;
  if (!stream->Read(&response)) return fail("no reply to the upload's start");
  if (response.has_stored()) {
    outcome.duplicate = true;
    outcome.location = response.stored().location();
    stream->WritesDone();
    grpc::Status finished = stream->Finish();
    if (!finished.ok()) return connection.Explain(finished, "upload " + name);
    return outcome;
  }
  uint64_t offset = response.progress().offset();
  if (offset > outcome.size) return fail("the collector claims more bytes than the file has");
  outcome.resumed_from = offset;

  // Rate-limited, send about a tenth of a second's worth at a time, so the
  // bytes flow evenly instead of in bursts of a whole chunk.
  const uint64_t rate = settings.rate_limit_bytes_per_s;
  const size_t chunk_bytes =
      rate == 0 ? settings.chunk_bytes
                : static_cast<size_t>(std::clamp<uint64_t>(rate / 10, 4096, settings.chunk_bytes));
  std::string buffer(chunk_bytes, '\0');
  const auto start = std::chrono::steady_clock::now();
  while (offset < outcome.size) {
    const size_t want = static_cast<size_t>(std::min<uint64_t>(buffer.size(), outcome.size - offset));
    const ssize_t got = ::pread(fd.get(), buffer.data(), want, static_cast<off_t>(offset));
    if (got <= 0) {
      context->TryCancel();
      stream->Finish();
      return got < 0 ? ErrnoStatus("read", path)
                     : absl::DataLossError(fmt::format("read {}: the file shrank", path));
    }
    request.Clear();
    v1::UploadChunk* chunk = request.mutable_chunk();
    chunk->set_offset(offset);
    chunk->set_data(buffer.data(), static_cast<size_t>(got));
    offset += static_cast<uint64_t>(got);
    chunk->set_last(offset == outcome.size);
    if (!stream->Write(request)) return fail(fmt::format("the stream broke at byte {}", offset));
    outcome.bytes_sent += static_cast<uint64_t>(got);
    Pace(rate, outcome.bytes_sent, start);
  }
  stream->WritesDone();
  while (stream->Read(&response)) {
    if (response.has_stored()) {
      outcome.location = response.stored().location();
      grpc::Status finished = stream->Finish();
      if (!finished.ok()) return connection.Explain(finished, "upload " + name);
      return outcome;
    }
  }
  grpc::Status finished = stream->Finish();
  if (finished.ok()) {
    return absl::UnavailableError(
        fmt::format("collector {}: upload {}: ended without an acknowledgement",
                    connection.address(), name));
  }
  return connection.Explain(finished, "upload " + name);
}

}  // namespace loupe::ship
