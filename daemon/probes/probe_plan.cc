#include "daemon/probes/probe_plan.h"

#include <fmt/format.h>
#include <sys/stat.h>
#include <unistd.h>

#include <array>
#include <cctype>
#include <fstream>
#include <map>
#include <memory>
#include <set>
#include <sstream>

#include "daemon/base/proc_root.h"
#include "daemon/base/status_util.h"
#include "daemon/probes/elf_file.h"
#include "daemon/probes/x86_sites.h"

namespace loupe::probes {
namespace {

constexpr std::array<std::pair<std::string_view, ProbeProgram>, 9> kShimProbes = {{
    {"span_begin", ProbeProgram::kShimSpanBegin},
    {"span_end", ProbeProgram::kShimSpanEnd},
    {"instant", ProbeProgram::kShimInstant},
    {"counter", ProbeProgram::kShimCounter},
    {"operation_begin", ProbeProgram::kShimOperationBegin},
    {"operation_end", ProbeProgram::kShimOperationEnd},
    {"operation_pass", ProbeProgram::kShimOperationPass},
    {"thread_name", ProbeProgram::kShimThreadName},
    {"trigger", ProbeProgram::kShimTrigger},
}};

std::optional<ProbeProgram> ShimProgram(const UsdtNote& note) {
  if (note.provider != "loupe") return std::nullopt;
  for (const auto& [name, program] : kShimProbes) {
    if (note.name == name) return program;
  }
  return std::nullopt;
}

std::string_view Basename(std::string_view path) {
  const size_t slash = path.rfind('/');
  return slash == std::string_view::npos ? path : path.substr(slash + 1);
}

// "libc" names libc.so.6 and libc-2.31.so; "app" names the executable app.
bool NamesObject(std::string_view target, std::string_view path) {
  const std::string_view base = Basename(path);
  if (base == target) return true;
  if (!base.starts_with(target) || base.size() == target.size()) return false;
  const char next = base[target.size()];
  return (next == '.' || next == '-') && base.find(".so") != std::string_view::npos;
}

// Whether `pid` was started by the name `target` though its executable is
// named otherwise: a symlink (/usr/bin/redis-server -> redis-check-rdb).
// The kernel names the process (comm, 15 bytes) after the path given to
// execve; argv[0] says the same unless the program rewrote it.
bool StartedAs(uint32_t pid, std::string_view target) {
  std::string comm;
  std::getline(std::ifstream(ProcPath(pid, "/comm")), comm);
  if (!comm.empty() && comm == target.substr(0, 15)) return true;
  std::string argv0;
  std::getline(std::ifstream(ProcPath(pid, "/cmdline")), argv0, '\0');
  return !argv0.empty() && Basename(argv0) == target;
}

// x86 instructions the kernel emulates at a uprobe (no single-step): the
// push of any general register (the push %r12..%r15 and %rbx that most
// functions without a frame pointer start with too; a probe there costs
// what one on push %rbp does, a quarter of a single-stepped one), nops.
bool EmulatedEntry(const std::vector<uint8_t>& bytes) {
  if (bytes.empty()) return false;
  const auto is_push = [](uint8_t opcode) { return opcode >= 0x50 && opcode <= 0x57; };
  if (is_push(bytes[0]) || bytes[0] == 0x90) return true;  // push %rax..%rdi, nop
  if (bytes.size() >= 2 && bytes[0] == 0x41 && is_push(bytes[1])) return true;  // push %r8..%r15
  static constexpr uint8_t kNop5[] = {0x0f, 0x1f, 0x44, 0x00, 0x00};
  return bytes.size() >= 5 && std::equal(kNop5, kNop5 + 5, bytes.begin());
}

// Functions of a runtime louped probes where returns are probed: where a
// call ends without returning.
struct RuntimeProbe {
  std::string_view name;  // the probe's, in the trace
  ProbeProgram program;
  std::vector<std::string_view> functions;
  bool (*is_runtime)(const ElfFile& file);
  std::string_view calls_left;  // the calls that cannot end without it
  // Whether a symbol is one of them (all such are probed; `functions` then
  // names them in messages); unset: each of `functions` by its name.
  bool (*is_function)(std::string_view symbol) = nullptr;
};

// A call a C++ exception unwinds ends where it is caught. The C++ runtime
// (libstdc++, or linked into the executable) calls __cxa_begin_catch at
// every catch, from the catching frame.
const RuntimeProbe kCatchProbe = {
    .name = kExceptionCaughtProbe,
    .program = ProbeProgram::kExceptionCatch,
    .functions = {"__cxa_begin_catch"},
    .is_runtime = [](const ElfFile&) { return true; },
    .calls_left = "calls a C++ exception unwinds",
};

// Whether `symbol` is std's `item` in module std::panicking::catch_unwind
// (std::panicking::try in older Rust), as legacy mangling spells it
// (_ZN3std9panicking…<item>17h<hash>E) or v0 (_R…_3std9panicking…<item>,
// then the end or, for a generic, its arguments), with or without LLVM's
// ".llvm.N" suffix. `item` is mangled too ("7cleanup"); nothing nested in
// it matches.
bool IsStdPanickingItem(std::string_view symbol, std::string_view item) {
  // Asked of every symbol of a program: most are no std::panicking item.
  if (symbol.find("3std9panicking") == std::string_view::npos) return false;
  symbol = symbol.substr(0, symbol.find(".llvm."));
  for (const std::string_view module : {"3std9panicking12catch_unwind", "3std9panicking3try"}) {
    const std::string path = fmt::format("{}{}", module, item);
    const std::string legacy = fmt::format("_ZN{}17h", path);
    if (symbol.starts_with(legacy) && symbol.size() == legacy.size() + 16 + 1 &&
        symbol.ends_with('E')) {
      return true;
    }
    const size_t at = symbol.starts_with("_R") ? symbol.find("_" + path) : std::string_view::npos;
    if (at == std::string_view::npos) continue;
    const size_t after = at + 1 + path.size();
    if (after == symbol.size() || !std::isdigit(static_cast<unsigned char>(symbol[after]))) {
      return true;
    }
  }
  return false;
}

// Where catch_unwind catches a panic: the catching frame calls do_catch (a
// generic, one per closure type, inlined when optimized), which calls
// cleanup, which frees the payload. Whichever the catching frame calls
// directly has its stack pointer at entry.
bool IsRustPanicCatch(std::string_view symbol) {
  return IsStdPanickingItem(symbol, "7cleanup") || IsStdPanickingItem(symbol, "8do_catch");
}

// A call a Rust panic unwinds ends where catch_unwind catches it (a
// thread's or a task's guard, a server's per-request one), in the program,
// which links std: IsRustPanicCatch.
const RuntimeProbe kPanicCatchProbe = {
    .name = kExceptionCaughtProbe,
    .program = ProbeProgram::kExceptionCatch,
    .functions = {"std::panicking::catch_unwind::{do_catch,cleanup}"},
    .is_runtime = [](const ElfFile& file) { return file.HasExceptionTables(); },
    .calls_left = "calls a Rust panic unwinds",
    .is_function = IsRustPanicCatch,
};

// A call a longjmp leaves ends at the jump: PostgreSQL's errors, Lua's,
// libpng's. Only glibc's jmp_buf layout is read (bpf/probes.bpf.c); its
// longjmp, _longjmp and siglongjmp are one function, __longjmp_chk their
// fortified twin.
const RuntimeProbe kLongjmpProbes = {
    .name = kLongjmpProbe,
    .program = ProbeProgram::kLongjmp,
    .functions = {"longjmp", "_longjmp", "siglongjmp", "__longjmp_chk"},
    .is_runtime =
        [](const ElfFile& file) {
          return file.FindSymbol("gnu_get_libc_version").has_value() ||
                 file.FindSymbol("__libc_siglongjmp").has_value();
        },
    .calls_left = "calls a longjmp leaves",
};

class Planner {
 public:
  Planner(const ProbeRequests& requests, bool shim, bool system_wide)
      : requests_(requests), shim_(shim), system_wide_(system_wide) {}

  void AddProcess(uint32_t pid) {
    map_files_.clear();
    const std::vector<std::string> objects = MappedObjects(pid, &map_files_);
    if (objects.empty()) {
      plan_.warnings.push_back(fmt::format("pid {}: cannot read its mappings", pid));
      return;
    }
    for (const std::string& object : objects) AddUsdtSites(pid, object);
    returns_probed_ = false;
    for (const UprobeRequest& request : requests_.uprobes) AddUprobe(pid, objects, request);
    if (returns_probed_) {
      AddRuntimeProbe(pid, objects, kCatchProbe);
      AddRuntimeProbe(pid, objects, kPanicCatchProbe);
      AddRuntimeProbe(pid, objects, kLongjmpProbes);
    }
  }

  ProbePlan Finish() {
    for (size_t i = 0; i < requests_.usdt.size(); ++i) {
      if (!usdt_matched_.contains(i)) {
        plan_.warnings.push_back(fmt::format(
            "--usdt '{}': no probe matches in the targets' executables and libraries",
            requests_.usdt[i].text));
      }
    }
    return std::move(plan_);
  }

 private:
  // An ELF file seen in an earlier target: what was planned for it.
  struct Planned {
    std::vector<ProbeAttachment> attachments;
  };

  // The very file the process maps (map_files: a chroot's, or one replaced
  // on disk since), else the path through the process's root (a caller
  // that is not root may not read map_files).
  const ElfFile* Open(uint32_t pid, const std::string& object) {
    const std::string through_root = ProcPath(pid, "/root" + object);
    std::string path = through_root;
    if (auto mapped = map_files_.find(object); mapped != map_files_.end()) {
      path = mapped->second;
    }
    auto it = files_.find(path);
    if (it != files_.end()) return it->second.get();
    absl::StatusOr<std::unique_ptr<ElfFile>> file = ElfFile::Open(path);
    if (!file.ok() && path != through_root) {
      if (auto fallback = ElfFile::Open(through_root); fallback.ok()) file = std::move(fallback);
    }
    if (!file.ok()) {
      plan_.warnings.push_back(std::string(MessageOf(file.status())));
      return files_.emplace(path, nullptr).first->second.get();
    }
    return files_.emplace(path, *std::move(file)).first->second.get();
  }

  // Reuses the plan for a file already planned in another target: the same
  // specs, attached for this pid too (or once for all when system-wide).
  bool Reuse(uint32_t pid, const std::string& path, const std::string& kind) {
    struct stat st;
    if (stat(path.c_str(), &st) != 0) return false;
    const auto key = std::tuple(st.st_dev, st.st_ino, kind);
    auto it = planned_.find(key);
    if (it == planned_.end()) {
      current_ = &planned_[key];
      return false;
    }
    current_ = nullptr;
    for (ProbeAttachment attachment : it->second.attachments) {
      NoteReturns(attachment);
      if (system_wide_) continue;
      attachment.pid = pid;
      plan_.attachments.push_back(attachment);
    }
    return true;
  }

  void Attach(const ProbeAttachment& attachment) {
    plan_.attachments.push_back(attachment);
    if (current_ != nullptr) current_->attachments.push_back(attachment);
    NoteReturns(attachment);
  }

  uint32_t ProbeId(const std::string& name) {
    auto [it, added] = probe_ids_.emplace(name, plan_.probe_names.size());
    if (added) {
      plan_.probe_names.push_back(name);
      plan_.probe_returns.push_back(false);
    }
    return it->second;
  }

  // Returns probed in this process too: the catch probe is needed here,
  // and the probe's calls are paired.
  void NoteReturns(const ProbeAttachment& attachment) {
    if (attachment.program != ProbeProgram::kUprobeReturn &&
        attachment.program != ProbeProgram::kUprobeReturnSite) {
      return;
    }
    returns_probed_ = true;
    plan_.probe_returns[attachment.cookie >> 8] = true;
  }

  void AddUsdtSites(uint32_t pid, const std::string& object) {
    const ElfFile* file = Open(pid, object);
    if (file == nullptr || Reuse(pid, file->path(), "usdt")) return;
    absl::StatusOr<std::vector<UsdtNote>> notes = file->UsdtNotes();
    if (!notes.ok()) {
      plan_.warnings.push_back(fmt::format("USDT probes of {} skipped: {}", object,
                                           MessageOf(notes.status())));
      return;
    }
    for (const UsdtNote& note : *notes) {
      if (shim_) {
        if (std::optional<ProbeProgram> program = ShimProgram(note)) {
          AddSite(pid, *file, object, note, *program, -1);
          ++plan_.shim_sites;
          continue;
        }
      }
      for (size_t i = 0; i < requests_.usdt.size(); ++i) {
        const UsdtRequest& request = requests_.usdt[i];
        if (GlobMatch(request.provider, note.provider) && GlobMatch(request.name, note.name)) {
          usdt_matched_.insert(i);
          AddSite(pid, *file, object, note, ProbeProgram::kUsdt, request.string_arg);
          break;
        }
      }
    }
  }

  void AddSite(uint32_t pid, const ElfFile& file, const std::string& object, const UsdtNote& note,
               ProbeProgram program, int string_arg) {
    const std::string probe = fmt::format("{}:{}", note.provider, note.name);
    auto warn = [&](std::string_view why) {
      plan_.warnings.push_back(
          fmt::format("USDT {} at {:#x} in {}: {}; site skipped", probe, note.pc, object, why));
    };
    // The newer "nop; nop5" sites are attached at the 5-byte nop.
    uint64_t address = note.pc;
    const std::vector<uint8_t> code = file.BytesAt(note.pc, 6);
    static constexpr uint8_t kNopNop5[] = {0x90, 0x0f, 0x1f, 0x44, 0x00, 0x00};
    if (code.size() == 6 && std::equal(code.begin(), code.end(), kNopNop5)) ++address;

    ProbeAttachment attachment{.program = program, .pid = pid};
    attachment.path = file.path();
    absl::StatusOr<uint64_t> offset = file.FileOffset(address);
    if (!offset.ok()) return warn(MessageOf(offset.status()));
    attachment.file_offset = *offset;
    if (note.semaphore != 0) {
      absl::StatusOr<uint64_t> semaphore = file.FileOffset(note.semaphore);
      if (!semaphore.ok()) return warn(MessageOf(semaphore.status()));
      attachment.semaphore_offset = *semaphore;
    }
    if (program == ProbeProgram::kUsdt) {
      absl::StatusOr<loupe_usdt_spec> spec = MakeSpec(file, note, address, string_arg);
      if (!spec.ok()) return warn(MessageOf(spec.status()));
      if (plan_.usdt_specs.size() >= LOUPE_USDT_MAX_SPECS) {
        return warn(fmt::format("more than {} USDT sites requested", LOUPE_USDT_MAX_SPECS));
      }
      spec->probe = ProbeId(probe);
      attachment.cookie = plan_.usdt_specs.size();
      plan_.usdt_specs.push_back(*spec);
    }
    Attach(attachment);
  }

  absl::StatusOr<loupe_usdt_spec> MakeSpec(const ElfFile& file, const UsdtNote& note,
                                           uint64_t address, int string_arg) {
    absl::StatusOr<std::vector<UsdtArg>> args = ParseUsdtArgs(note.args);
    if (!args.ok()) return args.status();
    if (string_arg >= static_cast<int>(args->size())) {
      return absl::InvalidArgumentError(
          fmt::format("has {} arguments, no arg{} to read a string from", args->size(),
                      string_arg));
    }
    loupe_usdt_spec spec{};
    spec.arg_count = static_cast<uint8_t>(args->size());
    spec.string_arg = static_cast<int8_t>(string_arg);
    for (size_t i = 0; i < args->size(); ++i) {
      const UsdtArg& arg = (*args)[i];
      loupe_usdt_arg& out = spec.args[i];
      out.size = arg.size;
      out.is_signed = arg.is_signed;
      out.reg_offset = arg.reg_offset;
      out.value = arg.value;
      switch (arg.kind) {
        case UsdtArgKind::kConstant:
          out.kind = LOUPE_USDT_CONST;
          break;
        case UsdtArgKind::kRegister:
          out.kind = LOUPE_USDT_REG;
          break;
        case UsdtArgKind::kMemory:
          out.kind = LOUPE_USDT_REG_DEREF;
          break;
        case UsdtArgKind::kRipRelative: {
          std::optional<ElfSymbol> symbol = file.FindSymbol(arg.symbol);
          if (!symbol) {
            return absl::NotFoundError(
                fmt::format("argument {} names symbol '{}', which the file lacks", i, arg.symbol));
          }
          // Relative to the probed address, which BPF sees as the ip.
          out.kind = LOUPE_USDT_IP_DEREF;
          out.value = static_cast<int64_t>(symbol->address + arg.value - address);
          break;
        }
      }
    }
    return spec;
  }

  void AddUprobe(uint32_t pid, const std::vector<std::string>& objects,
                 const UprobeRequest& request) {
    auto warn = [&](std::string_view why) {
      plan_.warnings.push_back(fmt::format("--uprobe '{}' in pid {}: {}", request.text, pid, why));
    };
    std::string object;
    if (request.target.find('/') != std::string::npos) {
      object = request.target;
    } else {
      for (const std::string& mapped : objects) {
        if (NamesObject(request.target, mapped)) {
          object = mapped;
          break;
        }
      }
      if (object.empty() && !objects.empty() && StartedAs(pid, request.target)) {
        object = objects.front();
      }
      if (object.empty()) {
        return warn(fmt::format("maps no executable or library named '{}'", request.target));
      }
    }
    const ElfFile* file = Open(pid, object);
    if (file == nullptr) return;
    const bool go = file->IsGo();
    if (request.with_return && go) {
      // The kernel's return probe swaps the return address on the stack for
      // its trampoline; Go's runtime reads return addresses when it grows a
      // goroutine's stack or walks it (GC, panics) and dies on the swapped
      // one ("fatal error: unknown caller pc"). Never placed, entry or return.
      return warn(fmt::format(
          "{} is a Go program: a return probe would crash it (Go's runtime reads the "
          "return addresses a return probe replaces); not placed — probe the entry only "
          "(without %return)",
          object));
    }
    if (Reuse(pid, file->path(), request.text)) return;
    // How messages name the function.
    std::string function = request.symbol;
    std::optional<ElfSymbol> symbol;
    if (request.frame_offset) {
      absl::StatusOr<ElfFunction> found = file->FunctionAt(*request.frame_offset);
      if (!found.ok()) return warn(MessageOf(found.status()));
      symbol = found->symbol;
      function = found->name;
      if (function.empty()) {
        absl::StatusOr<uint64_t> start = file->FileOffset(symbol->address);
        function = fmt::format("the function at {}+{:#x}", Basename(object),
                               start.ok() ? *start : *request.frame_offset);
      }
    } else {
      symbol = file->FindSymbol(request.symbol);
    }
    if (!symbol) {
      return warn(fmt::format("no symbol '{}' in {}{}", request.symbol, object,
                              file->HasSymbolTable()
                                  ? ""
                                  : " (it has no .symtab: stripped, only exported symbols remain): "
                                    "a function without a symbol is probed by a frame of it as "
                                    "stacks print it, TARGET+0xOFFSET"));
    }
    if (symbol->size != 0 && request.offset >= symbol->size) {
      return warn(fmt::format("offset {:#x} is past the end of {} ({} bytes)", request.offset,
                              function, symbol->size));
    }
    uint64_t entry = symbol->address + request.offset;
    if (go && request.offset == 0) {
      // Past the stack check: growing the stack restarts the function at
      // its first instruction, which a probe there would count twice.
      const std::vector<uint8_t> start = file->BytesAt(entry, 64);
      if (std::optional<uint64_t> checked = GoStackCheckEnd({entry, start})) entry = *checked;
    }
    absl::StatusOr<uint64_t> offset = file->FileOffset(entry);
    if (!offset.ok()) return warn(MessageOf(offset.status()));
    if (absl::Status probeable = CanCarryUprobe({entry, file->BytesAt(entry, 16)});
        !probeable.ok()) {
      return warn(fmt::format("not placed: {}; choose another instruction with +OFFSET",
                              MessageOf(probeable)));
    }
    // Said only of an entry that is placed.
    const bool slow_entry = !EmulatedEntry(file->BytesAt(entry, 5));
    auto attach_entry = [&](const ProbeAttachment& attachment) {
      Attach(attachment);
      if (!slow_entry) return;
      plan_.slow_entries.push_back(request.frame_offset ? fmt::format("{} in {}", function, object)
                                                        : fmt::format("{}:{}", object, function));
    };
    const std::string name =
        request.frame_offset ? request.frame
        : request.offset == 0
            ? fmt::format("{}:{}", request.target, function)
            : fmt::format("{}:{}+{:#x}", request.target, function, request.offset);
    const uint64_t id = ProbeId(name);
    ProbeAttachment attachment{.program = ProbeProgram::kUprobeEntry,
                               .path = file->path(),
                               .file_offset = *offset,
                               .cookie = id << 8 | request.arg_count |
                                         (go ? LOUPE_UPROBE_GO_ABI : 0u),
                               .pid = pid};
    if (!request.with_return) {
      attach_entry(attachment);
      return;
    }
    // The kernel's return probe would kill the program the first time an
    // exception unwinds through the call, whatever file the function is in
    // (a C library's function that calls back into C++): its returns are
    // probed at its own return instructions instead (x86_sites.h).
    absl::StatusOr<ReturnSites> sites = ReturnSitesOf(*file, function, *symbol);
    if (sites.ok() && sites->addresses.empty()) {
      // Its callee's return is its own: only the kernel's probe would see
      // it, and a C callee that calls back into C++ that throws dies of it.
      return warn(sites->tail_calls > 0
                      ? fmt::format("not placed: {} has no return instruction of its own (it "
                                    "leaves only by tail calls, {} of them): probe the function "
                                    "it jumps to",
                                    function, sites->tail_calls)
                      : fmt::format("not placed: {} has no return instruction: it never returns "
                                    "(it throws, exits or loops); probe its entry alone",
                                    function));
    }
    if (!sites.ok() && file->HasExceptionTables()) {
      return warn(fmt::format("not placed: its returns cannot be probed safely ({}), and the "
                              "kernel's return probe would crash the program when an exception "
                              "unwinds through {} ({} has exception tables)",
                              MessageOf(sites.status()), function, object));
    }
    if (!sites.ok()) {
      // A file of C code without exception tables is still unwound through
      // when it calls back into code that throws, or is the unwinder itself
      // (libgcc_s's _Unwind_RaiseException: the first throw would die).
      if (std::optional<std::string> unwinder = UnwinderOf(pid, objects)) {
        return warn(fmt::format("not placed: its returns cannot be probed safely ({}), and the "
                                "kernel's return probe would crash the program when an exception "
                                "unwinds through {} (the process can throw: {})",
                                MessageOf(sites.status()), function, *unwinder));
      }
    }
    attach_entry(attachment);
    attachment.cookie = id << 8;
    if (!sites.ok()) {
      // No exception tables: no exception is expected through it, and the
      // kernel's probe sees every return, tail calls' too.
      warn(fmt::format("its returns are probed by the kernel's return probe ({}), which kills "
                       "the program if a C++ exception ever unwinds through {}",
                       MessageOf(sites.status()), function));
      attachment.program = ProbeProgram::kUprobeReturn;
      Attach(attachment);
      return;
    }
    attachment.program = ProbeProgram::kUprobeReturnSite;
    for (uint64_t address : sites->addresses) {
      absl::StatusOr<uint64_t> site = file->FileOffset(address);
      if (!site.ok()) return warn(MessageOf(site.status()));
      attachment.file_offset = *site;
      Attach(attachment);
    }
    if (sites->tail_calls > 0) {
      // Without .symtab its .cold part has no name: jumps there look the same.
      warn(fmt::format("{} can leave by {} jump(s) out of its code ({}): its returns are probed "
                       "at its own return instructions, so calls that leave by one read as "
                       "begun without an end",
                       function, sites->tail_calls,
                       file->HasSymbolTable()
                           ? "tail calls, whose callee's return is the call's"
                           : "tail calls, or, the file having no .symtab, jumps to its unnamed "
                             "cold part, whose return instructions are not probed either"));
    }
  }

  // The first of the process's files that can unwind a stack (a C++
  // runtime, or the unwinder it uses), named with that function; none for
  // a process that cannot throw.
  std::optional<std::string> UnwinderOf(uint32_t pid, const std::vector<std::string>& objects) {
    for (const std::string& object : objects) {
      const ElfFile* file = Open(pid, object);
      if (file == nullptr) continue;
      for (const char* function : {"_Unwind_RaiseException", "__cxa_throw"}) {
        if (file->FindSymbol(function)) return fmt::format("{} defines {}", object, function);
      }
    }
    return std::nullopt;
  }

  // Probes the functions of a process's runtime where calls end without a
  // return (kCatchProbe, kPanicCatchProbe, kLongjmpProbes): each of the
  // probe's functions in the first of its files that defines one and is
  // that runtime's, each address once (aliases share one).
  void AddRuntimeProbe(uint32_t pid, const std::vector<std::string>& objects,
                       const RuntimeProbe& probe) {
    for (const std::string& object : objects) {
      const ElfFile* file = Open(pid, object);
      if (file == nullptr || !probe.is_runtime(*file)) continue;
      std::map<uint64_t, std::string> sites;
      if (probe.is_function != nullptr) {
        for (const ElfSymbol& symbol : file->SymbolsWhere(probe.is_function)) {
          sites.try_emplace(symbol.address, probe.functions.front());
        }
      } else {
        for (const std::string_view function : probe.functions) {
          std::optional<ElfSymbol> symbol = file->FindSymbol(std::string(function));
          if (symbol) sites.try_emplace(symbol->address, function);
        }
      }
      if (sites.empty()) continue;
      // Planned per runtime: C++'s catch and Rust's share a name in the trace,
      // and one file may link both.
      if (Reuse(pid, file->path(), fmt::format("{} {}", probe.name, probe.functions.front()))) {
        return;
      }
      for (const auto& [address, function] : sites) {
        absl::Status placeable = CanCarryUprobe({address, file->BytesAt(address, 16)});
        absl::StatusOr<uint64_t> offset = file->FileOffset(address);
        if (placeable.ok() && !offset.ok()) placeable = offset.status();
        if (!placeable.ok()) {
          plan_.warnings.push_back(fmt::format("pid {}: {} in {} not probed ({}): {} read as begun "
                                               "without an end",
                                               pid, function, object, MessageOf(placeable),
                                               probe.calls_left));
          continue;
        }
        Attach({.program = probe.program,
                .path = file->path(),
                .file_offset = *offset,
                .cookie = uint64_t{ProbeId(std::string(probe.name))} << 8,
                .pid = pid});
      }
      return;
    }
  }

  static absl::StatusOr<ReturnSites> ReturnSitesOf(const ElfFile& file, const std::string& name,
                                                   const ElfSymbol& symbol) {
    if (symbol.size == 0) return absl::InvalidArgumentError("its symbol has no size");
    const std::vector<uint8_t> code = file.BytesAt(symbol.address, symbol.size);
    std::vector<uint8_t> cold_code;
    CodeRange cold;
    if (std::optional<ElfSymbol> part = file.FindSymbol(name + ".cold"); part && part->size != 0) {
      cold_code = file.BytesAt(part->address, part->size);
      cold = {part->address, cold_code};
    }
    return FindReturnSites({symbol.address, code}, cold);
  }

  const ProbeRequests& requests_;
  const bool shim_;
  const bool system_wide_;
  ProbePlan plan_;
  std::map<std::string, std::unique_ptr<ElfFile>> files_;
  std::map<std::tuple<dev_t, ino_t, std::string>, Planned> planned_;
  Planned* current_ = nullptr;
  std::map<std::string, uint32_t> probe_ids_;
  std::set<size_t> usdt_matched_;
  // Whether the process being planned had a function's returns probed at
  // its return instructions.
  bool returns_probed_ = false;
  // The process being planned's mapped files: path -> its map_files link.
  std::map<std::string, std::string> map_files_;
};

}  // namespace

namespace {

// A file replaced on disk since it was mapped (an upgraded package) is
// named with this suffix; the mapping is still that file.
std::string WithoutDeleted(std::string path) {
  static constexpr std::string_view kDeleted = " (deleted)";
  if (path.ends_with(kDeleted)) path.resize(path.size() - kDeleted.size());
  return path;
}

}  // namespace

std::vector<std::string> MappedObjects(uint32_t pid, std::map<std::string, std::string>* map_files) {
  std::vector<std::string> objects;
  char exe[4096];
  const ssize_t n = readlink(ProcPath(pid, "/exe").c_str(), exe, sizeof exe - 1);
  if (n <= 0) return objects;
  objects.push_back(WithoutDeleted(std::string(exe, static_cast<size_t>(n))));
  std::ifstream maps(ProcPath(pid, "/maps"));
  std::set<std::string> seen{objects.front()};
  std::string line;
  while (std::getline(maps, line)) {
    std::istringstream fields(line);
    std::string range, perms, offset, device, inode, path;
    fields >> range >> perms >> offset >> device >> inode;
    std::getline(fields >> std::ws, path);
    if (perms.size() < 3 || perms[2] != 'x' || !path.starts_with('/')) continue;
    path = WithoutDeleted(std::move(path));
    if (map_files != nullptr) map_files->try_emplace(path, ProcPath(pid, "/map_files/" + range));
    if (seen.insert(path).second) objects.push_back(path);
  }
  return objects;
}

absl::Status ParseProbeRequests(const std::vector<std::string>& usdt,
                                const std::vector<std::string>& uprobes, ProbeRequests* out) {
  for (const std::string& text : usdt) {
    absl::StatusOr<UsdtRequest> request = ParseUsdtRequest(text);
    if (!request.ok()) return request.status();
    out->usdt.push_back(*std::move(request));
  }
  for (const std::string& text : uprobes) {
    absl::StatusOr<UprobeRequest> request = ParseUprobeRequest(text);
    if (!request.ok()) return request.status();
    out->uprobes.push_back(*std::move(request));
  }
  return absl::OkStatus();
}

ProbePlan PlanProbes(const std::vector<uint32_t>& pids, const ProbeRequests& requests, bool shim,
                     bool system_wide) {
  const bool per_pid = requests.credentials && !requests.credentials->root();
  ProbePlan refused;
  refused.per_pid = per_pid;
  if (per_pid && !PidsAreLocal()) {
    // perf_event_open numbers pids in louped's namespace; with proc_root set
    // the targets are known by host pid only, so they could be probed only
    // in every process, which is not for a caller that is not root.
    if (shim || !requests.usdt.empty() || !requests.uprobes.empty()) {
      refused.warnings.push_back(
          "uprobes, USDT and the shim's probes are off: for a caller that is not root they attach "
          "per process, which this louped (proc_root set, pids not its own) cannot do");
    }
    return refused;
  }
  // Files are opened, and /proc read, as the caller (ELF files through
  // /proc/PID/root, whose path the caller may not be allowed to walk).
  ScopedFsCredentials as_caller;
  if (absl::Status status = as_caller.Take(requests.credentials); !status.ok()) {
    refused.warnings.push_back(
        fmt::format("uprobes, USDT and the shim's probes are off: {}", MessageOf(status)));
    return refused;
  }
  Planner planner(requests, shim, system_wide && !per_pid);
  for (uint32_t pid : pids) planner.AddProcess(pid);
  ProbePlan plan = planner.Finish();
  plan.per_pid = per_pid;
  plan.credentials = requests.credentials;
  if (per_pid && system_wide && !plan.attachments.empty()) {
    plan.warnings.push_back(
        "--follow-children: probes are attached per target process for a caller that is not "
        "root; children started later get no uprobes, USDT or shim probes (their scheduling is "
        "still traced)");
  }
  return plan;
}

}  // namespace loupe::probes
