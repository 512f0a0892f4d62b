// The session manager's lifecycle (issue 15), with fake sessions whose only
// job is to inject what is slow or fails: list and status answer while a
// start or a stop hangs; an ended session is released at once, keeping only
// its final figures, the oldest ended forgotten first; sessions that finish
// by themselves are reaped; a closed client connection ends the sessions it
// attached, unless detached on purpose; shutdown ends everything.
#include "daemon/control/session_manager.h"

#include <gtest/gtest.h>
#include <spdlog/sinks/null_sink.h>
#include <spdlog/spdlog.h>

#include <atomic>
#include <future>
#include <set>

namespace loupe::control {
namespace {

// Open by default; closed, waits block until it opens again.
class Gate {
 public:
  void Close() {
    std::lock_guard<std::mutex> lock(mutex_);
    open_ = false;
  }
  void Open() {
    std::lock_guard<std::mutex> lock(mutex_);
    open_ = true;
    changed_.notify_all();
  }
  void Wait() {
    std::unique_lock<std::mutex> lock(mutex_);
    changed_.wait(lock, [this] { return open_; });
  }

 private:
  std::mutex mutex_;
  std::condition_variable changed_;
  bool open_ = true;
};

struct World {
  std::atomic<int> live = 0;  // fake sessions not yet destroyed
  std::atomic<int> stops = 0;
  std::atomic<int> starting = 0;  // inside a start
  Gate start_gate, stop_gate;
  std::mutex mutex;
  std::set<std::string> finished;  // sessions that "finished by themselves"
  std::set<std::string> failing_ends;  // sessions whose last segment cannot be written
  std::map<std::string, ManagedSession::Deadline> deadlines;  // passed to Stop
  std::map<std::string, ManagedSession::Deadline> hurried;    // passed to Hurry
};

class FakeSession final : public ManagedSession {
 public:
  FakeSession(World* world, session::SessionOptions options)
      : world_(world), options_(std::move(options)) {
    ++world_->live;
    stats_.id = options_.writer.session_id;
    stats_.directory = options_.writer.directory;
    stats_.running = true;
    stats_.targets = options_.pids;
  }
  ~FakeSession() override { --world_->live; }
  absl::Status Stop(Deadline deadline) override {
    {
      std::lock_guard<std::mutex> lock(world_->mutex);
      world_->deadlines[options_.writer.session_id] = deadline;
    }
    ++world_->stops;
    world_->stop_gate.Wait();
    bool fails;
    {
      std::lock_guard<std::mutex> lock(world_->mutex);
      fails = world_->failing_ends.contains(options_.writer.session_id);
    }
    std::lock_guard<std::mutex> lock(mutex_);
    stats_.running = false;
    stats_.events = 123;
    if (!fails) return absl::OkStatus();
    stats_.losses["writer/write_failed"] = 7;
    return absl::DataLossError("write /full/s-000000.loupe.active: No space left on device");
  }
  void Hurry(Deadline deadline) override {
    std::lock_guard<std::mutex> lock(world_->mutex);
    world_->hurried[options_.writer.session_id] = deadline;
  }
  bool Finished() override {
    std::lock_guard<std::mutex> lock(world_->mutex);
    return world_->finished.contains(options_.writer.session_id);
  }
  session::SessionStats stats() const override {
    std::lock_guard<std::mutex> lock(mutex_);
    return stats_;
  }

 private:
  World* world_;
  session::SessionOptions options_;
  mutable std::mutex mutex_;
  session::SessionStats stats_;
};

SessionStarter FakeStarter(World* world) {
  return [world](session::SessionOptions options)
             -> absl::StatusOr<std::unique_ptr<ManagedSession>> {
    ++world->starting;
    world->start_gate.Wait();
    --world->starting;
    return std::make_unique<FakeSession>(world, std::move(options));
  };
}

std::unique_ptr<SessionManager> Manager(World* world, size_t max_ended = 64,
                                        size_t max_sessions_per_user = 8) {
  SessionManagerOptions options;
  options.defaults.writer.directory = "/tmp/loupe-manager-test";
  options.max_ended = max_ended;
  options.max_sessions_per_user = max_sessions_per_user;
  options.reap_interval = std::chrono::milliseconds(10);
  auto log = std::make_shared<spdlog::logger>("test", std::make_shared<spdlog::sinks::null_sink_mt>());
  return std::make_unique<SessionManager>(std::move(options), log, FakeStarter(world));
}

v1::AttachRequest Request(const std::string& id, bool detached = false) {
  v1::AttachRequest request;
  request.add_pids(4242);
  request.set_session_id(id);
  request.set_detached(detached);
  return request;
}

constexpr PeerCredentials kRoot{.pid = 1, .uid = 0, .gid = 0, .connection = 0};

PeerCredentials Client(uint64_t connection, uid_t uid = 0) {
  return {.pid = 1, .uid = uid, .gid = uid, .connection = connection};
}

std::map<std::string, bool> Listed(SessionManager& manager, const PeerCredentials& who = kRoot) {
  auto status = manager.Status("", who);
  EXPECT_TRUE(status.ok()) << status.status();
  std::map<std::string, bool> out;
  if (status.ok()) {
    for (const v1::SessionStatus& s : *status) out[s.session_id()] = s.running();
  }
  return out;
}

// Waits (bounded) for `condition`; a correctness check, not a timing one.
template <typename F>
bool Eventually(F condition) {
  for (int i = 0; i < 1000; ++i) {
    if (condition()) return true;
    std::this_thread::sleep_for(std::chrono::milliseconds(5));
  }
  return condition();
}

TEST(SessionManagerTest, ListAndAttachAnswerWhileAStartHangs) {
  World world;
  auto manager = Manager(&world);
  ASSERT_TRUE(manager->Attach(Request("quick"), kRoot).ok());
  world.start_gate.Close();
  auto slow = std::async(std::launch::async, [&] { return manager->Attach(Request("slow"), kRoot); });
  ASSERT_TRUE(Eventually([&] { return world.starting == 1; }));
  // The start still hangs: these return only if the lock is not held across it.
  EXPECT_EQ(Listed(*manager), (std::map<std::string, bool>{{"quick", true}}));
  EXPECT_EQ(manager->Attach(Request("slow"), kRoot).status().code(),
            absl::StatusCode::kAlreadyExists);  // its name is taken already
  EXPECT_TRUE(manager->Detach("quick", kRoot).ok());
  world.start_gate.Open();
  ASSERT_TRUE(slow.get().ok());
  EXPECT_EQ(Listed(*manager), (std::map<std::string, bool>{{"quick", false}, {"slow", true}}));
}

TEST(SessionManagerTest, ListAnswersWhileADetachHangs) {
  World world;
  auto manager = Manager(&world);
  ASSERT_TRUE(manager->Attach(Request("held"), kRoot).ok());
  ASSERT_TRUE(manager->Attach(Request("other"), kRoot).ok());
  world.stop_gate.Close();
  auto detach = std::async(std::launch::async, [&] { return manager->Detach("held", kRoot); });
  ASSERT_TRUE(Eventually([&] { return world.stops == 1; }));
  EXPECT_EQ(Listed(*manager).size(), 2u);
  EXPECT_TRUE(manager->Status("other", kRoot).ok());
  EXPECT_EQ(manager->Unfinished(), (std::vector<std::string>{"held", "other"}));
  // A second detach of the same session waits for the first, then agrees.
  auto again = std::async(std::launch::async, [&] { return manager->Detach("held", kRoot); });
  world.stop_gate.Open();
  auto first = detach.get();
  auto second = again.get();
  ASSERT_TRUE(first.ok()) << first.status();
  ASSERT_TRUE(second.ok()) << second.status();
  EXPECT_EQ(first->events(), 123u);
  EXPECT_EQ(second->events(), 123u);
  EXPECT_EQ(world.stops, 1);
}

TEST(SessionManagerTest, EndedSessionsAreReleasedAndTheOldestEndedForgottenFirst) {
  World world;
  auto manager = Manager(&world, /*max_ended=*/3);
  // Names in an order unlike the order they end in.
  const std::vector<std::string> ids = {"zeta", "alpha", "mu", "beta", "gamma"};
  for (const std::string& id : ids) ASSERT_TRUE(manager->Attach(Request(id), kRoot).ok());
  EXPECT_EQ(world.live, 5);
  for (const std::string& id : ids) {
    auto ended = manager->Detach(id, kRoot);
    ASSERT_TRUE(ended.ok()) << ended.status();
    EXPECT_FALSE(ended->running());
  }
  EXPECT_EQ(world.live, 0) << "an ended session still holds its resources";
  // The three that ended last, whatever their names.
  EXPECT_EQ(Listed(*manager),
            (std::map<std::string, bool>{{"mu", false}, {"beta", false}, {"gamma", false}}));
  auto final_figures = manager->Status("gamma", kRoot);
  ASSERT_TRUE(final_figures.ok());
  EXPECT_EQ(final_figures->front().events(), 123u);
  EXPECT_EQ(manager->Status("zeta", kRoot).status().code(), absl::StatusCode::kNotFound);
  // A name is free again once forgotten, and a running session is never forgotten.
  ASSERT_TRUE(manager->Attach(Request("zeta"), kRoot).ok());
  EXPECT_EQ(Listed(*manager).at("zeta"), true);
}

TEST(SessionManagerTest, ASessionThatFinishesByItselfIsReapedAndReleased) {
  World world;
  auto manager = Manager(&world);
  ASSERT_TRUE(manager->Attach(Request("timed"), kRoot).ok());
  ASSERT_TRUE(manager->Attach(Request("long"), kRoot).ok());
  {
    std::lock_guard<std::mutex> lock(world.mutex);
    world.finished.insert("timed");
  }
  ASSERT_TRUE(Eventually([&] { return world.live == 1; }));
  EXPECT_EQ(world.stops, 1);
  EXPECT_EQ(Listed(*manager), (std::map<std::string, bool>{{"long", true}, {"timed", false}}));
}

TEST(SessionManagerTest, AClosedConnectionEndsWhatItAttachedUnlessDetached) {
  World world;
  auto manager = Manager(&world);
  ASSERT_TRUE(manager->Attach(Request("watched"), Client(7)).ok());
  ASSERT_TRUE(manager->Attach(Request("background", /*detached=*/true), Client(7)).ok());
  ASSERT_TRUE(manager->Attach(Request("someone-else"), Client(8)).ok());
  manager->ConnectionClosed(7);
  ASSERT_TRUE(Eventually([&] { return world.live == 2; }));
  std::this_thread::sleep_for(std::chrono::milliseconds(50));  // a few more reaper rounds
  EXPECT_EQ(Listed(*manager), (std::map<std::string, bool>{{"background", true},
                                                           {"someone-else", true},
                                                           {"watched", false}}));
}

TEST(SessionManagerTest, AClientGoneWhileItsSessionStartedEndsItOnceStarted) {
  World world;
  auto manager = Manager(&world);
  world.start_gate.Close();
  auto attach =
      std::async(std::launch::async, [&] { return manager->Attach(Request("orphan"), Client(9)); });
  ASSERT_TRUE(Eventually([&] { return world.starting == 1; }));
  manager->ConnectionClosed(9);
  world.start_gate.Open();
  EXPECT_FALSE(attach.get().ok());
  EXPECT_EQ(world.live, 0);
  EXPECT_EQ(world.stops, 1);
}

TEST(SessionManagerTest, OthersSessionsAreNeitherListedNorDetachable) {
  World world;
  auto manager = Manager(&world);
  ASSERT_TRUE(manager->Attach(Request("mine"), Client(1, 1000)).ok());
  ASSERT_TRUE(manager->Attach(Request("roots"), Client(2, 0)).ok());
  EXPECT_EQ(Listed(*manager, Client(1, 1000)), (std::map<std::string, bool>{{"mine", true}}));
  EXPECT_EQ(manager->Detach("roots", Client(1, 1000)).status().code(),
            absl::StatusCode::kPermissionDenied);
  EXPECT_TRUE(manager->Detach("mine", Client(1, 1000)).ok());
}

TEST(SessionManagerTest, StopAllEndsEverySessionInParallelAndRefusesNewOnes) {
  World world;
  auto manager = Manager(&world);
  for (const char* id : {"a", "b", "c"}) ASSERT_TRUE(manager->Attach(Request(id), kRoot).ok());
  world.stop_gate.Close();
  auto stop_all = std::async(std::launch::async, [&] { manager->StopAll(); });
  // All three are being stopped at once: one slow seal holds up no other.
  ASSERT_TRUE(Eventually([&] { return world.stops == 3; }));
  world.stop_gate.Open();
  stop_all.get();
  EXPECT_EQ(world.live, 0);
  EXPECT_TRUE(manager->Unfinished().empty());
  EXPECT_EQ(manager->Attach(Request("late"), kRoot).status().code(),
            absl::StatusCode::kUnavailable);
}

// Issue 15: a hang-up handled before the Attach that the client sent got to
// reserve its entry found no session to orphan; the Attach must notice.
TEST(SessionManagerTest, AClientGoneBeforeItsAttachArrivedGetsNoSession) {
  World world;
  auto manager = Manager(&world);
  manager->ConnectionClosed(11);
  auto attached = manager->Attach(Request("late-orphan"), Client(11));
  ASSERT_FALSE(attached.ok());
  EXPECT_EQ(attached.status().code(), absl::StatusCode::kUnavailable);
  EXPECT_NE(attached.status().ToString().find("connection closed"), std::string::npos)
      << attached.status();
  EXPECT_EQ(world.live, 0);
  EXPECT_TRUE(Listed(*manager).empty());
  // A detached session does not depend on its connection; other connections are unaffected.
  EXPECT_TRUE(manager->Attach(Request("on-purpose", /*detached=*/true), Client(11)).ok());
  EXPECT_TRUE(manager->Attach(Request("other"), Client(12)).ok());
}

TEST(SessionManagerTest, ClosedConnectionsRememberedAreBounded) {
  World world;
  SessionManagerOptions options;
  options.defaults.writer.directory = "/tmp/loupe-manager-test";
  options.closed_connections_kept = 4;
  auto log = std::make_shared<spdlog::logger>("test", std::make_shared<spdlog::sinks::null_sink_mt>());
  SessionManager manager(std::move(options), log, FakeStarter(&world));
  for (uint64_t connection = 100; connection < 110; ++connection) {
    manager.ConnectionClosed(connection);
  }
  EXPECT_FALSE(manager.Attach(Request("recent"), Client(109)).ok());
  EXPECT_TRUE(manager.Attach(Request("forgotten"), Client(100)).ok());  // only the last 4 kept
}

TEST(SessionManagerTest, ACallerOtherThanRootHasAtMostItsLimitOfSessions) {
  World world;
  auto manager = Manager(&world, 64, /*max_sessions_per_user=*/2);
  ASSERT_TRUE(manager->Attach(Request("u1"), Client(1, 1000)).ok());
  ASSERT_TRUE(manager->Attach(Request("u2", /*detached=*/true), Client(1, 1000)).ok());
  auto third = manager->Attach(Request("u3"), Client(1, 1000));
  ASSERT_FALSE(third.ok());
  EXPECT_EQ(third.status().code(), absl::StatusCode::kResourceExhausted);
  EXPECT_NE(third.status().ToString().find(
                "uid 1000 has 2 sessions already, louped's max_sessions_per_user"),
            std::string::npos)
      << third.status();
  // Other users and root are not held by it.
  EXPECT_TRUE(manager->Attach(Request("v1"), Client(2, 1001)).ok());
  for (const char* id : {"r1", "r2", "r3"}) EXPECT_TRUE(manager->Attach(Request(id), kRoot).ok());
  // An ended session no longer counts.
  ASSERT_TRUE(manager->Detach("u1", Client(1, 1000)).ok());
  EXPECT_TRUE(manager->Attach(Request("u3"), Client(1, 1000)).ok());
}

TEST(SessionManagerTest, StopAllPassesItsDeadlineToEverySessionAndHurriesOneStopping) {
  World world;
  auto manager = Manager(&world);
  for (const char* id : {"a", "b"}) ASSERT_TRUE(manager->Attach(Request(id), kRoot).ok());
  world.stop_gate.Close();
  // "a" is being detached (no deadline) when shutdown begins.
  auto detach = std::async(std::launch::async, [&] { return manager->Detach("a", kRoot); });
  ASSERT_TRUE(Eventually([&] { return world.stops == 1; }));
  const auto deadline = std::chrono::steady_clock::now() + std::chrono::seconds(7);
  auto stop_all = std::async(std::launch::async, [&] { manager->StopAll(deadline); });
  ASSERT_TRUE(Eventually([&] {
    std::lock_guard<std::mutex> lock(world.mutex);
    return world.deadlines.contains("b") && world.hurried.contains("a");
  }));
  world.stop_gate.Open();
  stop_all.get();
  ASSERT_TRUE(detach.get().ok());
  std::lock_guard<std::mutex> lock(world.mutex);
  EXPECT_EQ(world.deadlines.at("a"), ManagedSession::Deadline::max());
  EXPECT_EQ(world.deadlines.at("b"), deadline);
  EXPECT_EQ(world.hurried.at("a"), deadline);
}

TEST(SessionManagerTest, AFailedStartFreesItsName) {
  World world;
  SessionManagerOptions options;
  options.defaults.writer.directory = "/tmp/loupe-manager-test";
  auto log = std::make_shared<spdlog::logger>("test", std::make_shared<spdlog::sinks::null_sink_mt>());
  SessionManager manager(std::move(options), log,
                         [](session::SessionOptions) -> absl::StatusOr<std::unique_ptr<ManagedSession>> {
                           return absl::PermissionDeniedError("attach: nope");
                         });
  EXPECT_EQ(manager.Attach(Request("x"), kRoot).status().code(),
            absl::StatusCode::kPermissionDenied);
  EXPECT_TRUE(Listed(manager).empty());
  EXPECT_TRUE(manager.Unfinished().empty());
  // A request the builder refuses never reaches the starter.
  v1::AttachRequest bad = Request("y");
  bad.set_ring_buffer_size(12345);
  EXPECT_EQ(manager.Attach(bad, kRoot).status().code(), absl::StatusCode::kInvalidArgument);
}

// A session whose end fails (its last segment could not be written) is
// still detached with its figures: the losses it counted and the error,
// so that tracectl prints both instead of the error alone.
TEST(SessionManagerTest, AFailedEndStillReportsItsFiguresAndTheError) {
  World world;
  world.failing_ends.insert("full");
  auto manager = Manager(&world);
  ASSERT_TRUE(manager->Attach(Request("full"), kRoot).ok());
  absl::StatusOr<v1::SessionStatus> ended = manager->Detach("full", kRoot);
  ASSERT_TRUE(ended.ok()) << ended.status();
  EXPECT_EQ(ended->events(), 123u);
  EXPECT_EQ(ended->losses().at("writer/write_failed"), 7u);
  EXPECT_EQ(ended->end_error(), "write /full/s-000000.loupe.active: No space left on device");
}

}  // namespace
}  // namespace loupe::control
