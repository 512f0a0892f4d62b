// The aggregates behind `tracectl report`, on records built by hand.
#include "tools/tracectl/report_model.h"

#include <gtest/gtest.h>

#include <random>

#include "tools/tracectl/latency_histogram.h"

namespace loupe::tracectl {
namespace {

TEST(LatencyHistogramTest, QuantilesWithinABucketOfExact) {
  LatencyHistogram histogram;
  std::vector<uint64_t> values;
  std::mt19937_64 rng(7);
  for (int i = 0; i < 100'000; ++i) {
    const uint64_t v = 1000 + rng() % 10'000'000;
    values.push_back(v);
    histogram.Add(v);
  }
  std::sort(values.begin(), values.end());
  for (double q : {0.5, 0.9, 0.99}) {
    const double exact = static_cast<double>(values[static_cast<size_t>(q * values.size()) - 1]);
    EXPECT_NEAR(static_cast<double>(histogram.Quantile(q)), exact, exact * 0.016) << q;
  }
  EXPECT_EQ(histogram.max(), values.back());
  EXPECT_EQ(histogram.count(), values.size());
  EXPECT_EQ(LatencyHistogram().Quantile(0.5), 0u);
  LatencyHistogram small;
  for (uint64_t v : {1u, 2u, 3u}) small.Add(v);
  EXPECT_EQ(small.Quantile(0.5), 2u);  // exact below 64 ns
}

TEST(ClassifyOffCpuTest, FromStateAndKernelStack) {
  auto k = [](std::initializer_list<const char*> names) {
    std::vector<NamedFrame> frames;
    for (const char* name : names) frames.push_back({name, "", 0, true});
    return frames;
  };
  EXPECT_EQ(ClassifyOffCpu(0, k({"schedule"})), "preempted");
  EXPECT_EQ(ClassifyOffCpu(1, k({"schedule", "futex_wait_queue", "do_futex"})), "lock wait (futex)");
  EXPECT_EQ(ClassifyOffCpu(1, k({"schedule", "do_nanosleep", "hrtimer_nanosleep"})), "sleep");
  EXPECT_EQ(ClassifyOffCpu(1, k({"schedule", "pipe_read"})), "I/O or pipe wait");
  EXPECT_EQ(ClassifyOffCpu(2, k({"schedule", "io_schedule"})), "I/O or pipe wait");
  EXPECT_EQ(ClassifyOffCpu(2, k({"schedule"})), "blocked (uninterruptible)");
  EXPECT_EQ(ClassifyOffCpu(1, {}), "sleeping");
}

format::Record At(uint64_t t, uint32_t tid, format::Payload payload) {
  return {.time_ns = t, .tid = tid, .payload = payload};
}

TEST(ReportModelTest, ThreadTimesSpansAndOperationFilter) {
  const uint64_t kFrames[] = {0x1000, 0x2000};
  auto feed = [&](ReportModel& model) {
    model.Add(At(1'000, 7, format::ThreadInfo{.pid = 7, .ns_tid = 7, .name = "main"}));
    model.Add(At(1'000, 1, format::SchedSwitch{.next_tid = 7}));
    model.Add(At(2'000, 7, format::SpanBegin{.span_id = 1, .operation_id = 5, .name = "work"}));
    model.Add(At(3'000, 7, format::CpuSample{.user_stack = kFrames, .operation_id = 5}));
    model.Add(At(4'000, 7, format::CpuSample{.user_stack = kFrames}));
    model.Add(At(6'000, 7, format::SpanEnd{.span_id = 1}));
    model.Add(At(11'000, 7, format::SchedSwitch{.next_tid = 1, .prev_state = 1}));
    model.Add(At(21'000, 7, format::OffCpu{.duration_ns = 10'000, .runq_ns = 500,
                                           .prev_state = 1, .operation_id = 5}));
  };
  ReportModel all({});
  feed(all);
  all.Finish();
  const ThreadTotals& thread = all.threads().at(7);
  EXPECT_EQ(thread.on_cpu_ns, 10'000u);
  EXPECT_EQ(thread.samples, 2u);
  EXPECT_EQ(thread.off_cpu_ns.at("sleeping"), 10'000u);
  EXPECT_EQ(thread.runq.max(), 500u);
  EXPECT_EQ(all.spans().at("work").count(), 1u);
  EXPECT_EQ(all.spans().at("work").max(), 4'000u);
  const std::vector<FunctionCost> top = all.TopFunctions(5);
  ASSERT_FALSE(top.empty());
  EXPECT_EQ(top[0].name, "0x1000");  // no symbols: the address
  EXPECT_EQ(top[0].self, 2u);

  ReportModel only({.operation = 5});
  feed(only);
  only.Finish();
  EXPECT_EQ(only.threads().at(7).samples, 1u);  // the sample outside the operation is out
  EXPECT_EQ(only.threads().at(7).on_cpu_ns, 0u);
  EXPECT_EQ(only.spans().at("work").count(), 1u);

  ReportModel other_pid({.pid = 99});
  feed(other_pid);
  other_pid.Finish();
  EXPECT_TRUE(other_pid.spans().empty());
  EXPECT_EQ(other_pid.samples(), 0u);
}

}  // namespace
}  // namespace loupe::tracectl
