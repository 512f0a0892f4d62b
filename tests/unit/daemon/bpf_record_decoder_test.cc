// Records from the BPF ring, decoded: whole records come back as events;
// short, oversized, or self-contradicting ones are refused (the session
// counts them as malformed losses), never read past their end.
#include "daemon/session/bpf_record_decoder.h"

#include <gtest/gtest.h>

#include <cstring>
#include <optional>
#include <vector>

#include "shared/records.h"

namespace loupe::session {
namespace {

template <typename T>
std::vector<uint8_t> Bytes(const T& record, size_t size = sizeof(T)) {
  std::vector<uint8_t> bytes(size);
  std::memcpy(bytes.data(), &record, std::min(size, sizeof(T)));
  return bytes;
}

// The decoder's event as a value; nullopt when it refused the record.
std::optional<OwnedEvent> Decode(std::span<const uint8_t> bytes) {
  OwnedEvent event;
  if (!DecodeBpfRecord(bytes, &event)) return std::nullopt;
  return event;
}

loupe_sched_switch Switch(uint16_t user, uint16_t kernel) {
  loupe_sched_switch r{};
  r.hdr = {LOUPE_REC_SCHED_SWITCH, 0, 1, 5000};
  r.prev_tid = 10;
  r.prev_tgid = 10;
  r.next_tid = 20;
  r.next_tgid = 20;
  r.prev_state = 1;
  r.user_depth = user;
  r.kernel_depth = kernel;
  for (int i = 0; i < user + kernel; ++i) r.frames[i] = 0x1000 + i;
  return r;
}

TEST(BpfRecordDecoderTest, SwitchWithStacks) {
  const loupe_sched_switch record = Switch(2, 3);
  std::optional<OwnedEvent> event =
      Decode(Bytes(record, offsetof(loupe_sched_switch, frames) + 5 * 8));
  ASSERT_TRUE(event);
  EXPECT_EQ(event->record.time_ns, 5000u);
  EXPECT_EQ(event->record.tid, 10u);
  EXPECT_EQ(event->record.cpu, 1u);
  EXPECT_EQ(std::get<format::SchedSwitch>(event->record.payload).next_tid, 20u);
  EXPECT_EQ(event->UserStack().size(), 2u);
  ASSERT_EQ(event->KernelStack().size(), 3u);
  EXPECT_EQ(event->KernelStack()[0], 0x1002u);
  EXPECT_EQ(event->next_tgid, 20u);
}

TEST(BpfRecordDecoderTest, ExitCodesAreWhatExitWasGivenOrMinusTheSignal) {
  auto decoded = [](int32_t wait_status) {
    loupe_thread_exit r{};
    r.hdr = {LOUPE_REC_THREAD_EXIT, sizeof r, 0, 100};
    r.tid = r.tgid = 7;
    r.exit_code = wait_status;
    r.group_dead = 1;
    std::optional<OwnedEvent> event = Decode(Bytes(r));
    return event ? std::get<format::ThreadExit>(event->record.payload).exit_code : INT64_MIN;
  };
  EXPECT_EQ(decoded(0), 0);
  EXPECT_EQ(decoded(1 << 8), 1);      // exit(1)
  EXPECT_EQ(decoded(255 << 8), 255);  // exit(-1)
  EXPECT_EQ(decoded(9), -9);          // SIGKILL
  EXPECT_EQ(decoded(11 | 0x80), -11);  // SIGSEGV with a core dump
}

// A frame-pointer walk through code without frame pointers reads junk: the
// user stack is cut at the first address no user frame can have.
TEST(BpfRecordDecoderTest, UserStacksStopAtTheFirstImpossibleFrame) {
  loupe_sched_switch record = Switch(4, 1);
  record.frames[0] = 0x401000;
  record.frames[1] = 0x7f00deadbeef;
  record.frames[2] = 0x10;                   // below the first page
  record.frames[3] = 0x4141414141414141;     // non-canonical
  record.frames[4] = 0xffffffff81000000;     // the kernel frame
  std::optional<OwnedEvent> event =
      Decode(Bytes(record, offsetof(loupe_sched_switch, frames) + 5 * 8));
  ASSERT_TRUE(event);
  EXPECT_TRUE(event->unwind_stopped);
  ASSERT_EQ(event->UserStack().size(), 3u);
  EXPECT_EQ(event->UserStack()[1], 0x7f00deadbeefu);
  EXPECT_EQ(event->UserStack()[2], format::kUnwindStoppedFrame) << "the cut is marked in the stack";
  ASSERT_EQ(event->KernelStack().size(), 1u);
  EXPECT_EQ(event->KernelStack()[0], 0xffffffff81000000u);

  // No user frame kept: no mark either (a kernel-only stack stays one).
  loupe_sched_switch junk_only = Switch(1, 1);
  junk_only.frames[0] = 0x10;
  junk_only.frames[1] = 0xffffffff81000000;
  event = Decode(Bytes(junk_only, offsetof(loupe_sched_switch, frames) + 2 * 8));
  ASSERT_TRUE(event);
  EXPECT_TRUE(event->unwind_stopped);
  EXPECT_TRUE(event->UserStack().empty());
  EXPECT_EQ(event->KernelStack().size(), 1u);

  const loupe_sched_switch whole = Switch(2, 3);
  event = Decode(Bytes(whole, offsetof(loupe_sched_switch, frames) + 5 * 8));
  ASSERT_TRUE(event);
  EXPECT_FALSE(event->unwind_stopped);
}

// A walk from unwind tables was checked in BPF: it says itself where it
// stopped, and which frames a signal interrupted (exact addresses, flagged
// in the top bit, which no user address has).
TEST(BpfRecordDecoderTest, TableWalksCarryTheirStopAndTheirExactFrames) {
  loupe_cpu_sample record{};
  record.hdr = {LOUPE_REC_CPU_SAMPLE, 0, 0, 100};
  record.tid = record.tgid = 7;
  record.user_depth = 3;
  record.stack_flags = LOUPE_STACK_CFI | LOUPE_STACK_UNWIND_STOPPED;
  record.frames[0] = 0x401000;
  record.frames[1] = 0x401234 | LOUPE_FRAME_EXACT;
  record.frames[2] = 0x7f0000001000;
  std::optional<OwnedEvent> event =
      Decode(Bytes(record, offsetof(loupe_cpu_sample, frames) + 3 * 8));
  ASSERT_TRUE(event);
  EXPECT_TRUE(event->unwind_stopped);
  ASSERT_EQ(event->UserStack().size(), 4u);
  EXPECT_EQ(event->UserStack()[1], 0x401234u);
  EXPECT_EQ(event->UserStack()[3], format::kUnwindStoppedFrame);
  EXPECT_EQ(std::vector<uint16_t>(event->exact_frames().begin(), event->exact_frames().end()),
            std::vector<uint16_t>{1});

  record.stack_flags = LOUPE_STACK_CFI;
  record.frames[1] = 0x401234;
  event = Decode(Bytes(record, offsetof(loupe_cpu_sample, frames) + 3 * 8));
  ASSERT_TRUE(event);
  EXPECT_FALSE(event->unwind_stopped);
  EXPECT_EQ(event->UserStack().size(), 3u) << "a whole stack has no mark";
  EXPECT_TRUE(event->exact_frames().empty());

  // Depths past what BPF can write are a malformed record.
  record.user_depth = LOUPE_MAX_STACK_DEPTH + 1;
  EXPECT_FALSE(Decode(Bytes(record)));
}

TEST(BpfRecordDecoderTest, MalformedRecordsAreRefused) {
  EXPECT_FALSE(Decode({}));
  const loupe_sched_switch record = Switch(2, 3);
  // Depths claiming more frames than the record carries.
  EXPECT_FALSE(Decode(Bytes(record, offsetof(loupe_sched_switch, frames) + 4 * 8)));
  // Shorter than the fixed part.
  EXPECT_FALSE(Decode(Bytes(record, offsetof(loupe_sched_switch, frames) - 1)));
  // Longer than any such record can be.
  EXPECT_FALSE(Decode(Bytes(record, sizeof record + 8)));
  loupe_record_header unknown{99, sizeof(loupe_record_header), 0, 1};
  EXPECT_FALSE(Decode(Bytes(unknown)));
  loupe_sched_wakeup wakeup{};
  wakeup.hdr = {LOUPE_REC_SCHED_WAKEUP, sizeof wakeup, 0, 1};
  EXPECT_TRUE(Decode(Bytes(wakeup)));
  EXPECT_FALSE(Decode(Bytes(wakeup, sizeof wakeup - 4)));
}

TEST(BpfRecordDecoderTest, SwitchCarriesTheNamesOfUntracedSides) {
  loupe_sched_switch record = Switch(0, 0);
  std::strcpy(record.next_comm, "bg_compress");
  std::optional<OwnedEvent> event =
      Decode(Bytes(record, offsetof(loupe_sched_switch, frames)));
  ASSERT_TRUE(event);
  EXPECT_EQ(event->prev_comm.view(), "");
  EXPECT_EQ(event->next_comm.view(), "bg_compress");
}

TEST(BpfRecordDecoderTest, WakeupCarriesTheNameOfAnUntracedWaker) {
  loupe_sched_wakeup wakeup{};
  wakeup.hdr = {LOUPE_REC_SCHED_WAKEUP, sizeof wakeup, 0, 1};
  wakeup.waker_tid = 501;
  wakeup.waker_tgid = 500;
  wakeup.woken_tgid = 100;
  std::strcpy(wakeup.waker_comm, "backup");
  std::optional<OwnedEvent> event = Decode(Bytes(wakeup));
  ASSERT_TRUE(event);
  EXPECT_EQ(event->record.tid, 501u);
  EXPECT_EQ(event->prev_tgid, 500u);
  EXPECT_EQ(event->next_tgid, 100u);
  EXPECT_EQ(event->prev_comm.view(), "backup");
  EXPECT_EQ(event->next_comm.view(), "");
}

TEST(BpfRecordDecoderTest, WakeupContextAndMigration) {
  loupe_sched_wakeup wakeup{};
  wakeup.hdr = {LOUPE_REC_SCHED_WAKEUP, sizeof wakeup, 0, 1};
  wakeup.context = LOUPE_WAKER_TIMER;
  std::optional<OwnedEvent> event = Decode(Bytes(wakeup));
  ASSERT_TRUE(event);
  EXPECT_EQ(std::get<format::SchedWakeup>(event->record.payload).context,
            format::WakerContext::kTimer);
  wakeup.context = LOUPE_WAKER_NMI + 1;  // no such context
  EXPECT_FALSE(Decode(Bytes(wakeup)));

  loupe_sched_migrate migrate{};
  migrate.hdr = {LOUPE_REC_SCHED_MIGRATE, sizeof migrate, 1, 7};
  migrate.tid = 12;
  migrate.tgid = 10;
  migrate.orig_cpu = 1;
  migrate.dest_cpu = 0;
  event = Decode(Bytes(migrate));
  ASSERT_TRUE(event);
  EXPECT_EQ(event->record.tid, 12u);
  EXPECT_EQ(event->prev_tgid, 10u);
  const auto& moved = std::get<format::SchedMigrate>(event->record.payload);
  EXPECT_EQ(moved.orig_cpu, 1u);
  EXPECT_EQ(moved.dest_cpu, 0u);
  EXPECT_FALSE(Decode(Bytes(migrate, sizeof migrate - 4)));
}

TEST(BpfRecordDecoderTest, NamesStopAtTheirTerminatorOrLength) {
  loupe_thread_name name{};
  name.hdr = {LOUPE_REC_THREAD_NAME, sizeof name, 0, 1};
  name.tid = 7;
  name.tgid = 7;
  std::memset(name.comm, 'x', sizeof name.comm);  // no terminator at all
  std::optional<OwnedEvent> event = Decode(Bytes(name));
  ASSERT_TRUE(event);
  EXPECT_EQ(event->text, std::string(sizeof name.comm, 'x'));
}

// A reorder slot is decoded into again and again: nothing of the event
// before may show through, whatever the kinds.
TEST(BpfRecordDecoderTest, ReusedEventKeepsNothingOfThePreviousOne) {
  loupe_sched_switch change = Switch(2, 1);
  std::memcpy(change.prev_comm, "worker", 7);
  change.stack_flags = LOUPE_STACK_CFI | LOUPE_STACK_UNWIND_STOPPED;
  change.frames[1] |= LOUPE_FRAME_EXACT;
  loupe_sched_wakeup wakeup{};
  wakeup.hdr = {LOUPE_REC_SCHED_WAKEUP, sizeof wakeup, 0, 6000};
  wakeup.waker_tid = 3;
  wakeup.woken_tid = 4;
  wakeup.woken_tgid = 4;
  OwnedEvent reused;
  ASSERT_TRUE(DecodeBpfRecord(Bytes(change), &reused));
  EXPECT_EQ(reused.prev_comm.view(), "worker");
  EXPECT_EQ(reused.exact_frames().size(), 1u);
  ASSERT_TRUE(DecodeBpfRecord(Bytes(wakeup), &reused));
  std::optional<OwnedEvent> fresh = Decode(Bytes(wakeup));
  ASSERT_TRUE(fresh);
  EXPECT_EQ(reused.frames, fresh->frames);
  EXPECT_EQ(reused.user_depth, 0u);
  EXPECT_FALSE(reused.unwind_stopped);
  EXPECT_TRUE(reused.exact_frames().empty());
  EXPECT_TRUE(reused.prev_comm.empty());
  EXPECT_EQ(reused.prev_tgid, fresh->prev_tgid);
  EXPECT_EQ(reused.next_tgid, 4u);
  EXPECT_EQ(reused.record.tid, 3u);
  EXPECT_EQ(reused.record.time_ns, 6000u);
  EXPECT_TRUE(std::holds_alternative<format::SchedWakeup>(reused.record.payload));
}

// Extras (args, fields, exact frames) are few at a time: an event gives
// them back emptied, and the next event that needs some reuses them.
TEST(OwnedEventTest, ExtrasGoBackToThePoolEmptiedAndAreReused) {
  ExtrasPool pool;
  OwnedEvent first(&pool);
  EXPECT_TRUE(first.args().empty());
  first.extras().args = {1, 2};
  first.extras().value_text = "text";
  const EventExtras* taken = &first.extras();
  EXPECT_EQ(first.args().size(), 2u);
  first.ReleaseExtras();
  EXPECT_TRUE(first.args().empty());
  EXPECT_TRUE(first.value_text().empty());
  OwnedEvent second(&pool);
  EXPECT_EQ(&second.extras(), taken);
  EXPECT_TRUE(second.extras().args.empty());
  EXPECT_TRUE(second.value_text().empty());
  // Two at once need two.
  EXPECT_NE(&first.extras(), taken);
}

}  // namespace
}  // namespace loupe::session

