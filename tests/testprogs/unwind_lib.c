/* Built -O2 -fomit-frame-pointer and stripped (see unwind_lib.h): a stack
 * through it can only be walked with its CFI. */
#include "unwind_lib.h"

static volatile unsigned long lib_sink;

/* Static, so nothing names it after strip; noinline and with work after the
 * call, so it keeps a frame of its own between lib_work and the callback. */
#if defined(__clang__)
__attribute__((noinline))
#else
__attribute__((noinline, noclone))
#endif
static unsigned long lib_step(lib_callback callback, unsigned long i)
{
	unsigned long r = callback(i);

	lib_sink += r ^ i;
	return r * 3 + 1;
}

unsigned long lib_work(lib_callback callback, unsigned long rounds)
{
	unsigned long acc = 0;

	for (unsigned long i = 0; i < rounds; ++i)
		acc += lib_step(callback, i);
	lib_sink += acc;
	return acc;
}
