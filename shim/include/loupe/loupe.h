/* loupe/loupe.h — what an application tells Loupe about itself.
 *
 * Spans, instant events with typed fields, counters, operation (request) ids,
 * thread names and triggers, as USDT probes of provider "loupe". Self-contained:
 * C11 or C++17, x86-64 Linux, nothing beyond libc. On other targets every
 * probe compiles to nothing.
 *
 * Cost: while nobody traces, a probe is one load and one predictable branch on
 * its semaphore, and its arguments are not evaluated. While louped traces, a
 * probe is a call to a small out-of-line function whose 5-byte nop is turned
 * into a uprobe; its arguments sit in fixed registers, named in the probe's
 * SystemTap-style note, so perf and bpftrace can list and attach to them too.
 *
 * Names (span, event, counter, field keys) must be string literals or other
 * strings that live as long as the process: the daemon reads them by address
 * and caches them. String field values are copied when the event fires.
 * See docs/shim.md. */
#ifndef LOUPE_LOUPE_H_
#define LOUPE_LOUPE_H_

#include <stdint.h>
#include <string.h>

#ifdef __cplusplus
extern "C" {
#endif

/* A typed field of an instant event. Build them with loupe_int() etc. */
enum loupe_field_type {
	LOUPE_FIELD_INT = 1,
	LOUPE_FIELD_UINT = 2,
	LOUPE_FIELD_DOUBLE = 3,
	LOUPE_FIELD_BOOL = 4,
	LOUPE_FIELD_STRING = 5,
	LOUPE_FIELD_BYTES = 6,
};

/* The layout louped reads from the application's memory: keep in step with
 * bpf/shared/records.h (struct loupe_shim_field). */
struct loupe_field {
	const char *key;
	uint32_t type;   /* enum loupe_field_type */
	uint32_t length; /* of a string value, in bytes */
	uint64_t value;  /* the number, its IEEE-754 bits, 0/1, a byte count or a char pointer */
};

/* Longer strings are cut by the daemon (and the cut is counted). */
#define LOUPE_MAX_FIELDS 8
#define LOUPE_MAX_STRING 64

typedef struct {
	uint64_t id;
	uint64_t parent;
} loupe_span_t;

typedef struct {
	uint64_t id;
	uint64_t outer;
} loupe_operation_t;

#if defined(__x86_64__) && defined(__linux__) && defined(__GNUC__) && !defined(LOUPE_DISABLE)
#define LOUPE_ENABLED 1

#ifdef __cplusplus
#define LOUPE__TLS thread_local
#else
#define LOUPE__TLS _Thread_local
#endif
/* One copy per executable or library (weak), never shared across them
 * (hidden): each one's notes point at its own semaphores. */
#define LOUPE__SHARED __attribute__((weak, visibility("hidden")))

/* Semaphores in the SystemTap convention (".probes", provider_name_semaphore):
 * the kernel raises them while a uprobe is attached at one of the probe's sites. */
#define LOUPE__SEMAPHORE(name) \
	LOUPE__SHARED __attribute__((section(".probes"))) volatile unsigned short \
		loupe_##name##_semaphore
LOUPE__SEMAPHORE(span_begin);
LOUPE__SEMAPHORE(span_end);
LOUPE__SEMAPHORE(instant);
LOUPE__SEMAPHORE(counter);
LOUPE__SEMAPHORE(operation_begin);
LOUPE__SEMAPHORE(operation_end);
LOUPE__SEMAPHORE(operation_pass);
LOUPE__SEMAPHORE(thread_name);
LOUPE__SEMAPHORE(trigger);

/* Per thread, shared by every translation unit of the binary. */
LOUPE__SHARED LOUPE__TLS uint64_t loupe__current_span;
LOUPE__SHARED LOUPE__TLS uint64_t loupe__current_operation;
LOUPE__SHARED uint64_t loupe__last_span_id;

#define LOUPE__ON(name) __builtin_expect(loupe_##name##_semaphore != 0, 0)

/* The probe site: a 5-byte nop (so kernels that can turn a uprobe into a call
 * do), then a note (pc, base, semaphore, provider, name, argument specs) in
 * the group of the enclosing function, so it goes wherever the code goes. The
 * ".stapsdt.base" symbol lets tools detect prelink-style relocation.
 * LOUPE_SHIM_TRAP_PROBES: a 1-byte nop and a 4-byte one instead, which the
 * kernel keeps as a trap. A child forked after the kernel turned a site
 * into a call does not inherit the page it calls on some kernels (6.18) and
 * dies at its first probe (docs/shim.md): for programs that fork workers
 * while traced. */
#ifdef LOUPE_SHIM_TRAP_PROBES
#define LOUPE__SITE ".byte 0x90, 0x0f, 0x1f, 0x40, 0x00"
#else
#define LOUPE__SITE ".byte 0x0f, 0x1f, 0x44, 0x00, 0x00"
#endif
#define LOUPE__PROBE(name, args, ...)                                                   \
	__asm__ __volatile__(                                                           \
		"990: " LOUPE__SITE "\n"                                               \
		".pushsection .note.stapsdt, \"?\", \"note\"\n"                         \
		".balign 4\n"                                                           \
		".4byte 992f-991f, 994f-993f, 3\n"                                      \
		"991: .asciz \"stapsdt\"\n"                                             \
		"992: .balign 4\n"                                                      \
		"993: .8byte 990b, _.stapsdt.base, loupe_" #name "_semaphore\n"         \
		".asciz \"loupe\"\n"                                                    \
		".asciz \"" #name "\"\n"                                                \
		".asciz \"" args "\"\n"                                                 \
		"994: .balign 4\n"                                                      \
		".popsection\n"                                                         \
		".ifndef _.stapsdt.base\n"                                              \
		".pushsection .stapsdt.base, \"aG\", \"progbits\", .stapsdt.base, comdat\n" \
		".weak _.stapsdt.base\n"                                                \
		".hidden _.stapsdt.base\n"                                              \
		"_.stapsdt.base: .space 1\n"                                            \
		".size _.stapsdt.base, 1\n"                                             \
		".popsection\n"                                                         \
		".endif\n"                                                              \
		:                                                                       \
		: __VA_ARGS__                                                           \
		: "memory") /* the daemon reads what the arguments point at */

/* Out of line so that arguments arrive in the registers the notes name and a
 * disabled probe stays one branch at its call site. */
#define LOUPE__EMITTER static __attribute__((noinline, unused))

LOUPE__EMITTER void loupe__emit_span_begin(const char *name, uint64_t id, uint64_t parent,
					   uint64_t operation)
{
	LOUPE__PROBE(span_begin, "8@%%rdi 8@%%rsi 8@%%rdx 8@%%rcx", "D"(name), "S"(id), "d"(parent),
		     "c"(operation));
}

LOUPE__EMITTER void loupe__emit_span_end(uint64_t id)
{
	LOUPE__PROBE(span_end, "8@%%rdi", "D"(id));
}

LOUPE__EMITTER void loupe__emit_instant(const char *name, uint64_t operation,
					const struct loupe_field *fields, uint64_t count)
{
	LOUPE__PROBE(instant, "8@%%rdi 8@%%rsi 8@%%rdx 8@%%rcx", "D"(name), "S"(operation),
		     "d"(fields), "c"(count));
}

LOUPE__EMITTER void loupe__emit_counter(const char *name, uint64_t type, uint64_t value)
{
	LOUPE__PROBE(counter, "8@%%rdi 8@%%rsi 8@%%rdx", "D"(name), "S"(type), "d"(value));
}

LOUPE__EMITTER void loupe__emit_operation_begin(uint64_t id, const char *name)
{
	LOUPE__PROBE(operation_begin, "8@%%rdi 8@%%rsi", "D"(id), "S"(name));
}

LOUPE__EMITTER void loupe__emit_operation_end(uint64_t id)
{
	LOUPE__PROBE(operation_end, "8@%%rdi", "D"(id));
}

LOUPE__EMITTER void loupe__emit_operation_pass(uint64_t id)
{
	LOUPE__PROBE(operation_pass, "8@%%rdi", "D"(id));
}

LOUPE__EMITTER void loupe__emit_thread_name(const char *name)
{
	LOUPE__PROBE(thread_name, "8@%%rdi", "D"(name));
}

LOUPE__EMITTER void loupe__emit_trigger(const char *name)
{
	LOUPE__PROBE(trigger, "8@%%rdi", "D"(name));
}

/* Is louped tracing this process right now? For work that only feeds probes.
 * Any of the shim's semaphores: the compiler drops the emitters a binary
 * never calls, and with them their probe sites, so one that uses only
 * operations has no span_begin site for louped to raise. */
static inline int loupe_tracing(void)
{
	return __builtin_expect((loupe_span_begin_semaphore | loupe_span_end_semaphore |
				 loupe_instant_semaphore | loupe_counter_semaphore |
				 loupe_operation_begin_semaphore | loupe_operation_end_semaphore |
				 loupe_operation_pass_semaphore | loupe_thread_name_semaphore |
				 loupe_trigger_semaphore) != 0,
				0);
}

static inline loupe_span_t loupe_span_begin(const char *name)
{
	loupe_span_t span = {0, 0};

	if (LOUPE__ON(span_begin)) {
		span.id = __atomic_add_fetch(&loupe__last_span_id, 1, __ATOMIC_RELAXED);
		span.parent = loupe__current_span;
		loupe__current_span = span.id;
		loupe__emit_span_begin(name, span.id, span.parent, loupe__current_operation);
	}
	return span;
}

/* Ends what loupe_span_begin started (nothing, if tracing was off then). */
static inline void loupe_span_end(loupe_span_t span)
{
	if (span.id != 0) {
		loupe__current_span = span.parent;
		if (LOUPE__ON(span_end))
			loupe__emit_span_end(span.id);
	}
}

/* Binds this thread to an operation (a request, a session, a job) until the
 * matching end: every span and event, and the kernel's samples and off-CPU
 * intervals of this thread, are attributed to `id`. Scopes nest. */
static inline loupe_operation_t loupe_operation_begin(uint64_t id, const char *name)
{
	loupe_operation_t operation = {0, 0};

	if (LOUPE__ON(operation_begin)) {
		operation.id = id;
		operation.outer = loupe__current_operation;
		loupe__current_operation = id;
		loupe__emit_operation_begin(id, name);
	}
	return operation;
}

static inline void loupe_operation_end(loupe_operation_t operation)
{
	if (operation.id != 0) {
		loupe__current_operation = operation.outer;
		if (LOUPE__ON(operation_end))
			loupe__emit_operation_end(operation.id);
	}
}

/* Ends this thread's part of the operation without ending the operation: it
 * waits (in a queue, say) until a thread binds its id again with
 * loupe_operation_begin, and that thread's part and the wait in between
 * belong to the same request. Pass before the operation can reach the next
 * thread (before the push onto the queue): a thread that binds the id
 * first begins a request of its own. */
static inline void loupe_operation_pass(loupe_operation_t operation)
{
	if (operation.id != 0) {
		loupe__current_operation = operation.outer;
		if (LOUPE__ON(operation_pass))
			loupe__emit_operation_pass(operation.id);
		else if (LOUPE__ON(operation_end))
			/* A louped that predates passes: end the part at least. */
			loupe__emit_operation_end(operation.id);
	}
}

#define LOUPE__DEFINE_COUNTER(suffix, ctype, field_type, to_bits)                         \
	static inline void loupe_counter_##suffix(const char *name, ctype value)          \
	{                                                                                  \
		if (LOUPE__ON(counter))                                                    \
			loupe__emit_counter(name, field_type, to_bits(value));             \
	}

#else /* not x86-64 Linux with a GNU compiler: every probe is nothing */
#define LOUPE_ENABLED 0
#define LOUPE__ON(name) 0
static inline void loupe__emit_instant(const char *name, uint64_t operation,
				       const struct loupe_field *fields, uint64_t count)
{
	(void)name, (void)operation, (void)fields, (void)count;
}
static inline void loupe__emit_thread_name(const char *name) { (void)name; }
static inline void loupe__emit_trigger(const char *name) { (void)name; }
static inline int loupe_tracing(void) { return 0; }
static inline loupe_span_t loupe_span_begin(const char *name)
{
	loupe_span_t span = {0, 0};
	(void)name;
	return span;
}
static inline void loupe_span_end(loupe_span_t span) { (void)span; }
static inline loupe_operation_t loupe_operation_begin(uint64_t id, const char *name)
{
	loupe_operation_t operation = {0, 0};
	(void)id, (void)name;
	return operation;
}
static inline void loupe_operation_end(loupe_operation_t operation) { (void)operation; }
static inline void loupe_operation_pass(loupe_operation_t operation) { (void)operation; }
#define LOUPE__DEFINE_COUNTER(suffix, ctype, field_type, to_bits)                         \
	static inline void loupe_counter_##suffix(const char *name, ctype value)          \
	{                                                                                  \
		(void)name, (void)value;                                                   \
	}
#endif

static inline uint64_t loupe__int_bits(int64_t v) { return (uint64_t)v; }
static inline uint64_t loupe__uint_bits(uint64_t v) { return v; }
static inline uint64_t loupe__double_bits(double v)
{
	uint64_t bits;

	memcpy(&bits, &v, sizeof bits);
	return bits;
}

/* Counters and gauges: loupe_counter_int("queue_depth", n). */
LOUPE__DEFINE_COUNTER(int, int64_t, LOUPE_FIELD_INT, loupe__int_bits)
LOUPE__DEFINE_COUNTER(uint, uint64_t, LOUPE_FIELD_UINT, loupe__uint_bits)
LOUPE__DEFINE_COUNTER(double, double, LOUPE_FIELD_DOUBLE, loupe__double_bits)
LOUPE__DEFINE_COUNTER(bytes, uint64_t, LOUPE_FIELD_BYTES, loupe__uint_bits)

/* Fields, for LOUPE_EVENT. */
static inline struct loupe_field loupe__field(const char *key, uint32_t type, uint32_t length,
					      uint64_t value)
{
	struct loupe_field field;

	field.key = key;
	field.type = type;
	field.length = length;
	field.value = value;
	return field;
}
static inline struct loupe_field loupe_int(const char *key, int64_t v)
{
	return loupe__field(key, LOUPE_FIELD_INT, 0, (uint64_t)v);
}
static inline struct loupe_field loupe_uint(const char *key, uint64_t v)
{
	return loupe__field(key, LOUPE_FIELD_UINT, 0, v);
}
static inline struct loupe_field loupe_double(const char *key, double v)
{
	return loupe__field(key, LOUPE_FIELD_DOUBLE, 0, loupe__double_bits(v));
}
static inline struct loupe_field loupe_bool(const char *key, int v)
{
	return loupe__field(key, LOUPE_FIELD_BOOL, 0, v ? 1 : 0);
}
static inline struct loupe_field loupe_bytes(const char *key, uint64_t n)
{
	return loupe__field(key, LOUPE_FIELD_BYTES, 0, n);
}
/* A string of `length` bytes (not necessarily NUL-terminated). */
static inline struct loupe_field loupe_string_n(const char *key, const char *v, size_t length)
{
	return loupe__field(key, LOUPE_FIELD_STRING, length > UINT32_MAX ? UINT32_MAX : (uint32_t)length,
			    (uint64_t)(uintptr_t)v);
}
static inline struct loupe_field loupe_string(const char *key, const char *v)
{
	return loupe_string_n(key, v, v ? strlen(v) : 0);
}

/* An instant event with one or more fields (at most LOUPE_MAX_FIELDS are
 * kept): LOUPE_EVENT("cache_miss", loupe_int("key", k), loupe_string("tier", t)).
 * The fields are only evaluated while someone traces. */
#define LOUPE_EVENT(name, ...)                                                              \
	do {                                                                                \
		if (LOUPE__ON(instant)) {                                                   \
			const struct loupe_field loupe__fields[] = {__VA_ARGS__};           \
			loupe__emit_instant(name, loupe__current_operation_or_zero(),       \
					    loupe__fields,                                  \
					    sizeof loupe__fields / sizeof loupe__fields[0]); \
		}                                                                           \
	} while (0)

/* An instant event without fields. */
#define LOUPE_MARK(name)                                                                       \
	do {                                                                                   \
		if (LOUPE__ON(instant))                                                        \
			loupe__emit_instant(name, loupe__current_operation_or_zero(), 0, 0);   \
	} while (0)

#define LOUPE_THREAD_NAME(name)                          \
	do {                                             \
		if (LOUPE__ON(thread_name))              \
			loupe__emit_thread_name(name);   \
	} while (0)

/* A named moment worth keeping the recent past for (flight-recorder dumps). */
#define LOUPE_TRIGGER(name)                          \
	do {                                         \
		if (LOUPE__ON(trigger))              \
			loupe__emit_trigger(name);   \
	} while (0)

static inline uint64_t loupe__current_operation_or_zero(void)
{
#if LOUPE_ENABLED
	return loupe__current_operation;
#else
	return 0;
#endif
}

#ifdef __cplusplus
} /* extern "C" */

namespace loupe {

/* A span for the rest of the scope: loupe::Span span("parse"); */
class Span {
 public:
	explicit Span(const char *name) : span_(loupe_span_begin(name)) {}
	~Span() { loupe_span_end(span_); }
	Span(const Span &) = delete;
	Span &operator=(const Span &) = delete;

 private:
	loupe_span_t span_;
};

/* Binds the thread to an operation for the rest of the scope. */
class Operation {
 public:
	Operation(uint64_t id, const char *name) : operation_(loupe_operation_begin(id, name)) {}
	~Operation() { loupe_operation_end(operation_); }
	// Hands the operation on (see loupe_operation_pass); the destructor
	// then ends nothing.
	void Pass()
	{
		loupe_operation_pass(operation_);
		operation_.id = 0;
	}
	Operation(const Operation &) = delete;
	Operation &operator=(const Operation &) = delete;

 private:
	loupe_operation_t operation_;
};

}  // namespace loupe

#define LOUPE__CONCAT2(a, b) a##b
#define LOUPE__CONCAT(a, b) LOUPE__CONCAT2(a, b)
/* LOUPE_SCOPE("handle_request"); — a span until the end of the block. */
#define LOUPE_SCOPE(name) ::loupe::Span LOUPE__CONCAT(loupe_scope_, __LINE__)(name)
#endif /* __cplusplus */

#endif /* LOUPE_LOUPE_H_ */
