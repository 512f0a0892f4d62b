// The one options builder: defaults + AttachRequest + caller, as louped's
// Attach, tracectl's embedded mode and --check-config all use it.
#include "daemon/control/session_options.h"

#include <gtest/gtest.h>

namespace loupe::control {
namespace {

session::SessionOptions Defaults() {
  session::SessionOptions defaults;
  defaults.sources.sample_hz = 49;
  defaults.sources.ring_bytes = 1 << 20;
  defaults.writer.directory = "/var/lib/loupe/traces";
  defaults.writer.max_file_size = 1 << 20;
  defaults.writer.max_total_size = 8 << 20;
  return defaults;
}

v1::AttachRequest Request() {
  v1::AttachRequest request;
  request.add_pids(42);
  request.set_session_id("s1");
  return request;
}

TEST(SessionOptionsTest, UnsetRequestFieldsKeepTheDefaults) {
  auto options = BuildSessionOptions(Defaults(), Request(), {.pid = 7, .uid = 0});
  ASSERT_TRUE(options.ok()) << options.status();
  EXPECT_EQ(options->pids, std::vector<uint32_t>{42});
  EXPECT_EQ(options->caller_pid, 7u);
  EXPECT_EQ(options->sources.sample_hz, 49u);
  EXPECT_EQ(options->sources.ring_bytes, 1u << 20);
  EXPECT_EQ(options->writer.directory, "/var/lib/loupe/traces");
  EXPECT_EQ(options->writer.session_id, "s1");
  EXPECT_EQ(options->writer.max_total_size, 8u << 20);
  EXPECT_EQ(options->duration_ns, 0u);
  EXPECT_TRUE(options->sources.sched && options->sources.cpu && options->sources.shim);
}

TEST(SessionOptionsTest, RequestFieldsOverride) {
  v1::AttachRequest request = Request();
  request.set_sample_hz(999);
  request.set_ring_buffer_size(1 << 16);
  request.add_sources("sched");
  request.set_offcpu_stacks("none");
  request.set_duration_ms(1500);
  request.set_follow_children(true);
  request.set_content_policy("full");
  request.set_output_dir("/tmp");
  request.add_uprobes("libc:malloc");
  auto options = BuildSessionOptions(Defaults(), request, {});
  ASSERT_TRUE(options.ok()) << options.status();
  EXPECT_EQ(options->sources.sample_hz, 999u);
  EXPECT_EQ(options->sources.ring_bytes, 1u << 16);
  EXPECT_TRUE(options->sources.sched);
  EXPECT_FALSE(options->sources.cpu);
  EXPECT_FALSE(options->sources.offcpu_user_stacks);
  EXPECT_EQ(options->duration_ns, 1'500'000'000u);
  EXPECT_TRUE(options->sources.follow_children);
  EXPECT_EQ(options->content_policy, session::ContentPolicy::kFull);
  EXPECT_EQ(options->writer.directory, "/tmp");
  EXPECT_EQ(options->probes.uprobes.size(), 1u);
}

TEST(SessionOptionsTest, RefusalsNameTheField) {
  struct Case {
    void (*change)(v1::AttachRequest&);
    std::string expected;
  };
  const Case cases[] = {
      {[](v1::AttachRequest& r) { r.set_ring_buffer_size(12345); },
       "ring_buffer_size = 12345 must be a power of two"},
      {[](v1::AttachRequest& r) { r.add_sources("disk"); }, "unknown source 'disk'"},
      {[](v1::AttachRequest& r) { r.set_sample_event("instructions"); }, "sample_event"},
      {[](v1::AttachRequest& r) { r.set_sample_hz(20000); }, "sample_hz = 20000"},
      {[](v1::AttachRequest& r) { r.set_content_policy("some"); }, "some"},
      {[](v1::AttachRequest& r) { r.clear_pids(); }, "no target pid"},
      {[](v1::AttachRequest& r) { r.set_session_id("../x"); }, "session_id '../x'"},
      {[](v1::AttachRequest& r) { r.add_uprobes("nocolon"); }, "nocolon"},
  };
  for (const Case& c : cases) {
    v1::AttachRequest request = Request();
    c.change(request);
    auto options = BuildSessionOptions(Defaults(), request, {});
    ASSERT_FALSE(options.ok()) << c.expected;
    EXPECT_NE(options.status().ToString().find(c.expected), std::string::npos)
        << options.status();
  }
}

TEST(SessionOptionsTest, DefaultsThatNoAttachCouldUseAreRefused) {
  session::SessionOptions defaults = Defaults();
  defaults.writer.max_total_size = defaults.writer.max_file_size;  // below twice
  auto options = BuildSessionOptions(defaults, Request(), {});
  ASSERT_FALSE(options.ok());
  EXPECT_NE(options.status().ToString().find("max_total_size"), std::string::npos);
}

TEST(SessionOptionsTest, EmbeddedDefaultsWriteToLoupeTraces) {
  auto options = BuildSessionOptions(EmbeddedDefaults(), Request(),
                                     {.uid = 1000, .gid = 1000, .in_process = true});
  ASSERT_TRUE(options.ok()) << options.status();
  EXPECT_EQ(options->writer.directory, "loupe-traces");
  EXPECT_EQ(options->caller_pid, 0u);  // pids as this process sees them
  EXPECT_EQ(options->caller_uid, 1000u);
}

// Issue 15: louped's resources and the kernel's layout are not any caller's.
TEST(SessionOptionsTest, ACallerOtherThanRootGetsNoLargerRingThanLoupedsOwn) {
  v1::AttachRequest request = Request();
  request.set_ring_buffer_size(1 << 30);
  auto refused = BuildSessionOptions(Defaults(), request, {.pid = 7, .uid = 1000, .gid = 1000});
  ASSERT_FALSE(refused.ok());
  EXPECT_EQ(refused.status().code(), absl::StatusCode::kPermissionDenied);
  EXPECT_NE(refused.status().ToString().find(
                "ring_buffer_size = 1073741824 is above louped's ring_buffer_size = 1048576"),
            std::string::npos)
      << refused.status();
  // Up to louped's own setting is fine; root and the embedded mode are not limited.
  request.set_ring_buffer_size(1 << 20);
  EXPECT_TRUE(BuildSessionOptions(Defaults(), request, {.pid = 7, .uid = 1000}).ok());
  request.set_ring_buffer_size(1 << 30);
  auto root = BuildSessionOptions(Defaults(), request, {.pid = 7, .uid = 0});
  ASSERT_TRUE(root.ok()) << root.status();
  EXPECT_EQ(root->sources.ring_bytes, 1u << 30);
  EXPECT_TRUE(
      BuildSessionOptions(Defaults(), request, {.uid = 1000, .in_process = true}).ok());
}

TEST(SessionOptionsTest, KernelStacksAreOffForACallerOtherThanRootAndSaidSo) {
  v1::AttachRequest request = Request();
  request.set_offcpu_stacks("user,kernel");
  auto user = BuildSessionOptions(Defaults(), request, {.pid = 7, .uid = 1000, .gid = 1000});
  ASSERT_TRUE(user.ok()) << user.status();
  EXPECT_FALSE(user->sources.offcpu_kernel_stacks);
  EXPECT_FALSE(user->sources.cpu_kernel_stacks);
  EXPECT_TRUE(user->sources.offcpu_user_stacks);
  ASSERT_EQ(user->notes.size(), 1u);
  EXPECT_NE(user->notes[0].find("kernel stacks are off for a caller other than root (uid 1000): "
                                "off-CPU and CPU sample stacks"),
            std::string::npos)
      << user->notes[0];

  auto root = BuildSessionOptions(Defaults(), request, {.pid = 7, .uid = 0});
  ASSERT_TRUE(root.ok());
  EXPECT_TRUE(root->sources.offcpu_kernel_stacks);
  EXPECT_TRUE(root->sources.cpu_kernel_stacks);
  EXPECT_TRUE(root->notes.empty());

  // Nothing asked, nothing to say.
  request.set_offcpu_stacks("user");
  request.add_sources("sched");
  auto quiet = BuildSessionOptions(Defaults(), request, {.pid = 7, .uid = 1000});
  ASSERT_TRUE(quiet.ok()) << quiet.status();
  EXPECT_TRUE(quiet->notes.empty()) << quiet->notes[0];
}

}  // namespace
}  // namespace loupe::control
