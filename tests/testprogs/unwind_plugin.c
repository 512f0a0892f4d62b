/* Loaded by unwind_app's "dlopen" mode with dlopen once it is traced: code
 * mapped after the tracer loaded the program's unwind tables. Built -O2
 * -fomit-frame-pointer (symbols kept, to name its frames): a stack through
 * it is walked with its CFI only once the tables are loaded again. */
typedef unsigned long (*plugin_callback)(unsigned long);

static volatile unsigned long plugin_sink;

/* Static and noinline, with work after the call: a frame of its own
 * between plugin_work and the callback, called without the PLT. */
#if defined(__clang__)
__attribute__((noinline))
#else
__attribute__((noinline, noclone))
#endif
static unsigned long plugin_step(plugin_callback callback, unsigned long i)
{
	unsigned long r = callback(i);

	plugin_sink += r ^ i;
	return r * 5 + 3;
}

unsigned long plugin_work(plugin_callback callback, unsigned long rounds)
{
	unsigned long acc = 0;

	for (unsigned long i = 0; i < rounds; ++i)
		acc += plugin_step(callback, i);
	plugin_sink += acc;
	return acc;
}
