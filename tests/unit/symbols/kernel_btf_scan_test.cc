#include "daemon/symbols/kernel_btf_scan.h"

#include <bpf/btf.h>
#include <gtest/gtest.h>
#include <sys/mman.h>
#include <unistd.h>

#include <algorithm>
#include <memory>
#include <optional>
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

struct BtfFree {
  void operator()(btf* types) const { btf__free(types); }
};
using BtfPtr = std::unique_ptr<btf, BtfFree>;

// A type id from libbpf's builders: a failed add would leave the crafted
// BTF without the kind a test means to walk past.
int Added(int id) {
  EXPECT_GT(id, 0) << "libbpf refused a type";
  return id;
}

std::string RawOf(const btf* types) {
  uint32_t size = 0;
  const void* raw = btf__raw_data(types, &size);
  return std::string(static_cast<const char*>(raw), size);
}

// Every kind with trailing data (and some without) ahead of the variables,
// so a wrong size for any of them derails the walk before it reaches them.
// `wanted_id` gets the id libbpf gave the variable.
std::string RawWithEveryKind(bool with_variable, int* wanted_id = nullptr) {
  BtfPtr owned(btf__new_empty());
  btf* types = owned.get();
  const int u32 = Added(btf__add_int(types, "unsigned int", 4, 0));
  const int pointer = Added(btf__add_ptr(types, u32));
  Added(btf__add_array(types, u32, u32, 4));
  const int pair = Added(btf__add_struct(types, "pair", 8));
  EXPECT_EQ(btf__add_field(types, "first", u32, 0, 0), 0);
  EXPECT_EQ(btf__add_field(types, "second", u32, 32, 0), 0);
  Added(btf__add_union(types, "either", 4));
  EXPECT_EQ(btf__add_field(types, "one", u32, 0, 0), 0);
  Added(btf__add_enum(types, "colour", 4));
  EXPECT_EQ(btf__add_enum_value(types, "RED", 0), 0);
  EXPECT_EQ(btf__add_enum_value(types, "GREEN", 1), 0);
  Added(btf__add_enum64(types, "big", 8, false));
  EXPECT_EQ(btf__add_enum64_value(types, "HUGE", 1ULL << 40), 0);
  Added(btf__add_fwd(types, "opaque", BTF_FWD_STRUCT));
  Added(btf__add_typedef(types, "pair_t", pair));
  Added(btf__add_volatile(types, u32));
  Added(btf__add_const(types, u32));
  Added(btf__add_restrict(types, pointer));
  const int prototype = Added(btf__add_func_proto(types, u32));
  EXPECT_EQ(btf__add_func_param(types, "a", u32), 0);
  EXPECT_EQ(btf__add_func_param(types, "b", pointer), 0);
  const int function = Added(btf__add_func(types, "add", BTF_FUNC_GLOBAL, prototype));
  Added(btf__add_float(types, "double", 8));
  Added(btf__add_decl_tag(types, "tagged", function, -1));
  Added(btf__add_type_tag(types, "user", u32));
  // A string that is the wanted name's tail, and a VAR whose name only
  // starts with it: neither is the variable.
  const int near_miss =
      Added(btf__add_var(types, "__preempt_count_shadow", BTF_VAR_GLOBAL_ALLOCATED, u32));
  Added(btf__add_var(types, "x__preempt_count", BTF_VAR_GLOBAL_ALLOCATED, u32));
  Added(btf__add_datasec(types, ".data..percpu", 8));
  EXPECT_EQ(btf__add_datasec_var_info(types, near_miss, 0, 4), 0);
  if (with_variable) {
    const int wanted =
        Added(btf__add_var(types, "__preempt_count", BTF_VAR_GLOBAL_ALLOCATED, u32));
    if (wanted_id != nullptr) *wanted_id = wanted;
    Added(btf__add_datasec(types, ".data..percpu", 4));
    EXPECT_EQ(btf__add_datasec_var_info(types, wanted, 0, 4), 0);
  } else {
    Added(btf__add_struct(types, "__preempt_count", 4));  // the name, not a VAR
    EXPECT_EQ(btf__add_field(types, "value", u32, 0, 0), 0);
  }
  return RawOf(types);
}

btf_header* HeaderOf(std::string& raw) { return reinterpret_cast<btf_header*>(raw.data()); }

using FoundId = absl::StatusOr<std::optional<uint32_t>>;

FoundId ScanBytes(std::string_view bytes) {
  ScopedFd file = FileOf(bytes);
  return BtfTypeId(file.get(), "__preempt_count", BTF_KIND_VAR);
}

TEST(KernelBtfScanTest, FindsAVariablesIdPastEveryKindOfType) {
  int wanted = 0;
  FoundId found = ScanBytes(RawWithEveryKind(/*with_variable=*/true, &wanted));
  ASSERT_TRUE(found.ok()) << found.status();
  ASSERT_TRUE(found->has_value());
  EXPECT_EQ(**found, static_cast<uint32_t>(wanted));
}

TEST(KernelBtfScanTest, ANameOfAnotherKindIsNotFoundAsAVariable) {
  FoundId found = ScanBytes(RawWithEveryKind(/*with_variable=*/false));
  ASSERT_TRUE(found.ok()) << found.status();
  EXPECT_FALSE(found->has_value());
}

// Strings cross the reader's 64 KiB chunks: a name cut between two reads,
// and a type named by the tail of a longer string, are still found.
TEST(KernelBtfScanTest, NamesAcrossReadsAndNamesThatAreTailsAreFound) {
  BtfPtr owned(btf__new_empty());
  btf* types = owned.get();
  const int u32 = Added(btf__add_int(types, "unsigned int", 4, 0));
  // "" and "unsigned int" take 14 bytes: "__preempt_count" starts at 65530.
  const std::string filler(65515, 'f');
  Added(btf__add_typedef(types, filler.c_str(), u32));
  const int variable = Added(btf__add_var(types, "__preempt_count", BTF_VAR_GLOBAL_ALLOCATED, u32));
  std::string raw = RawOf(types);
  FoundId found = ScanBytes(raw);
  ASSERT_TRUE(found.ok()) << found.status();
  ASSERT_TRUE(found->has_value());
  EXPECT_EQ(**found, static_cast<uint32_t>(variable));

  // The same variable named by pointing into "x__preempt_count", one past its start.
  BtfPtr tail_owned(btf__new_empty());
  const int tail_u32 = Added(btf__add_int(tail_owned.get(), "unsigned int", 4, 0));
  const int longer =
      Added(btf__add_var(tail_owned.get(), "x__preempt_count", BTF_VAR_GLOBAL_ALLOCATED, tail_u32));
  std::string tail_raw = RawOf(tail_owned.get());
  const btf_header* header = HeaderOf(tail_raw);
  auto* var = reinterpret_cast<btf_type*>(tail_raw.data() + header->hdr_len + header->type_off +
                                          sizeof(btf_type) + 4);  // past the INT and its word
  ++var->name_off;
  FoundId tail = ScanBytes(tail_raw);
  ASSERT_TRUE(tail.ok()) << tail.status();
  ASSERT_TRUE(tail->has_value());
  EXPECT_EQ(**tail, static_cast<uint32_t>(longer));
}

TEST(KernelBtfScanTest, DataThatIsNotBtfOrIsCutShortIsAnErrorThatSaysSo) {
  FoundId not_btf = ScanBytes("this is not BTF at all, just text long enough");
  ASSERT_FALSE(not_btf.ok());
  EXPECT_NE(not_btf.status().message().find("not raw BTF"), std::string_view::npos);

  std::string raw = RawWithEveryKind(/*with_variable=*/true);
  const btf_header header = *HeaderOf(raw);
  const size_t strings_end = header.hdr_len + header.str_off + header.str_len;
  ASSERT_EQ(strings_end, raw.size());
  // Cut anywhere past the header, through the types and the strings: the
  // variable is never reported found or absent from a partial file.
  for (size_t cut = header.hdr_len + 1; cut < strings_end; cut += 5) {
    FoundId cut_short = ScanBytes(std::string_view(raw).substr(0, cut));
    ASSERT_FALSE(cut_short.ok()) << "cut at " << cut << " of " << raw.size();
    EXPECT_EQ(cut_short.status().code(), absl::StatusCode::kDataLoss) << cut_short.status();
  }
}

TEST(KernelBtfScanTest, HeadersThatLieAreErrorsNotHangsOrCrashes) {
  const std::string whole = RawWithEveryKind(/*with_variable=*/true);
  auto lie = [&](auto&& change) {
    std::string raw = whole;
    change(*HeaderOf(raw));
    return ScanBytes(raw);
  };
  EXPECT_EQ(lie([](btf_header& h) { h.hdr_len = 8; }).status().code(),
            absl::StatusCode::kInvalidArgument);
  EXPECT_EQ(lie([](btf_header& h) { h.version = 2; }).status().code(),
            absl::StatusCode::kUnimplemented);
  EXPECT_EQ(lie([](btf_header& h) { h.type_len = 0xffffffffu; }).status().code(),
            absl::StatusCode::kDataLoss);
  EXPECT_EQ(lie([](btf_header& h) { h.type_off = 0xfffffff0u; }).status().code(),
            absl::StatusCode::kDataLoss);
  // A type section that ends inside a record.
  EXPECT_EQ(lie([](btf_header& h) { h.type_len -= 2; }).status().code(),
            absl::StatusCode::kDataLoss);
  // Strings said to lie past the file: the variable's name cannot be read.
  EXPECT_EQ(lie([](btf_header& h) { h.str_off = 0xfffff000u; h.str_len = 0xfffu; })
                .status()
                .code(),
            absl::StatusCode::kDataLoss);
  // No VAR at all once the type section is said to be empty.
  FoundId no_types = lie([](btf_header& h) { h.type_len = 0; });
  ASSERT_TRUE(no_types.ok()) << no_types.status();
  EXPECT_FALSE(no_types->has_value());
}

TEST(KernelBtfScanTest, AKindThisReaderDoesNotKnowStopsTheWalkWithItsNumber) {
  std::string raw = RawWithEveryKind(/*with_variable=*/true);
  const btf_header* header = HeaderOf(raw);
  btf_type* first = reinterpret_cast<btf_type*>(raw.data() + header->hdr_len + header->type_off);
  first->info = 31u << 24;  // kind 31, no members
  FoundId found = ScanBytes(raw);
  ASSERT_FALSE(found.ok());
  EXPECT_NE(found.status().message().find("kind 31"), std::string_view::npos) << found.status();
}

// The running kernel's own BTF, checked against libbpf's full parse.
TEST(KernelBtfScanTest, AgreesWithLibbpfOnThisKernel) {
  const BtfPtr kernel(btf__parse_raw(std::string(kKernelBtfPath).c_str()));
  if (kernel == nullptr) GTEST_SKIP() << "no kernel BTF here (" << kKernelBtfPath << ")";
  int variables = 0;
  for (const char* name : {"__preempt_count", "runqueues", "cpu_number", "loupe_no_such_var"}) {
    const int expected = btf__find_by_name_kind(kernel.get(), name, BTF_KIND_VAR);
    variables += expected > 0;
    FoundId found = KernelBtfTypeId(name, BTF_KIND_VAR);
    ASSERT_TRUE(found.ok()) << found.status();
    EXPECT_EQ(found->value_or(0), static_cast<uint32_t>(std::max(expected, 0))) << name;
  }
  EXPECT_GT(variables, 0) << "none of the per-CPU variables asked for is in this kernel's BTF";
  for (const char* name : {"schedule", "do_nanosleep"}) {
    FoundId found = KernelBtfTypeId(name, BTF_KIND_FUNC);
    ASSERT_TRUE(found.ok()) << found.status();
    EXPECT_EQ(found->value_or(0),
              static_cast<uint32_t>(btf__find_by_name_kind(kernel.get(), name, BTF_KIND_FUNC)))
        << name;
  }
}

}  // namespace
}  // namespace loupe::symbols
