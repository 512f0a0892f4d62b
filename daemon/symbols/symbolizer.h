// Resolves code locations to source frames on its own thread, off the event
// path: the session asks early (Prefetch, as addresses first appear), and at
// seal time only reads what is resolved (Lookup), so sealing never waits
// for DWARF. The cache lives as long as the session and is keyed by build
// id (else by the open file), so a library shared by many processes, or
// mapped again, is read once.
#ifndef LOUPE_DAEMON_SYMBOLS_SYMBOLIZER_H_
#define LOUPE_DAEMON_SYMBOLS_SYMBOLIZER_H_

#include <condition_variable>
#include <cstdint>
#include <deque>
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
  Symbolizer();  // reads /proc/kallsyms and starts the thread
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
  static std::string ObjectKey(const ObjectFile& object);
  void Run();

  const KernelSymbols kernel_;
  mutable std::mutex mutex_;
  std::condition_variable work_, idle_;
  std::deque<Request> queue_;
  bool busy_ = false;
  bool stop_ = false;
  absl::flat_hash_map<Key, std::vector<SourceFrame>> frames_;
  // Touched only by the thread (notes copied under the lock).
  std::map<std::string, std::unique_ptr<ElfSymbolizer>> files_;
  std::map<std::string, std::string> notes_;  // by object key
  std::thread thread_;
};

}  // namespace loupe::symbols

#endif  // LOUPE_DAEMON_SYMBOLS_SYMBOLIZER_H_
