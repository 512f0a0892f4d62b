#include "daemon/symbols/symbolizer.h"

#include <fmt/format.h>

#include <chrono>

namespace loupe::symbols {

Symbolizer::Symbolizer() : kernel_(KernelSymbols::Load()), thread_([this] { Run(); }) {}

Symbolizer::~Symbolizer() {
  {
    std::lock_guard<std::mutex> lock(mutex_);
    stop_ = true;
  }
  work_.notify_all();
  thread_.join();
}

std::string Symbolizer::ObjectKey(const ObjectFile& object) {
  return object.build_id.empty() ? fmt::format("file@{}", static_cast<const void*>(&object))
                                 : object.build_id;
}

void Symbolizer::Prefetch(const std::shared_ptr<const ObjectFile>& object, uint64_t file_offset) {
  {
    std::lock_guard<std::mutex> lock(mutex_);
    if (frames_.contains(Key{ObjectKey(*object), file_offset})) return;
    queue_.push_back({object, file_offset});
  }
  work_.notify_one();
}

std::optional<std::vector<SourceFrame>> Symbolizer::Lookup(const ObjectFile& object,
                                                           uint64_t file_offset) {
  std::lock_guard<std::mutex> lock(mutex_);
  auto it = frames_.find(Key{ObjectKey(object), file_offset});
  if (it == frames_.end()) return std::nullopt;
  return it->second;
}

bool Symbolizer::WaitIdle(uint64_t timeout_ns) {
  std::unique_lock<std::mutex> lock(mutex_);
  return idle_.wait_for(lock, std::chrono::nanoseconds(timeout_ns),
                        [this] { return queue_.empty() && !busy_; });
}

std::vector<std::string> Symbolizer::Notes() {
  std::vector<std::string> notes;
  if (!kernel_.note().empty()) notes.push_back(kernel_.note());
  std::lock_guard<std::mutex> lock(mutex_);
  for (const auto& [key, note] : notes_) notes.push_back(note);
  return notes;
}

uint64_t Symbolizer::resolved() const {
  std::lock_guard<std::mutex> lock(mutex_);
  return frames_.size();
}

void Symbolizer::Run() {
  std::unique_lock<std::mutex> lock(mutex_);
  while (true) {
    // Whatever emptied the queue (a resolved location, or a request already
    // answered), a waiter hears it: WaitIdle never outwaits an empty queue.
    if (queue_.empty()) idle_.notify_all();
    work_.wait(lock, [this] { return stop_ || !queue_.empty(); });
    if (stop_) return;
    Request request = std::move(queue_.front());
    queue_.pop_front();
    Key key{ObjectKey(*request.object), request.offset};
    if (frames_.contains(key)) continue;  // asked twice before it was resolved
    busy_ = true;
    lock.unlock();
    // DWARF is read here, without the lock: the session thread never waits on it.
    auto& file = files_[key.object];
    if (file == nullptr) file = std::make_unique<ElfSymbolizer>(*request.object);
    std::vector<SourceFrame> frames = file->Symbolize(request.offset);
    lock.lock();
    if (!file->note().empty()) notes_[key.object] = file->note();
    frames_.emplace(std::move(key), std::move(frames));
    busy_ = false;
  }
}

}  // namespace loupe::symbols
