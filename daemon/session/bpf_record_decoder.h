// Turns the raw records of bpf/shared/records.h into owned events. Records
// that are too short for their type are counted, never read past their end.
#ifndef LOUPE_DAEMON_SESSION_BPF_RECORD_DECODER_H_
#define LOUPE_DAEMON_SESSION_BPF_RECORD_DECODER_H_

#include <cstdint>
#include <span>

#include "daemon/session/owned_event.h"

namespace loupe::session {

// Clears `event` and decodes into it; false for a malformed record
// (counted by the caller) or an unknown type.
bool DecodeBpfRecord(std::span<const uint8_t> bytes, OwnedEvent* event);

}  // namespace loupe::session

#endif  // LOUPE_DAEMON_SESSION_BPF_RECORD_DECODER_H_
