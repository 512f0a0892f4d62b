// A process's executable mappings become keys of BPF's longest-prefix-match
// trie: together they must cover each mapping exactly, no byte more (a
// neighbouring mapping would take the wrong table) and no byte less.
#include <gtest/gtest.h>

#include <cstring>

#include "daemon/bpf/unwind_maps.h"

namespace loupe::bpf {
namespace {

struct Block {
  uint64_t start, size;
};

Block BlockOf(const loupe_unwind_key& key) {
  uint64_t big_endian = 0;
  std::memcpy(&big_endian, key.address, sizeof big_endian);
  const uint32_t bits = key.prefixlen - 32;
  return {__builtin_bswap64(big_endian), bits == 0 ? 0 : uint64_t{1} << (64 - bits)};
}

void ExpectExactCover(uint64_t start, uint64_t end) {
  const std::vector<loupe_unwind_key> keys = UnwindKeys(42, start, end);
  ASSERT_FALSE(keys.empty());
  EXPECT_LE(keys.size(), 128u);
  uint64_t next = start;
  for (const loupe_unwind_key& key : keys) {
    EXPECT_EQ(key.tgid, 42u);
    const Block block = BlockOf(key);
    EXPECT_EQ(block.start, next) << "gap or overlap";
    EXPECT_EQ(block.start % block.size, 0u) << "a prefix must be aligned to its size";
    next = block.start + block.size;
  }
  EXPECT_EQ(next, end);
}

TEST(UnwindKeysTest, MappingsAreCoveredExactly) {
  ExpectExactCover(0x400000, 0x401000);                // one page
  ExpectExactCover(0x55d0c0a3f000, 0x55d0c0b6e000);    // a PIE's text
  ExpectExactCover(0x7f3a1c028000, 0x7f3a1c1bd000);    // libc's text
  ExpectExactCover(0x7ffd3b5f4000, 0x7ffd3b5f6000);    // the vDSO
  ExpectExactCover(0x1000, 0x00007ffffffff000);        // nearly all of user space
}

TEST(UnwindKeysTest, AnAlignedPowerOfTwoIsOneKey) {
  const std::vector<loupe_unwind_key> keys = UnwindKeys(7, 0x7f0000000000, 0x7f0000100000);
  ASSERT_EQ(keys.size(), 1u);
  EXPECT_EQ(keys[0].prefixlen, 32u + 44u);
}

TEST(UnwindKeysTest, AnEmptyRangeHasNoKeys) { EXPECT_TRUE(UnwindKeys(7, 0x1000, 0x1000).empty()); }

}  // namespace
}  // namespace loupe::bpf
