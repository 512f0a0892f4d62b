#include "daemon/symbols/kernel_btf_scan.h"

#include <bpf/btf.h>
#include <gtest/gtest.h>
#include <sys/mman.h>
#include <unistd.h>

#include <string>
#include <string_view>

#include "daemon/base/scoped_fd.h"

namespace loupe::symbols {
namespace {

// A memfd holding `bytes`, as the scanner reads a file.
ScopedFd FileOf(std::string_view bytes) {
  ScopedFd fd(memfd_create("btf", MFD_CLOEXEC));
  EXPECT_EQ(write(fd.get(), bytes.data(), bytes.size()), static_cast<ssize_t>(bytes.size()));
  return fd;
}

std::string RawOf(const btf* types) {
  uint32_t size = 0;
  const void* raw = btf__raw_data(types, &size);
  return std::string(static_cast<const char*>(raw), size);
}

// Every kind with trailing data (and some without) ahead of the variables,
// so a wrong size for any of them derails the walk before it reaches them.
std::string RawWithEveryKind(bool with_variable) {
  btf* types = btf__new_empty();
  const int u32 = btf__add_int(types, "unsigned int", 4, 0);
  const int pointer = btf__add_ptr(types, u32);
  btf__add_array(types, u32, u32, 4);
  const int pair = btf__add_struct(types, "pair", 8);
  btf__add_field(types, "first", u32, 0, 0);
  btf__add_field(types, "second", u32, 32, 0);
  btf__add_union(types, "either", 4);
  btf__add_field(types, "one", u32, 0, 0);
  btf__add_enum(types, "colour", 4);
  btf__add_enum_value(types, "RED", 0);
  btf__add_enum_value(types, "GREEN", 1);
  btf__add_enum64(types, "big", 8, false);
  btf__add_enum64_value(types, "HUGE", 1ULL << 40);
  btf__add_fwd(types, "opaque", BTF_FWD_STRUCT);
  btf__add_typedef(types, "pair_t", pair);
  btf__add_volatile(types, u32);
  btf__add_const(types, u32);
  btf__add_restrict(types, pointer);
  const int prototype = btf__add_func_proto(types, u32);
  btf__add_func_param(types, "a", u32);
  btf__add_func_param(types, "b", pointer);
  const int function = btf__add_func(types, "add", BTF_FUNC_GLOBAL, prototype);
  btf__add_float(types, "double", 8);
  btf__add_decl_tag(types, "tagged", function, -1);
  btf__add_type_tag(types, "user", u32);
  // A string that is the wanted name's tail, and a VAR whose name only
  // starts with it: neither is the variable.
  const int near_miss = btf__add_var(types, "__preempt_count_shadow", BTF_VAR_GLOBAL_ALLOCATED, u32);
  btf__add_var(types, "x__preempt_count", BTF_VAR_GLOBAL_ALLOCATED, u32);
  btf__add_datasec(types, ".data..percpu", 8);
  btf__add_datasec_var_info(types, near_miss, 0, 4);
  if (with_variable) {
    const int wanted = btf__add_var(types, "__preempt_count", BTF_VAR_GLOBAL_ALLOCATED, u32);
    btf__add_datasec(types, ".data..percpu", 4);
    btf__add_datasec_var_info(types, wanted, 0, 4);
  } else {
    btf__add_struct(types, "__preempt_count", 4);  // the name, not a VAR
    btf__add_field(types, "value", u32, 0, 0);
  }
  std::string raw = RawOf(types);
  btf__free(types);
  return raw;
}

TEST(KernelBtfScanTest, FindsAVariablePastEveryKindOfType) {
  ScopedFd file = FileOf(RawWithEveryKind(/*with_variable=*/true));
  absl::StatusOr<bool> found = BtfHasVariable(file.get(), "__preempt_count");
  ASSERT_TRUE(found.ok()) << found.status();
  EXPECT_TRUE(*found);
}

TEST(KernelBtfScanTest, ANameThatIsNotAVariableIsNotFound) {
  ScopedFd file = FileOf(RawWithEveryKind(/*with_variable=*/false));
  absl::StatusOr<bool> found = BtfHasVariable(file.get(), "__preempt_count");
  ASSERT_TRUE(found.ok()) << found.status();
  EXPECT_FALSE(*found);
}

TEST(KernelBtfScanTest, DataThatIsNotBtfOrIsCutShortIsAnErrorThatSaysSo) {
  ScopedFd text = FileOf("this is not BTF at all, just text long enough for a header");
  absl::StatusOr<bool> not_btf = BtfHasVariable(text.get(), "__preempt_count");
  ASSERT_FALSE(not_btf.ok());
  EXPECT_NE(not_btf.status().message().find("not raw BTF"), std::string_view::npos);

  const std::string raw = RawWithEveryKind(/*with_variable=*/true);
  const btf_header* header = reinterpret_cast<const btf_header*>(raw.data());
  // Cut inside the type section, at every length to a few bytes past it.
  for (size_t cut = header->hdr_len + 1; cut < header->hdr_len + header->type_len; cut += 7) {
    ScopedFd file = FileOf(std::string_view(raw).substr(0, cut));
    absl::StatusOr<bool> cut_short = BtfHasVariable(file.get(), "__preempt_count");
    ASSERT_FALSE(cut_short.ok()) << "cut at " << cut;
    EXPECT_EQ(cut_short.status().code(), absl::StatusCode::kDataLoss) << cut_short.status();
  }
}

TEST(KernelBtfScanTest, AKindThisReaderDoesNotKnowStopsTheWalkWithItsNumber) {
  std::string raw = RawWithEveryKind(/*with_variable=*/true);
  const btf_header* header = reinterpret_cast<const btf_header*>(raw.data());
  btf_type* first = reinterpret_cast<btf_type*>(raw.data() + header->hdr_len + header->type_off);
  first->info = 31u << 24;  // kind 31, no members
  ScopedFd file = FileOf(raw);
  absl::StatusOr<bool> found = BtfHasVariable(file.get(), "__preempt_count");
  ASSERT_FALSE(found.ok());
  EXPECT_NE(found.status().message().find("kind 31"), std::string_view::npos) << found.status();
}

// The running kernel's own BTF, checked against libbpf's full parse.
TEST(KernelBtfScanTest, AgreesWithLibbpfOnThisKernel) {
  btf* kernel = btf__load_vmlinux_btf();
  if (kernel == nullptr) GTEST_SKIP() << "no kernel BTF here (" << kKernelBtfPath << ")";
  for (const char* name : {"__preempt_count", "runqueues", "cpu_number", "loupe_no_such_var"}) {
    const bool expected = btf__find_by_name_kind(kernel, name, BTF_KIND_VAR) > 0;
    absl::StatusOr<bool> found = KernelBtfHasVariable(name);
    ASSERT_TRUE(found.ok()) << found.status();
    EXPECT_EQ(*found, expected) << name;
  }
  btf__free(kernel);
}

}  // namespace
}  // namespace loupe::symbols
