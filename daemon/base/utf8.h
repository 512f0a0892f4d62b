// Names and paths are bytes (a thread's comm, a file name), but JSON and
// proto3 strings must be UTF-8: these tell the two apart and mend the rest.
#ifndef LOUPE_DAEMON_BASE_UTF8_H_
#define LOUPE_DAEMON_BASE_UTF8_H_

#include <cstddef>
#include <string>
#include <string_view>

namespace loupe {

// The length of the well-formed UTF-8 sequence (RFC 3629: no overlong
// forms, surrogates or code points past U+10FFFF) that starts at
// text[at], a non-ASCII byte; 0 when the bytes there are not one.
inline size_t Utf8SequenceLength(std::string_view text, size_t at) {
  const auto byte = [&](size_t i) {
    return at + i < text.size() ? static_cast<unsigned char>(text[at + i]) : 0;
  };
  const unsigned char lead = byte(0);
  size_t length = 0;
  unsigned char second_min = 0x80, second_max = 0xbf;
  if (lead >= 0xc2 && lead <= 0xdf) {
    length = 2;
  } else if (lead >= 0xe0 && lead <= 0xef) {
    length = 3;
    if (lead == 0xe0) second_min = 0xa0;
    if (lead == 0xed) second_max = 0x9f;
  } else if (lead >= 0xf0 && lead <= 0xf4) {
    length = 4;
    if (lead == 0xf0) second_min = 0x90;
    if (lead == 0xf4) second_max = 0x8f;
  } else {
    return 0;
  }
  if (byte(1) < second_min || byte(1) > second_max) return 0;
  for (size_t i = 2; i < length; ++i) {
    if (byte(i) < 0x80 || byte(i) > 0xbf) return 0;
  }
  return length;
}

// `text` with each byte that is not part of well-formed UTF-8 replaced by
// U+FFFD: for a message or a path shown to people through a proto3 string.
inline std::string Utf8Text(std::string_view text) {
  std::string out;
  out.reserve(text.size());
  for (size_t i = 0; i < text.size(); ++i) {
    if (static_cast<unsigned char>(text[i]) < 0x80) {
      out.push_back(text[i]);
    } else if (const size_t length = Utf8SequenceLength(text, i); length > 0) {
      out.append(text.substr(i, length));
      i += length - 1;
    } else {
      out += "\xef\xbf\xbd";
    }
  }
  return out;
}

}  // namespace loupe

#endif  // LOUPE_DAEMON_BASE_UTF8_H_
