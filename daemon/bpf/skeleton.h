// A movable owner for a bpftool-generated skeleton: open, set load-time
// knobs, load, attach; destroyed (detaching everything) in the destructor,
// so a half-finished attach unwinds by itself.
#ifndef LOUPE_DAEMON_BPF_SKELETON_H_
#define LOUPE_DAEMON_BPF_SKELETON_H_

#include <fmt/format.h>

#include <cerrno>
#include <cstring>
#include <string_view>
#include <utility>

#include "absl/status/status.h"
#include "absl/status/statusor.h"

namespace loupe::bpf {

template <typename Skel, Skel* (*OpenFn)(), int (*LoadFn)(Skel*), int (*AttachFn)(Skel*),
          void (*DestroyFn)(Skel*)>
class Skeleton {
 public:
  static absl::StatusOr<Skeleton> Open(std::string_view name) {
    Skel* skel = OpenFn();
    if (skel == nullptr) {
      return absl::InternalError(fmt::format("open BPF object {}: {}", name, std::strerror(errno)));
    }
    return Skeleton(skel, name);
  }

  Skeleton(Skeleton&& other) noexcept
      : skel_(std::exchange(other.skel_, nullptr)), name_(other.name_) {}
  Skeleton& operator=(Skeleton&& other) noexcept {
    std::swap(skel_, other.skel_);
    name_ = other.name_;
    return *this;
  }
  Skeleton(const Skeleton&) = delete;
  Skeleton& operator=(const Skeleton&) = delete;
  ~Skeleton() {
    if (skel_ != nullptr) DestroyFn(skel_);
  }

  // Between Open and Load: rodata knobs, map sizes, programs to leave out.
  Skel* operator->() const { return skel_; }
  Skel* get() const { return skel_; }

  absl::Status Load() { return Check(LoadFn(skel_), "load"); }
  absl::Status Attach() { return Check(AttachFn(skel_), "attach"); }

 private:
  Skeleton(Skel* skel, std::string_view name) : skel_(skel), name_(name) {}
  absl::Status Check(int error, std::string_view step) const {
    if (error == 0) return absl::OkStatus();
    const int code = error < 0 ? -error : error;
    return absl::Status(code == EPERM || code == EACCES ? absl::StatusCode::kPermissionDenied
                                                        : absl::StatusCode::kInternal,
                        fmt::format("{} BPF programs {}: {}", step, name_, std::strerror(code)));
  }

  Skel* skel_;
  std::string_view name_;
};

}  // namespace loupe::bpf

#endif  // LOUPE_DAEMON_BPF_SKELETON_H_
