#include "analysis/report_model.h"

#include <fmt/format.h>

#include <algorithm>
#include <map>
#include <set>
#include <variant>

#include "daemon/base/overloaded.h"

namespace loupe::analysis {
namespace {

// As deep as louped pairs a recursive probe's calls (UprobePairer::kMaxDepth).
constexpr size_t kMaxOpenPerThread = 1024;
// Operations passed on and not yet taken up, held at once: a queue deeper
// than this (or passes nobody takes up) counts the rest as not taken.
constexpr size_t kMaxPassed = 1 << 16;
constexpr size_t kRows = 5;  // evidence rows per breakdown
// How often the p90 so far is looked at, and how far below it (in latency
// buckets: 64 per power of two, so here a factor of 2) a request still
// keeps its evidence: if the final p90 falls lower, the report says the
// evidence covers fewer requests than the times do.
constexpr uint64_t kEvidenceEvery = 256;
constexpr size_t kEvidenceMargin = 64;

// Whether a kernel frame turns interrupts back on. The CPU samples come
// from a timer (no hardware counters): one due while interrupts are off
// waits and is taken where they come back on, so the time was spent in
// the function that called these, not in them.
bool EnablesInterrupts(const NamedFrame& frame) {
  const std::string_view f = frame.function;
  return frame.kernel && (f.find("irq_enable") != std::string_view::npos ||
                          f.ends_with("_unlock_irqrestore") || f.ends_with("_unlock_irq"));
}

// The function a sample is counted under: its innermost frame, past those
// turning interrupts back on while a kernel frame called them (a lone one
// stays: the user code did not run then), or the tracer when it was taken
// inside the kernel's uprobe handling (a BPF helper reserving ring space is
// Loupe's cost, not the request's).
std::string SampledFunction(const std::vector<NamedFrame>& frames) {
  if (InUprobeHandling(frames)) return std::string(kUprobeHandling);
  size_t where = 0;
  while (where + 1 < frames.size() && EnablesInterrupts(frames[where]) && frames[where + 1].kernel) ++where;
  return frames[where].function;
}

template <typename Map>
auto Largest(const Map& map, size_t n) {
  std::vector<std::pair<typename Map::key_type, uint64_t>> rows(map.begin(), map.end());
  std::sort(rows.begin(), rows.end(), [](const auto& a, const auto& b) {
    return a.second != b.second ? a.second > b.second : a.first < b.first;
  });
  if (rows.size() > n) rows.resize(n);
  return rows;
}

std::string Percent(double share) { return fmt::format("{:.0f} %", share * 100); }

}  // namespace

ReportModel::ReportModel(ReportOptions options)
    : options_(std::move(options)),
      timeline_(stacks_.threads(), [this](const StateInterval& interval) { OnInterval(interval); }),
      kinds_(options_.pairs) {
  timeline_.set_session_left([this](uint32_t tid) { LeaveSession(tid); });
}

// What a thread began in an earlier session and did not end there stays
// unended: an end in this one may be another call's, and what happened
// between the two was not traced.
void ReportModel::LeaveSession(uint32_t tid) {
  auto it = accounts_.find(tid);
  if (it == accounts_.end()) return;
  ThreadAccount& account = it->second;
  for (const OpenRequest& open : account.open) {
    ++kind_stats_[open.kind].unpaired_begins;
    account.ledger.Close();
  }
  account.open.clear();
}

void ReportModel::AddHeader(const v1::SegmentHeader& header) {
  kinds_.AddHeader(header);
  // A session whose segment 0 is not among those read (evicted, or not
  // asked for) starts mid-session: what its threads did before their first
  // record here is not in the trace.
  (header.sequence() == 0 ? sessions_from_start_ : sessions_mid_).insert(header.session_id());
  starts_mid_session_ = false;
  for (const std::string& session : sessions_mid_) {
    starts_mid_session_ = starts_mid_session_ || !sessions_from_start_.contains(session);
  }
  timeline_.set_starts_mid_session(starts_mid_session_);
  if (auto hz = header.config().find("sample_hz"); hz != header.config().end()) {
    sample_hz_ = static_cast<uint32_t>(std::strtoul(hz->second.c_str(), nullptr, 10));
  }
}

ThreadName ReportModel::NameOf(uint32_t tid) const {
  const ThreadDirectory& directory = stacks_.threads();
  if (tid == 0) return {0, 0, "idle", "the CPU was idle or waking up"};
  ThreadName name{tid, directory.PidOf(tid), directory.ThreadName(tid),
                  directory.ProcessNameOf(tid)};
  if (name.thread.empty()) name.thread = fmt::format("tid {}", tid);
  return name;
}

bool ReportModel::TakesUp(const RequestMark& mark) const {
  return kinds_.kinds()[mark.kind].source == RequestSource::kOperation && passed_.contains(mark.key);
}

bool ReportModel::Wanted(const format::Record& record, const RequestMark& mark) const {
  if (options_.pid && stacks_.threads().PidOf(record.tid) != *options_.pid) return false;
  if (!InWindow(record.time_ns)) return false;
  return !options_.operation || mark.operation_id == *options_.operation;
}

void ReportModel::Add(const format::Record& record, uint32_t session) {
  using namespace format;
  sessions_ = std::max(sessions_, session + 1);
  if (!timeline_.Admit(record, session)) return;  // another session's copy
  if (first_ns_ == 0) first_ns_ = record.time_ns;
  last_ns_ = std::max(last_ns_, record.time_ns);
  const uint32_t stack = stacks_.Add(record);
  std::visit(Overloaded{
                 [&](const CpuSample& sample) {
                   // Where two sessions traced the thread at once, one's samples.
                   if (timeline_.SpeaksFor(record.tid)) AddSample(record, stack, sample);
                 },
                 [&](const UsdtEvent& usdt) { ++usdt_[std::string(usdt.probe)]; },
                 // Reach the report through the stacks, the timeline and requests below.
                 [](const ClockSync&) {}, [](const ProcessInfo&) {}, [](const ThreadInfo&) {},
                 [](const ProcessFork&) {}, [](const ProcessExec&) {}, [](const ThreadExit&) {},
                 [&](const SchedSwitch& change) {
                   if ((change.prev_state & kSwitchInferred) != 0) ++inferred_switches_;
                 },
                 [](const SchedWakeup&) {}, [](const SchedMigrate&) {},
                 [](const OffCpu&) {}, [](const UprobeEntry&) {}, [](const UprobeReturn&) {},
                 [](const SpanBegin&) {}, [](const SpanEnd&) {}, [](const Instant&) {},
                 [](const Counter&) {}, [](const OperationBegin&) {}, [](const OperationEnd&) {},
                 [&](const Loss& loss) {
                   if (!IsCut(loss.reason)) {
                     lost_by_source_[static_cast<size_t>(loss.source)] += loss.count;
                   }
                 }},
             record.payload);
  timeline_.Add(record, stack);
  const RequestMark mark = kinds_.Mark(record);
  // Two sessions traced the thread at once: one's requests count.
  if (mark.type != RequestMark::kNone && !timeline_.SpeaksFor(record.tid)) return;
  if (mark.type != RequestMark::kNone && first_request_event_ns_ == 0) {
    first_request_event_ns_ = record.time_ns;
  }
  if (mark.type == RequestMark::kBegin) {
    // A take-up goes on with a request its first begin made wanted, even
    // past --until: the ones that queued longest would be lost otherwise.
    if (Wanted(record, mark) || TakesUp(mark)) Begin(record, mark);
  } else if (mark.type == RequestMark::kEnd) {
    End(record, mark);
  }
}

void ReportModel::AddSample(const format::Record& record, uint32_t stack,
                            const format::CpuSample& sample) {
  if (!stacks_.threads().Traced(record.tid)) return;
  if (options_.pid && stacks_.threads().PidOf(record.tid) != *options_.pid) return;
  const bool in_window = InWindow(record.time_ns);
  AccountOf(record.tid).ledger.AddSample(record.time_ns, stack, !sample.kernel_stack.empty(),
                                         in_window);
  if (in_window && stack != 0) {
    ++samples_by_stack_[stack];
    ++top_function_samples_;
  }
}

bool ReportModel::InWindow(uint64_t time_ns) const {
  const uint64_t at = time_ns - first_ns_;
  return at >= options_.since_ns && at <= options_.until_ns;
}

std::string ReportModel::WindowLabel() const {
  if (options_.since_ns == 0 && options_.until_ns == UINT64_MAX) return "";
  auto seconds = [](uint64_t ns) { return static_cast<double>(ns) / 1e9; };
  if (options_.until_ns == UINT64_MAX) return fmt::format(" from +{:.3f} s", seconds(options_.since_ns));
  return fmt::format(" from +{:.3f} s to +{:.3f} s", seconds(options_.since_ns),
                     seconds(options_.until_ns));
}

uint64_t ReportModel::WindowPart(uint64_t begin_ns, uint64_t end_ns) const {
  // Relative to the first event, as the options are.
  const uint64_t from = std::max(begin_ns > first_ns_ ? begin_ns - first_ns_ : 0, options_.since_ns);
  const uint64_t to = std::min(end_ns > first_ns_ ? end_ns - first_ns_ : 0, options_.until_ns);
  return to > from ? to - from : 0;
}

// Running time up to `now` joins the requests open on the thread and its
// totals: called before requests open or close, and when running ends.
void ReportModel::Settle(uint32_t tid, ThreadAccount& account, uint64_t now) {
  if (timeline_.state(tid) != ThreadState::kRunning) return;
  const uint64_t from = std::max(account.settled_until, timeline_.since(tid));
  if (now <= from) return;
  account.settled_until = now;
  const uint64_t ns = now - from;
  StateInterval running{.tid = tid, .state = ThreadState::kRunning, .begin_ns = from, .end_ns = now};
  account.ledger.AddInterval(running, ns, WindowPart(from, now));
}

void ReportModel::OnInterval(const StateInterval& interval) {
  if (options_.pid && stacks_.threads().PidOf(interval.tid) != *options_.pid) return;
  ThreadAccount& account = AccountOf(interval.tid);
  // Running time may have been settled already; so may the start of a
  // stretch no switch places (it began where the thread was last seen run).
  if (interval.state == ThreadState::kRunning || interval.state == ThreadState::kUnknown) {
    const uint64_t from = std::max(account.settled_until, interval.begin_ns);
    account.settled_until = std::max(account.settled_until, interval.end_ns);
    if (interval.end_ns <= from) return;
    const uint64_t in_window = WindowPart(from, interval.end_ns);
    if (interval.state == ThreadState::kUnknown && in_window != 0) {
      ++unplaced_stretches_;
      unplaced_ns_ += in_window;
      unplaced_last_end_ns_ = std::max(unplaced_last_end_ns_, interval.end_ns);
    }
    account.ledger.AddInterval(interval, interval.end_ns - from, in_window);
    return;
  }
  // Off CPU, no request can have opened or closed: each open one holds it whole.
  account.ledger.AddInterval(interval, interval.ns(),
                             WindowPart(interval.begin_ns, interval.end_ns));
}

ReportModel::ThreadAccount& ReportModel::AccountOf(uint32_t tid) {
  auto [it, added] = accounts_.try_emplace(tid);
  if (added && passes_seen_) it->second.ledger.KeepHistory();
  return it->second;
}

void ReportModel::Begin(const format::Record& record, const RequestMark& mark) {
  ThreadAccount& account = AccountOf(record.tid);
  timeline_.Flush(record.tid);
  Settle(record.tid, account, record.time_ns);
  if (kind_stats_.size() < kinds_.kinds().size()) kind_stats_.resize(kinds_.kinds().size());
  if (account.open.size() >= kMaxOpenPerThread) {
    // The oldest is given up, not the new one: a begin whose end was lost
    // (a full ring) stays open below everything after it, and refusing new
    // begins would leave every later request on the thread unpaired.
    ++kind_stats_[account.open.front().kind].unpaired_begins;
    account.open.erase(account.open.begin());
    account.ledger.Close();
  }
  OpenRequest open{mark.kind, mark.key, record.time_ns, {mark.args.begin(), mark.args.end()},
                   account.ledger.Now(), nullptr};
  if (kinds_.kinds()[mark.kind].source == RequestSource::kOperation) {
    if (auto it = passed_.find(mark.key); it != passed_.end()) {
      // Taken up: the request began on the first thread, and waited between.
      std::unique_ptr<Passed> carried = std::move(it->second);
      passed_.erase(it);
      const uint64_t queued = record.time_ns > carried->passed_ns ? record.time_ns - carried->passed_ns : 0;
      carried->so_far.queued_ns += queued;
      carried->so_far.handoffs.Add(HandoffKey(carried->passer_tid, record.tid), queued);
      // Settled: the taker's history runs up to now.
      const uint64_t passed = std::min(carried->passed_ns, record.time_ns);
      if (const auto busy = account.ledger.BusyBetween(passed, record.time_ns)) {
        carried->so_far.taker_outside_ns += busy->outside_ns;
        carried->so_far.taker_inside_ns += busy->inside_ns;
        carried->so_far.taker_blocked_ns += busy->blocked_ns;
        carried->so_far.taker_runq_ns += busy->runq_ns;
        for (uint32_t stack : busy->samples) carried->so_far.taker_samples.Add(stack, 1);
      } else {
        ++carried->so_far.taker_unknown;
      }
      open.kind = carried->kind;
      open.begin_ns = carried->begin_ns;
      open.args = std::move(carried->args);
      open.carried = std::move(carried);
    }
  }
  account.open.push_back(std::move(open));
  account.ledger.Open();
}

void ReportModel::Pass(const format::Record& record, ThreadAccount& account, OpenRequest request) {
  if (!passes_seen_) {
    // From here on every thread may be the one a passed request waits for:
    // what each does is kept for a while (ThreadLedger::BusyBetween).
    passes_seen_ = true;
    for (auto& [tid, each] : accounts_) each.ledger.KeepHistory();
  }
  std::unique_ptr<Passed> passed = std::move(request.carried);
  if (!passed) {
    passed = std::make_unique<Passed>();
    passed->first_tid = record.tid;
  }
  passed->kind = request.kind;
  passed->begin_ns = request.begin_ns;
  passed->args = std::move(request.args);
  passed->passer_tid = record.tid;
  passed->passed_ns = record.time_ns;
  account.ledger.AddSince(request.mark, &passed->so_far, true);
  if (passed->so_far.evidence_count == 0) passed->evidence_cut = true;
  passed->so_far.evidence_count = 0;
  KindStats& stats = kind_stats_[request.kind];
  if (passed_.size() >= kMaxPassed && !passed_.contains(request.key)) {
    ++stats.passed_not_taken;
    return;
  }
  std::unique_ptr<Passed>& slot = passed_[request.key];
  // Passed again before anyone took it up: the id was reused, the first lost.
  if (slot) ++kind_stats_[slot->kind].passed_not_taken;
  slot = std::move(passed);
}

void ReportModel::End(const format::Record& record, const RequestMark& mark) {
  auto it = accounts_.find(record.tid);
  // Calls above the one a return ends were left by an exception: they end
  // with it, unpaired, rather than take its return.
  auto matches = [&](const OpenRequest& open) {
    return open.key == mark.key && (mark.kind == UINT32_MAX || open.kind == mark.kind) &&
           (mark.begin_ns == 0 || open.begin_ns == mark.begin_ns);
  };
  if (it == accounts_.end() ||
      std::find_if(it->second.open.begin(), it->second.open.end(), matches) == it->second.open.end()) {
    if (auto stale = passed_.find(mark.key); stale != passed_.end()) {
      // Passed on, then ended where no take-up began (its begin lost): left
      // waiting, the pass would join a later request that reuses the id.
      ++kind_stats_[stale->second->kind].passed_not_taken;
      passed_.erase(stale);
      return;
    }
    // Begun before the trace, its begin lost, or filtered out.
    if (!Wanted(record, mark)) return;
    if (mark.kind == UINT32_MAX) {
      ++ends_without_begin_;
      return;
    }
    if (kind_stats_.size() < kinds_.kinds().size()) kind_stats_.resize(kinds_.kinds().size());
    ++kind_stats_[mark.kind].unpaired_ends;
    return;
  }
  ThreadAccount& account = it->second;
  auto open = std::find_if(account.open.rbegin(), account.open.rend(), matches);
  if (record.time_ns < open->begin_ns) {
    // Time ran backwards (a damaged trace): no duration can be told.
    ++kind_stats_[open->kind].unpaired_ends;
    return;
  }
  timeline_.Flush(record.tid);
  Settle(record.tid, account, record.time_ns);
  OpenRequest request = std::move(*open);
  size_t closed = 1;
  if (mark.unwound != format::Unwound::kNo) {
    // The catch or the jump ends each call it left, by its own record; a
    // request opened after it may be open on another stack (a fiber).
    account.open.erase(std::next(open).base());
  } else {
    // Requests opened inside it and never closed end with it, unpaired.
    for (auto inner = account.open.rbegin(); inner != open; ++inner) {
      ++kind_stats_[inner->kind].unpaired_begins;
    }
    closed = static_cast<size_t>(std::distance(account.open.rbegin(), open)) + 1;
    account.open.erase(std::next(open).base(), account.open.end());
  }
  if (mark.passes) {
    Pass(record, account, std::move(request));
    for (size_t i = 0; i < closed; ++i) account.ledger.Close();
    return;
  }

  const uint64_t duration = record.time_ns - request.begin_ns;
  KindStats& stats = kind_stats_[request.kind];
  stats.latency.Add(duration);
  if (mark.unwound == format::Unwound::kByException) ++stats.unwound;
  if (mark.unwound == format::Unwound::kByLongjmp) ++stats.longjmped;
  const Passed* carried = request.carried.get();
  auto add_to = [&](Anatomy* into, bool evidence) {
    into->count += 1;
    into->duration_ns += duration;
    const uint64_t whole = into->evidence_count;
    // Times always; evidence only where every thread's part kept it all.
    const bool cut = carried && carried->evidence_cut;
    if (carried) into->Merge(carried->so_far, evidence && !cut);
    account.ledger.AddSince(request.mark, into, evidence);
    if (cut) into->evidence_count = whole;
  };
  if (options_.slow_ns) {
    if (duration >= *options_.slow_ns) add_to(&stats.over_threshold, true);
  } else {
    const size_t bucket = LatencyHistogram::Bucket(duration);
    const bool evidence = bucket >= stats.evidence_from;
    std::unique_ptr<Anatomy>& slot = stats.by_bucket[bucket];
    if (!slot) slot = std::make_unique<Anatomy>();
    add_to(slot.get(), evidence);
    if (stats.latency.count() % kEvidenceEvery == 0) {
      const size_t p90 = stats.latency.QuantileBucket(0.9);
      stats.evidence_from = p90 > kEvidenceMargin ? p90 - kEvidenceMargin : 0;
    }
  }
  if (Slowest(duration)) {
    Finished finished{request.kind,       record.tid, carried ? carried->first_tid : 0,
                      request.begin_ns,   duration,   std::move(request.args),
                      {},                 mark.unwound};
    add_to(&finished.anatomy, true);
    Keep(std::move(finished));
  }
  for (size_t i = 0; i < closed; ++i) account.ledger.Close();
}

// The slowest requests, with room for the ones of the same extent (a span
// inside an operation inside a uprobe'd call) that are folded together.
bool ReportModel::Slowest(uint64_t duration_ns) const {
  return finished_.size() < 4 * options_.list + 8 || duration_ns > finished_.back().duration_ns;
}

void ReportModel::Keep(Finished finished) {
  const size_t room = 4 * options_.list + 8;
  auto at = std::upper_bound(finished_.begin(), finished_.end(), finished.duration_ns,
                             [](uint64_t d, const Finished& f) { return d > f.duration_ns; });
  finished_.insert(at, std::move(finished));
  if (finished_.size() > room) finished_.pop_back();
}

std::string ReportModel::WaitOf(uint64_t evidence) {
  auto [it, added] = wait_of_.try_emplace(evidence);
  if (added) {
    it->second = std::string(
        WaitClassName(ClassifyStack(stacks_, EvidenceStack(evidence), EvidenceState(evidence))));
  }
  return it->second;
}

// Blocking stacks, largest first: the application's frames whole, of the
// kernel's only the one that told what the wait was.
std::vector<StackShare> ReportModel::BlockingStacks(const Counts<uint64_t>& blocked, size_t n) {
  std::map<std::string, std::map<uint32_t, uint64_t>> stacks_by_wait;
  blocked.ForEach([&](uint64_t evidence, uint64_t ns) {
    stacks_by_wait[WaitOf(evidence)][EvidenceStack(evidence)] += ns;
  });
  std::vector<StackShare> shares;
  // Stacks that differ only in frames not shown (two calls on one line,
  // kernel frames below the deciding one) are one row.
  std::map<std::string, size_t> row_of;
  for (const auto& [wait, stacks] : stacks_by_wait) {
    for (const auto& [stack, ns] : stacks) {
      StackShare share{wait, ns, {}, stacks_.InnermostApplicationFunction(stack)};
      auto [kernel, user] = SplitFrames(stacks_, stack);
      const Classified why = ClassifyWait(0, kernel, user);
      if (why.deciding_frame >= 0) share.frames.push_back(kernel[why.deciding_frame]);
      share.frames.insert(share.frames.end(), user.begin(), user.end());
      if (user.empty() && why.deciding_frame < 0) share.frames = kernel;
      std::string shown = wait;
      for (const NamedFrame& frame : share.frames) {
        shown += fmt::format("\n{}{}:{}:{}", frame.kernel ? "[k]" : "", frame.function, frame.file,
                             frame.line);
      }
      if (auto [row, added] = row_of.try_emplace(shown, shares.size()); !added) {
        shares[row->second].ns += ns;
        continue;
      }
      shares.push_back(std::move(share));
    }
  }
  std::sort(shares.begin(), shares.end(),
            [](const StackShare& x, const StackShare& y) { return x.ns > y.ns; });
  if (shares.size() > n) shares.resize(n);
  return shares;
}

Breakdown ReportModel::Classify(const Anatomy& a, std::string_view short_name) {
  Breakdown b;
  b.count = a.count;
  b.evidence_count = a.evidence_count;
  b.duration_ns = a.duration_ns;
  b.on_cpu_ns = a.on_cpu_ns;
  b.runq_ns = a.runq_ns;
  b.throttled_ns = a.throttled_ns;
  b.queued_ns = a.queued_ns;
  b.unaccounted_ns = a.unaccounted_ns();
  b.user_samples = a.user_samples;
  b.kernel_samples = a.kernel_samples;
  a.blocked.ForEach([&](uint64_t evidence, uint64_t ns) {
    const std::string wait = WaitOf(evidence);
    b.off_cpu_ns[wait] += ns;
    (wait == "sleep" ? b.sleep_ns : b.blocked_ns) += ns;
  });
  // Blocked time of requests whose evidence was not kept: its class is unknown.
  if (const uint64_t classified = b.blocked_ns + b.sleep_ns; a.blocked_ns > classified) {
    b.off_cpu_ns["unclassified"] += a.blocked_ns - classified;
    b.blocked_ns += a.blocked_ns - classified;
  }
  b.stacks = BlockingStacks(a.blocked, kRows);

  const std::pair<const char*, uint64_t> parts[] = {{"on_cpu", b.on_cpu_ns},
                                                    {"blocked", b.blocked_ns},
                                                    {"sleep", b.sleep_ns},
                                                    {"runqueue", b.runq_ns},
                                                    {"queued", b.queued_ns},
                                                    {"unaccounted", b.unaccounted_ns}};
  uint64_t most = 0;
  for (const auto& [name, ns] : parts) {
    if (ns > most) most = ns, b.dominant = name;
  }
  if (b.dominant == "blocked") {
    uint64_t largest = 0;
    for (const auto& [wait, ns] : b.off_cpu_ns) {
      if (wait != "sleep" && ns > largest) largest = ns, b.dominant_class = wait;
    }
  }

  std::map<std::string, uint64_t> functions;
  a.samples.ForEach([&](uint32_t stack, uint64_t n) {
    const std::vector<NamedFrame> frames = stacks_.StackFrames(stack);
    if (!frames.empty()) functions[SampledFunction(frames)] += n;
  });
  b.functions = Largest(functions, kRows);
  // tid -> the stack (WakerDoingKey) it spent most of the time in, per kind.
  const auto doing_of = [](const Counts<uint64_t>& doing_keys) {
    absl::flat_hash_map<uint32_t, std::pair<uint64_t, uint64_t>> best;  // tid -> (key, ns)
    doing_keys.ForEach([&](uint64_t key, uint64_t ns) {
      auto& top = best[static_cast<uint32_t>(key >> 32)];
      if (ns > top.second) top = {key, ns};
    });
    return best;
  };
  const auto holder_doing = doing_of(a.holder_doing);
  for (const auto& [tid, ns] : a.holders.Largest(kRows)) {
    Breakdown::Holder holder{NameOf(tid), ns, ""};
    if (auto it = holder_doing.find(tid); it != holder_doing.end()) {
      holder.doing = stacks_.InnermostApplicationFunction(it->second.first & 0x7fffffffu);
    }
    b.holders.push_back(std::move(holder));
  }
  for (const auto& [key, ns] : a.handoffs.Largest(kRows)) {
    b.handoffs.push_back({NameOf(static_cast<uint32_t>(key >> 32)), NameOf(static_cast<uint32_t>(key)), ns});
  }
  const uint64_t placed =
      a.taker_outside_ns + a.taker_inside_ns + a.taker_blocked_ns + a.taker_runq_ns;
  b.taker = {.outside_ns = a.taker_outside_ns,
             .inside_ns = a.taker_inside_ns,
             .blocked_ns = a.taker_blocked_ns,
             .runq_ns = a.taker_runq_ns,
             .unplaced_ns = a.queued_ns > placed ? a.queued_ns - placed : 0,
             .unknown = a.taker_unknown,
             .function = TopApplicationFunction(a.taker_samples)};
  const auto doing = doing_of(a.waker_doing);
  const auto woken_by = doing_of(a.waker_woken_by);
  const auto name_waker = [&](uint64_t key, uint64_t ns) {
    const uint32_t tid = static_cast<uint32_t>(key >> 8);
    const auto context = static_cast<format::WakerContext>(key & 0xff);
    Breakdown::Waker waker{NameOf(tid), std::string(format::WakerContextName(context)), ns, ""};
    if (context == format::WakerContext::kTask && tid == 0) {
      // The idle task wakes nobody itself: an interrupt it was running under did.
      waker.context = "interrupt";
      waker.who = {0, 0, "interrupt", "taken while the CPU was idle"};
    } else if (context == format::WakerContext::kUnreported) {
      // Placed from the woken thread's run delay (MissedWakeups): who woke it is not known.
      waker.who = {0, 0, "an unknown waker (the kernel did not report this wakeup)", "unreported"};
    } else if (context != format::WakerContext::kTask) {
      waker.who = {0, 0, std::string(format::WakerContextName(context)), "interrupt"};
    } else if (auto it = doing.find(tid); it != doing.end()) {
      waker.doing = stacks_.InnermostApplicationFunction(it->second.first & 0x7fffffffu);
      waker.doing_off_cpu = (it->second.first >> 31 & 1) != 0;
      if (auto chain = woken_by.find(tid); waker.doing_off_cpu && chain != woken_by.end()) {
        waker.doing_woken_by = NameOf(static_cast<uint32_t>(chain->second.first));
      }
    }
    return waker;
  };
  // Every wait's wakers, and those of the dominant kind of wait.
  const std::string dominant_wait = b.dominant == "sleep" ? "sleep" : b.dominant_class;
  Counts<uint64_t> all, in_wait;
  a.wakers_by_wait.ForEach([&](const std::pair<uint64_t, uint64_t>& key, uint64_t ns) {
    all.Add(key.second, ns);
    if (!dominant_wait.empty() && WaitOf(key.first) == dominant_wait) in_wait.Add(key.second, ns);
  });
  for (const auto& [key, ns] : all.Largest(kRows)) b.wakers.push_back(name_waker(key, ns));
  if (const auto top = in_wait.Largest(1); !top.empty()) {
    b.dominant_waker = name_waker(top[0].first, top[0].second);
  }
  b.sentence = Sentence(b, short_name);
  return b;
}

// One plain sentence: what the time was, where in the code, and who else
// was involved.
std::string ReportModel::Sentence(const Breakdown& b, std::string_view short_name) const {
  if (b.duration_ns == 0) return "";
  const std::string head = fmt::format("slow {}: ", short_name);
  const StackShare* stack = nullptr;
  for (const StackShare& s : b.stacks) {
    if ((b.dominant == "sleep") == (s.wait == "sleep") &&
        (b.dominant_class.empty() || s.wait == b.dominant_class || b.dominant == "sleep")) {
      stack = &s;
      break;
    }
  }
  // Where: the function of the top stack of that kind of wait, with its
  // own share when other code waited the same way too.
  const auto where = [&](uint64_t wait_ns) -> std::string {
    if (!stack || stack->function.empty()) return "";
    uint64_t in_function = 0;
    for (const StackShare& s : b.stacks) {
      if (s.wait == stack->wait && s.function == stack->function) in_function += s.ns;
    }
    const std::string share = Percent(b.Share(in_function));
    if (share == Percent(b.Share(wait_ns))) return " in " + stack->function;
    return fmt::format(", {} in {}", share, stack->function);
  };
  const Breakdown::Waker* waker = b.dominant_waker ? &*b.dominant_waker : nullptr;
  auto by = [&](std::string_view verb) -> std::string {
    if (!waker) return "";
    // A sleep ends by its timer. Any other wait a timer ends either timed
    // out (what it waited for, a signal or a lock, did not come sooner) or
    // waited for that timer (a timerfd): a timer is no culprit.
    if (waker->context == "timer") {
      return std::string(b.dominant == "sleep" ? ", woken by a timer"
                                               : ", ended by a timer (its timeout, or a timer it "
                                                 "waited for)");
    }
    if (waker->context == "interrupt") return std::string(", woken by an interrupt");
    if (waker->context == format::WakerContextName(format::WakerContext::kUnreported)) {
      return std::string(", woken by a wakeup the kernel did not report");
    }
    if (waker->context != "task") return fmt::format(", woken by an interrupt ({})", waker->context);
    if (waker->doing.empty()) return fmt::format(", {} {}", verb, waker->who.thread);
    if (waker->doing_off_cpu && waker->doing_woken_by) {
      return fmt::format(", {} {}, itself off CPU in {} meanwhile until {} woke it", verb,
                         waker->who.thread, waker->doing, waker->doing_woken_by->thread);
    }
    if (waker->doing_off_cpu) {
      return fmt::format(", {} {}, itself off CPU in {} meanwhile", verb, waker->who.thread,
                         waker->doing);
    }
    return fmt::format(", {} {} in {}", verb, waker->who.thread, waker->doing);
  };
  if (b.dominant == "on_cpu") {
    const std::string hot = b.functions.empty() ? "" : fmt::format(", mostly in {} (sampled)", b.functions.front().first);
    return fmt::format("{}{} on CPU{}", head, Percent(b.Share(b.on_cpu_ns)), hot);
  }
  if (b.dominant == "runqueue" && 2 * b.throttled_ns >= b.runq_ns) {
    // Its own quota, not another thread: holders would be bystanders (often the idle task).
    return fmt::format("{}{} waiting to run, {} throttled by its cgroup's CPU quota", head,
                       Percent(b.Share(b.runq_ns)), Percent(b.Share(b.throttled_ns)));
  }
  if (b.dominant == "runqueue") {
    std::string holder;
    if (!b.holders.empty()) {
      const Breakdown::Holder& top = b.holders.front();
      holder = fmt::format(", the CPU held by {} ({}){}", top.who.thread, top.who.process,
                           top.doing.empty() ? "" : " in " + top.doing);
    }
    return fmt::format("{}{} waiting for a CPU{}", head, Percent(b.Share(b.runq_ns)), holder);
  }
  if (b.dominant == "queued") {
    // No thread held it: the one it waited for was busy elsewhere.
    std::string between;
    if (!b.handoffs.empty()) {
      between = fmt::format(", passed on by {} and waiting for {} to take it up",
                            b.handoffs.front().from.thread, b.handoffs.front().to.thread);
    }
    return fmt::format("{}{} queued between threads{}{}", head, Percent(b.Share(b.queued_ns)), between,
                       b.handoffs.empty() ? "" : TakerBusy(b.handoffs.front().to));
  }
  if (b.dominant == "sleep") {
    return fmt::format("{}{} sleeping{}{}", head, Percent(b.Share(b.sleep_ns)), where(b.sleep_ns),
                       by("woken by"));
  }
  if (b.dominant == "unaccounted") {
    return fmt::format("{}{} unaccounted (no context switch of the thread covers that time)", head,
                       Percent(b.Share(b.unaccounted_ns)));
  }
  WaitClass wait = WaitClass::kOther;
  for (int i = 0; i < kWaitClassCount; ++i) {
    if (WaitClassName(static_cast<WaitClass>(i)) == b.dominant_class) wait = static_cast<WaitClass>(i);
  }
  const char* verb = wait == WaitClass::kLock          ? "held by"
                     : wait == WaitClass::kPipeSocket  ? "fed by"
                     : wait == WaitClass::kCondition   ? "signalled by"
                     : wait == WaitClass::kStopped     ? "resumed by"
                                                       : "woken by";
  // The dominant class's own share: other classes are on the summary line.
  const auto in_class = b.off_cpu_ns.find(b.dominant_class);
  const uint64_t class_ns = in_class != b.off_cpu_ns.end() ? in_class->second : b.blocked_ns;
  // A stopped thread is not blocked on anything: it was stopped.
  return fmt::format("{}{} {}{}{}{}", head, Percent(b.Share(class_ns)),
                     wait == WaitClass::kStopped ? "" : "blocked ", WaitClassPhrase(wait),
                     where(class_ns), wait == WaitClass::kTracer ? "" : by(verb));
}

std::string ReportModel::TopApplicationFunction(const Counts<uint32_t>& samples) const {
  std::map<std::string, uint64_t> functions;
  samples.ForEach([&](uint32_t stack, uint64_t n) {
    const std::string function = stacks_.InnermostApplicationFunction(stack);
    if (!function.empty()) functions[function] += n;
  });
  const auto hottest = Largest(functions, 1);
  return hottest.empty() ? "" : hottest.front().first;
}

std::string ReportModel::TakerBusy(const ThreadName& taker) const {
  auto it = accounts_.find(taker.tid);
  if (it == accounts_.end()) return "";
  const Anatomy& inside = it->second.ledger.inside();
  const Anatomy& outside = it->second.ledger.outside();
  const std::string hottest = TopApplicationFunction(outside.samples);
  auto ms = [](uint64_t ns) { return static_cast<double>(ns) / 1e6; };
  const std::string window = WindowLabel();
  return fmt::format("; {}'s CPU time {}: {:.3f} ms outside requests{}, {:.3f} ms in them",
                     taker.thread, window.empty() ? "over the trace" : window.substr(1),
                     ms(outside.on_cpu_ns),
                     hottest.empty() ? "" : fmt::format(" (mostly in {}, sampled)", hottest),
                     ms(inside.on_cpu_ns));
}

uint64_t ReportModel::PairingLost(RequestSource source) const {
  using format::LossSource;
  auto lost = [this](LossSource from) { return lost_by_source_[static_cast<size_t>(from)]; };
  const LossSource own = source == RequestSource::kUprobe ? LossSource::kUprobe
                         : source == RequestSource::kUsdt ? LossSource::kUsdt
                                                          : LossSource::kShim;
  return lost(own) + lost(LossSource::kMerge) + lost(LossSource::kWriter) +
         lost(LossSource::kShipper);
}

void ReportModel::Finish() {
  timeline_.Finish(last_ns_);
  kind_stats_.resize(kinds_.kinds().size());
  // Requests still open at the end never ended in the trace.
  for (auto& [tid, account] : accounts_) {
    for (const OpenRequest& open : account.open) ++kind_stats_[open.kind].unpaired_begins;
  }
  for (const auto& [key, passed] : passed_) ++kind_stats_[passed->kind].passed_not_taken;
  for (size_t k = 0; k < kind_stats_.size(); ++k) {
    const KindStats& stats = kind_stats_[k];
    const RequestKind& kind = kinds_.kinds()[k];
    KindReport report{kind};
    report.count = stats.latency.count();
    report.unpaired_begins = stats.unpaired_begins;
    report.unpaired_ends = stats.unpaired_ends;
    report.unwound = stats.unwound;
    report.longjmped = stats.longjmped;
    report.passed_not_taken = stats.passed_not_taken;
    report.pairing_lost = PairingLost(kind.source);
    if (report.count == 0 && report.unpaired_begins == 0 && report.unpaired_ends == 0 &&
        report.passed_not_taken == 0) {
      continue;
    }
    report.total_ns = stats.latency.total();
    report.p50_ns = stats.latency.Quantile(0.5);
    report.p90_ns = stats.latency.Quantile(0.9);
    report.p99_ns = stats.latency.Quantile(0.99);
    report.max_ns = stats.latency.max();
    if (options_.slow_ns) {
      report.threshold_ns = *options_.slow_ns;
      report.threshold_rule = "--slow";
      report.slow = Classify(stats.over_threshold, kind.short_name);
    } else if (report.count != 0) {
      const size_t from = stats.latency.QuantileBucket(0.9);
      report.threshold_ns = LatencyHistogram::BucketFloor(from);
      report.threshold_rule = "p90";
      Anatomy slow;
      for (size_t bucket = from; bucket < stats.by_bucket.size(); ++bucket) {
        if (stats.by_bucket[bucket]) slow.Merge(*stats.by_bucket[bucket]);
      }
      report.slow = Classify(slow, kind.short_name);
    }
    kind_reports_.push_back(std::move(report));
  }
  std::sort(kind_reports_.begin(), kind_reports_.end(), [](const KindReport& a, const KindReport& b) {
    return a.slow.duration_ns != b.slow.duration_ns ? a.slow.duration_ns > b.slow.duration_ns
                                                    : a.kind.name < b.kind.name;
  });

  // Each extent once: requests of one thread that begin and end within 1 %
  // of each other are one request seen by several sources.
  std::vector<bool> folded(finished_.size(), false);
  for (size_t i = 0; i < finished_.size() && slowest_reports_.size() < options_.list; ++i) {
    if (folded[i]) continue;
    const Finished& f = finished_[i];
    RequestReport report{kinds_.kinds()[f.kind], {}, NameOf(f.tid), std::nullopt,
                         f.begin_ns,             f.duration_ns, f.args};
    if (f.first_tid != 0 && f.first_tid != f.tid) report.passed_from = NameOf(f.first_tid);
    const uint64_t slack = std::max<uint64_t>(f.duration_ns / 100, 1000);
    for (size_t j = i + 1; j < finished_.size(); ++j) {
      const Finished& g = finished_[j];
      if (folded[j] || g.tid != f.tid) continue;
      const uint64_t begin_gap = g.begin_ns > f.begin_ns ? g.begin_ns - f.begin_ns : f.begin_ns - g.begin_ns;
      const uint64_t end_f = f.begin_ns + f.duration_ns, end_g = g.begin_ns + g.duration_ns;
      const uint64_t end_gap = end_g > end_f ? end_g - end_f : end_f - end_g;
      if (begin_gap > slack || end_gap > slack) continue;
      folded[j] = true;
      const RequestKind& other = kinds_.kinds()[g.kind];
      report.also.push_back(fmt::format("{} {}", RequestSourceName(other.source), other.name));
      if (report.args.empty()) report.args = g.args;
    }
    report.breakdown = Classify(f.anatomy, report.kind.short_name);
    report.unwound = f.unwound;
    slowest_reports_.push_back(std::move(report));
  }

  // Every thread's waits by stack, summed across threads.
  Counts<uint64_t> waits_inside, waits_outside;
  for (const auto& [tid, account] : accounts_) {
    if (!stacks_.threads().Traced(tid)) continue;
    thread_reports_.push_back({NameOf(tid), Classify(account.ledger.inside(), ""),
                               Classify(account.ledger.outside(), "")});
    waits_inside.Merge(account.ledger.inside().blocked);
    waits_outside.Merge(account.ledger.outside().blocked);
  }
  top_waits_[0] = BlockingStacks(waits_outside, options_.top);
  top_waits_[1] = BlockingStacks(waits_inside, options_.top);
  std::sort(thread_reports_.begin(), thread_reports_.end(),
            [](const ThreadReport& a, const ThreadReport& b) { return a.thread.tid < b.thread.tid; });
}

std::vector<ReportModel::FunctionCost> ReportModel::TopFunctions(size_t n) const {
  std::map<std::string, FunctionCost> costs;
  for (const auto& [id, samples] : samples_by_stack_) {
    const std::vector<NamedFrame> frames = stacks_.StackFrames(id);
    if (frames.empty()) continue;
    const std::string self = SampledFunction(frames);
    costs[self].self += samples;
    std::set<std::string> seen{self};
    costs[self].total += samples;
    for (const NamedFrame& frame : frames) {
      if (frame.function == kUnwindStoppedName) continue;  // a mark, not a function
      if (seen.insert(frame.function).second) costs[frame.function].total += samples;
    }
  }
  std::vector<FunctionCost> top;
  for (auto& [name, cost] : costs) {
    cost.name = name;
    top.push_back(cost);
  }
  std::sort(top.begin(), top.end(), [](const FunctionCost& a, const FunctionCost& b) {
    return a.self != b.self ? a.self > b.self : a.total > b.total;
  });
  if (top.size() > n) top.resize(n);
  return top;
}

std::vector<StackShare> ReportModel::TopWaits(bool inside, size_t n) const {
  const std::vector<StackShare>& top = top_waits_[inside ? 1 : 0];
  return {top.begin(), top.begin() + static_cast<ptrdiff_t>(std::min(n, top.size()))};
}

}  // namespace loupe::analysis
