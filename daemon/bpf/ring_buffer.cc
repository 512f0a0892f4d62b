#include "daemon/bpf/ring_buffer.h"

#include <fmt/format.h>

#include <cerrno>
#include <cstring>

namespace loupe::bpf {

absl::StatusOr<std::unique_ptr<RingBuffer>> RingBuffer::Create(int map_fd, Handler handler) {
  std::unique_ptr<RingBuffer> ring(new RingBuffer(std::move(handler)));
  ring->ring_.reset(ring_buffer__new(map_fd, &RingBuffer::OnRecord, ring.get(), nullptr));
  if (!ring->ring_) {
    return absl::InternalError(
        fmt::format("open ring buffer map fd {}: {}", map_fd, std::strerror(errno)));
  }
  return ring;
}

int RingBuffer::OnRecord(void* self, void* data, size_t size) {
  static_cast<RingBuffer*>(self)->handler_(
      std::span<const uint8_t>(static_cast<const uint8_t*>(data), size));
  return 0;
}

absl::StatusOr<size_t> RingBuffer::Drain() {
  const int n = ring_buffer__consume(ring_.get());
  if (n < 0) {
    return absl::InternalError(fmt::format("drain ring buffer: {}", std::strerror(-n)));
  }
  return static_cast<size_t>(n);
}

}  // namespace loupe::bpf
