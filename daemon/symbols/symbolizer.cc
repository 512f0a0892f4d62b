#include "daemon/symbols/symbolizer.h"

#include <fmt/format.h>
#include <spdlog/spdlog.h>

#include <chrono>

namespace loupe::symbols {

Symbolizer::Symbolizer(Resolver resolver, std::chrono::milliseconds stop_wait)
    : kernel_(KernelSymbols::Load()), stop_wait_(stop_wait), state_(std::make_shared<State>()) {
  state_->resolver = std::move(resolver);
  thread_ = std::thread([state = state_] { Run(state); });
}

Symbolizer::~Symbolizer() {
  std::unique_lock<std::mutex> lock(state_->mutex);
  state_->stop = true;
  state_->work.notify_all();
  const bool exited = state_->exited_changed.wait_for(lock, stop_wait_,
                                                      [this] { return state_->exited; });
  lock.unlock();
  if (exited) {
    thread_.join();
    return;
  }
  // A job still runs (libdw on a huge file, a debuginfod download): it owns
  // its state through the shared pointer, and ends by itself.
  thread_.detach();
  spdlog::warn("symbolizer: a symbol lookup still runs after {} ms; leaving it to finish on its "
               "own (its result is dropped)",
               stop_wait_.count());
}

std::string Symbolizer::ObjectKey(const ObjectFile& object) {
  return object.build_id.empty() ? fmt::format("file@{}", static_cast<const void*>(&object))
                                 : object.build_id;
}

void Symbolizer::Prefetch(const std::shared_ptr<const ObjectFile>& object, uint64_t file_offset) {
  {
    std::lock_guard<std::mutex> lock(state_->mutex);
    if (state_->frames.contains(Key{ObjectKey(*object), file_offset})) return;
    state_->queue.push_back({object, file_offset});
  }
  state_->work.notify_one();
}

std::optional<std::vector<SourceFrame>> Symbolizer::Lookup(const ObjectFile& object,
                                                           uint64_t file_offset) {
  std::lock_guard<std::mutex> lock(state_->mutex);
  auto it = state_->frames.find(Key{ObjectKey(object), file_offset});
  if (it == state_->frames.end()) return std::nullopt;
  return it->second;
}

bool Symbolizer::WaitIdle(uint64_t timeout_ns) {
  std::unique_lock<std::mutex> lock(state_->mutex);
  return state_->idle.wait_for(lock, std::chrono::nanoseconds(timeout_ns), [this] {
    return state_->queue.empty() && !state_->busy;
  });
}

std::vector<std::string> Symbolizer::Notes() {
  std::vector<std::string> notes;
  if (!kernel_.note().empty()) notes.push_back(kernel_.note());
  std::lock_guard<std::mutex> lock(state_->mutex);
  for (const auto& [key, note] : state_->notes) notes.push_back(note);
  return notes;
}

uint64_t Symbolizer::resolved() const {
  std::lock_guard<std::mutex> lock(state_->mutex);
  return state_->frames.size();
}

void Symbolizer::Run(const std::shared_ptr<State>& state) {
  State& s = *state;
  std::unique_lock<std::mutex> lock(s.mutex);
  while (true) {
    // Whatever emptied the queue (a resolved location, or a request already
    // answered), a waiter hears it: WaitIdle never outwaits an empty queue.
    if (s.queue.empty()) s.idle.notify_all();
    s.work.wait(lock, [&s] { return s.stop || !s.queue.empty(); });
    if (s.stop) break;
    Request request = std::move(s.queue.front());
    s.queue.pop_front();
    Key key{ObjectKey(*request.object), request.offset};
    if (s.frames.contains(key)) continue;  // asked twice before it was resolved
    s.busy = true;
    lock.unlock();
    // DWARF is read here, without the lock: the session thread never waits on it.
    std::vector<SourceFrame> frames;
    std::string note;
    if (s.resolver) {
      frames = s.resolver(*request.object, request.offset);
    } else {
      auto& file = s.files[key.object];
      if (file == nullptr) file = std::make_unique<ElfSymbolizer>(*request.object);
      frames = file->Symbolize(request.offset);
      note = file->note();
    }
    lock.lock();
    if (!note.empty()) s.notes[key.object] = std::move(note);
    s.frames.emplace(std::move(key), std::move(frames));
    s.busy = false;
  }
  s.exited = true;
  s.exited_changed.notify_all();
}

}  // namespace loupe::symbols
