#include "daemon/symbols/address_spaces.h"

namespace loupe::symbols {

bool AddressSpaces::Take(uint32_t pid, Space& space, uint64_t now_ns) {
  space.taken_ns = now_ns;
  absl::StatusOr<std::vector<Mapping>> mappings = ReadProcMaps(pid);
  if (!mappings.ok()) return false;  // gone: the last snapshot stays
  space.snapshots.push_back(std::make_unique<std::vector<Mapping>>(*std::move(mappings)));
  const std::vector<Mapping>& snapshot = *space.snapshots.back();
  space.objects.assign(snapshot.size(), nullptr);
  for (size_t i = 0; i < snapshot.size(); ++i) {
    const Mapping& mapping = snapshot[i];
    if (!mapping.HasObject()) continue;
    const auto key = std::tuple(mapping.device, mapping.inode, mapping.path);
    auto known = objects_.find(key);
    if (known == objects_.end() || mapping.deleted) {
      absl::StatusOr<ObjectFile> opened = OpenObject(pid, mapping);
      if (!opened.ok()) continue;
      known = objects_.insert_or_assign(key, std::make_shared<ObjectFile>(*std::move(opened))).first;
    }
    space.objects[i] = known->second;
  }
  return true;
}

void AddressSpaces::Snapshot(uint32_t pid, uint64_t now_ns, bool exec) {
  Space& space = spaces_[pid];
  if (Take(pid, space, now_ns) || !exec) return;
  space.snapshots.push_back(std::make_unique<std::vector<Mapping>>());
  space.objects.clear();
}

void AddressSpaces::Forked(uint32_t parent, uint32_t child, uint64_t now_ns) {
  Space& space = spaces_[child];
  if (Take(child, space, now_ns)) return;
  const auto inherited = spaces_.find(parent);
  if (inherited == spaces_.end() || inherited->second.snapshots.empty()) return;
  space.snapshots.push_back(
      std::make_unique<std::vector<Mapping>>(*inherited->second.snapshots.back()));
  space.objects = inherited->second.objects;
}

Location AddressSpaces::Locate(uint32_t pid, uint64_t address, uint64_t now_ns) {
  Space& space = spaces_[pid];
  auto find = [&]() -> Location {
    if (space.snapshots.empty()) return {};
    const std::vector<Mapping>& snapshot = *space.snapshots.back();
    const Mapping* mapping = FindMapping(snapshot, address);
    if (mapping == nullptr) return {};
    const size_t index = static_cast<size_t>(mapping - snapshot.data());
    return {space.objects[index], mapping, address - mapping->start + mapping->offset};
  };
  Location found = find();
  if (found.mapping == nullptr && now_ns >= space.taken_ns + kMinRefreshIntervalNs) {
    Take(pid, space, now_ns);
    found = find();
  }
  return found;
}

}  // namespace loupe::symbols
