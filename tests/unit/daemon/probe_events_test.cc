// The session's handling of probe events, without BPF: records as the BPF
// programs write them, decoded against this very process's memory (names
// are read by address), the content policy, operation attribution and
// call/return pairing.
#include <gtest/gtest.h>
#include <unistd.h>

#include <cstring>
#include <optional>

#include "daemon/probes/probe_plan.h"
#include "daemon/session/content_policy.h"
#include "daemon/session/operation_tracker.h"
#include "daemon/session/probe_record_decoder.h"
#include "daemon/session/uprobe_pairer.h"
#include "shared/records.h"

namespace loupe::session {
namespace {

template <typename T>
std::span<const uint8_t> Bytes(const T& record, size_t size = sizeof(T)) {
  return {reinterpret_cast<const uint8_t*>(&record), size};
}

// The decoder's event as a value; nullopt when it refused the record.
std::optional<OwnedEvent> Decode(ProbeRecordDecoder& decoder, std::span<const uint8_t> bytes) {
  OwnedEvent event;
  if (!decoder.Decode(bytes, &event)) return std::nullopt;
  return event;
}

uint64_t Address(const char* text) { return reinterpret_cast<uint64_t>(text); }

loupe_record_header Header(uint16_t type, uint64_t time_ns) {
  return {.type = type, .size = 0, .cpu = 1, .time_ns = time_ns};
}

const std::vector<std::string> kProbeNames = {"prov:start", "libc:malloc", "app:step"};

TEST(ContentPolicyTest, NamesPolicyKeepsLengthAndAKeyedHashOnly) {
  ContentFilter names(ContentPolicy::kNames);
  const std::string secret = names.Apply("secret-user-42", 14);
  EXPECT_EQ(secret.find("secret"), std::string::npos);
  EXPECT_TRUE(secret.starts_with("<redacted 14 bytes #")) << secret;
  EXPECT_EQ(names.Apply("secret-user-42", 14), secret);  // equal values stay equal
  EXPECT_NE(names.Apply("secret-user-43", 14), secret);
  EXPECT_NE(ContentFilter(ContentPolicy::kNames).Apply("secret-user-42", 14), secret);
  EXPECT_EQ(ContentFilter(ContentPolicy::kFull).Apply("secret-user-42", 14), "secret-user-42");
  EXPECT_EQ(*ParseContentPolicy("full"), ContentPolicy::kFull);
  EXPECT_EQ(*ParseContentPolicy("names"), ContentPolicy::kNames);
  auto bad = ParseContentPolicy("everything");
  ASSERT_FALSE(bad.ok());
  EXPECT_NE(bad.status().ToString().find("'everything'"), std::string::npos);
}

TEST(ProbeRecordDecoderTest, ShimEventsReadNamesFromTheProcess) {
  ProbeRecordDecoder decoder(&kProbeNames, ContentPolicy::kNames);
  const uint32_t self = static_cast<uint32_t>(getpid());
  loupe_shim_event span{.hdr = Header(LOUPE_REC_SPAN_BEGIN, 100),
                        .tid = 7,
                        .tgid = self,
                        .args = {Address("handle"), 5, 4, 99}};
  auto event = Decode(decoder, Bytes(span));
  ASSERT_TRUE(event.has_value());
  const format::Record& record = event->View();
  const auto& begin = std::get<format::SpanBegin>(record.payload);
  EXPECT_EQ(begin.name, "handle");
  EXPECT_EQ(begin.span_id, 5u);
  EXPECT_EQ(begin.parent_id, 4u);
  EXPECT_EQ(begin.operation_id, 99u);
  EXPECT_EQ(record.tid, 7u);

  loupe_shim_event counter{.hdr = Header(LOUPE_REC_COUNTER, 101),
                           .tid = 7,
                           .tgid = self,
                           .args = {Address("depth"), 1, static_cast<uint64_t>(-3)}};
  event = Decode(decoder, Bytes(counter));
  ASSERT_TRUE(event.has_value());
  const auto& value = std::get<format::Counter>(event->View().payload);
  EXPECT_EQ(value.name, "depth");
  EXPECT_EQ(value.value.AsInt(), -3);

  // An address that is not mapped: the event stays, the loss is counted.
  span.args[0] = 8;
  event = Decode(decoder, Bytes(span));
  ASSERT_TRUE(event.has_value());
  EXPECT_NE(std::get<format::SpanBegin>(event->View().payload).name.find("unreadable"),
            std::string::npos);
  EXPECT_EQ(decoder.losses().shim_unreadable, 1u);
  // A record of the wrong size is malformed.
  EXPECT_FALSE(Decode(decoder, Bytes(span, sizeof span - 8)).has_value());
}

TEST(ProbeRecordDecoderTest, InstantFieldsStringsCutAndRedacted) {
  ProbeRecordDecoder decoder(&kProbeNames, ContentPolicy::kNames);
  loupe_shim_instant instant{};
  instant.hdr = Header(LOUPE_REC_INSTANT, 5);
  instant.tgid = static_cast<uint32_t>(getpid());
  instant.name = Address("parsed");
  instant.operation = 12;
  instant.count = 3;
  instant.fields[0] = {.key = Address("n"), .type = 1, .length = 0, .value = static_cast<uint64_t>(-5)};
  instant.fields[1] = {.key = Address("s"), .type = 5, .length = 5, .value = 0};
  std::memcpy(instant.strings[1], "hello", 5);
  instant.fields[2] = {.key = Address("long"), .type = 5, .length = 300, .value = 0};
  std::memset(instant.strings[2], 'x', LOUPE_SHIM_MAX_STRING);
  auto event = Decode(decoder, Bytes(instant));
  ASSERT_TRUE(event.has_value());
  const auto& decoded = std::get<format::Instant>(event->View().payload);
  EXPECT_EQ(decoded.name, "parsed");
  EXPECT_EQ(decoded.operation_id, 12u);
  ASSERT_EQ(decoded.fields.size(), 3u);
  EXPECT_EQ(decoded.fields[0].key, "n");
  EXPECT_EQ(decoded.fields[0].value.AsInt(), -5);
  EXPECT_TRUE(decoded.fields[1].value.text.starts_with("<redacted 5 bytes #"));
  EXPECT_TRUE(decoded.fields[2].value.text.starts_with("<redacted 300 bytes #"));
  EXPECT_EQ(decoder.losses().shim_strings_cut, 1u);

  ProbeRecordDecoder full(&kProbeNames, ContentPolicy::kFull);
  event = Decode(full, Bytes(instant));
  ASSERT_TRUE(event.has_value());
  const auto& kept = std::get<format::Instant>(event->View().payload);
  EXPECT_EQ(kept.fields[1].value.text, "hello");
  EXPECT_EQ(kept.fields[2].value.text, std::string(LOUPE_SHIM_MAX_STRING, 'x'));

  instant.count = LOUPE_SHIM_MAX_FIELDS + 1;
  EXPECT_FALSE(Decode(full, Bytes(instant)).has_value());
}

TEST(ProbeRecordDecoderTest, UsdtAndUprobeEventsNameTheirProbes) {
  ProbeRecordDecoder decoder(&kProbeNames, ContentPolicy::kFull);
  loupe_usdt_event usdt{};
  usdt.hdr = Header(LOUPE_REC_USDT, 9);
  usdt.tid = 3;
  usdt.probe = 0;
  usdt.arg_count = 2;
  usdt.args[0] = -1;
  usdt.args[1] = 1LL << 40;
  auto event = Decode(decoder, Bytes(usdt, offsetof(loupe_usdt_event, string)));
  ASSERT_TRUE(event.has_value());
  const auto& decoded = std::get<format::UsdtEvent>(event->View().payload);
  EXPECT_EQ(decoded.probe, "prov:start");
  EXPECT_EQ(std::vector<int64_t>(decoded.args.begin(), decoded.args.end()),
            (std::vector<int64_t>{-1, 1LL << 40}));
  // A whole string: kept, not cut.
  const size_t header = offsetof(loupe_usdt_event, string);
  std::memset(usdt.string, 'q', sizeof usdt.string);
  usdt.flags = LOUPE_USDT_STRING;
  usdt.string_length = 300;
  event = Decode(decoder, Bytes(usdt, header + 300));
  ASSERT_TRUE(event.has_value());
  EXPECT_EQ(std::get<format::UsdtEvent>(event->View().payload).str_arg, std::string(300, 'q'));
  EXPECT_EQ(decoder.losses().usdt_strings_cut, 0u);
  // One the BPF side marked as longer than the session's cap: kept up to it, counted cut.
  usdt.flags = LOUPE_USDT_STRING | LOUPE_USDT_STRING_CUT;
  usdt.string_length = 256;
  event = Decode(decoder, Bytes(usdt, header + 256));
  ASSERT_TRUE(event.has_value());
  EXPECT_EQ(std::get<format::UsdtEvent>(event->View().payload).str_arg.size(), 256u);
  EXPECT_EQ(decoder.losses().usdt_strings_cut, 1u);
  // A length the record does not carry is refused, never read past.
  EXPECT_FALSE(Decode(decoder, Bytes(usdt, header + 100)).has_value());
  usdt.string_length = LOUPE_USDT_MAX_STRING + 1;
  EXPECT_FALSE(Decode(decoder, Bytes(usdt, sizeof usdt)).has_value());
  usdt.string_length = 256;
  usdt.arg_count = LOUPE_USDT_MAX_ARGS + 1;
  EXPECT_FALSE(Decode(decoder, Bytes(usdt)).has_value());

  loupe_uprobe_event ret{.hdr = Header(LOUPE_REC_UPROBE_RETURN, 10), .tid = 3, .probe = 1,
                         .arg_count = 1, .values = {42}};
  event = Decode(decoder, Bytes(ret));
  ASSERT_TRUE(event.has_value());
  const auto& returned = std::get<format::UprobeReturn>(event->View().payload);
  EXPECT_EQ(returned.probe, "libc:malloc");
  EXPECT_EQ(returned.retval, 42);
  ret.probe = 77;
  event = Decode(decoder, Bytes(ret));
  EXPECT_EQ(std::get<format::UprobeReturn>(event->View().payload).probe, "<unknown probe>");
}

format::Record At(uint32_t tid, format::Payload payload, uint64_t time_ns = 0) {
  return {.time_ns = time_ns, .tid = tid, .payload = payload};
}

TEST(OperationTrackerTest, SamplesAndOffCpuIntervalsGetTheInnermostOperation) {
  OperationTracker tracker;
  std::vector<format::Record> stream = {
      At(1, format::OperationBegin{.operation_id = 10}),
      At(1, format::CpuSample{}),
      At(1, format::OperationBegin{.operation_id = 11}),
      At(2, format::CpuSample{}),
      At(1, format::OffCpu{}),
      At(1, format::OperationEnd{.operation_id = 11}),
      At(1, format::CpuSample{}),
      At(1, format::OperationEnd{.operation_id = 10}),
      At(1, format::CpuSample{}),
  };
  for (format::Record& record : stream) tracker.Observe(record);
  EXPECT_EQ(std::get<format::CpuSample>(stream[1].payload).operation_id, 10u);
  EXPECT_EQ(std::get<format::CpuSample>(stream[3].payload).operation_id, 0u);  // other thread
  EXPECT_EQ(std::get<format::OffCpu>(stream[4].payload).operation_id, 11u);
  EXPECT_EQ(std::get<format::CpuSample>(stream[6].payload).operation_id, 10u);
  EXPECT_EQ(std::get<format::CpuSample>(stream[8].payload).operation_id, 0u);
  EXPECT_EQ(tracker.tracked_threads(), 0u);

  // An end for an outer scope closes the inner ones left open; an exit forgets.
  format::Record begin = At(3, format::OperationBegin{.operation_id = 1});
  format::Record inner = At(3, format::OperationBegin{.operation_id = 2});
  format::Record end = At(3, format::OperationEnd{.operation_id = 1});
  for (format::Record* r : {&begin, &inner, &end}) tracker.Observe(*r);
  EXPECT_EQ(tracker.tracked_threads(), 0u);
  format::Record again = At(4, format::OperationBegin{.operation_id = 5});
  format::Record exit = At(4, format::ThreadExit{.pid = 4});
  tracker.Observe(again);
  tracker.Observe(exit);
  EXPECT_EQ(tracker.tracked_threads(), 0u);
}

TEST(UprobePairerTest, ReturnsPairWithTheirEntriesEvenWhenRecursive) {
  UprobePairer pairer;
  const std::string_view probe = kProbeNames[1];
  std::vector<format::Record> stream = {
      At(1, format::UprobeEntry{.probe = probe}, 100),
      At(1, format::UprobeEntry{.probe = probe}, 150),
      At(2, format::UprobeReturn{.probe = probe}, 160),  // entered before tracing
      At(1, format::UprobeReturn{.probe = probe}, 170),
      At(1, format::UprobeReturn{.probe = probe}, 400),
  };
  for (format::Record& record : stream) pairer.Observe(record, /*user_sp=*/0);
  EXPECT_EQ(std::get<format::UprobeReturn>(stream[2].payload).duration_ns, 0u);
  EXPECT_EQ(std::get<format::UprobeReturn>(stream[3].payload).duration_ns, 20u);
  EXPECT_EQ(std::get<format::UprobeReturn>(stream[4].payload).duration_ns, 300u);
  EXPECT_EQ(pairer.open_calls(), 0u);
}

// rec(1) -> rec(2) -> rec(3) -> rec(4) throws, caught in rec(2), which
// returns: by the stack pointer its return is its own, not rec(4)'s, and
// rec(3) and rec(4) are over. A later call at rec(1)'s depth, its return
// lost, ends rec(1) too: each next call pairs alone.
TEST(UprobePairerTest, ByTheStackPointerAReturnIsItsOwnCallsPastAnException) {
  UprobePairer pairer;
  const std::string_view probe = kProbeNames[1];
  struct Step {
    format::Record record;
    uint64_t sp;
  };
  std::vector<Step> steps = {
      {At(1, format::UprobeEntry{.probe = probe}, 100), 0x7000},
      {At(1, format::UprobeEntry{.probe = probe}, 110), 0x6f00},
      {At(1, format::UprobeEntry{.probe = probe}, 120), 0x6e00},
      {At(1, format::UprobeEntry{.probe = probe}, 130), 0x6d00},
      {At(1, format::UprobeReturn{.probe = probe}, 200), 0x6f00},       // rec(2), at its ret
      {At(1, format::UprobeReturn{.probe = probe}, 300), 0x7000 + 8},   // rec(1), kernel's probe
      {At(1, format::UprobeEntry{.probe = probe}, 400), 0x7000},        // its return lost
      {At(1, format::UprobeEntry{.probe = probe}, 500), 0x7000},
      {At(1, format::UprobeReturn{.probe = probe}, 550), 0x7000},
  };
  for (Step& step : steps) pairer.Observe(step.record, step.sp);
  EXPECT_EQ(std::get<format::UprobeReturn>(steps[4].record.payload).duration_ns, 90u);
  EXPECT_EQ(std::get<format::UprobeReturn>(steps[5].record.payload).duration_ns, 200u);
  EXPECT_EQ(std::get<format::UprobeReturn>(steps[8].record.payload).duration_ns, 50u);
  EXPECT_EQ(pairer.open_calls(), 0u);
}

// The calls an exception or a longjmp left in the two cases below: step
// (entered 30 ns before) and handle (40 ns), innermost first.
void ExpectStepAndHandleLeft(const std::vector<format::UprobeReturn>& left, format::Unwound by) {
  ASSERT_EQ(left.size(), 2u);
  EXPECT_EQ(left[0].probe, kProbeNames[2]);
  EXPECT_EQ(left[0].duration_ns, 30u);
  EXPECT_EQ(left[0].unwound, by);
  EXPECT_EQ(left[1].probe, kProbeNames[1]);
  EXPECT_EQ(left[1].duration_ns, 40u);
  EXPECT_EQ(left[1].unwound, by);
}

// handle(1) -> step() throws; handle's caller catches (its frame's calls
// have handle's stack pointer), so both end there, innermost first, marked
// unwound. serve(), which called the catcher, runs on and returns.
TEST(UprobePairerTest, ACatchEndsTheCallsTheExceptionUnwound) {
  UprobePairer pairer;
  const std::string_view serve = kProbeNames[0], handle = kProbeNames[1], step = kProbeNames[2];
  struct Step {
    format::Record record;
    uint64_t sp;
  };
  std::vector<Step> steps = {
      {At(1, format::UprobeEntry{.probe = serve}, 100), 0x8000},
      {At(1, format::UprobeEntry{.probe = handle}, 110), 0x7000},
      {At(1, format::UprobeEntry{.probe = step}, 120), 0x6e00},
      {At(2, format::UprobeEntry{.probe = step}, 125), 0x6000},  // another thread's
      {At(1, format::UprobeEntry{.probe = probes::kExceptionCaughtProbe}, 150), 0x7000},
  };
  for (Step& step : steps) {
    pairer.Observe(step.record, step.sp);
    if (&step != &steps.back()) {
      EXPECT_FALSE(UprobePairer::IsCatch(step.record));
      EXPECT_TRUE(pairer.unwound().empty());
    }
  }
  EXPECT_TRUE(UprobePairer::IsCatch(steps.back().record));
  ExpectStepAndHandleLeft(pairer.unwound(), format::Unwound::kByException);
  EXPECT_EQ(pairer.open_calls(), 2u);  // serve, and thread 2's step

  format::Record ret = At(1, format::UprobeReturn{.probe = serve}, 300);
  pairer.Observe(ret, 0x8000);
  EXPECT_TRUE(pairer.unwound().empty());
  EXPECT_EQ(std::get<format::UprobeReturn>(ret.payload).duration_ns, 200u);
  EXPECT_EQ(std::get<format::UprobeReturn>(ret.payload).unwound, format::Unwound::kNo);
  EXPECT_EQ(pairer.open_calls(), 1u);
}

// A thread runs on two stacks: its own and a fiber's (mapped elsewhere).
// An exception caught on the fiber ends only the fiber's call; a call on
// the thread's stack entered while one is open on the fiber does not end
// the fiber's, and each return pairs with its own call.
TEST(UprobePairerTest, CallsOnAnotherStackAreNotThisExceptionsNorThisCallsInner) {
  UprobePairer pairer;
  const std::string_view outer = kProbeNames[0], inner = kProbeNames[1];
  constexpr uint64_t kThreadStack = 0x7ffc'0000'0000, kFiberStack = 0x5555'0000'0000;
  format::Record a = At(1, format::UprobeEntry{.probe = outer}, 100);
  pairer.Observe(a, kThreadStack - 0x100);
  format::Record b = At(1, format::UprobeEntry{.probe = inner}, 110);
  pairer.Observe(b, kFiberStack + 0x8000);  // on the fiber
  format::Record c = At(1, format::UprobeEntry{.probe = inner}, 120);
  pairer.Observe(c, kThreadStack - 0x400);  // back on the thread's stack
  EXPECT_EQ(pairer.open_calls(), 3u);
  // Caught on the fiber, below the fiber's call: its stack's bounds given.
  format::Record caught = At(1, format::UprobeEntry{.probe = probes::kExceptionCaughtProbe}, 130);
  const int64_t fiber_bounds[] = {static_cast<int64_t>(kFiberStack),
                                  static_cast<int64_t>(kFiberStack + 0x10000)};
  pairer.Observe(caught, kFiberStack + 0x8000, fiber_bounds);
  ASSERT_EQ(pairer.unwound().size(), 1u);
  EXPECT_EQ(pairer.unwound()[0].duration_ns, 20u);
  format::Record ret_c = At(1, format::UprobeReturn{.probe = inner}, 140);
  pairer.Observe(ret_c, kThreadStack - 0x400);
  EXPECT_EQ(std::get<format::UprobeReturn>(ret_c.payload).duration_ns, 20u);
  format::Record ret_a = At(1, format::UprobeReturn{.probe = outer}, 150);
  pairer.Observe(ret_a, kThreadStack - 0x100);
  EXPECT_EQ(std::get<format::UprobeReturn>(ret_a.payload).duration_ns, 50u);
  EXPECT_EQ(pairer.open_calls(), 0u);
}

// A longjmp lands in the frame that called setjmp, at the stack pointer
// that frame had: the calls made from it and below end at the jump; the
// call around it goes on, and so does a call open on another stack.
TEST(UprobePairerTest, ALongjmpEndsTheCallsBelowWhereItLands) {
  UprobePairer pairer;
  const std::string_view serve = kProbeNames[0], handle = kProbeNames[1], step = kProbeNames[2];
  constexpr uint64_t kStack = 0x7ffc'0001'0000, kFiberStack = 0x5555'0000'0000;
  constexpr uint64_t kLanding = kStack + 0xe000;  // the setjmp caller's stack pointer
  struct Step {
    format::Record record;
    uint64_t sp;
  } steps[] = {
      {At(1, format::UprobeEntry{.probe = serve}, 100), kStack + 0xf008},  // calls setjmp
      {At(1, format::UprobeEntry{.probe = handle}, 110), kLanding - 8},    // from that frame
      {At(1, format::UprobeEntry{.probe = step}, 120), kLanding - 0x100},
      {At(1, format::UprobeEntry{.probe = step}, 125), kFiberStack + 0x100},  // another stack
  };
  for (Step& each : steps) pairer.Observe(each.record, each.sp);
  format::Record jump = At(1, format::UprobeEntry{.probe = probes::kLongjmpProbe}, 150);
  const int64_t bounds[] = {static_cast<int64_t>(kStack), static_cast<int64_t>(kStack + 0x10000)};
  pairer.Observe(jump, kLanding, bounds);
  EXPECT_TRUE(UprobePairer::IsCatch(jump));
  ExpectStepAndHandleLeft(pairer.unwound(), format::Unwound::kByLongjmp);
  EXPECT_EQ(pairer.open_calls(), 2u);  // serve, and the step on the other stack
}

// An entry-only probe's calls never end: a catch above one does not make
// up an end for it. Only the probes whose returns are probed are paired.
TEST(UprobePairerTest, ACatchEndsOnlyCallsOfProbesWithReturns) {
  UprobePairer pairer;
  const std::string_view timed = kProbeNames[1], counted = kProbeNames[2];
  pairer.set_returning({timed.data()});
  format::Record a = At(1, format::UprobeEntry{.probe = timed}, 100);
  pairer.Observe(a, 0x7000);
  format::Record b = At(1, format::UprobeEntry{.probe = counted}, 110);
  pairer.Observe(b, 0x6f00);
  EXPECT_EQ(pairer.open_calls(), 1u);
  format::Record caught = At(1, format::UprobeEntry{.probe = probes::kExceptionCaughtProbe}, 130);
  pairer.Observe(caught, 0x7000);
  ASSERT_EQ(pairer.unwound().size(), 1u);
  EXPECT_EQ(pairer.unwound()[0].probe, timed);
}

}  // namespace
}  // namespace loupe::session
