// Resolves code locations to source frames on its own thread, off the event
// path: the session asks early (Prefetch, as addresses first appear), and at
// seal time only reads what is resolved (Lookup), so sealing never waits
// for DWARF. The cache lives as long as the session and is keyed by build
// id (else by the open file), so a library shared by many processes, or
// mapped again, is read once.
#ifndef LOUPE_DAEMON_SYMBOLS_SYMBOLIZER_H_
#define LOUPE_DAEMON_SYMBOLS_SYMBOLIZER_H_

#include <chrono>
#include <condition_variable>
#include <cstdint>
#include <deque>
#include <functional>
#include <map>
#include <memory>
#include <mutex>
#include <optional>
#include <string>
#include <thread>
#include <vector>

#include "absl/container/flat_hash_map.h"
#include "daemon/symbols/elf_symbolizer.h"
#include "daemon/symbols/kernel_symbols.h"
#include "daemon/symbols/object_file.h"

namespace loupe::symbols {

class Symbolizer {
 public:
  // Resolves one location of an object; the default reads the file's DWARF
  // (an ElfSymbolizer per object, kept for the session). Tests pass their
  // own, e.g. one that hangs as a slow debuginfod download would.
  using Resolver = std::function<std::vector<SourceFrame>(const ObjectFile& object,
                                                          uint64_t file_offset)>;
  // How long the destructor waits for a job in progress before leaving the
  // thread to finish it alone.
  static constexpr std::chrono::milliseconds kStopWait{2000};

  // Reads /proc/kallsyms and starts the thread.
  explicit Symbolizer(Resolver resolver = {}, std::chrono::milliseconds stop_wait = kStopWait);
  // Stops the thread. One stuck in a long job (a large DWARF file, a
  // debuginfod download) is waited for at most `stop_wait`, then detached
  // with a warning (spdlog's default logger): it owns what it still
  // touches, and its result is dropped. A session's end never hangs on it.
  ~Symbolizer();
  Symbolizer(const Symbolizer&) = delete;
  Symbolizer& operator=(const Symbolizer&) = delete;

  void Prefetch(const std::shared_ptr<const ObjectFile>& object, uint64_t file_offset);
  // The frames of a location if resolved (possibly none known), else nullopt.
  std::optional<std::vector<SourceFrame>> Lookup(const ObjectFile& object, uint64_t file_offset);
  std::string KernelName(uint64_t address) const { return kernel_.Name(address); }
  // Blocks until everything prefetched is resolved or `timeout_ns` passes.
  bool WaitIdle(uint64_t timeout_ns);
  // What limits the answers, per file ("...: no debug information"), and the kernel's.
  std::vector<std::string> Notes();
  uint64_t resolved() const;

 private:
  struct Key {
    std::string object;  // build id, or the object's address when it has none
    uint64_t offset;
    bool operator==(const Key&) const = default;
    template <typename H>
    friend H AbslHashValue(H h, const Key& k) {
      return H::combine(std::move(h), k.object, k.offset);
    }
  };
  struct Request {
    std::shared_ptr<const ObjectFile> object;
    uint64_t offset;
  };
  // Everything the thread touches, shared with it: a thread left to finish
  // a long job after the Symbolizer is gone still owns what it uses.
  struct State {
    std::mutex mutex;
    std::condition_variable work, idle, exited_changed;
    std::deque<Request> queue;
    bool busy = false;
    bool stop = false;
    bool exited = false;
    absl::flat_hash_map<Key, std::vector<SourceFrame>> frames;
    // Touched only by the thread (notes copied under the lock).
    std::map<std::string, std::unique_ptr<ElfSymbolizer>> files;
    std::map<std::string, std::string> notes;  // by object key
    Resolver resolver;
  };
  static std::string ObjectKey(const ObjectFile& object);
  static void Run(const std::shared_ptr<State>& state);

  const KernelSymbols kernel_;
  const std::chrono::milliseconds stop_wait_;
  std::shared_ptr<State> state_;
  std::thread thread_;
};

}  // namespace loupe::symbols

#endif  // LOUPE_DAEMON_SYMBOLS_SYMBOLIZER_H_
