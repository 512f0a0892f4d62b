// Turns the records of the shim, USDT and uprobe programs into owned events:
// names read from the application by address, string values passed through
// the content policy, probe ids replaced by probe names. Cut strings and
// unreadable names or fields are counted, and the event is still kept.
#ifndef LOUPE_DAEMON_SESSION_PROBE_RECORD_DECODER_H_
#define LOUPE_DAEMON_SESSION_PROBE_RECORD_DECODER_H_

#include <cstdint>
#include <span>
#include <string>
#include <vector>

#include "daemon/session/content_policy.h"
#include "daemon/session/name_cache.h"
#include "daemon/session/owned_event.h"

namespace loupe::session {

struct ProbeLosses {
  uint64_t shim_strings_cut = 0;
  uint64_t usdt_strings_cut = 0;
  uint64_t shim_unreadable = 0;  // a name, field array or string value the BPF side or we could not read
  uint64_t usdt_unreadable = 0;
};

class ProbeRecordDecoder {
 public:
  // `probe_names` (by probe id) must outlive the decoder and its events.
  ProbeRecordDecoder(const std::vector<std::string>* probe_names, ContentPolicy policy)
      : probe_names_(probe_names), filter_(policy) {}

  static bool Handles(uint16_t type);
  // Clears `event` and decodes into it; false for a malformed record
  // (counted by the caller).
  bool Decode(std::span<const uint8_t> bytes, OwnedEvent* event);

  NameCache& names() { return names_; }
  const ProbeLosses& losses() const { return losses_; }

 private:
  // A view, good until the next call: most names are read once and kept.
  std::string_view NameAt(uint32_t tgid, uint64_t address);
  std::string_view ProbeName(uint32_t id);
  bool DecodeInstant(std::span<const uint8_t> bytes, OwnedEvent* event);
  bool DecodeUsdt(std::span<const uint8_t> bytes, OwnedEvent* event);

  const std::vector<std::string>* probe_names_;
  ContentFilter filter_;
  NameCache names_;
  ProbeLosses losses_;
  std::string unreadable_name_;  // what NameAt returned last for a name it could not read
};

}  // namespace loupe::session

#endif  // LOUPE_DAEMON_SESSION_PROBE_RECORD_DECODER_H_
