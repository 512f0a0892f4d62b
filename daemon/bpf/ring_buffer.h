// Owns a libbpf ring_buffer over one or more BPF ringbuf maps and drains
// them in batches. Programs submit with BPF_RB_NO_WAKEUP, so nothing wakes
// a waiter per event: the owner calls Drain() on its own schedule.
#ifndef LOUPE_DAEMON_BPF_RING_BUFFER_H_
#define LOUPE_DAEMON_BPF_RING_BUFFER_H_

#include <bpf/libbpf.h>

#include <cstddef>
#include <cstdint>
#include <functional>
#include <memory>
#include <span>

#include "absl/status/statusor.h"

namespace loupe::bpf {

class RingBuffer {
 public:
  // Called for each record, in the order the ring holds them.
  using Handler = std::function<void(std::span<const uint8_t> record)>;

  static absl::StatusOr<std::unique_ptr<RingBuffer>> Create(int map_fd, Handler handler);
  RingBuffer(const RingBuffer&) = delete;
  RingBuffer& operator=(const RingBuffer&) = delete;

  // Hands every record available now to the handler; returns how many.
  absl::StatusOr<size_t> Drain();

 private:
  struct Free {
    void operator()(ring_buffer* rb) const { ring_buffer__free(rb); }
  };
  explicit RingBuffer(Handler handler) : handler_(std::move(handler)) {}
  static int OnRecord(void* self, void* data, size_t size);

  Handler handler_;
  std::unique_ptr<ring_buffer, Free> ring_;
};

}  // namespace loupe::bpf

#endif  // LOUPE_DAEMON_BPF_RING_BUFFER_H_
