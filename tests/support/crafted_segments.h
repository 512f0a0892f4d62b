// Segments written by the real writer and then damaged on purpose, for the
// tests of bounded reading: frames duplicated, swapped or dropped, and
// frames replaced by ones that claim or decode to far more than a reader
// should ever allocate (decompression bombs).
#ifndef LOUPE_TESTS_SUPPORT_CRAFTED_SEGMENTS_H_
#define LOUPE_TESTS_SUPPORT_CRAFTED_SEGMENTS_H_

#include <cstddef>
#include <cstdint>
#include <string>
#include <string_view>
#include <vector>

namespace loupe::testing {

// A small sealed segment from SegmentWriter in `directory`: four event
// blocks of every kind, a symbol frame and the trailer. Returns its bytes.
std::string WriteSmallSegment(const std::string& directory, const std::string& session);

// The frames of a segment file, in order: [0] the signature, [1] the header
// (frame #0), [2] frame #1, and so on. Empty when the file cannot be split.
std::vector<std::string> SplitFrames(std::string_view file);
std::string JoinFrames(const std::vector<std::string>& frames);

// One zstd frame (as the writer compresses) holding Frame{field: body}.
std::string CompressFrame(uint32_t frame_field, std::string_view body);

struct CraftedSegment {
  std::string name;   // e.g. "stack-bomb-24m"
  std::string bytes;  // the whole file
  std::string what;   // one line for logs
};

// Bombs built from `segment` (a WriteSmallSegment file): each packs about
// `payload` bytes into frames of a few KiB that decode (or claim to decode)
// to much more. Frame numbers stay in order, so only the size gives them away.
std::vector<CraftedSegment> CraftBombs(std::string_view segment, size_t payload);

// `segment` with one event block duplicated, two swapped, one dropped.
std::vector<CraftedSegment> CraftReorderings(std::string_view segment);

}  // namespace loupe::testing

#endif  // LOUPE_TESTS_SUPPORT_CRAFTED_SEGMENTS_H_
