#include "analysis/stack_profile.h"

#include <fmt/format.h>

#include <algorithm>
#include <variant>

#include "absl/hash/hash.h"
#include "daemon/base/overloaded.h"

namespace loupe::analysis {

bool IsSystemPath(std::string_view path) {
  // Code the kernel maps into every process: the vDSO's clock reads, the
  // uprobes' single-step and return trampolines.
  if (path.starts_with("[vdso") || path.starts_with("[vsyscall") ||
      path.starts_with("[uprobes")) {
    return true;
  }
  if (path.find("/ld-linux") != std::string_view::npos) return true;
  // A shared library in a system library directory (or its multiarch
  // one): libc, libstdc++, libssl. Programs live under /usr/lib too
  // (/usr/lib/postgresql/15/bin/postgres), as do an application's own
  // plugins deeper down: those are the application's code.
  const size_t slash = path.rfind('/');
  if (slash == std::string_view::npos) return false;
  const std::string_view dir = path.substr(0, slash), file = path.substr(slash + 1);
  if (file.find(".so") == std::string_view::npos) return false;
  for (std::string_view lib : {"/lib", "/lib64", "/usr/lib", "/usr/lib64"}) {
    if (dir == lib) return true;
    if (dir.starts_with(lib) && dir[lib.size()] == '/') {
      const std::string_view sub = dir.substr(lib.size() + 1);
      if (sub.find('/') == std::string_view::npos && sub.find("-linux-") != std::string_view::npos) {
        return true;
      }
    }
  }
  return false;
}

bool InUprobeHandling(std::span<const NamedFrame> frames) {
  // The breakpoint's trap and what it runs, not every function named for
  // uprobes: uprobe_mmap and uprobe_start_dup_mmap run in any mmap or fork.
  // The debug trap that follows the kernel's single step of a probed
  // instruction (exc_debug_user) is a debugger's too, where one steps a
  // traced program. sys_uprobe and sys_uretprobe are the syscalls the
  // kernel's trampolines make for an optimized entry probe and a return.
  static constexpr std::string_view kHandling[] = {
      "handle_swbp", "uprobe_notify_resume", "uprobe_dispatcher", "uretprobe_dispatcher",
      "uprobe_prog_run", "arch_uprobe_", "hprobe_", "handle_trampoline", "uprobe_handle_trampoline",
      "handle_syscall_uprobe", "find_active_uprobe", "uprobe_multi_link_handler",
      "sstep_notifier", "exc_debug_user", "do_int3_user", "sys_uprobe", "sys_uretprobe"};
  for (size_t i = 0; i < frames.size(); ++i) {
    const NamedFrame& frame = frames[i];
    if (!frame.kernel) {
      // The innermost user frame in the kernel's trampolines or single-step
      // area: the probe's own code, or the syscall it made.
      return frame.function.starts_with("[uprobes");
    }
    for (std::string_view handling : kHandling) {
      if (frame.function.find(handling) != std::string::npos) return true;
    }
    // A breakpoint or single-step trap taken from user mode (its entry is
    // the outermost kernel frame; one taken in the kernel unwinds on into
    // the kernel code it stopped). The handler runs with interrupts off, so
    // the timer's sample waits and lands on the trap's way out, after the
    // handler's frames are gone.
    const bool outermost = i + 1 == frames.size() || !frames[i + 1].kernel;
    if (outermost && (frame.function == "asm_exc_int3" || frame.function == "asm_exc_debug")) {
      return true;
    }
  }
  return false;
}

bool IsTracerFrame(const NamedFrame& frame) {
  const std::string& f = frame.function;
  return frame.kernel && (f.starts_with("bpf_prog_") || f.starts_with("bpf_trace_run") ||
                          f.starts_with("__traceiter_") || f.starts_with("__bpf_trace_") ||
                          f.starts_with("bpf_get_stack") || f.starts_with("__bpf_get_stack"));
}

uint32_t StackProfile::Intern(uint32_t pid, format::Stack user, format::Stack kernel) {
  if (user.empty() && kernel.empty()) return kNoStack;
  const uint64_t hash = absl::HashOf(pid, absl::MakeConstSpan(user.data(), user.size()),
                                     absl::MakeConstSpan(kernel.data(), kernel.size()));
  auto [first, added] = ids_by_hash_.try_emplace(hash, 0);
  for (uint32_t id = first->second; id != 0; id = next_with_hash_[id]) {
    const StackKey& key = keys_[id];
    if (key.pid == pid && std::ranges::equal(key.user, user) &&
        std::ranges::equal(key.kernel, kernel)) {
      return id;
    }
  }
  const uint32_t id = static_cast<uint32_t>(keys_.size());
  keys_.push_back({pid, {user.begin(), user.end()}, {kernel.begin(), kernel.end()}});
  totals_.emplace_back();
  next_with_hash_.push_back(first->second);
  first->second = id;
  return id;
}

uint32_t StackProfile::Add(const format::Record& record) {
  using namespace format;
  threads_.Observe(record);
  return std::visit(
      Overloaded{
          [&](const CpuSample& sample) {
            ++samples_;
            const uint32_t id = Intern(threads_.PidOf(record.tid), sample.user_stack, sample.kernel_stack);
            ++totals_[id].samples;
            return id;
          },
          [&](const OffCpu& off) {
            const uint32_t id = Intern(threads_.PidOf(record.tid), off.user_stack, off.kernel_stack);
            totals_[id].off_cpu_ns += off.duration_ns;
            return id;
          },
          // Carry no stack.
          [](const ClockSync&) { return kNoStack; }, [](const ProcessInfo&) { return kNoStack; },
          [](const ThreadInfo&) { return kNoStack; }, [](const ProcessFork&) { return kNoStack; },
          [](const ProcessExec&) { return kNoStack; }, [](const ThreadExit&) { return kNoStack; },
          [](const SchedSwitch&) { return kNoStack; }, [](const SchedWakeup&) { return kNoStack; },
          [](const SchedMigrate&) { return kNoStack; },
          [](const UprobeEntry&) { return kNoStack; },
          [](const UprobeReturn&) { return kNoStack; }, [](const UsdtEvent&) { return kNoStack; },
          [](const SpanBegin&) { return kNoStack; }, [](const SpanEnd&) { return kNoStack; },
          [](const Instant&) { return kNoStack; }, [](const Counter&) { return kNoStack; },
          [](const OperationBegin&) { return kNoStack; },
          [](const OperationEnd&) { return kNoStack; }, [](const Loss&) { return kNoStack; }},
      record.payload);
}

void StackProfile::AddSymbols(const v1::SymbolTable& table) {
  const int base = static_cast<int>(mappings_.size());
  mappings_.insert(mappings_.end(), table.mappings().begin(), table.mappings().end());
  for (const auto& address : table.addresses()) {
    Symbol symbol;
    bool system = false;
    if (address.mapping() != 0) {
      symbol.mapping = base + static_cast<int>(address.mapping()) - 1;
      if (symbol.mapping < static_cast<int>(mappings_.size())) {
        system = IsSystemPath(mappings_[symbol.mapping].path());
      }
    }
    for (const auto& frame : address.frames()) {
      symbol.frames.push_back(
          {frame.function(), frame.file(), frame.line(), address.pid() == 0, system});
    }
    symbols_[{address.pid(), address.address()}] = std::move(symbol);
  }
}

const v1::SymbolTable::Mapping* StackProfile::MappingOf(uint32_t pid, uint64_t address) const {
  auto it = symbols_.find({pid, address});
  if (it == symbols_.end() || it->second.mapping < 0 ||
      it->second.mapping >= static_cast<int>(mappings_.size())) {
    return nullptr;
  }
  return &mappings_[it->second.mapping];
}

std::vector<NamedFrame> StackProfile::Frames(uint32_t pid, uint64_t address, bool kernel) const {
  // System code in the sense that it is never the application's function.
  if (!kernel && address == format::kUnwindStoppedFrame) {
    return {{std::string(kUnwindStoppedName), "", 0, false, true}};
  }
  auto it = symbols_.find({kernel ? 0 : pid, address});
  if (it != symbols_.end()) {
    std::vector<NamedFrame> frames;
    for (const NamedFrame& frame : it->second.frames) {
      if (!frame.function.empty()) frames.push_back(frame);
    }
    if (!frames.empty()) return frames;
  }
  if (const v1::SymbolTable::Mapping* mapping = kernel ? nullptr : MappingOf(pid, address)) {
    const std::string& path = mapping->path();
    if (path.empty()) {
      // JIT-compiled code without a perf map, or other code in anonymous
      // memory: no file to count from, and two such mappings' offsets
      // would merge. Its address is its name.
      return {{fmt::format("[JIT/anonymous code] {:#x}", address), "", 0, false, false}};
    }
    return {{fmt::format("{}+{:#x}", path.substr(path.rfind('/') + 1),
                         address - mapping->start() + mapping->file_offset()),
             "", 0, false, IsSystemPath(path)}};
  }
  return {{fmt::format("{:#x}", address), "", 0, kernel}};
}

std::vector<NamedFrame> StackProfile::StackFrames(uint32_t id) const {
  std::vector<NamedFrame> frames;
  if (id == kNoStack || id >= keys_.size()) return frames;
  const StackKey& key = keys_[id];
  for (uint64_t address : key.kernel) {
    for (NamedFrame& frame : Frames(key.pid, address, true)) {
      frame.kernel = true;
      if (!IsTracerFrame(frame)) frames.push_back(std::move(frame));
    }
  }
  for (uint64_t address : key.user) {
    for (NamedFrame& frame : Frames(key.pid, address, false)) frames.push_back(std::move(frame));
  }
  return frames;
}

std::string StackProfile::InnermostApplicationFunction(uint32_t id) const {
  const std::vector<NamedFrame> frames = StackFrames(id);
  // The standard library's templates are compiled into the application
  // but are not its code: std::future<long>::get() says less than its caller.
  const auto library_template = [](const std::string& function) {
    return function.starts_with("std::") || function.starts_with("__gnu_cxx::");
  };
  for (const NamedFrame& frame : frames) {
    if (!frame.kernel && !frame.system && !library_template(frame.function)) return frame.function;
  }
  for (const NamedFrame& frame : frames) {
    if (!frame.kernel && !frame.system) return frame.function;
  }
  for (const NamedFrame& frame : frames) {
    if (!frame.kernel && frame.function != kUnwindStoppedName) return frame.function;
  }
  return frames.empty() ? "" : frames.front().function;
}

}  // namespace loupe::analysis
