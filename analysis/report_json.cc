// The report as one JSON document; its fields are in docs/report.md ("JSON").
#include <nlohmann/json.hpp>

#include "analysis/report_output.h"

namespace loupe::analysis {
namespace {

using Json = nlohmann::ordered_json;

Json Thread(const ThreadName& who) {
  return {{"tid", who.tid}, {"pid", who.pid}, {"thread", who.thread}, {"process", who.process}};
}

Json Frames(const std::vector<NamedFrame>& frames) {
  Json out = Json::array();
  for (const NamedFrame& frame : frames) out.push_back(FrameText(frame));
  return out;
}

Json Parts(const Breakdown& b) {
  Json off = Json::object();
  for (const auto& [wait, ns] : b.off_cpu_ns) off[wait] = ns;
  return {{"on_cpu_ns", b.on_cpu_ns},
          {"runqueue_ns", b.runq_ns},
          {"throttled_ns", b.throttled_ns},
          {"queued_ns", b.queued_ns},
          {"unaccounted_ns", b.unaccounted_ns},
          {"off_cpu_ns", off}};
}

Json Handoffs(const Breakdown& b) {
  Json out = Json::array();
  for (const auto& handoff : b.handoffs) {
    out.push_back({{"from", Thread(handoff.from)}, {"to", Thread(handoff.to)}, {"ns", handoff.ns}});
  }
  return out;
}

Json Holders(const Breakdown& b) {
  Json out = Json::array();
  for (const Breakdown::Holder& holder : b.holders) {
    Json row = Thread(holder.who);
    row["ns"] = holder.ns;
    row["doing"] = holder.doing;  // sampled; "" unknown (an untraced holder has no samples)
    out.push_back(row);
  }
  return out;
}

Json Wakers(const Breakdown& b) {
  Json out = Json::array();
  for (const auto& waker : b.wakers) {
    Json row = Thread(waker.who);
    row["context"] = waker.context;
    row["ns"] = waker.ns;
    row["doing"] = waker.doing;
    row["doing_off_cpu"] = waker.doing_off_cpu;
    // Off CPU itself: who ended that wait.
    row["doing_woken_by"] = waker.doing_woken_by ? Thread(*waker.doing_woken_by) : Json();
    out.push_back(row);
  }
  return out;
}

Json Functions(const Breakdown& b) {
  Json out = Json::array();
  for (const auto& [name, samples] : b.functions) out.push_back({{"name", name}, {"samples", samples}});
  return out;
}

Json Slow(const KindReport& kind) {
  const Breakdown& b = kind.slow;
  Json slow = {{"threshold_ns", kind.threshold_ns}, {"threshold_rule", kind.threshold_rule},
               {"count", b.count}, {"evidence_count", b.evidence_count},
               {"total_ns", b.duration_ns}, {"dominant", b.dominant},
               {"dominant_class", b.dominant_class}};
  slow["shares"] = {{"on_cpu", b.Share(b.on_cpu_ns)},
                    {"blocked", b.Share(b.blocked_ns)},
                    {"sleep", b.Share(b.sleep_ns)},
                    {"runqueue", b.Share(b.runq_ns)},
                    {"queued", b.Share(b.queued_ns)},
                    {"unaccounted", b.Share(b.unaccounted_ns)}};
  slow.update(Parts(b));
  slow["sampled"] = {{"user_samples", b.user_samples},
                     {"kernel_samples", b.kernel_samples},
                     {"functions", Functions(b)}};
  Json stacks = Json::array();
  for (const StackShare& stack : b.stacks) {
    stacks.push_back({{"class", stack.wait}, {"ns", stack.ns}, {"frames", Frames(stack.frames)},
                      {"function", stack.function}});
  }
  slow["blocking_stacks"] = stacks;
  slow["cpu_holders"] = Holders(b);
  slow["wakers"] = Wakers(b);
  slow["handoffs"] = Handoffs(b);
  slow["sentence"] = b.sentence;
  return slow;
}

Json Request(const RequestReport& request, uint64_t first_ns) {
  const Breakdown& b = request.breakdown;
  Json out = {{"kind", RequestSourceName(request.kind.source)}, {"name", request.kind.name},
              {"also", request.also}};
  out.update(Thread(request.thread));
  out["passed_from"] = request.passed_from ? Thread(*request.passed_from) : Json();
  out["begin_ns"] = request.begin_ns;
  out["begin_offset_ns"] = request.begin_ns - first_ns;
  out["duration_ns"] = request.duration_ns;
  out["args"] = request.args;
  // Left by an exception (timed to its catch) or a longjmp (to the jump).
  out["left_by"] = request.unwound == format::Unwound::kByException ? "exception"
                   : request.unwound == format::Unwound::kByLongjmp ? "longjmp"
                                                                    : "return";
  out.update(Parts(b));
  out["dominant"] = b.dominant;
  out["dominant_class"] = b.dominant_class;
  out["cpu_holders"] = Holders(b);
  out["wakers"] = Wakers(b);
  out["handoffs"] = Handoffs(b);
  out["taker_while_queued"] =
      b.handoffs.empty() ? Json()
                         : Json{{"outside_requests_ns", b.taker.outside_ns},
                                {"in_other_requests_ns", b.taker.inside_ns},
                                {"off_cpu_ns", b.taker.blocked_ns + b.taker.runq_ns},
                                {"blocked_ns", b.taker.blocked_ns},
                                {"runqueue_ns", b.taker.runq_ns},
                                {"unplaced_ns", b.taker.unplaced_ns},
                                {"function", b.taker.function},
                                {"known", b.taker.unknown == 0}};
  out["blocking_stack"] = b.stacks.empty() ? Json::array() : Frames(b.stacks.front().frames);
  out["functions"] = Functions(b);
  out["sentence"] = b.sentence;
  return out;
}

}  // namespace

std::string ReportJson(const ReportModel& model, const TraceVerdict& verdict) {
  Json doc;
  doc["verdict"] = {{"complete", verdict.complete},
                    {"losses", verdict.losses.lost},
                    {"cuts", verdict.losses.cut},
                    {"problems", verdict.problems},
                    {"notes", verdict.notes},
                    {"events", verdict.events}};
  doc["sched_data"] = model.has_sched_data();
  // false when scheduler events were lost or a switch is missing: threads'
  // times then fall short.
  doc["times_exact"] = model.times_exact(verdict.SwitchesMayBeLost() + verdict.problems.size());
  doc["trace"] = {{"first_ns", model.first_ns()},
                  {"last_ns", model.last_ns()},
                  {"duration_ns", model.last_ns() - model.first_ns()},
                  {"sample_hz", model.sample_hz()},
                  {"inferred_switches", model.inferred_switches()},
                  // 0 none; before it, time in requests counts as outside them
                  {"first_request_event_ns", model.first_request_event_ns()},
                  {"unplaced", {{"stretches", model.unplaced_stretches()},
                                {"ns", model.unplaced_ns()},
                                {"last_end_ns", model.unplaced_last_end_ns()}}},
                  {"starts_mid_session", model.starts_mid_session()},
                  {"sessions", {{"count", model.sessions()},
                                {"threads_across", model.threads_across_sessions()},
                                {"threads_in_overlapping", model.threads_in_overlapping_sessions()}}}};
  Json kinds = Json::array();
  for (const KindReport& kind : model.kinds()) {
    Json row = {{"kind", RequestSourceName(kind.kind.source)},
                {"name", kind.kind.name},
                {"count", kind.count},
                {"total_ns", kind.total_ns},
                {"p50_ns", kind.p50_ns},
                {"p90_ns", kind.p90_ns},
                {"p99_ns", kind.p99_ns},
                {"max_ns", kind.max_ns},
                {"unpaired", {{"begins", kind.unpaired_begins}, {"ends", kind.unpaired_ends}}},
                // of count: calls an exception unwound, timed to its catch,
                // and calls a longjmp left, timed to the jump
                {"unwound", kind.unwound},
                {"longjmped", kind.longjmped},
                {"passed_not_taken", kind.passed_not_taken},
                {"pairing_lost", kind.pairing_lost}};
    row["slow"] = kind.slow.count != 0 ? Slow(kind)
                                       : Json{{"threshold_ns", kind.threshold_ns},
                                              {"threshold_rule", kind.threshold_rule},
                                              {"count", 0}};
    kinds.push_back(row);
  }
  doc["request_kinds"] = kinds;
  doc["ends_without_begin"] = model.ends_without_begin();
  Json slowest = Json::array();
  for (const RequestReport& request : model.slowest()) {
    slowest.push_back(Request(request, model.first_ns()));
  }
  doc["slowest"] = slowest;
  Json threads = Json::array();
  for (const ThreadReport& thread : model.threads()) {
    Json row = {{"tid", thread.thread.tid}, {"pid", thread.thread.pid},
                {"name", thread.thread.thread}, {"process", thread.thread.process},
                {"foreign", false}};
    row["in_requests"] = Parts(thread.inside);
    row["outside_requests"] = Parts(thread.outside);
    row["samples"] = thread.inside.user_samples + thread.inside.kernel_samples +
                     thread.outside.user_samples + thread.outside.kernel_samples;
    threads.push_back(row);
  }
  doc["threads"] = threads;
  Json functions = Json::array();
  for (const auto& cost : model.TopFunctions(model.options().top)) {
    functions.push_back({{"name", cost.name}, {"self", cost.self}, {"total", cost.total}});
  }
  doc["top_functions"] = {
      {"sampled", true}, {"samples", model.top_function_samples()}, {"functions", functions}};
  for (bool inside : {true, false}) {
    Json waits = Json::array();
    for (const StackShare& wait : model.TopWaits(inside, model.options().top)) {
      waits.push_back({{"class", wait.wait}, {"ns", wait.ns}, {"frames", Frames(wait.frames)},
                       {"function", wait.function}});
    }
    doc[inside ? "waits_in_requests" : "waits_outside_requests"] = waits;
  }
  doc["usdt"] = model.usdt();
  // What --since/--until narrowed the threads, top functions and waits to
  // (from the first event; until null: to the end).
  const ReportOptions& options = model.options();
  doc["window"] = {{"since_ns", options.since_ns},
                   {"until_ns", options.until_ns == UINT64_MAX ? Json() : Json(options.until_ns)}};
  // Names are the program's bytes (a thread's comm, a span's name), not always
  // UTF-8: a byte that is not becomes U+FFFD instead of failing the report.
  return doc.dump(-1, ' ', false, Json::error_handler_t::replace) + "\n";
}

}  // namespace loupe::analysis
